"""Read-only access to a partition log table by offset range, straight from its Delta files.

Readers outside the broker (Spark executors of the ``lakelog`` data source, tools) read a partition's
Delta table directly instead of fetching through the gateway. Everything here is read-only and needs
no broker, no ZooKeeper and no Spark: one :class:`deltalake.DeltaTable` snapshot (the file list with
its ``min.offset``/``max.offset`` statistics) and pyarrow to read the Parquet files.

- :func:`read_offset_range` yields the records ``start <= offset < end`` in offset order, opening only
  the data files (and within them only the row groups) whose offset statistics overlap the range.
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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable

from lakelog.log_tables.errors import LogTableError
from lakelog.log_tables.schema import LOG_SCHEMA

log = logging.getLogger(__name__)

#: Default number of rows per yielded record batch.
DEFAULT_BATCH_ROWS = 64 * 1024

#: How often :func:`read_offset_range` moves to a newer snapshot when files vanish under it (VACUUM).
MAX_SNAPSHOT_RELOADS = 5

__all__ = [
    "DEFAULT_BATCH_ROWS",
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


class DataLossError(LogTableError):
    """Offsets a reader needs are no longer in the partition log (retention or truncation removed them).

    Raised by :func:`read_offset_range` when no ``on_data_loss`` callback is given. Not retriable:
    the records are gone.
    """

    http_status = 422
    error_code = 42208

    def __init__(self, loss: "DataLoss", message: str | None = None) -> None:
        super().__init__(message or f"{loss.describe()} of the table {loss.table_uri}")
        self.loss = loss


@dataclass(frozen=True)
class DataLoss:
    """Offsets ``start <= offset < end`` that a reader asked for and the table no longer holds.

    Attributes:
        table_uri: the partition table.
        start: first missing offset.
        end: first offset after the missing run (exclusive).
        log_start_offset: the table's first offset at the snapshot read, or None if it holds no records.
        at_head: True when the offsets were removed from the start of the log (retention); False when
            the log ends before them (it was truncated below offsets a reader was told were committed).
    """

    table_uri: str
    start: int
    end: int
    log_start_offset: int | None
    at_head: bool = True

    @property
    def count(self) -> int:
        """Number of missing offsets."""
        return self.end - self.start

    def describe(self) -> str:
        """``"offsets 0 to 14 (15 records) are no longer in the log (log start offset 15)"``."""
        span = f"offset {self.start}" if self.count == 1 else f"offsets {self.start} to {self.end - 1}"
        where = (f"log start offset {self.log_start_offset}" if self.log_start_offset is not None
                 else "the log holds no records")
        if self.at_head:
            return f"{span} ({self.count} records) are no longer in the log ({where}; retention removed them)"
        return f"{span} ({self.count} records) are missing at the end of the log (it was truncated; {where})"


@dataclass(frozen=True)
class DataFile:
    """One data file of a table snapshot.

    Attributes:
        path: location as the Delta log lists it (relative to the table root, URL-decoded), or an
            absolute URI.
        min_offset: ``min.offset`` statistic, None when the file has no statistics.
        max_offset: ``max.offset`` statistic, None when the file has no statistics.
        max_timestamp_us: ``max.timestamp`` statistic in microseconds since the epoch, or None.
        num_records: row count, or None when unknown.
        size_bytes: file size.
    """

    path: str
    min_offset: int | None
    max_offset: int | None
    max_timestamp_us: int | None
    num_records: int | None
    size_bytes: int

    @property
    def has_offset_stats(self) -> bool:
        return self.min_offset is not None and self.max_offset is not None

    def overlaps(self, start: int, end: int) -> bool:
        """True when the file may hold an offset in ``[start, end)`` (always, without statistics)."""
        if not self.has_offset_stats:
            return True
        return self.max_offset >= start and self.min_offset < end


def open_table(table: "str | DeltaTable", *, version: int | None = None,
               storage_options: dict[str, str] | None = None) -> DeltaTable:
    """``table`` as a :class:`DeltaTable` snapshot (opened at ``version``, default the newest)."""
    if isinstance(table, DeltaTable):
        if version is not None and table.version() != version:
            table = DeltaTable(table.table_uri, version=version, storage_options=storage_options)
        return table
    return DeltaTable(table, version=version, storage_options=storage_options)


def _us(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return int(value)


def data_files(table: DeltaTable) -> list[DataFile]:
    """The data files of the snapshot, ordered by ``min.offset`` (files without statistics last)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return []
    names = set(actions.column_names)

    def column(name: str) -> list:
        if name not in names:
            return [None] * actions.num_rows
        col = actions[name]
        if pa.types.is_timestamp(col.type):
            col = pc.cast(pc.cast(col, pa.timestamp("us", tz="UTC")), pa.int64())
        return col.to_pylist()

    files = [
        DataFile(path=unquote(path), min_offset=lo, max_offset=hi, max_timestamp_us=_us(thi), num_records=n,
                 size_bytes=int(size))
        for path, lo, hi, thi, n, size in zip(
            column("path"), column("min.offset"), column("max.offset"), column("max.timestamp"),
            column("num_records"), column("size_bytes"))
    ]
    files.sort(key=lambda f: (f.min_offset is None, f.min_offset if f.min_offset is not None else 0, f.path))
    return files


