"""Reading: the rows of a planned offset range (:func:`read_partition`) and the batch reader.

A task (:class:`~lakelog.spark.source.planning.OffsetRangePartition`) reads offsets
``start <= offset < end`` of one partition, in two parts, and returns Arrow record batches shaped like
Spark's Kafka source rows (:func:`kafka_schema`):

- ``[start, min(end, lake end offset))`` from the partition's Delta table directly, with
  :func:`lakelog.log_tables.reader.read_offset_range` (only the files whose offset statistics overlap
  the range);
- ``[max(start, lake end offset), end)``, only when the range reaches past the lake end offset the
  driver saw (``lakelog.read.tail=true``), from the partition leader's Arrow fetch through the gateway
  (:func:`lakelog.spark.source.tail.fetch_offset_range`).

``lakelog.read.mode`` (:func:`~lakelog.spark.source.options.read_mode_option`) says where the first part
comes from: ``direct`` the table path, ``broker`` the leader's Arrow fetch (the whole range, which the
leader serves from its Delta table too), ``auto`` (default) direct when the executor can open the table,
else broker (:func:`direct_table`).

The end is never past the high watermark the driver saw when it planned the batch, so uncommitted
records are never returned. ``spark.read.format("lakelog")`` is :class:`LakelogPushdownBatchReader`
(filter pushdown, :mod:`~lakelog.spark.source.pushdown`) in sessions where :func:`lakelog.spark.source.register`
ran, else :class:`LakelogBatchReader` (the same without ``pushFilters``).
"""

from __future__ import annotations

import logging
import os
from typing import Iterator, Sequence
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import BinaryType, DataType, StructField, StructType

from lakelog.log_tables.offset_scan import TimestampBounds, filter_timestamps
from lakelog.log_tables.reader import DataLoss, DataLossError, read_offset_range
from lakelog.client import GatewayError, LakelogClient
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.schemas.record_columns import column_type
from lakelog.spark.errors import SourceError, SourceOptionError
from lakelog.spark.source.lake_storage import LakeStorage
from lakelog.spark.source.options import ReadMode, SourceOptions
from lakelog.spark.source.planning import (FAIL_ON_DATA_LOSS_HINT, OffsetRangePartition, _Cluster, batch_ranges,
                                           report_data_loss, resolve_ending_offsets, resolve_starting_offsets,
                                           split_ranges)
from lakelog.spark.source.pushdown import PushedFilters, push_filters
from lakelog.spark.source.subjects import latest_schema, value_subject
from lakelog.spark.source.tail import TailFetch, fetch_offset_range, tail_fetch
from lakelog.spark.source.typed_tail import typed_tail_values
from lakelog.spark.sql import KAFKA_SOURCE_SCHEMA
from lakelog.spark.typed_views import partition_typed_columns, typed_column_type

log = logging.getLogger(__name__)

__all__ = [
    "LakelogBatchReader", "LakelogPushdownBatchReader", "OffsetRangePartition", "direct_table", "kafka_schema",
    "read_partition", "report_data_loss", "split_ranges", "tail_fetch",
]

# -- schema --------------------------------------------------------------------------------------

