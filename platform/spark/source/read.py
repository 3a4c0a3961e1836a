"""Reading: the Spark tasks of a read (:class:`OffsetRangePartition`), the rows they return, the batch reader.

A task reads offsets ``start <= offset < end`` of one partition's Delta table directly, with
:func:`lakelog.log_tables.reader.read_offset_range` (only the files whose offset statistics overlap the
range), and returns Arrow record batches shaped like Spark's Kafka source rows (:func:`kafka_schema`).
The end is never past the high watermark the driver saw when it planned the batch, so uncommitted
records are never returned. :func:`split_ranges` cuts planned ranges into tasks (``minPartitions``,
``maxRecordsPerPartition``); :class:`LakelogBatchReader` is ``spark.read.format("lakelog")``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from lakelog.log_tables.reader import DataLoss, DataLossError, read_offset_range
from lakelog.spark.errors import SourceError
from lakelog.spark.source.options import SourceOptions
from lakelog.spark.source.planning import _Cluster, resolve_ending_offsets, resolve_starting_offsets
from lakelog.spark.sql import KAFKA_SOURCE_SCHEMA

log = logging.getLogger(__name__)

__all__ = [
    "LakelogBatchReader", "OffsetRangePartition", "kafka_schema", "read_partition", "report_data_loss",
    "split_ranges",
]

_FAIL_ON_DATA_LOSS_HINT = (
    " Some data may have been lost because it is not available in the log any more: either retention "
    "removed it or the topic was deleted before all of it was processed. If you want your query to go "
    "on in such cases, set the source option 'failOnDataLoss' to 'false'.")



# -- schema --------------------------------------------------------------------------------------

def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema: the ``headers`` column only with ``include_headers``.

    ``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int`` and, with ``include_headers``, ``headers array<struct<key: string, value: binary>>``
    (the columns of :data:`lakelog.spark.sql.KAFKA_SOURCE_SCHEMA`, all nullable).
    """
    fields = KAFKA_SOURCE_SCHEMA.fields if include_headers else KAFKA_SOURCE_SCHEMA.fields[:-1]
    return StructType(list(fields))


def _arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema PySpark expects of batches with Spark schema ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


# -- planned offset ranges -> Spark tasks -------------------------------------------------------

@dataclass
class OffsetRangePartition(InputPartition):
    """One Spark task: offsets ``start <= offset < end`` of one partition table.

    Attributes:
        topic, partition: the partition; table_uri: its Delta table (as the gateway reported it);
        start, end: the offsets read, ``start`` inclusive, ``end`` exclusive (never past the HW the
        driver planned with); timestamp_type: 0 = CreateTime, 1 = LogAppendTime (the ``timestampType``
        column).
    """

    topic: str
    partition: int
    table_uri: str
    start: int
    end: int
    timestamp_type: int = 0

    @property
    def size(self) -> int:
        """Offsets in the range (``end - start``; records may be fewer where compaction left gaps)."""
        return self.end - self.start


def _divide(r: OffsetRangePartition, parts: int) -> list[OffsetRangePartition]:
    """``r`` cut into ``parts`` ranges of (almost) equal size; empty ones dropped."""
    out, remaining, start = [], r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        out.append(OffsetRangePartition(r.topic, r.partition, r.table_uri, start, end, r.timestamp_type))
        start = end
    return [x for x in out if x.size > 0]


