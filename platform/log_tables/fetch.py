"""The broker's read of a partition log by offset range: the tail cache, then the data files.

:func:`read_log` answers :meth:`PartitionLog.read <lakelog.log_tables.partition_log.PartitionLog.read>`
from a :class:`ReadView`, a consistent picture of the log taken under its state lock: records older
than the tail cache come from the data files through
:func:`~lakelog.log_tables.offset_scan.scan_offsets` (the read path Spark's
:func:`~lakelog.log_tables.reader.read_offset_range` uses too), the rest from the cache. The answer is
bounded by a soft byte limit (KIP-74: at least one record, so a fetch always makes progress) and only
as much of the files is decoded as the limit needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lakelog.log_tables.data_files import FileSnapshot
from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.log_tables.offset_scan import DataLoss, scan_offsets, target_schema
from lakelog.log_tables.schema import LOG_SCHEMA
from lakelog.log_tables.tail_cache import CacheView

__all__ = ["FetchDataLoss", "ReadView", "read_log", "read_range"]


@dataclass(frozen=True)
class ReadView:
    """A log's state at one moment, as a read needs it.

    Attributes:
        log_start_offset, log_end_offset, high_watermark: the offsets.
        cache: the tail cache.
        files: the file index (it may miss the newest commits).
    """

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    cache: CacheView
    files: FileSnapshot


def read_log(view: ReadView, start_offset: int, *, max_bytes: int, end_offset: int | None,
             columns: list[str] | None, reload_index: Callable[[], FileSnapshot], topic: str,
             partition: int) -> pa.Table:
    """:meth:`PartitionLog.read <lakelog.log_tables.partition_log.PartitionLog.read>` on ``view``.

    Raises:
        OffsetOutOfRangeError: ``start_offset`` is out of the log's range, or the table no longer holds it.
        KeyError: an unknown column.
    """
    hw = view.high_watermark
    bound = hw if end_offset is None else view.log_end_offset
    upper = bound if end_offset is None else min(end_offset, bound)
    if start_offset < view.log_start_offset or start_offset > bound:
        raise OffsetOutOfRangeError(topic=topic, partition=partition, offset=start_offset,
                                    log_start_offset=view.log_start_offset, high_watermark=hw)
    schema = LOG_SCHEMA if columns is None else target_schema(columns)
    if start_offset >= upper:
        return schema.empty_table()
    try:
        chunks = read_range(view.files, view.cache, start_offset, upper, max_bytes=max_bytes, columns=columns,
                            reload_index=reload_index)
    except FetchDataLoss as e:  # return what was read; the next fetch starts at the missing offset
        if not e.partial:
            first = e.loss.end if e.loss.log_start_offset is None else e.loss.log_start_offset
            raise OffsetOutOfRangeError(topic=topic, partition=partition, offset=start_offset,
                                        log_start_offset=first, high_watermark=hw) from e
        chunks = e.partial
    if not chunks:
        return schema.empty_table()
    if columns is not None:
        chunks = [c.select(columns) for c in chunks]
    return pa.concat_tables(chunks)


class FetchDataLoss(Exception):
    """Offsets of a fetch are gone from the table (a listed file vanished and the newest snapshot starts
    later). ``partial`` holds what was read before them, possibly nothing."""

    def __init__(self, loss: DataLoss, partial: list[pa.Table]) -> None:
        super().__init__(loss.describe())
        self.loss = loss
        self.partial = partial


def _raise(loss: DataLoss) -> None:
    raise FetchDataLoss(loss, [])


def read_range(files: FileSnapshot, cache: CacheView, start: int, upper: int, *, max_bytes: int,
               columns: Sequence[str] | None, reload_index: Callable[[], FileSnapshot]) -> list[pa.Table]:
    """The pieces of the records ``start <= offset < upper``, in offset order, about ``max_bytes`` at most.

    Args:
        files: the log's file index. It may miss the log's newest commits: when it ends short of
            the cache (or ``upper``) with budget left, ``reload_index()`` is called once for a fresh one.
        cache: the tail cache at the same moment.
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
    """
    pieces: list[pa.Table] = []
    budget, offset, cache_start = max_bytes, start, cache.first_offset
    if cache_start is None or offset < cache_start:
        disk_end = upper if cache_start is None else min(upper, cache_start)
        try:
            offset, budget = _read_files(files, offset, disk_end, budget, columns, pieces, reload_index)
        except FetchDataLoss as e:
            raise FetchDataLoss(e.loss, pieces) from None
    if budget > 0 and cache_start is not None and offset >= cache_start:
        cache.read(offset, upper, budget, pieces)
    return pieces


def _read_files(files: FileSnapshot, offset: int, end: int, budget: int, columns: Sequence[str] | None,
                out: list[pa.Table], reload_index: Callable[[], FileSnapshot]) -> tuple[int, int]:
    """Append to ``out`` the records ``offset <= o < end`` from the data files, up to about ``budget``
    Arrow bytes (at least one record); return ``(next offset, budget left)``."""
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
                    break
        if offset >= end or budget <= 0 or attempt:
            break
        files = reload_index()  # commits since the index was listed
    return offset, budget