def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema: the ``headers`` column only with ``include_headers``.

    ``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int`` and, with ``include_headers``, ``headers array<struct<key: string, value: binary>>``
    (the columns of :data:`lakelog.spark.sql.KAFKA_SOURCE_SCHEMA`, all nullable).
    """
    fields = KAFKA_SOURCE_SCHEMA.fields if include_headers else KAFKA_SOURCE_SCHEMA.fields[:-1]
    return StructType(list(fields))


def registry_value_type(client: LakelogClient, topic: str) -> DataType | None:
    """The Spark type of ``topic``'s typed value as its subject's latest schema gives it (the column the
    flusher will write: :func:`~lakelog.schemas.record_columns.column_type`), None when the topic names no
    subject (``value.schema.subject``, or ``confluent.value.schema.validation=true``: ``<topic>-value``) or the
    subject has no version."""
    from pyspark.sql.pandas.types import from_arrow_type

    subject = value_subject(client, topic)
    latest = None if subject is None else latest_schema(client, subject)
    if latest is None:
        return None
    arrow_type, _ = column_type(latest.schema_type, latest.schema, referenced=latest.referenced)
    return from_arrow_type(arrow_type)


def typed_value_schema(options: SourceOptions, partitions: Sequence[PartitionLogInfo], *,
                       client: LakelogClient | None = None) -> StructType:
    """The schema of a read with ``valueFormat=schema``: :func:`kafka_schema` with ``value`` the typed value
    of the partitions' tables (their ``value_parsed`` columns' union: :mod:`lakelog.spark.typed_views`) and
    of the topics' subjects' latest schemas (:func:`registry_value_type`, through ``client``), so records
    of a version not flushed yet keep their new fields when read from the leader.

    Raises:
        SourceOptionError: no partition table has a typed value and no subject with a schema is bound to
            the topics.
        GatewayError: a topic's configs or subject could not be read (a 403 on the subject is passed over
            when a table has the typed value).
    """
    storage = None if not partitions else options.lake_storage.for_uri(partitions[0].table_uri)
    per_table = partition_typed_columns(partitions, storage_options=storage)
    latest = []
    for topic in sorted({p.topic for p in partitions}) if client is not None else ():
        try:
            found = registry_value_type(client, topic)
        except GatewayError as e:
            if getattr(e, "http_status", None) != 403 or not any("value_parsed" in c for c in per_table):
                raise
            found = None  # no READ on the topic's subject: the tables' type
        if found is not None:
            latest.append({"value_parsed": found})
    value_type = typed_column_type(per_table + latest, "value_parsed")
    if value_type is None:
        topics = sorted({p.topic for p in partitions})
        raise SourceOptionError(
            f"Option 'valueFormat=schema': {', '.join(topics) or 'the topics read'} has no typed value: no table has "
            "the value_parsed column and no subject with a schema is bound to it. Bind the topic to a schema "
            "registry subject (topic config value.schema.subject) that holds a schema, or read valueFormat=bytes.")
    base = kafka_schema(options.include_headers)
    return StructType([StructField("value", value_type, True) if f.name == "value" else f for f in base.fields])


def _arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema PySpark expects of batches with Spark schema ``schema`` (``timestamp`` is ``us``, UTC).

    PySpark 4.2 compares the schema of the first ``RecordBatch`` a ``read()`` yields with
    ``to_arrow_schema(schema, timezone="UTC")`` and fails the task with
    ``DATA_SOURCE_RETURN_SCHEMA_MISMATCH`` when they differ (``records_to_arrow_batches`` in
    ``pyspark/sql/worker/plan_data_source_read.py``); ``to_arrow_schema`` needs the time zone of a
    ``TimestampType`` given.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


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


def _kafka_rows(batch: pa.RecordBatch, part: OffsetRangePartition, names: list[str],
                arrow_schema: pa.Schema) -> pa.RecordBatch:
    """Log records (``offset``, ``timestamp``, ``key``, ``value`` [, ``headers``]) as Kafka source rows."""
    n = batch.num_rows
    value = batch.column("value") if "value" in batch.schema.names else (
        batch.column("value_parsed") if "value_parsed" in batch.schema.names  # valueFormat=schema
        else pa.nulls(n, arrow_schema.field("value").type))  # a file flushed before the topic had a subject
    arrays = {
        "key": batch.column("key"),
        "value": value,
        "topic": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)),
                                                pa.array([part.topic])).cast(pa.string()),
        "partition": pa.array(np.full(n, part.partition, np.int32)),
        "offset": batch.column("offset"),
        "timestamp": batch.column("timestamp"),
        "timestampType": pa.array(np.full(n, part.timestamp_type, np.int32)),
    }
    if "headers" in names:
        arrays["headers"] = _null_if_empty(batch.column("headers"))
    return pa.RecordBatch.from_arrays(
        [arrays[name].cast(arrow_schema.field(name).type) for name in names], schema=arrow_schema)


_logged_modes: set[tuple[str, str]] = set()  # (table URI, how it is read) this worker logged already


def _local_path(uri: str) -> str | None:
    """The local filesystem path of a table URI (a plain path or ``file://``), None for other schemes."""
    if uri.startswith("file://"):
        return unquote(uri[len("file://"):])
    return None if "://" in uri else uri


def direct_table(table_uri: str, mode: ReadMode, *, table_id: str | None = None,
                 storage_options: dict[str, str] | None = None) -> "str | DeltaTable | None":
    """What an executor reads the Delta part of a range from under ``lakelog.read.mode`` ``mode``.

    Returns:
        ``direct``: ``table_uri``. ``broker``: None (fetch through the leader). ``auto``: the opened
        :class:`DeltaTable` when the executor can open it (a local path is first checked for its
        ``_delta_log`` folder, so a missing one costs no delta-rs call) and it is the leader's table (its
        ``metaData.id`` is ``table_id``, when given: on another machine the same path may hold another
        replica's table, which can lag or have diverged), else None; which of them is logged once per
        table and Python worker (info). An ``s3://`` table of a shared lake (``lake.uri``) is opened with
        ``storage_options`` (delta-rs's, from ``lakelog.lake.storage.*``:
        :mod:`~lakelog.spark.source.lake_storage`; never logged); without them delta-rs looks in the
        executor's environment, and ``auto`` reads through the leader when that finds no way in.
    """
    if mode == "direct":
        return table_uri
    if mode == "broker":
        return None
    local = _local_path(table_uri)
    table: DeltaTable | None = None
    why = ""
    if local is not None and not os.path.isdir(os.path.join(local, "_delta_log")):
        why = f"{local}/_delta_log is not there"
    else:
        try:
            table = DeltaTable(table_uri, storage_options=storage_options)
        except Exception as e:  # noqa: BLE001 - whatever keeps it from being opened: read through the leader
            why = f"{type(e).__name__}: {e}"
        if table is not None and table_id is not None and table.metadata().id != table_id:
            why = f"the table there is not the leader's (id {table.metadata().id}, the leader's {table_id})"
            table = None
    key = (table_uri, "direct" if table is not None else "broker")
    if key not in _logged_modes:
        _logged_modes.add(key)
        if table is not None:
            log.info("lakelog.read.mode=auto: reading %s directly", table_uri)
        else:
            log.info("lakelog.read.mode=auto: %s cannot be opened here (%s); reading it through the partition "
                     "leader", table_uri, why)
    return table


def read_partition(part: OffsetRangePartition | InputPartition | None, schema: StructType, *,
                   fail_on_data_loss: bool, batch_rows: int = 64 * 1024,
                   tail: TailFetch | None = None, mode: ReadMode = "direct",
                   timestamps: TimestampBounds | None = None,
                   lake_storage: LakeStorage | None = None) -> Iterator[pa.RecordBatch]:
    """The Kafka-shaped rows of one planned offset range, as Arrow batches with exactly ``schema``.

    Offsets below the range's ``lake_end_offset`` are read from the Delta table
    (:attr:`~lakelog.spark.source.planning.OffsetRangePartition.delta_range`), the rest from the
    partition leader's Arrow fetch (``tail_range``), in pages until the range's end; nothing at or
    above the end is returned.

    Args:
        part: the range. None, an empty range, or any other ``InputPartition`` gives no batches: a batch
            read planning no range runs one task with ``InputPartition(None)`` (PySpark 4.2,
            ``plan_data_source_read.py``; 4.0 passed None).
        schema: :func:`kafka_schema` (with or without ``headers``; with ``valueFormat=schema``
            :func:`typed_value_schema`, whose ``value`` is read from the tables' ``value_parsed`` and
            decoded here from the bytes the leader's fetch gives: :mod:`~lakelog.spark.source.typed_tail`);
            the batches carry exactly its columns.
        fail_on_data_loss: offsets of the range that are no longer in the log (retention, truncation)
            raise :class:`~lakelog.log_tables.reader.DataLossError` naming them (True), or are skipped
            with a warning (False).
        batch_rows: at most this many rows per batch. Default: 65,536.
        tail: how to fetch the tail part (:func:`tail_fetch`). Default None: a range with a tail part
            (or any range in ``broker`` mode) raises :class:`~lakelog.spark.errors.SourceError`.
        mode: ``lakelog.read.mode``: where the Delta part is read from (:func:`direct_table`); in
            ``broker`` mode (or ``auto`` when the table cannot be opened) the whole range is fetched
            from the leader. Default ``direct``.
        timestamps: ``(low_us, high_us)`` (µs since the epoch, inclusive, None = unbounded): only
            records whose timestamp lies within, pruning Delta files and row groups by their statistics
            (pushed-down ``timestamp`` filters). Default None: every record.
        lake_storage: how to open an ``s3://`` table of a shared lake (``lakelog.lake.storage.*``).
            Default None: delta-rs's own lookup in the executor's environment.

    Yields:
        ``pyarrow.RecordBatch`` es in offset order; ``headers`` is null for a record without headers.
    """
    if not isinstance(part, OffsetRangePartition) or part.size <= 0:
        return
    names = schema.fieldNames()
    arrow_schema = _arrow_schema(schema)
    typed = not isinstance(schema["value"].dataType, BinaryType)  # valueFormat=schema
    columns = ["offset", "timestamp", "key", "value_parsed" if typed else "value"] + (
        ["headers"] if "headers" in names else [])

    def on_data_loss(loss: DataLoss) -> None:
        message = f"{part.topic}-{part.partition}: {loss.describe()}."
        if fail_on_data_loss:
            raise DataLossError(loss, message + FAIL_ON_DATA_LOSS_HINT)
        log.warning("%s Skipping them (failOnDataLoss=false).", message)

    delta_start, delta_end = part.delta_range
    tail_start, tail_end = part.tail_range
    storage_options = None if lake_storage is None else lake_storage.for_uri(part.table_uri)
    table = (direct_table(part.table_uri, mode, table_id=part.table_id, storage_options=storage_options)
             if delta_start < delta_end else None)
    if table is None:
        tail_start = delta_start  # broker mode: the leader's fetch serves the Delta part too
    else:
        for batch in read_offset_range(table, delta_start, delta_end, columns=columns, batch_rows=batch_rows,
                                       storage_options=storage_options, on_data_loss=on_data_loss,
                                       end_is_committed=True, timestamps=timestamps):
            yield _kafka_rows(batch, part, names, arrow_schema)
    if tail_start >= tail_end:
        return
    if tail is None:
        where = "are not in the Delta table" if table is not None or delta_start >= delta_end else \
            f"are to be read through the partition leader (lakelog.read.mode={mode})"
        raise SourceError(f"{part.topic}-{part.partition}: offsets {tail_start} to {tail_end - 1} {where} and no "
                          "gateway was given to fetch them from the leader")
    # the leader's fetch has the records' bytes: a typed read decodes their values here (typed_tail)
    fetched = ["value" if c == "value_parsed" else c for c in columns]
    with tail.client() as client:
        decode = typed_tail_values(client, bootstrap_servers=tail.bootstrap_servers, topic=part.topic) \
            if typed else None
        for table in fetch_offset_range(client, tail, topic=part.topic, partition=part.partition,
                                        table_uri=part.table_uri, start=tail_start, end=tail_end,
                                        on_data_loss=on_data_loss):
            for batch in filter_timestamps(table.select(fetched), timestamps).to_batches(max_chunksize=batch_rows):
                if not batch.num_rows:
                    continue
                if decode is not None:
                    i = batch.schema.get_field_index("value")
                    batch = batch.set_column(i, "value_parsed", decode(batch.column(i)))
                yield _kafka_rows(batch, part, names, arrow_schema)


# -- batch ------------------------------------------------------------------------------------------

class LakelogBatchReader(DataSourceReader):
    """``spark.read.format("lakelog")`` without filter pushdown: one planned offset range per Spark task.

    :meth:`partitions` runs on the driver (asks the gateway, resolves the starting and ending
    options, checks for data loss); :meth:`read` runs in the executors' Python workers. With
    ``lakelog.read.tail=false`` (the batch default) "latest" is each partition's lake end offset and
    every task reads only the Delta tables; with ``true`` it is the high watermark and tasks fetch the
    offsets past the lake end offset from the leaders.

    This class does not override ``pushFilters``: PySpark 4.2 fails the planning of a reader that does
    when ``spark.sql.python.filterPushdown.enabled`` is false (its default), so sessions that found the
    source by themselves (``pyspark_lakelog``) get this one; :class:`LakelogPushdownBatchReader` adds
    the pushdown. :attr:`pushed` (None here) narrows the ranges and filters timestamps when set.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.pushed: PushedFilters | None = None
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
            start = resolve_starting_offsets(opts, states, client=self._cluster.client)
            end = resolve_ending_offsets(opts, states, client=self._cluster.client)
        finally:
            self._cluster.close()
        ranges = batch_ranges(states, start, end, fail_on_data_loss=opts.fail_on_data_loss,
                              tail=bool(opts.read_tail))
        if self.pushed is not None:
            ranges = self.pushed.narrow(ranges)
        return split_ranges(ranges, min_partitions=opts.min_partitions,
                            max_records_per_partition=opts.max_records_per_partition)

    def read(self, partition: OffsetRangePartition) -> Iterator[pa.RecordBatch]:
        """The rows of one task (:func:`read_partition`)."""
        return read_partition(partition, self.schema, fail_on_data_loss=self.options.fail_on_data_loss,
                              tail=tail_fetch(self.options), mode=self.options.read_mode,
                              timestamps=None if self.pushed is None else self.pushed.timestamps,
                              lake_storage=self.options.lake_storage)


class LakelogPushdownBatchReader(LakelogBatchReader):
    """:class:`LakelogBatchReader` with filter pushdown (:mod:`~lakelog.spark.source.pushdown`).

    Spark calls :meth:`pushFilters` on the driver before :meth:`~LakelogBatchReader.partitions`, only
    with ``spark.sql.python.filterPushdown.enabled=true`` (:func:`lakelog.spark.source.register` sets
    it; with it false PySpark 4.2 refuses to plan this reader, ``DATA_SOURCE_PUSHDOWN_DISABLED``).
    """

    def pushFilters(self, filters: Sequence[Filter]) -> Iterator[Filter]:
        """Keep what narrows the read (:func:`~lakelog.spark.source.pushdown.push_filters`) in
        :attr:`pushed`; yield the filters Spark must still evaluate (``timestamp`` ones among them)."""
        self.pushed, rest = push_filters(list(filters))
        log.debug("pushed filters: %s; left to Spark: %s", self.pushed, rest)
        return iter(rest)