def split_ranges(ranges: Sequence[OffsetRangePartition], *, min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[OffsetRangePartition]:
    """Split offset ranges into Spark tasks as Spark's ``KafkaOffsetRangeCalculator`` does.

    Without options one task per non-empty partition range. ``maxRecordsPerPartition`` first cuts each
    range into pieces of at most that many offsets; ``minPartitions`` then, if there are fewer pieces
    than it, divides the large ranges in proportion to their size so that there are about that many.
    """
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records_per_partition is None:
        return list(ranges)
    if max_records_per_partition is not None:
        ranges = [x for r in ranges for x in _divide(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, total_size: int, parts: int) -> int:
        return max(int(math.floor(size / total_size * parts + 0.5)), 1)

    unsplit = [i for i, r in enumerate(ranges) if part_count(r.size, total, min_partitions) == 1]
    unsplit_total = sum(ranges[i].size for i in unsplit)
    split_total = total - unsplit_total
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for i, r in enumerate(ranges):
        parts = 1 if i in unsplit or split_total <= 0 else part_count(r.size, split_total, split_min)
        out.extend(_divide(r, parts))
    return out



# -- reading (executors) ----------------------------------------------------------------------------

def _null_if_empty(headers: pa.Array) -> pa.Array:
    """Kafka's source gives null, not an empty array, for a record without headers."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(headers), 0)
    empty = pc.equal(lengths, 0)
    if not pc.any(empty).as_py():
        return headers
    return pc.if_else(empty, pa.scalar(None, headers.type), headers)


def read_partition(part: OffsetRangePartition | None, schema: StructType, *, fail_on_data_loss: bool,
                   batch_rows: int = 64 * 1024) -> Iterator[pa.RecordBatch]:
    """The Kafka-shaped rows of one planned offset range, as Arrow batches with exactly ``schema``.

    Args:
        part: the range (None or an empty range: no batches).
        schema: :func:`kafka_schema` (with or without ``headers``); the batches carry exactly its columns.
        fail_on_data_loss: offsets of the range that are no longer in the table (retention, truncation)
            raise :class:`~lakelog.log_tables.reader.DataLossError` naming them (True), or are skipped
            with a warning (False).
        batch_rows: at most this many rows per batch.

    Yields:
        ``pyarrow.RecordBatch`` es in offset order; ``headers`` is null for a record without headers.
    """
    if part is None or part.size <= 0:
        return
    names = schema.fieldNames()
    arrow_schema = _arrow_schema(schema)
    columns = ["offset", "timestamp", "key", "value"] + (["headers"] if "headers" in names else [])

    def on_data_loss(loss: DataLoss) -> None:
        message = f"{part.topic}-{part.partition}: {loss.describe()}."
        if fail_on_data_loss:
            raise DataLossError(loss, message + _FAIL_ON_DATA_LOSS_HINT)
        log.warning("%s Skipping them (failOnDataLoss=false).", message)

    for batch in read_offset_range(part.table_uri, part.start, part.end, columns=columns, batch_rows=batch_rows,
                                   on_data_loss=on_data_loss, end_is_committed=True):
        n = batch.num_rows
        arrays = {
            "key": batch.column("key"),
            "value": batch.column("value"),
            "topic": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)),
                                                    pa.array([part.topic])).cast(pa.string()),
            "partition": pa.array(np.full(n, part.partition, np.int32)),
            "offset": batch.column("offset"),
            "timestamp": batch.column("timestamp"),
            "timestampType": pa.array(np.full(n, part.timestamp_type, np.int32)),
        }
        if "headers" in names:
            arrays["headers"] = _null_if_empty(batch.column("headers"))
        yield pa.RecordBatch.from_arrays(
            [arrays[name].cast(arrow_schema.field(name).type) for name in names], schema=arrow_schema)


def report_data_loss(message: str, *, fail: bool) -> None:
    """Data loss the driver found while planning (``message`` says which offsets, ending with ".").

    Raises:
        SourceError: ``fail`` (``failOnDataLoss=true``), with the Kafka source's hint appended.

    Else logs a warning and returns.
    """
    if fail:
        raise SourceError(message + _FAIL_ON_DATA_LOSS_HINT)
    log.warning("%s Some data may have been missed (failOnDataLoss=false).", message)


# -- batch ------------------------------------------------------------------------------------------

class LakelogBatchReader(DataSourceReader):
    """``spark.read.format("lakelog")``: one planned offset range per Spark task.

    :meth:`partitions` runs on the driver (asks the gateway, resolves the starting and ending
    options, checks for data loss); :meth:`read` runs in the executors' Python workers.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._cluster = _Cluster(options)

    def partitions(self) -> list[OffsetRangePartition]:
        """The batch's Spark tasks: from the starting to the ending offsets of every partition read.

        Raises:
            SourceError: a starting offset past its ending offset; data loss (offsets before the log
                start offset) with ``failOnDataLoss=true``; an assigned partition that does not exist.
            SourceOptionError: offsets options that do not fit the partitions read.
        """
        opts = self.options
        try:
            states = self._cluster.partitions()
            start = resolve_starting_offsets(opts, states)
            end = resolve_ending_offsets(opts, states)
        finally:
            self._cluster.close()
        ranges = []
        for tp, state in states.items():
            s, e = start[tp], end[tp]
            if s < state.log_start_offset:
                loss = DataLoss(state.table_uri, s, min(e, state.log_start_offset), state.log_start_offset)
                report_data_loss(f"{tp[0]}-{tp[1]}: {loss.describe()}.", fail=opts.fail_on_data_loss)
                s = min(state.log_start_offset, max(e, s))
            if s > e:
                raise SourceError(
                    f"Beginning offset {s} is after the ending offset {e} for topic {tp[0]} partition {tp[1]}. "
                    "You either provided an invalid starting offset, or the topic has been damaged.")
            ranges.append(OffsetRangePartition(tp[0], tp[1], state.table_uri, s, e, state.timestamp_type))
        return split_ranges(ranges, min_partitions=opts.min_partitions,
                            max_records_per_partition=opts.max_records_per_partition)

    def read(self, partition: OffsetRangePartition) -> Iterator[pa.RecordBatch]:
        """The rows of one task (:func:`read_partition`)."""
        return read_partition(partition, self.schema, fail_on_data_loss=self.options.fail_on_data_loss)

