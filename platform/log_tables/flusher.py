"""The flusher of one partition log: commits its segment tail to the Delta table in large files.

Records are acknowledged once they are in the segment tail (:mod:`~lakelog.log_tables.segments`); the
flusher makes them visible to Delta readers (Spark, SQL) within about ``lake.commit.interval.ms``. One
asyncio task per replica (leader and followers alike: each flushes its own table, only below its own
high watermark, so the table never holds a record a truncation could remove).

Steps of one round (mirrored by comments in :meth:`LakeFlusher._run`):

1. wait until ``lake.commit.interval.ms`` after the previous round's start (rounds are paced from their
   starts, so a long round does not stretch the interval), or less once ``lake.commit.bytes`` wait in
   the tail (the high watermark listener wakes the task);
2. commit the tail below the high watermark *as it was when the round began* to Delta, one commit per
   ``lake.commit.bytes`` or the log's merge target, whichever is smaller
   (:meth:`PartitionLog.flush_to_lake <lakelog.log_tables.partition_log.PartitionLog.flush_to_lake>`,
   in a worker thread: appends go on meanwhile); a failed commit is logged and retried next round.
   The bound keeps a round finite under constant load: records produced during the round wait for the
   next one, and steps 3 and 4 run every round;
3. merge the oldest small data files when the table holds too many
   (:func:`~lakelog.log_tables.compaction.compact_if_needed`), fsync the tail when ``flush.ms`` is due;
4. every ``log.retention.check.interval.ms`` (the first time one interval after the open): the log's maintenance
   (:meth:`LogLifecycle.run <lakelog.log_tables.lifecycle.LogLifecycle.run>`: Delta table properties,
   retention, VACUUM), in a worker thread.

While an outside committer (a Spark maintenance job) holds the table's committer lease
(:mod:`~lakelog.log_tables.committer_leases`) steps 2 to 4 commit nothing: the writer refuses its own
flushes and merges (:meth:`LogWriter.lake_commits_allowed
<lakelog.log_tables.log_writer.LogWriter.lake_commits_allowed>`) and maintenance waits; records stay in
the segment tail, acknowledged and readable, and go to Delta at the first round after the lease.

:meth:`LakeFlusher.close` flushes what is below the high watermark before it stops, so a clean
shutdown leaves the Delta table up to date.
"""

from __future__ import annotations

import asyncio
import logging
import time

from lakelog.errors import LakelogError
from lakelog.log_tables.compaction import compact_if_needed, merge_target_bytes
from lakelog.log_tables.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["LakeFlusher"]


