"""Read-only access to a partition log table by offset range, straight from its Delta files.

Readers outside the broker (Spark executors of the ``lakelog`` data source, tools) read a partition's
Delta table directly instead of fetching through the gateway. Everything here is read-only and needs
no broker, no ZooKeeper and no Spark: one :class:`deltalake.DeltaTable` snapshot (the file list with
its ``min.offset``/``max.offset`` statistics) and pyarrow to read the Parquet files.

- :func:`read_offset_range` yields the records ``start <= offset < end`` in offset order, opening only
  the data files (and within them only the row groups) whose offset statistics overlap the range
  (and, given timestamp bounds, whose timestamp statistics meet them).
- :func:`data_loss` tells whether retention already removed offsets of a range (they are below the
  table's current first offset), :func:`log_start_offset` gives that first offset.
- :func:`offset_for_timestamp` finds the first offset whose timestamp is at or after a time (Kafka's
  ``offsetsForTimes``), skipping files by their ``max.timestamp`` statistic.

Consistency: each call reads one table snapshot (a fixed Delta version), so a compaction or retention
commit that lands while it reads does not change what it sees: compaction rewrites a contiguous run of
files into one file in a single commit (``overwrite`` with a ``replaceWhere`` predicate), and the old
files stay on disk until a VACUUM. Only when a VACUUM deletes a file the snapshot still lists does
:func:`read_offset_range` move to the newest snapshot and continue from the next offset it owes; if
retention removed that offset meanwhile, that is reported as data loss like any other.

Within one file delta-rs may store a commit's rows in another order than it was given, so rows are
sorted by offset whenever a file (or row group) is not already in order.

The reading itself is :func:`lakelog.log_tables.offset_scan.scan_offsets`, the same code the broker's
fetch (:meth:`PartitionLog.read <lakelog.log_tables.partition_log.PartitionLog.read>`) runs for the
records its tail cache no longer holds: both return the same rows for the same range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from lakelog.log_tables.data_files import DataFile, FileSnapshot, data_files, open_table
from lakelog.log_tables.errors import DataLossError
from lakelog.log_tables.offset_scan import (MAX_SNAPSHOT_RELOADS, DataLoss, TimestampBounds, groups_of_files,
                                            read_file_range, scan_offsets, target_schema)
from lakelog.log_tables.recovery import log_start_offset_of
from lakelog.log_tables.schema import LOG_SCHEMA, timestamps_us
from lakelog.log_tables.table_writes import recorded_lake_end_offset, recorded_log_start_offset

#: Default number of rows per yielded record batch.
DEFAULT_BATCH_ROWS = 64 * 1024

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "MAX_SNAPSHOT_RELOADS",
    "DataFile",
    "DataLoss",
    "DataLossError",
    "data_files",
    "data_loss",
    "log_start_offset",
    "offset_for_timestamp",
    "open_table",
    "read_offset_range",
]


def log_start_offset(table: "str | DeltaTable", *, storage_options: dict[str, str] | None = None) -> int | None:
    """The log start offset of the table, as the broker recovers it
    (:func:`~lakelog.log_tables.recovery.log_start_offset_of`: the one its commits record -- below the
    first file when the log cleaner emptied the head of a compacted topic, a gap and not lost records --
    else the first offset its files hold); None if it holds no record and records none.

    This is how the broker defines the log start offset (retention moves it up by removing the oldest
    files, and records it).
    """
    dt = open_table(table, storage_options=storage_options)
    snapshot = FileSnapshot.of_table(dt, storage_options=storage_options)
    recorded = recorded_log_start_offset(dt)
    if snapshot.first_offset is None and recorded is None:
        return None
    return log_start_offset_of(snapshot.first_offset, recorded,
                               max(snapshot.end_offset or 0, recorded_lake_end_offset(dt)))


def data_loss(table: "str | DeltaTable", start: int, end: int, *,
              storage_options: dict[str, str] | None = None) -> DataLoss | None:
    """Which offsets of ``[start, end)`` retention already removed from the table, if any.

    The missing offsets are those below the table's current first offset (:func:`log_start_offset`);
    a table without records is missing the whole range. Gaps in the middle of the log (a compacted
    topic, ``cleanup.policy=compact``) are not data loss, as in Kafka.

    Args:
        table: table URI or an open :class:`DeltaTable` snapshot (then that snapshot is judged).
        start: first offset wanted.
        end: exclusive end; offsets below it were committed when the reader planned the range
            (end <= the high watermark it saw).

    Returns:
        A :class:`DataLoss` for ``[start, min(end, log start offset))``, or None when nothing is missing
        (including when ``start >= end``).
    """
    if start >= end:
        return None
    dt = open_table(table, storage_options=storage_options)
    first = log_start_offset(dt, storage_options=storage_options)
    if first is not None and start >= first:
        return None
    stop = end if first is None else min(end, first)
    return DataLoss(table_uri=dt.table_uri, start=start, end=stop, log_start_offset=first)


def read_offset_range(table_uri: "str | DeltaTable", start: int, end: int, *, columns: list[str] | None = None,
                      batch_rows: int = DEFAULT_BATCH_ROWS, version: int | None = None,
                      storage_options: dict[str, str] | None = None,
                      on_data_loss: Callable[[DataLoss], None] | None = None,
                      end_is_committed: bool = False,
                      timestamps: TimestampBounds | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the records ``start <= offset < end`` of a partition table, in offset order.

    Only the data files whose ``min.offset``/``max.offset`` statistics overlap the range are opened
    (files without statistics are always read), and within a file only the row groups whose offset
    statistics overlap it. Rows are sorted by offset where a file stores them out of order.
    (:func:`~lakelog.log_tables.offset_scan.scan_offsets` on one snapshot of the table.)

    Args:
        table_uri: the partition table's URI/path, or an open :class:`DeltaTable` snapshot to read.
        start: first offset wanted.
        end: exclusive end offset. Offsets above the table's content are simply absent (unless
            ``end_is_committed``); callers bound ``end`` by the high watermark they saw, since records
            at or past it are not committed.
        columns: columns to return, in this order. Default: all of :data:`LOG_SCHEMA`.
        batch_rows: at most this many rows per yielded batch (> 0).
        version: the Delta version to read. Default: the newest (or the given snapshot's).
        storage_options: delta-rs storage options for object stores.
        on_data_loss: called with a :class:`DataLoss` when offsets of the range are no longer in the
            table: retention removed them from its head, or (with ``end_is_committed``) the log now
            ends before ``end``. If it returns, reading goes on with the offsets that are there; to
            stop, raise from it. Default: raise :class:`DataLossError`.
        end_is_committed: every offset below ``end`` was committed when the caller planned the read
            (``end`` <= the high watermark it saw), so a table ending before ``end`` was truncated
            since: report that as data loss too. A table whose files end early because compaction
            removed its last records is not truncated: the lake end offset its commits record
            (:func:`~lakelog.log_tables.table_writes.recorded_lake_end_offset`) tells them apart.
        timestamps: ``(low_us, high_us)``, µs since the epoch, inclusive, None = unbounded: only the
            records whose timestamp lies within, and only the files and row groups whose ``timestamp``
            statistics allow such records are opened (Spark's pushed-down ``timestamp`` filters).
            Default None: every record.

    Offsets missing between records (a compacted topic, ``cleanup.policy=compact``: offsets never
    change, so gaps appear) are skipped, not reported: as in Kafka they are not data loss.

    Yields:
        ``pyarrow.RecordBatch`` es with the :data:`LOG_SCHEMA` types of ``columns``, offsets strictly
        increasing across all of them.

    Raises:
        DataLossError: offsets are missing and no ``on_data_loss`` was given.
        ValueError: an unknown column or ``batch_rows < 1``.
        LogTableError: data files kept vanishing (VACUUM) over several snapshot reloads.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
    out_columns = list(LOG_SCHEMA.names if columns is None else columns)
    target_schema(out_columns)
    if start >= end:
        return

    def report(loss: DataLoss) -> None:
        if on_data_loss is None:
            raise DataLossError(loss)
        on_data_loss(loss)

    dt = open_table(table_uri, version=version, storage_options=storage_options)
    snapshot = FileSnapshot.of_table(dt, storage_options=storage_options)
    for table in scan_offsets(snapshot, start, end, out_columns, on_data_loss=report,
                              end_is_committed=end_is_committed, recorded_end=lambda: recorded_lake_end_offset(dt),
                              timestamps=timestamps):
        if table.column_names != out_columns:  # a typed column its file lacks is left out
            table = table.select([c for c in out_columns if c in table.column_names])
        for batch in table.to_batches(max_chunksize=batch_rows):
            if batch.num_rows:
                yield batch


def offset_for_timestamp(table: "str | DeltaTable", timestamp_ms: int, *, start: int = 0, end: int | None = None,
                         storage_options: dict[str, str] | None = None) -> int | None:
    """The first offset in ``[start, end)`` whose record timestamp is >= ``timestamp_ms`` (Kafka's offsetsForTimes).

    Files are visited in offset order and skipped when their ``max.timestamp`` statistic is below the
    time; the first file that may match is read (``offset`` and ``timestamp`` only). With CreateTime
    timestamps are not monotonic in offsets; the answer is still the smallest matching offset.

    Args:
        table: table URI or an open :class:`DeltaTable` snapshot.
        timestamp_ms: the time, ms since the epoch.
        start, end: the offsets searched (end exclusive; default: to the end of the table).

    Returns:
        The offset, or None when no record in the range is that recent.
    """
    dt = open_table(table, storage_options=storage_options)
    target_us = int(timestamp_ms) * 1000
    upper = end if end is not None else np.iinfo(np.int64).max
    if start >= upper:
        return None
    snapshot = FileSnapshot.of_table(dt, storage_options=storage_options)
    best: int | None = None
    for group in groups_of_files(snapshot.overlapping(start, upper)):
        if all(f.max_timestamp_us is not None and f.max_timestamp_us < target_us for f in group):
            continue
        for f in group:
            for table in read_file_range(snapshot, f, start, upper, ["offset", "timestamp"]):
                hits = table["offset"].filter(pc.greater_equal(timestamps_us(table["timestamp"]), target_us))
                if len(hits):
                    lo = pc.min(hits).as_py()
                    best = lo if best is None else min(best, lo)
        if best is not None:
            return best  # groups are ascending and disjoint: nothing later can be smaller
    return best
