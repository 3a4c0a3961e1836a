"""The broker's read of a partition log by offset range: the tail cache, the segment tail, the data files.

:func:`read_log` answers :meth:`PartitionLog.read <lakelog.log_tables.partition_log.PartitionLog.read>`
from a :class:`ReadView`, a consistent picture of the log taken under its state lock: records in the
tail cache come from it; older records at or above the lake end offset from the segment files
(:class:`~lakelog.log_tables.segments.SegmentView`); older ones from the Delta table's data files
through :func:`~lakelog.log_tables.offset_scan.scan_offsets` (the read path Spark's
:func:`~lakelog.log_tables.reader.read_offset_range` uses too). The answer is
bounded by a soft byte limit (KIP-74: at least one record, so a fetch always makes progress) and only
as much of the files is decoded as the limit needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log_tables.data_files import FileSnapshot
from lakelog.log_tables.errors import DataLossError, OffsetOutOfRangeError
from lakelog.log_tables.offset_scan import DataLoss, scan_offsets, target_schema
from lakelog.log_tables.reader import offset_for_timestamp
from lakelog.log_tables.schema import ATTRIBUTES, LOG_SCHEMA, TAIL_SCHEMA, timestamps_us, with_attributes
from lakelog.log_tables.segments import SegmentView
from lakelog.log_tables.tail_cache import CacheView
from lakelog.log_tables.transaction_index import IsolationLevel, TransactionView

__all__ = ["READ_END_OFFSET_KEY", "FetchDataLoss", "ReadView", "first_offset_at_or_after", "log_offset_for_timestamp",
           "read_end_offset",
           "read_log", "read_range", "tail_offset_for_timestamp"]

#: Schema metadata of a read that dropped control or aborted records: one past the last offset it covered.
READ_END_OFFSET_KEY = b"lakelog.read_end_offset"


@dataclass(frozen=True)
class ReadView:
    """A log's state at one moment, as a read needs it.

    Attributes:
        log_start_offset, lake_end_offset, log_end_offset, high_watermark: the offsets.
        cache: the tail cache.
        files: the file index of the Delta table (it may miss the newest commits).
        segments: the segment tail's frames (from the lake end offset on).
        index_complete: True when ``files`` lists every commit up to the lake end offset (then files
            ending before it end in a gap, and no re-listing finds more).
        transactions: the open and aborted transactions of the tail (the last stable offset).
    """

    log_start_offset: int
    lake_end_offset: int
    log_end_offset: int
    high_watermark: int
    cache: CacheView
    files: FileSnapshot
    segments: SegmentView
    index_complete: bool = False
    transactions: TransactionView = TransactionView()

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of an open transaction, at most the high watermark."""
        return self.transactions.last_stable_offset(self.high_watermark)


def read_log(take_view: Callable[[], ReadView], start_offset: int, *, max_bytes: int, end_offset: int | None,
             columns: list[str] | None, reload_index: Callable[[], FileSnapshot], topic: str,
             partition: int, isolation_level: IsolationLevel = "read_uncommitted",
             control_records: bool = False) -> pa.Table:
    """:meth:`PartitionLog.read <lakelog.log_tables.partition_log.PartitionLog.read>` on ``take_view()``.

    A segment the flusher deleted under the view (once its records are in Delta and the new lake end
    offset is published) makes the read start again on a fresh view, which finds them in Delta.

    Raises:
        OffsetOutOfRangeError: ``start_offset`` is out of the log's range, or the table no longer holds it.
        KeyError: an unknown column.
    """
    for attempt in range(3):
        try:
            return _read_log(take_view(), start_offset, max_bytes=max_bytes, end_offset=end_offset, columns=columns,
                             reload_index=reload_index, topic=topic, partition=partition,
                             isolation_level=isolation_level, control_records=control_records)
        except FileNotFoundError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _read_log(view: ReadView, start_offset: int, *, max_bytes: int, end_offset: int | None,
              columns: list[str] | None, reload_index: Callable[[], FileSnapshot], topic: str,
              partition: int, isolation_level: IsolationLevel, control_records: bool) -> pa.Table:
    hw = view.high_watermark
    bound = hw if end_offset is None else view.log_end_offset
    upper = bound if end_offset is None else min(end_offset, bound)
    if isolation_level == "read_committed":
        upper = min(upper, view.last_stable_offset)
    if start_offset < view.log_start_offset or start_offset > bound:
        raise OffsetOutOfRangeError(topic=topic, partition=partition, offset=start_offset,
                                    log_start_offset=view.log_start_offset, high_watermark=hw)
    attributes = columns is not None and ATTRIBUTES in columns
    schema = LOG_SCHEMA if columns is None else (
        pa.schema([TAIL_SCHEMA.field(c) for c in columns]) if attributes else target_schema(columns))
    if start_offset >= upper:
        return schema.empty_table()
    filtering = view.transactions.filters(start_offset, upper, isolation_level=isolation_level,
                                          control_records=control_records)
    file_columns = columns
    if columns is not None and (attributes or filtering):
        file_columns = list(dict.fromkeys(["offset", "producer_id", *(c for c in columns if c != ATTRIBUTES)]))
    try:
        chunks = read_range(view, start_offset, upper, max_bytes=max_bytes, columns=file_columns,
                            reload_index=reload_index)
    except FetchDataLoss as e:  # return what was read; the next fetch starts at the missing offset
        if not e.partial:
            first = e.loss.end if e.loss.log_start_offset is None else e.loss.log_start_offset
            raise OffsetOutOfRangeError(topic=topic, partition=partition, offset=start_offset,
                                        log_start_offset=first, high_watermark=hw) from e
        chunks = e.partial
    read_end = chunks[-1]["offset"][-1].as_py() + 1 if chunks else start_offset
    if filtering:  # control records (and aborted records, read_committed) are in the tail pieces only
        chunks = [c.filter(view.transactions.keep_mask(c, isolation_level=isolation_level,
                                                       control_records=control_records))
                  if ATTRIBUTES in c.column_names else c for c in chunks]
        chunks = [c for c in chunks if c.num_rows]
    if attributes:
        chunks = [with_attributes(c) for c in chunks]
    rows = pa.concat_tables([c.select(schema.names) for c in chunks]) if chunks else schema.empty_table()
    if filtering:
        rows = rows.replace_schema_metadata({READ_END_OFFSET_KEY: str(read_end).encode()})
    return rows


