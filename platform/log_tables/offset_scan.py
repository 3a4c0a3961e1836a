"""The one read path of a partition table by offset range: the broker's fetch and Spark's reader both use it.

:func:`scan_offsets` yields the records ``start <= offset < end`` of a :class:`FileSnapshot` in offset
order, lazily (a caller that has enough stops iterating and nothing more is read):

- with timestamp bounds (``timestamps``, Spark's pushed-down ``timestamp`` filters) only the records
  whose timestamp lies within them, skipping the files and row groups whose ``timestamp`` statistics
  rule them out;
- only the data files whose ``min.offset``/``max.offset`` statistics overlap the range are opened
  (files without statistics are always read), and within a file only the row groups whose offset
  statistics overlap it; row groups are read one at a time when their ranges are ascending and
  disjoint (files written by the broker and by compaction), so a fetch of a few MiB from a large
  compacted file reads a few row groups, not the file;
- delta-rs may store a commit's rows within a file in another order than it was given, so rows are
  sorted by offset whenever a file (or row group) is not already in order; files whose offset ranges
  overlap (never written by lakelog, but possible from other writers) are read together and sorted;
- a data file the snapshot lists but a VACUUM deleted makes it move to a newer snapshot
  (``refresh``) and continue from the next offset it owes;
- offsets below the snapshot's first offset (retention removed them) and, with ``end_is_committed``,
  offsets missing at the end of the log (it was truncated) are reported as :class:`DataLoss` to
  ``on_data_loss``; gaps between offsets (compaction keeps the latest record per key, offsets never
  change) are simply skipped, as a Kafka consumer skips them: they are not data loss.

Each yielded table has the :data:`~lakelog.log_tables.schema.LOG_SCHEMA` types of the columns asked
for, ``offset`` first; a table is a zero-copy slice of what was decoded wherever the rows were in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.log_tables.data_files import DataFile, FileSnapshot, _us
from lakelog.log_tables.errors import LogTableError
from lakelog.log_tables.schema import LOG_SCHEMA, timestamps_us
from lakelog.log_tables.typed_columns import TYPED_COLUMNS

log = logging.getLogger(__name__)

#: How often :func:`scan_offsets` moves to a newer snapshot when files vanish under it (VACUUM).
MAX_SNAPSHOT_RELOADS = 5

__all__ = ["MAX_SNAPSHOT_RELOADS", "DataLoss", "TimestampBounds", "filter_timestamps", "groups_of_files",
           "read_file_range", "scan_offsets", "target_schema"]

#: ``(low_us, high_us)``: timestamps in microseconds since the epoch, both inclusive, None = unbounded.
TimestampBounds = tuple["int | None", "int | None"]


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


def target_schema(columns: Sequence[str], file_schema: pa.Schema | None = None) -> pa.Schema:
    """The :data:`LOG_SCHEMA` fields of ``columns``, in that order; a schema'd topic's typed columns
    (:data:`~lakelog.log_tables.typed_columns.TYPED_COLUMNS`) as ``file_schema`` has them (left out
    without one).

    Raises:
        ValueError: a column the log schema does not have.
    """
    fields = []
    for c in columns:
        if c in TYPED_COLUMNS:
            if file_schema is not None:
                fields.append(file_schema.field(c))
        elif c in LOG_SCHEMA.names:
            fields.append(LOG_SCHEMA.field(c))
        else:
            raise ValueError(f"unknown column '{c}'; a partition log table has {LOG_SCHEMA.names} "
                             f"and a schema'd topic's {list(TYPED_COLUMNS)}")
    return pa.schema(fields)


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


def _timestamp_groups(meta: pq.FileMetaData, groups: list[int], bounds: TimestampBounds) -> list[int]:
    """Those of ``groups`` whose ``timestamp`` statistics may meet ``bounds`` (all lacking statistics)."""
    index = next((i for i in range(meta.num_columns) if meta.schema.column(i).path == "timestamp"), None)
    if index is None:
        return groups
    low, high = bounds
    out = []
    for i in groups:
        stats = meta.row_group(i).column(index).statistics
        if stats is not None and stats.has_min_max:
            lo, hi = _us(stats.min), _us(stats.max)  # exact, truncated to whole microseconds
            if (low is not None and hi is not None and hi < low) or (high is not None and lo is not None and lo > high):
                continue
        out.append(i)
    return out


def filter_timestamps(table: "pa.Table | pa.RecordBatch", bounds: TimestampBounds | None) -> "pa.Table | pa.RecordBatch":
    """The rows of ``table`` whose ``timestamp`` lies in ``bounds`` (µs since the epoch, inclusive), in order.

    ``table`` must have a ``timestamp`` column (any unit). None or ``(None, None)``: ``table`` itself.
    """
    if bounds is None or bounds == (None, None) or table.num_rows == 0:
        return table
    us = timestamps_us(table.column("timestamp"))
    low, high = bounds
    mask = None
    if low is not None:
        mask = pc.greater_equal(us, low)
    if high is not None:
        upper = pc.less_equal(us, high)
        mask = upper if mask is None else pc.and_(mask, upper)
    mask = pc.fill_null(mask, False)
    if pc.all(mask).as_py():
        return table
    return table.filter(mask)


def _in_range(table: pa.Table, start: int, end: int) -> pa.Table:
    """The rows of ``table`` with ``start <= offset < end``, in offset order (a slice when already sorted)."""
    if table.num_rows == 0:
        return table
    offsets = table["offset"].to_numpy()
    if len(offsets) > 1 and (offsets[1:] < offsets[:-1]).any():
        order = np.argsort(offsets, kind="stable")
        table, offsets = table.take(order), offsets[order]
    lo, hi = np.searchsorted(offsets, [start, end], side="left")
    if lo == 0 and hi == len(offsets):
        return table
    return table.slice(int(lo), int(hi - lo))


class _FileVanished(Exception):
    """A data file listed by the snapshot is gone (VACUUM); the reader reloads the snapshot."""


def read_file_range(snapshot: FileSnapshot, f: DataFile, start: int, end: int,
                    read_columns: Sequence[str], timestamps: TimestampBounds | None = None) -> Iterator[pa.Table]:
    """Tables of ``start <= offset < end`` from one file, each in offset order, consecutive in offset order.

    Args:
        snapshot: where the file is read from.
        f: the file.
        start, end: the offset range, end exclusive.
        read_columns: the columns to read; must include ``offset`` (and ``timestamp`` with
            ``timestamps``). Columns the file lacks are left out.
        timestamps: only rows with a timestamp in these bounds (:data:`TimestampBounds`); row groups
            whose ``timestamp`` statistics rule them out are not read. Default None: all rows.

    Raises:
        _FileVanished: the file is gone (a VACUUM deleted it).
    """
    path = snapshot.path(f)
    try:
        source = snapshot.fs.open_input_file(path)
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
        if timestamps is not None and groups:
            groups = _timestamp_groups(meta, groups, timestamps)
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
        schema = target_schema(cols, pf.schema_arrow)
        for chunk in ([i] for i in groups) if ordered else [groups]:
            table = pf.read_row_groups(chunk, columns=cols)
            # Normalise types (files of other writers may use binary_view, ns timestamps, ...)
            if not table.schema.equals(schema):
                table = table.cast(schema)
            table = filter_timestamps(_in_range(table, start, end), timestamps)
            if table.num_rows:
                yield table


def groups_of_files(files: Sequence[DataFile]) -> list[list[DataFile]]:
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


def _read_group(snapshot: FileSnapshot, group: list[DataFile], start: int, end: int,
                read_columns: Sequence[str], timestamps: TimestampBounds | None = None) -> Iterator[pa.Table]:
    if len(group) == 1:
        yield from read_file_range(snapshot, group[0], start, end, read_columns, timestamps)
        return
    parts = [t for f in group for t in read_file_range(snapshot, f, start, end, read_columns, timestamps)]
    if parts:
        yield _in_range(pa.concat_tables(parts, promote_options="permissive"), start, end)


def scan_offsets(snapshot: FileSnapshot, start: int, end: int, columns: Sequence[str] | None = None, *,
                 refresh: Callable[[], FileSnapshot] | None = None,
                 on_data_loss: Callable[[DataLoss], None] | None = None,
                 check_head: bool = True, end_is_committed: bool = False,
                 recorded_end: Callable[[], int | None] | None = None,
                 timestamps: TimestampBounds | None = None) -> Iterator[pa.Table]:
    """Yield the records ``start <= offset < end`` of ``snapshot``'s files, in offset order.

    Args:
        snapshot: the data files to read.
        start: first offset wanted.
        end: exclusive end offset. Offsets above the files' content are simply absent (unless
            ``end_is_committed``).
        columns: the columns wanted. Default: all of :data:`LOG_SCHEMA`. ``offset`` is always read
            and comes first in each yielded table (callers select their own order).
        refresh: returns the newest snapshot of the table; called when a listed file has vanished
            (VACUUM). Default: :meth:`FileSnapshot.newest` of ``snapshot.uri``.
        on_data_loss: called with a :class:`DataLoss` for offsets of the range no longer in the table
            (see ``check_head``, ``end_is_committed``). If it returns, reading goes on with the offsets
            that are there; to stop, raise from it. Default: None = missing offsets are skipped silently.
        check_head: compare ``start`` with the snapshot's first offset (retention removed what is
            below it). The broker, whose in-memory file list may lag its own newest commits, checks
            its log start offset itself and passes False; a snapshot refreshed after a vanished file
            is always checked.
        end_is_committed: every offset below ``end`` was committed when the caller planned the read,
            so a table ending before ``end`` was truncated since: report that as data loss too.
        recorded_end: with ``end_is_committed``, returns the end offset the table's commits record
            (:func:`~lakelog.log_tables.table_writes.recorded_lake_end_offset`), or None. Called only
            when the files end before ``end``: a table whose last offsets compaction removed (a gap
            at its end, ``cleanup.policy=compact``) still records the end it had, a truncated one
            records its new end. Default None: the files' end is the table's end.
        timestamps: only the records whose timestamp lies in these bounds (:data:`TimestampBounds`,
            µs since the epoch, inclusive): files whose ``timestamp`` statistics rule them out are not
            opened (:meth:`DataFile.may_hold_timestamps`), nor such row groups read, and the other
            rows are filtered. Timestamps are not monotonic in offsets (CreateTime), so this prunes only
            what the statistics prove. Default None: every record.

    Gaps in the offsets (compaction kept only the latest record per key; aborted transactions) are
    skipped: they are not data loss, as in Kafka. Only offsets below the snapshot's first offset
    (``check_head``) or past the table's end (``end_is_committed``) are reported.

    Yields:
        ``pyarrow.Table`` s with the :data:`LOG_SCHEMA` types of ``offset`` + ``columns``, each non-empty,
        offsets strictly increasing across all of them.

    Raises:
        ValueError: an unknown column.
        LogTableError: data files kept vanishing over :data:`MAX_SNAPSHOT_RELOADS` reloads.
    """
    read_columns = list(dict.fromkeys(["offset", *(LOG_SCHEMA.names if columns is None else columns)]))
    if timestamps is not None and "timestamp" not in read_columns:
        read_columns.append("timestamp")  # to filter by; yielded too (callers select their columns)
    target_schema(read_columns)  # unknown columns fail before anything is read
    if start >= end:
        return

    def report(loss: DataLoss) -> None:
        if on_data_loss is not None:
            on_data_loss(loss)

    expected = start  # next offset owed to the caller
    for reload in range(MAX_SNAPSHOT_RELOADS + 1):
        if check_head:
            first = snapshot.first_offset
            if first is None or first > expected:
                loss = DataLoss(snapshot.uri, expected, end if first is None else min(end, first), first)
                report(loss)
                expected = loss.end
                if expected >= end:
                    return
        try:
            for group in groups_of_files(snapshot.overlapping(expected, end)):
                if timestamps is not None:
                    group_end = (min(end, max(f.max_offset for f in group) + 1)
                                 if all(f.has_offset_stats for f in group) else None)
                    group = [f for f in group if f.may_hold_timestamps(*timestamps)]
                for table in _read_group(snapshot, group, expected, end, read_columns, timestamps):
                    last = table["offset"][-1].as_py()
                    yield table
                    expected = last + 1
                if timestamps is not None and group_end is not None:
                    expected = max(expected, group_end)  # all of the group seen, the filtered rows too
            break
        except _FileVanished as e:
            if reload == MAX_SNAPSHOT_RELOADS:
                raise LogTableError(f"The data files of {snapshot.uri} keep disappearing while reading offsets "
                                    f"{expected} to {end - 1} (VACUUM with a short retention?): {e}") from e
            log.info("data file %s of %s vanished (VACUUM?); reading on from offset %d in the newest snapshot",
                     e, snapshot.uri, expected)
            snapshot = refresh() if refresh is not None else FileSnapshot.newest(
                snapshot.uri, storage_options=snapshot.storage_options)
            check_head = True
    # The log must reach end - 1: a table that ends below it was truncated. Its files may end earlier
    # without that (compaction removed its last records, a gap): the end its commits record decides.
    if end_is_committed and expected < end:
        table_end = snapshot.end_offset
        if table_end is not None and table_end < end and expected >= table_end and recorded_end is not None:
            recorded = recorded_end()
            if recorded is not None and recorded > table_end:
                table_end = recorded
        if table_end is not None and table_end < end and expected >= table_end:
            report(DataLoss(snapshot.uri, max(expected, table_end), end, snapshot.first_offset, at_head=False))