def log_start_offset(table: "str | DeltaTable", *, storage_options: dict[str, str] | None = None) -> int | None:
    """The first offset the table holds now: min of ``min.offset`` over its files; None if it holds none.

    This is how the broker defines the log start offset (retention moves it up by removing the oldest
    files). Files without statistics are read to find their first offset.
    """
    dt = open_table(table, storage_options=storage_options)
    return _first_offset(dt, data_files(dt), storage_options)


def _first_offset(dt: DeltaTable, files: Sequence[DataFile],
                  storage_options: dict[str, str] | None = None) -> int | None:
    candidates = [f.min_offset for f in files if f.has_offset_stats and (f.num_records or 0) > 0]
    first = min(candidates) if candidates else None
    unknown = [f for f in files if not f.has_offset_stats]
    if unknown:
        fs, root = _filesystem(dt, storage_options)
        for f in unknown:
            offsets = pq.read_table(_file_path(root, f.path), filesystem=fs, columns=["offset"])["offset"]
            if len(offsets):
                lo = pc.min(offsets).as_py()
                first = lo if first is None else min(first, lo)
    return first


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
    first = _first_offset(dt, data_files(dt), storage_options)
    if first is not None and start >= first:
        return None
    stop = end if first is None else min(end, first)
    return DataLoss(table_uri=dt.table_uri, start=start, end=stop, log_start_offset=first)


def _filesystem(dt: DeltaTable, storage_options: dict[str, str] | None = None) -> tuple[pafs.FileSystem, str]:
    """A filesystem to read the table's data files with, and the table root within it.

    Local tables use pyarrow's local filesystem; object stores use delta-rs' own storage handler, so
    the same ``storage_options`` (credentials, endpoints) reach both the Delta log and the Parquet
    files, and the root is ``""`` (paths are relative to the table).
    """
    uri = dt.table_uri
    if uri.startswith("file://"):
        uri = unquote(uri[len("file://"):])
    if "://" not in uri:
        return pafs.LocalFileSystem(), uri.rstrip("/")
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(dt.table_uri, storage_options)), ""


def _file_path(root: str, path: str) -> str:
    if "://" in path:  # an absolute URI in the log (e.g. a shallow clone): only local ones are read
        return unquote(path[len("file://"):]) if path.startswith("file://") else path
    if path.startswith("/") or not root:
        return path
    return f"{root}/{path}"


def _target_schema(columns: Sequence[str]) -> pa.Schema:
    try:
        return pa.schema([LOG_SCHEMA.field(c) for c in columns])
    except KeyError as e:
        raise ValueError(f"unknown column {e}; a partition log table has {LOG_SCHEMA.names}") from None


def _row_groups(meta: pq.FileMetaData, offset_index: int, start: int, end: int) -> list[int]:
    """Row groups whose offset statistics overlap ``[start, end)`` (all groups lacking statistics)."""
    groups = []
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        if rg.num_rows == 0:
            continue
        stats = rg.column(offset_index).statistics
        if stats is not None and stats.has_min_max and (stats.max < start or stats.min >= end):
            continue
        groups.append(i)
    return groups