def read_end_offset(rows: pa.Table) -> int | None:
    """Where a read that dropped control or aborted records (:meth:`PartitionLog.read
    <lakelog.log_tables.partition_log.PartitionLog.read>`) ended: one past the last offset it covered, which
    may lie past its last row (a commit marker ends most transactions); the next fetch starts there. None
    when the read dropped nothing (then the next offset is the last row's + 1)."""
    meta = rows.schema.metadata or {}
    return int(meta[READ_END_OFFSET_KEY]) if READ_END_OFFSET_KEY in meta else None


class FetchDataLoss(DataLossError):
    """Offsets of a fetch are gone from the table (a listed file vanished and the newest snapshot starts
    later). ``partial`` holds what was read before them, possibly nothing.

    Control flow of a fetch: raised by :func:`read_range`, caught by :func:`read_log`, which answers what was
    read or an :class:`OffsetOutOfRangeError`. A :class:`DataLossError` (422 / 42229; it declares no code of its own), so
    one that escaped anyway would still answer as a lakelog error.
    """

    def __init__(self, loss: DataLoss, partial: list[pa.Table]) -> None:
        super().__init__(loss, loss.describe())
        self.partial = partial


def _raise(loss: DataLoss) -> None:
    raise FetchDataLoss(loss, [])


def read_range(view: ReadView, start: int, upper: int, *, max_bytes: int,
               columns: Sequence[str] | None, reload_index: Callable[[], FileSnapshot]) -> list[pa.Table]:
    """The pieces of the records ``start <= offset < upper``, in offset order, about ``max_bytes`` at most.

    Args:
        view: the log's state. Its file index may miss the table's newest commits (unless
            ``view.index_complete``): when it ends short of the lake end offset (or ``upper``) with budget
            left, ``reload_index()`` is called once for a fresh one.
        start: first offset (not below the log start offset; below ``upper``).
        upper: exclusive end offset.
        max_bytes: soft limit on the Arrow bytes of the answer; at least one record is returned.
        columns: columns wanted (``offset`` comes first in each piece, callers select their order);
            None = all.
        reload_index: re-lists the log's data files.

    Returns:
        The pieces (tables), contiguous in offsets; empty when nothing is there.

    Raises:
        FetchDataLoss: offsets at the position reached are no longer in the table.
        FileNotFoundError: a segment file of the view was deleted (read again on a fresh view).
    """
    pieces: list[pa.Table] = []
    cache = view.cache
    budget, offset, cache_start = max_bytes, start, cache.first_offset
    memory_start = upper if cache_start is None else min(upper, cache_start)
    if offset < memory_start:
        # the Delta table below the lake end offset, then the segment files
        files_end = min(memory_start, view.lake_end_offset)
        if offset < files_end:
            try:
                offset, budget = _read_files(view.files, offset, files_end, budget, columns, pieces,
                                             None if view.index_complete else reload_index)
            except FetchDataLoss as e:
                raise FetchDataLoss(e.loss, pieces) from None
        if budget > 0 and view.lake_end_offset <= offset < memory_start:
            offset, budget = view.segments.read(offset, memory_start, budget, pieces)
    if budget > 0 and cache_start is not None and offset >= cache_start:
        cache.read(offset, upper, budget, pieces)
    return pieces


