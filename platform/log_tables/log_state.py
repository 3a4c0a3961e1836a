"""The in-memory state of a partition log, kept consistent under one lock.

Offsets (log start, lake end, log end, high watermark), the file index (the table's data files with their
offset statistics, possibly missing the newest commits), the segment tail's frames, the tail cache and
the leader epoch cache change together: after an append, a flush to Delta, a truncation, a recovery. :class:`LogState` makes each such change atomic for
readers, which take a :class:`~lakelog.log_tables.fetch.ReadView` without waiting for a running commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa

from lakelog.log_tables.data_files import FileSnapshot
from lakelog.log_tables.fetch import ReadView
from lakelog.log_tables.leader_epochs import LeaderEpochCache
from lakelog.log_tables.recovery import RecoveredLog
from lakelog.log_tables.schema import with_attributes
from lakelog.log_tables.segments import SegmentView
from lakelog.log_tables.tail_cache import TailCache
from lakelog.log_tables.transaction_index import TransactionIndex

__all__ = ["LogState"]


class LogState:
    """Offsets, file index, tail cache and leader epochs of one log (writers hold the log's write lock too).

    Args:
        files: the initial (empty) file index.
        tail_cache_max_bytes: bytes of the newest records kept in memory (0 = none).
    """

    def __init__(self, files: FileSnapshot, segments: SegmentView, tail_cache_max_bytes: int) -> None:
        self.lock = threading.Lock()
        self.files = files
        #: frames of the segment tail from the lake end offset on
        self.segments = segments
        #: appends whose data files the index does not list yet
        self.commits_since_index = 0
        self.cache = TailCache(tail_cache_max_bytes)
        self.log_start_offset = 0
        #: first offset not in the Delta table
        self.lake_end_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        #: the log cleaner's checkpoint (Kafka's cleaner-offset-checkpoint): offsets below it were cleaned;
        #: None until the cleaner reads it from the table, and again after every re-read of the table (a
        #: truncation: the table's history lowers it, :func:`~lakelog.log_tables.cleaner.cleaned_offset`)
        self.cleaned_offset: int | None = None
        self.epochs = LeaderEpochCache()
        #: open and aborted transactions of the segment tail, and so the last stable offset
        self.transactions = TransactionIndex()
        self._hw_listeners: list[Callable[[], None]] = []

    def reset(self, recovered: RecoveredLog) -> None:
        """Take the state recovered from the table and tail (the cache holds the tail's batches again;
        the fence epoch never drops; the high watermark drops to at most the log end offset, e.g. after a
        truncation whose tail was deleted and whose commit failed)."""
        with self.lock:
            self.files, self.commits_since_index = recovered.files, 0
            self.log_start_offset, self.log_end_offset = recovered.log_start_offset, recovered.log_end_offset
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
            self.lake_end_offset = recovered.lake_end_offset
            self.cleaned_offset = None
            if recovered.segments is not None:
                self.segments = recovered.segments
            self.cache.clear()
            for base, batch in recovered.tail_batches:
                self.cache.add(base, with_attributes(pa.Table.from_batches([batch])))
            self.transactions = TransactionIndex.from_batches([batch for _, batch in recovered.tail_batches])
            recovered.epochs.fence(self.epochs.fence_epoch)
            self.epochs = recovered.epochs

    def set_index(self, files: FileSnapshot) -> None:
        """A freshly listed file index (it holds every commit so far)."""
        with self.lock:
            self.files, self.commits_since_index = files, 0

    def appended(self, base: int, batch: pa.Table, epoch_starts: list[tuple[int, int]], *,
                 segments: SegmentView | None, end_offset: int | None = None) -> None:
        """``batch`` (offsets from ``base``) was appended; ``epoch_starts``: its ``(epoch, first offset)`` s.

        ``segments``: the tail's frames with it (written to the segment tail), or None (committed to
        the Delta table: the lake end offset moves with it). ``end_offset``: the log end offset after it
        when the batch covers the offsets ``[base, end_offset)`` with gaps (a replicated range the leader
        compacted, always committed to the Delta table); None = dense, ``base + batch.num_rows``.
        """
        with self.lock:
            self.log_end_offset = base + batch.num_rows if end_offset is None else end_offset
            batch = with_attributes(batch)  # the cache holds the tail schema
            self.cache.add(base, batch)
            self.transactions.fold(batch)
            if segments is None:
                self.lake_end_offset = self.log_end_offset
                self.commits_since_index += 1
            else:
                self.segments = segments
            for epoch, start in epoch_starts:
                self.epochs.assign(epoch, start)
                self.epochs.fence(epoch)

    def flushed(self, lake_end_offset: int, files: FileSnapshot, segments: SegmentView) -> None:
        """The flusher committed the tail below ``lake_end_offset`` to Delta (``files``: the table's files now)."""
        with self.lock:
            self.lake_end_offset = lake_end_offset
            self.files, self.commits_since_index = files, 0
            self.segments = segments
            # markers and aborted records below the table's end stay in the tail cache a while: readers of
            # the cache still need to know them
            cached = self.cache.view().first_offset
            self.transactions.release_below(lake_end_offset if cached is None else min(cached, lake_end_offset))

    def start_advanced(self, log_start_offset: int, files: FileSnapshot) -> None:
        """The log now starts at ``log_start_offset`` (retention, the leader's, DeleteRecords); ``files``:
        the table's files after the data files below it were removed. The leader epoch cache starts
        there too (Kafka's ``truncateFromStart``)."""
        with self.lock:
            self.log_start_offset = max(self.log_start_offset, log_start_offset)
            self.files, self.commits_since_index = files, 0
            self.epochs.truncate_from_start(self.log_start_offset)

    def cleaned(self, cleaned_offset: int, files: FileSnapshot) -> None:
        """The log cleaner replaced records of the table below ``cleaned_offset`` (``files``: its files
        now): the tail cache, which may hold records it dropped, starts empty again (reads fall through
        to segments and files)."""
        with self.lock:
            self.cleaned_offset = cleaned_offset
            self.files, self.commits_since_index = files, 0
            self.cache.clear()

    def truncated(self, offset: int) -> None:
        """The log now ends at ``offset``; the high watermark drops to at most it."""
        with self.lock:
            self.log_end_offset = offset
            self.high_watermark = min(self.high_watermark, offset)

    def view(self) -> ReadView:
        """A consistent picture for a read."""
        with self.lock:
            return ReadView(self.log_start_offset, self.lake_end_offset, self.log_end_offset, self.high_watermark,
                            self.cache.view(), self.files, self.segments, self.commits_since_index == 0,
                            self.transactions.view())

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the high watermark up to ``offset``, capped at the log end offset; listeners run after a move."""
        with self.lock:
            new = min(offset, self.log_end_offset)
            if new <= self.high_watermark:
                return False
            self.high_watermark = new
        for listener in list(self._hw_listeners):
            listener()
        return True

    def add_high_watermark_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every high watermark move."""
        self._hw_listeners.append(listener)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """:meth:`LeaderEpochCache.end_offset_for` with this log's offsets."""
        with self.lock:
            return self.epochs.end_offset_for(leader_epoch, log_start_offset=self.log_start_offset,
                                              log_end_offset=self.log_end_offset)