class LakeFlusher:
    """Commits ``log``'s segment tail to its Delta table (does nothing for a log without a tail).

    Args:
        log: the partition log.
        interval_ms: time between flushes. Default: the topic's ``lake.commit.interval.ms``.
        commit_bytes: tail bytes that start a flush early, and the most one commit takes (also at most
            the log's merge target, :func:`~lakelog.log_tables.compaction.merge_target_bytes`, so a
            flushed file is never larger than a merge would build). Default: the topic's
            ``lake.commit.bytes``.
        segment_files_max: data files after which the oldest small ones are merged; None = never.
            Default: 64.
        close_timeout_s: how long :meth:`close` flushes before it gives up (the rest stays in the
            tail, recovered on the next open). Default: 30.
        maintenance_interval_ms: time between maintenance rounds (``log.retention.check.interval.ms``).
            Default: 300000 (Kafka's).

    Must be created inside a running asyncio event loop.
    """

    def __init__(self, log: PartitionLog, *, interval_ms: int | None = None, commit_bytes: int | None = None,
                 segment_files_max: int | None = 64, close_timeout_s: float = 30.0,
                 maintenance_interval_ms: int = 300_000) -> None:
        self.log = log
        self.maintenance_interval_s = maintenance_interval_ms / 1000.0
        # the first round one interval after the open, as Kafka's retention task
        self._next_maintenance = time.monotonic() + self.maintenance_interval_s
        self._interval_ms = interval_ms
        self._commit_bytes = commit_bytes
        self._segment_files_max = segment_files_max
        self._close_timeout_s = close_timeout_s
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task | None = None
        #: flushes made and records committed by them (for metrics and tests)
        self.flushes = 0
        self.records = 0
        # every log gets the task: a topic config change may give a log without a tail one
        log.add_high_watermark_listener(self._on_high_watermark)
        self._task = self._loop.create_task(self._run(), name=f"flush-{log.topic}-{log.partition}")

    @property
    def interval_s(self) -> float:
        """Seconds between flushes (the topic's ``lake.commit.interval.ms`` as it is now, unless fixed)."""
        ms = self.log.config.lake_commit_interval_ms if self._interval_ms is None else self._interval_ms
        return (ms or 1000) / 1000.0

    @property
    def commit_bytes(self) -> int:
        """Tail bytes that start a flush early."""
        return self.log.config.lake_commit_bytes if self._commit_bytes is None else self._commit_bytes

    @property
    def file_bytes(self) -> int:
        """The most tail bytes one commit takes: ``commit_bytes``, at most the log's merge target."""
        return min(self.commit_bytes, merge_target_bytes(self.log.config))

    def _on_high_watermark(self, log: PartitionLog) -> None:
        """From any thread: wake the task early once ``lake.commit.bytes`` wait in the tail."""
        if log.unflushed_bytes >= self.commit_bytes and not self._wake.is_set():
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        round_start = time.monotonic()
        while not self._closed:
            # 1. wait for the interval after the previous round's start, or lake.commit.bytes in the tail
            wait_s = round_start + self.interval_s - time.monotonic()
            if wait_s > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), wait_s)
                except asyncio.TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)  # a round longer than the interval: let others run first
            self._wake.clear()
            round_start = time.monotonic()
            if self._closed:
                return
            # 2. commit the tail below the high watermark of the round's start
            try:
                await self.flush()
            except LakelogError as e:  # CommitFailedError, LogClosedError: the next round retries
                log.warning("flushing %s-%d to Delta failed: %s", self.log.topic, self.log.partition, e)
            except Exception:
                log.exception("flushing %s-%d to Delta failed", self.log.topic, self.log.partition)
            # 3. merge small files, fsync when flush.ms is due
            if self.log.tiered:  # a log without a tail is compacted after its appends (group commit, follower)
                await compact_if_needed(self.log, segment_files_max=self._segment_files_max)
            if self.log.fsyncs:
                await asyncio.to_thread(self.log.sync_if_due)
            # 4. retention and VACUUM when log.retention.check.interval.ms is due
            await self.maintain_if_due()

    async def maintain_if_due(self) -> None:
        """Run the log's maintenance round when ``maintenance_interval_ms`` passed since the last one.
        Never raises (a failure is logged; the next round tries again); cancellation is passed on."""
        if time.monotonic() < self._next_maintenance or self.log.lake_commits_held:
            return  # under an outside committer's lease: the first round after it
        self._next_maintenance = time.monotonic() + self.maintenance_interval_s
        try:
            await asyncio.to_thread(self.log.lifecycle.run)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("maintenance of %s-%d failed", self.log.topic, self.log.partition)

    async def flush(self) -> int:
        """Commit everything below the high watermark as it is now (several commits of at most
        :attr:`file_bytes`). Records that reach the high watermark meanwhile are left for the next call.

        Returns:
            Records committed.

        Raises:
            CommitFailedError: a Delta commit failed (the records stay in the tail).
        """
        total = 0
        upper = self.log.high_watermark
        while self.log.lake_end_offset < upper:
            n = await asyncio.to_thread(self.log.flush_to_lake, max_bytes=self.file_bytes)
            if n == 0:
                return total
            total += n
            self.flushes += 1
            self.records += n
        return total

    async def close(self, *, flush: bool = True) -> None:
        """Stop; with ``flush``, commit what is below the high watermark first (up to ``close_timeout_s``).

        Never raises. ``flush=False`` is for a log about to be deleted.
        """
        if self._task is None or self._closed:
            return
        self._closed = True
        self._wake.set()
        try:
            await self._task
        except Exception:  # logged by the task
            pass
        if not flush:
            return
        try:
            await asyncio.wait_for(self.flush(), self._close_timeout_s)
        except Exception as e:  # the tail keeps it; the next open recovers it
            log.warning("final flush of %s-%d to Delta failed: %s", self.log.topic, self.log.partition, e)