def _read_files(files: FileSnapshot, offset: int, end: int, budget: int, columns: Sequence[str] | None,
                out: list[pa.Table], reload_index: Callable[[], FileSnapshot] | None) -> tuple[int, int]:
    """Append to ``out`` the records ``offset <= o < end`` from the data files, up to about ``budget``
    Arrow bytes (at least one record); return ``(next offset, budget left)``.

    The next offset is ``end`` when the files hold nothing more below it: offsets missing after the
    last record read are a gap (compaction keeps the latest record per key, offsets never change), and
    the read goes on past it, into the segment tail or the tail cache. So a fetch from inside a gap
    returns the next records, as Kafka's does, and paging always makes progress.
    """
    for attempt in range(2):
        # The broker checked its log start offset; only a snapshot refreshed after a vanished file
        # (VACUUM) is checked against the offsets it owes.
        scan = scan_offsets(files, offset, end, columns, check_head=False, on_data_loss=_raise)
        with contextlib.closing(scan):
            for chunk in scan:
                if chunk.nbytes > budget:
                    chunk = chunk.slice(0, max(1, int(chunk.num_rows * budget / chunk.nbytes)))
                    budget = 0
                else:
                    budget -= chunk.nbytes
                out.append(chunk)
                offset = chunk["offset"][-1].as_py() + 1
                if budget <= 0:
                    return offset, budget
        if offset >= end:
            break
        files_end = files.end_offset
        if attempt == 0 and reload_index is not None and (files_end is None or files_end < end):
            files = reload_index()  # the index may miss commits since it was listed: look again
            continue
        offset = end  # the files hold no record in [offset, end): a gap
        break
    return offset, budget


def log_offset_for_timestamp(view: ReadView, table_uri: str, read: Callable[..., pa.Table], timestamp_ms: int) -> int:
    """:meth:`PartitionLog.offset_for_timestamp <lakelog.log_tables.partition_log.PartitionLog.offset_for_timestamp>`.

    The Delta table first, through :func:`lakelog.log_tables.reader.offset_for_timestamp` (only files whose
    ``max.timestamp`` statistic can match are opened), then the segment tail up to the high watermark
    (:func:`tail_offset_for_timestamp` over ``read``, the log's read). Returns the high watermark when no
    committed record is that recent.
    """
    hw, start = view.high_watermark, view.log_start_offset
    lake_end = min(view.lake_end_offset, hw)
    found = offset_for_timestamp(table_uri, timestamp_ms, start=start, end=lake_end) if lake_end > start else None
    if found is None:
        found = tail_offset_for_timestamp(read, timestamp_ms, start=max(lake_end, start), end=hw)
    return hw if found is None else found


def tail_offset_for_timestamp(read: Callable[..., pa.Table], timestamp_ms: int, *, start: int, end: int) -> int | None:
    """The first offset in ``[start, end)`` whose timestamp is at or after ``timestamp_ms``, or None.

    For the part of a log outside the Delta table (its segment tail): pages through ``read(offset,
    max_bytes=, end_offset=, columns=)`` (:meth:`PartitionLog.read
    <lakelog.log_tables.partition_log.PartitionLog.read>`) 8 MiB at a time, offsets and timestamps only.
    """
    def pages() -> Iterator[pa.Table]:
        offset = start
        while offset < end:
            rows = read(offset, max_bytes=8 * 1024 * 1024, end_offset=end, columns=["offset", "timestamp"])
            if rows.num_rows == 0:
                return
            yield rows
            offset = rows["offset"][-1].as_py() + 1

    return first_offset_at_or_after(pages(), timestamp_ms)


def first_offset_at_or_after(pages: Iterable[pa.Table], timestamp_ms: int) -> int | None:
    """The ``offset`` of the first row of ``pages`` whose ``timestamp`` is at or after ``timestamp_ms``.

    Args:
        pages: offset-ordered tables with ``offset`` and a ``timestamp`` column (ms, us or ns; the log
            stores us, the Arrow fetch answers ms); read lazily, the search stops at the first hit.
        timestamp_ms: ms since the epoch.

    Returns:
        The offset, or None when no row is that recent (Kafka's ListOffsets by time then answers the end).
    """
    for page in pages:
        first = pc.index(pc.greater_equal(timestamps_us(page["timestamp"]), timestamp_ms * 1000), True).as_py()
        if first >= 0:
            return page["offset"][first].as_py()
    return None