def _sorted_by_offset(table: pa.Table) -> pa.Table:
    offsets = table["offset"].to_numpy()
    if len(offsets) > 1 and (offsets[1:] < offsets[:-1]).any():
        table = table.take(pc.sort_indices(table["offset"]))
    return table


class _FileVanished(Exception):
    """A data file listed by the snapshot is gone (VACUUM); the reader reloads the snapshot."""


def _read_file_range(fs: pafs.FileSystem, path: str, start: int, end: int, read_columns: list[str]) -> Iterator[pa.Table]:
    """Tables of ``start <= offset < end`` from one file, each in offset order, consecutive in offset order."""
    try:
        source = fs.open_input_file(path)
    except FileNotFoundError as e:
        raise _FileVanished(path) from e
    except OSError as e:  # some filesystems say "not found" with a plain OSError
        if "not found" in str(e).lower() or "no such file" in str(e).lower():
            raise _FileVanished(path) from e
        raise
    with source:
        pf = pq.ParquetFile(source)
        meta = pf.metadata
        names = pf.schema_arrow.names
        # row-group statistics are per leaf column: find the leaf "offset" (nested headers count twice)
        offset_index = next(i for i in range(meta.num_columns) if meta.schema.column(i).path == "offset")
        groups = _row_groups(meta, offset_index, start, end)
        if not groups:
            return
        # Groups can be streamed one at a time when their offset ranges are disjoint and ascending;
        # otherwise (a file written from rows in another order) read them together and sort.
        bounds = []
        for i in groups:
            stats = meta.row_group(i).column(offset_index).statistics
            bounds.append((stats.min, stats.max) if stats is not None and stats.has_min_max else None)
        ordered = all(b is not None for b in bounds) and all(
            bounds[k][1] < bounds[k + 1][0] for k in range(len(bounds) - 1))
        cols = [c for c in read_columns if c in names]
        chunks = [[i] for i in groups] if ordered else [groups]
        for chunk in chunks:
            # Normalise types first (files of other writers may use binary_view, ns timestamps, ...)
            table = pf.read_row_groups(chunk, columns=cols)
            table = table.cast(_target_schema(table.column_names))
            mask = pc.and_(pc.greater_equal(table["offset"], start), pc.less(table["offset"], end))
            table = table.filter(mask)
            if table.num_rows:
                yield _sorted_by_offset(table)


def _groups_of_files(files: Sequence[DataFile]) -> list[list[DataFile]]:
    """Files grouped so that groups are disjoint in offsets and ascending: overlapping files share a group.

    In a healthy table every file covers its own offsets and each group is one file. Files without
    statistics could hold anything, so they join one group with all the others.
    """
    if any(not f.has_offset_stats for f in files):
        return [list(files)] if files else []
    groups: list[list[DataFile]] = []
    group_max = None
    for f in files:  # sorted by min_offset
        if groups and f.min_offset <= group_max:
            groups[-1].append(f)
            group_max = max(group_max, f.max_offset)
        else:
            groups.append([f])
            group_max = f.max_offset
    return groups


def read_offset_range(table_uri: "str | DeltaTable", start: int, end: int, *, columns: list[str] | None = None,
                      batch_rows: int = DEFAULT_BATCH_ROWS, version: int | None = None,
                      storage_options: dict[str, str] | None = None,
                      on_data_loss: Callable[[DataLoss], None] | None = None,
                      end_is_committed: bool = False) -> Iterator[pa.RecordBatch]:
    """Yield the records ``start <= offset < end`` of a partition table, in offset order.

    Only the data files whose ``min.offset``/``max.offset`` statistics overlap the range are opened
    (files without statistics are always read), and within a file only the row groups whose offset
    statistics overlap it. Rows are sorted by offset where a file stores them out of order.

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
            since: report that as data loss too.

    Yields:
        ``pyarrow.RecordBatch`` es with the :data:`LOG_SCHEMA` types of ``columns``, offsets strictly
        increasing across all of them.

    Raises:
        DataLossError: offsets are missing and no ``on_data_loss`` was given.
        ValueError: an unknown column or ``batch_rows < 1``.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
    out_columns = list(LOG_SCHEMA.names if columns is None else columns)
    schema = _target_schema(out_columns)
    read_columns = list(dict.fromkeys(["offset", *out_columns]))
    read_schema = _target_schema(read_columns)
    if start >= end:
        return

    def report(loss: DataLoss) -> None:
        if on_data_loss is None:
            raise DataLossError(loss)
        on_data_loss(loss)

    dt = open_table(table_uri, version=version, storage_options=storage_options)
    uri = dt.table_uri
    expected = start  # next offset owed to the caller
    checked_head = False
    for reload in range(MAX_SNAPSHOT_RELOADS + 1):
        files = data_files(dt)
        if not checked_head:
            checked_head = True
            first = _first_offset(dt, files, storage_options)
            if first is None or first > expected:
                loss = DataLoss(uri, expected, end if first is None else min(end, first), first)
                report(loss)
                expected = loss.end
                if expected >= end:
                    return
        fs, root = _filesystem(dt, storage_options)
        candidates = [f for f in files if f.overlaps(expected, end)]
        try:
            for group in _groups_of_files(candidates):
                tables: Iterator[pa.Table]
                if len(group) == 1:
                    tables = _read_file_range(fs, _file_path(root, group[0].path), expected, end, read_columns)
                else:
                    parts = [t for f in group
                             for t in _read_file_range(fs, _file_path(root, f.path), expected, end, read_columns)]
                    tables = iter([_sorted_by_offset(pa.concat_tables(parts))] if parts else [])
                for table in tables:
                    table = table.filter(pc.greater_equal(table["offset"], expected))
                    if table.num_rows == 0:
                        continue
                    last = table["offset"][-1].as_py()
                    table = table.select(read_columns).cast(read_schema).select(out_columns).cast(schema)
                    for batch in table.to_batches(max_chunksize=batch_rows):
                        if batch.num_rows:
                            yield batch
                    expected = last + 1
            break
        except _FileVanished as e:
            if reload == MAX_SNAPSHOT_RELOADS:
                raise LogTableError(f"The data files of {uri} keep disappearing while reading offsets "
                                    f"{expected} to {end - 1} (VACUUM with a short retention?): {e}") from e
            log.info("data file %s of %s vanished (VACUUM?); reading on from offset %d in the newest snapshot",
                     e, uri, expected)
            dt = DeltaTable(uri, storage_options=storage_options)
            checked_head = False
    # The log must reach end - 1: a table whose last file ends below it was truncated.
    if end_is_committed and expected < end:
        last_offsets = [f.max_offset for f in data_files(dt) if f.has_offset_stats]
        table_end = max(last_offsets) + 1 if last_offsets else None
        if table_end is not None and table_end < end and expected >= table_end:
            report(DataLoss(uri, max(expected, table_end), end, _first_offset(dt, data_files(dt), storage_options),
                            at_head=False))


def offset_for_timestamp(table: "str | DeltaTable", timestamp_ms: int, *, start: int = 0, end: int | None = None,
                         storage_options: dict[str, str] | None = None) -> int | None:
    """The first offset in ``[start, end)`` whose record timestamp is >= ``timestamp_ms`` (Kafka's offsetsForTimes).

    Files are visited in offset order and skipped when their ``max.timestamp`` statistic is below the
    time; the first file that may match is read (``offset`` and ``timestamp`` only). With CreateTime
    timestamps are not monotonic in offsets; the answer is still the smallest matching offset.

    Returns:
        The offset, or None when no record in the range is that recent.
    """
    dt = open_table(table, storage_options=storage_options)
    target_us = int(timestamp_ms) * 1000
    upper = end if end is not None else np.iinfo(np.int64).max
    if start >= upper:
        return None
    fs, root = _filesystem(dt, storage_options)
    files = [f for f in data_files(dt) if f.overlaps(start, upper)]
    best: int | None = None
    for group in _groups_of_files(files):
        if all(f.max_timestamp_us is not None and f.max_timestamp_us < target_us for f in group):
            continue
        for f in group:
            for table in _read_file_range(fs, _file_path(root, f.path), start, upper, ["offset", "timestamp"]):
                ts = pc.cast(pc.cast(table["timestamp"], pa.timestamp("us", tz="UTC")), pa.int64())
                hits = table["offset"].filter(pc.greater_equal(ts, target_us))
                if len(hits):
                    lo = pc.min(hits).as_py()
                    best = lo if best is None else min(best, lo)
        if best is not None:
            return best  # groups are ascending and disjoint: nothing later can be smaller
    return best
