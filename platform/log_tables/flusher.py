"""The flusher of one partition log: commits its segment tail to the Delta table in large files.

Records are acknowledged once they are in the segment tail (:mod:`~lakelog.log_tables.segments`); the
flusher makes them visible to Delta readers (Spark, SQL) within about ``lake.commit.interval.ms``. Every
replica has one (leader and followers alike: each flushes its own table, only below its own high
watermark, so the table never holds a record a truncation could remove). In a shared lake (``lake.uri``:
one table per partition for all its replicas) only the leader's flusher commits, retains, merges and
vacuums; a follower's rounds read the table's lake end offset instead and drop the tail below it, and a
new leader's first round continues the table from there (:class:`~lakelog.log_tables.committer_leases.PartitionLease`). A flusher owns no task or timer:
it is a job on the broker's one :class:`~lakelog.log_tables.log_scheduler.LogScheduler` (Kafka's
``LogManager`` runs ``flushDirtyLogs()`` and ``cleanupLogs()`` for all logs on one ``KafkaScheduler``),
which runs :meth:`LakeFlusher.run_due` when the earliest of its due times comes. A log with nothing to
flush is due only for its next maintenance (step 4): an idle partition costs a heap entry, not a task.

Steps of one run (mirrored by comments in :meth:`LakeFlusher.run_due` and :meth:`LakeFlusher._round`):

1. due times: a flush round ``lake.commit.interval.ms`` after the previous round's start (rounds are
   paced from their starts, so a long round does not stretch the interval), wanted once a high
   watermark move leaves records below it unflushed (the next point of that grid), or at once when
   ``lake.commit.bytes`` wait in the tail; a maintenance (step 4) that falls due before the round runs
   then, alone: a ``log.retention.check.interval.ms`` shorter than ``lake.commit.interval.ms`` is kept,
   not stretched to the rounds' pace;
2. a round commits the tail below the high watermark *as it was when the round began* to Delta, one
   commit per ``lake.commit.bytes`` or the log's merge target, whichever is smaller
   (:meth:`PartitionLog.flush_to_lake <lakelog.log_tables.partition_log.PartitionLog.flush_to_lake>`,
   in a worker thread: appends go on meanwhile, and the retention trigger below runs between two
   commits when due, at most once an interval, and after the round's last); a failed commit is logged
   and retried next round.
   The bound keeps a round finite under constant load: records produced during the round wait for the
   next one (one interval after this one's start), and steps 3 and 4 run every round;
3. merge the oldest small data files when the table holds too many
   (:func:`~lakelog.log_tables.file_merges.merge_if_needed`), fsync the tail when ``flush.ms`` is due
   (a log with ``flush.messages`` / ``flush.ms`` keeps a round every interval for that);
4. every ``log.retention.check.interval.ms`` (the first time one interval after the open): the log's
   maintenance (:meth:`LogLifecycle.run <lakelog.log_tables.lifecycle.LogLifecycle.run>`: Delta table
   properties, retention, cleaning, VACUUM unless the VACUUM timer below ran one within the interval), in
   a worker thread. It is due at a round that *starts* one interval after the start of the round that
   last ran it (Kafka's retention task runs at a fixed rate). Measured from the maintenance's own start,
   which comes after a flush of varying length, a 1 s check interval with 1 s rounds ran in only 75
   rounds of 119 (bench/soak.py --minutes 2): retention checks up to 2 s apart.

Beside the rounds, a VACUUM timer deletes the files a commit removed from the table as soon as their
``lake.vacuum.retention.ms`` has passed, as Kafka deletes a removed segment ``file.delete.delay.ms`` after
its removal. With VACUUM only in step 4, right after retention, a removed file stayed on disk until the
VACUUM of the next maintenance round or of the one after (removal to deletion 2.0 s median, up to 4.6 s,
with a 1 s grace and a 1 s check interval; at 6.4 MiB/s per partition up to 42 MiB of removed files on
disk). Steps (mirrored in :meth:`LakeFlusher._vacuum_if_due`):

1. the job is due when the earliest removal recorded by :meth:`LogLifecycle.note_removal
   <lakelog.log_tables.lifecycle.LogLifecycle.note_removal>` (retention, the cleaner, merges) expires;
   a commit that records one reschedules it;
2. VACUUM in a worker thread (:meth:`LogLifecycle.vacuum_if_due
   <lakelog.log_tables.lifecycle.LogLifecycle.vacuum_if_due>`);
3. when the removal is still due after that (VACUUM failed, the log closed, an outside committer's lease),
   not again before one ``lake.commit.interval.ms``.

And a retention trigger: ``retention.bytes`` is applied as soon as the log has grown past it by its oldest
file, not only at step 4. Kafka checks retention only every ``log.retention.check.interval.ms``
(``LogManager.cleanupLogs``), so a partition written at R bytes/s holds up to R x that interval beyond
``retention.bytes``. A partition of the soak (bench/soak.py) takes about 20 MiB/s on 2 cores: even a 1 s
interval held 20 MiB beyond its 50 MiB. Removing a file as soon as Kafka's own test says it may go (the
log without it still holds ``retention.bytes``, data files plus the segment tail) keeps the log within
``retention.bytes`` plus one file, at one metadata-only Delta commit per file removed. Steps (mirrored in
:meth:`LakeFlusher._apply_retention`):

1. every high watermark move asks :meth:`LogLifecycle.retention_bytes_due
   <lakelog.log_tables.lifecycle.LogLifecycle.retention_bytes_due>` (an in-memory test of the oldest file)
   and makes the job due now when it says so;
2. retention in a worker thread (:meth:`LogLifecycle.apply_retention
   <lakelog.log_tables.lifecycle.LogLifecycle.apply_retention>`: ``retention.ms`` too);
3. when that removed nothing (a failed commit; the table's file list, read again, said otherwise), not
   again before one ``lake.commit.interval.ms``.

While an outside committer (a Spark maintenance job) holds the table's committer lease
(:mod:`~lakelog.log_tables.committer_leases`) steps 2 to 4, the VACUUM timer and the retention trigger
commit nothing: the writer refuses its own flushes and merges (:meth:`LogWriter.lake_commits_allowed
<lakelog.log_tables.log_writer.LogWriter.lake_commits_allowed>`) and maintenance waits (looked at again
every ``lake.commit.interval.ms``); records stay in the segment tail, acknowledged and readable, and go to
Delta at the first round after the lease.

:meth:`LakeFlusher.close` flushes what is below the high watermark before it stops, so a clean
shutdown leaves the Delta table up to date.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from lakelog.errors import LakelogError
from lakelog.log_tables.file_merges import flush_commit_bytes, merge_if_needed
from lakelog.log_tables.log_metrics import LogMetrics
from lakelog.log_tables.log_scheduler import LogScheduler
from lakelog.log_tables.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["LakeFlusher"]

#: A round that starts this many seconds before the maintenance is due counts as due (timers fire a
#: little early or late; the rounds are paced at lake.commit.interval.ms, usually the check interval too).
MAINTENANCE_SLACK_S = 0.01


class LakeFlusher:
    """Commits ``log``'s segment tail to its Delta table (does nothing for a log without a tail).

    Args:
        log: the partition log.
        interval_ms: time between flushes. Default: the topic's ``lake.commit.interval.ms``.
        commit_bytes: tail bytes that start a flush early, and the most one commit takes (also at most
            the log's merge target, :func:`~lakelog.log_tables.file_merges.merge_target_bytes`, so a
            flushed file is never larger than a merge would build). Default: the topic's
            ``lake.commit.bytes``.
        segment_files_max: data files after which the oldest small ones are merged; None = never.
            Default: 64.
        close_timeout_s: how long :meth:`close` flushes before it gives up (the rest stays in the
            tail, recovered on the next open). Default: 30.
        maintenance_interval_ms: time between maintenance rounds (``log.retention.check.interval.ms``).
            Default: 300000 (Kafka's).
        metrics: the broker's log histograms; each Delta commit's time goes there. Default: None.
        scheduler: the scheduler whose job this is. Default: the log's (``log.lifecycle.scheduler``, given
            by the :class:`~lakelog.log_tables.log_manager.LogManager` that opened it), else one of its own
            on the log's clock.

    Must be created inside a running asyncio event loop.
    """

    def __init__(self, log: PartitionLog, *, interval_ms: int | None = None, commit_bytes: int | None = None,
                 segment_files_max: int | None = 64, close_timeout_s: float = 30.0,
                 maintenance_interval_ms: int = 300_000, metrics: LogMetrics | None = None,
                 scheduler: LogScheduler | None = None) -> None:
        self.log = log
        self._metrics = metrics
        self._scheduler = scheduler or log.lifecycle.scheduler or LogScheduler(clock=log.lifecycle.clock)
        self._clock = clock = self._scheduler.clock
        self.maintenance_interval_s = maintenance_interval_ms / 1000.0
        now = clock.monotonic()
        # the first round one interval after the open, as Kafka's retention task
        self._next_maintenance = now + self.maintenance_interval_s
        self._interval_ms = interval_ms
        self._commit_bytes = commit_bytes
        self._segment_files_max = segment_files_max
        self._close_timeout_s = close_timeout_s
        self._loop = asyncio.get_running_loop()
        self._round_start = now                  # rounds are paced from their starts
        self._flush_at: float | None = None      # when the next round is due; None: no round wanted
        self._flush_early = False                # lake.commit.bytes wait in the tail: the round is due now
        self._retention_due = False              # retention.bytes lets the oldest file go
        self._retention_not_before = -math.inf   # after a retention that removed nothing
        self._vacuum_not_before = -math.inf      # after a VACUUM that left a removal due
        self._retention_ran_at = -math.inf       # clock.monotonic() of the last retention trigger
        self._closed = False
        #: flushes made and records committed by them (for metrics and tests)
        self.flushes = 0
        self.records = 0
        # every log gets the job: a topic config change may give a log without a tail one
        log.add_high_watermark_listener(self._on_high_watermark)
        log.lifecycle.on_removal = self._on_removal
        if log.lake_end_offset < log.high_watermark or log.fsyncs:  # a tail recovered below the HW
            self._flush_at = now + self.interval_s
        self._scheduler.schedule(self, self._next_due(now))

    def __repr__(self) -> str:
        return f"LakeFlusher({self.log.topic}-{self.log.partition})"

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
        return flush_commit_bytes(self.log.config, commit_bytes=self._commit_bytes)

    # -- events (from any thread) ---------------------------------------------------------------

    def _on_high_watermark(self, log: PartitionLog) -> None:
        """From any thread: a round is wanted (at the next point of the rounds' grid when none is, at once
        once ``lake.commit.bytes`` wait in the tail), and the retention trigger once ``retention.bytes``
        lets the oldest file go. Cheap when a round is wanted already: nothing to tell the event loop."""
        if self._closed:
            return
        early = not self._flush_early and log.unflushed_bytes >= self.commit_bytes
        idle = self._flush_at is None and log.tiered
        retention = not self._retention_due and log.lifecycle.retention_bytes_due()
        if early or idle or retention:
            self._in_loop(self._wanted, early, retention)

    def _on_removal(self) -> None:
        """From any thread: a commit removed files; the VACUUM timer takes their expiry."""
        if not self._closed:
            self._in_loop(self._wanted, False, False)

    def _in_loop(self, call: Callable[..., None], *args: object) -> None:
        """``call(*args)`` in the event loop: now when this is its thread, else soon."""
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:  # a worker thread
            here = False
        if here:
            call(*args)
            return
        try:
            self._loop.call_soon_threadsafe(call, *args)
        except RuntimeError:  # the event loop is closed: nobody flushes any more
            pass

    def _wanted(self, early: bool, retention: bool) -> None:
        """In the event loop: note what a high watermark move or a removal asks for, and (re)schedule."""
        if self._closed:
            return
        now = self._clock.monotonic()
        if early:
            self._flush_early = True
            self._flush_at = now
        elif self._flush_at is None and self.log.lake_end_offset < self.log.high_watermark:
            # the next point of the rounds' grid (paced from the last round's start)
            start, interval = self._round_start, self.interval_s
            self._flush_at = start + max(1, math.ceil((now - start) / interval)) * interval
        if retention:
            self._retention_due = True
        self._scheduler.schedule(self, self._next_due(now))

    def _next_due(self, now: float) -> float:
        """The earliest due time of the job (the clock's ``monotonic()`` seconds)."""
        held = self.log.lake_commits_held
        due = now + self.interval_s if held else self._next_maintenance  # leased: look again in a round's time
        if self._flush_at is not None:
            due = min(due, self._flush_at)
        if self._retention_due:
            due = min(due, max(now, self._retention_not_before))
        vacuum_at = self.log.lifecycle.vacuum_due_at()
        if vacuum_at is not None:
            due = min(due, max(now + vacuum_at - self._clock.time(), self._vacuum_not_before))
        return due

    # -- the job --------------------------------------------------------------------------------

    async def run_due(self) -> float | None:
        """What is due now (steps in the module docstring); returns the next due time, None once closed.
        Never raises (failures are logged and retried later); cancellation is passed on."""
        if self._closed:
            return None
        now = self._clock.monotonic()
        # retention trigger: retention.bytes lets the oldest file go
        if self._retention_due and now >= self._retention_not_before:
            self._retention_due = False
            await self._apply_retention()
        # 1. a round when due (or lake.commit.bytes wait); a maintenance due before it runs alone
        if self._flush_at is not None and (self._flush_early or now + MAINTENANCE_SLACK_S >= self._flush_at):
            await self._round()
        else:
            await self.maintain_if_due(now)
        # the VACUUM timer
        await self._vacuum_if_due()
        return None if self._closed else self._next_due(self._clock.monotonic())

    async def _round(self) -> None:
        """One flush round: steps 2 to 4."""
        self._flush_at, self._flush_early = None, False
        self._round_start = round_start = self._clock.monotonic()
        # 2. commit the tail below the high watermark of the round's start
        try:
            await self.flush()
        except LakelogError as e:  # CommitFailedError, LogClosedError: the next round retries
            log.warning("flushing %s-%d to Delta failed: %s", self.log.topic, self.log.partition, e,
                        extra={"topic": self.log.topic, "partition": self.log.partition})
        except Exception:
            log.exception("flushing %s-%d to Delta failed", self.log.topic, self.log.partition,
                          extra={"topic": self.log.topic, "partition": self.log.partition})
        if self._retention_wanted():  # the round's commits let files go
            await self._apply_retention()
        # 3. merge small files, fsync when flush.ms is due
        if self.log.tiered:  # a log without a tail has its files merged after its appends (group commit, follower)
            await merge_if_needed(self.log, segment_files_max=self._segment_files_max)
        if self.log.fsyncs:
            await asyncio.to_thread(self.log.sync_if_due)
        # 4. retention and VACUUM when log.retention.check.interval.ms is due at the round's start
        await self.maintain_if_due(round_start)
        # records left (produced during the round, a failed commit, a lease) or fsyncs: the next round one
        # interval after this one's start
        if self._flush_at is None and (self.log.lake_end_offset < self.log.high_watermark or self.log.fsyncs):
            self._flush_at = round_start + self.interval_s

    async def maintain_if_due(self, at: float | None = None) -> None:
        """Run the log's maintenance round when ``maintenance_interval_ms`` passed between the last one's
        ``at`` and this ``at`` (the clock's ``monotonic()`` seconds: the flusher passes its round's start;
        default now). Never raises (a failure is logged; the next round tries again); cancellation is
        passed on."""
        at = self._clock.monotonic() if at is None else at
        if at + MAINTENANCE_SLACK_S < self._next_maintenance or self.log.lake_commits_held:
            return  # under an outside committer's lease: the first round after it
        self._next_maintenance = at + self.maintenance_interval_s
        try:
            # the VACUUM timer's VACUUM since the last round did this round's
            await asyncio.to_thread(self.log.lifecycle.run, skip_vacuum_within_s=self.maintenance_interval_s)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("maintenance of %s-%d failed", self.log.topic, self.log.partition,
                          extra={"topic": self.log.topic, "partition": self.log.partition})

    async def _vacuum_if_due(self) -> None:
        """The VACUUM timer (steps in the module docstring). Never raises (a failure is logged and retried
        one ``lake.commit.interval.ms`` later); cancellation is passed on."""
        lifecycle = self.log.lifecycle
        # 1. due when the earliest recorded removal has expired
        due = lifecycle.vacuum_due_at()
        if due is None or due > self._clock.time() or self._clock.monotonic() < self._vacuum_not_before:
            return
        # 2. VACUUM (under an outside committer's lease: after it)
        if not self.log.lake_commits_held:
            try:
                await asyncio.to_thread(lifecycle.vacuum_if_due)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("vacuum of %s-%d failed", self.log.topic, self.log.partition,
                              extra={"topic": self.log.topic, "partition": self.log.partition})
        # 3. still due (failed, closed or leased): not again before one round's interval
        due = lifecycle.vacuum_due_at()
        if due is not None and due <= self._clock.time():
            self._vacuum_not_before = self._clock.monotonic() + self.interval_s

    async def _apply_retention(self) -> None:
        """The retention trigger (steps in the module docstring). Never raises (a failure is logged and
        retried one ``lake.commit.interval.ms`` later); cancellation is passed on."""
        lifecycle = self.log.lifecycle
        # 1. a high watermark move found the oldest file removable by retention.bytes
        if self.log.lake_commits_held or not lifecycle.retention_bytes_due():
            return  # under an outside committer's lease: the first move after it
        # 2. retention (and retention.ms) in a worker thread
        removed = 0
        self._retention_ran_at = self._clock.monotonic()
        try:
            removed = await asyncio.to_thread(lifecycle.apply_retention, now_ms=int(self._clock.time() * 1000))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("retention of %s-%d failed", self.log.topic, self.log.partition,
                          extra={"topic": self.log.topic, "partition": self.log.partition})
        # 3. nothing removed: one round's interval before the next try
        if not removed:
            self._retention_not_before = self._clock.monotonic() + self.interval_s

    async def flush(self) -> int:
        """Commit everything below the high watermark as it is now (several commits of at most
        :attr:`file_bytes`). Records that reach the high watermark meanwhile are left for the next call.

        Returns:
            Records committed.

        Raises:
            CommitFailedError: a Delta commit failed (the records stay in the tail).
        """
        if self.log.shared_lake and self.log.lake_commits_held:
            # a follower of a table in a shared lake: the leader commits; take the lake end offset it
            # reached, so this replica's tail keeps only what the table lacks
            await asyncio.to_thread(self.log.catch_up_lake_end)
            return 0
        total = 0
        upper = self.log.high_watermark
        while self.log.lake_end_offset < upper:
            started = time.perf_counter()
            n = await asyncio.to_thread(self.log.flush_to_lake, max_bytes=self.file_bytes)
            if n == 0:
                return total
            if self._metrics is not None:
                self._metrics.lake_commit_seconds.observe(time.perf_counter() - started)
            total += n
            self.flushes += 1
            self.records += n
            # the retention trigger between a round's commits (at most once an interval: one retention commit
            # removes every file that may go, so commits are not spent on one file each)
            if self._clock.monotonic() - self._retention_ran_at >= self.interval_s and self._retention_wanted():
                await self._apply_retention()
        return total

    def _retention_wanted(self) -> bool:
        """True when the retention trigger should run now: flagged by a high watermark move, or a commit
        let the oldest file go (in memory: :meth:`LogLifecycle.retention_bytes_due`)."""
        if self._closed or not (self._retention_due or self.log.lifecycle.retention_bytes_due()):
            return False
        self._retention_due = False
        return True

    async def close(self, *, flush: bool = True) -> None:
        """Stop (a run in progress ends first); with ``flush``, commit what is below the high watermark
        first (up to ``close_timeout_s``).

        Never raises. ``flush=False`` is for a log about to be deleted.
        """
        if self._closed:
            return
        self._closed = True
        await self._scheduler.remove(self)
        if self.log.lifecycle.on_removal == self._on_removal:
            self.log.lifecycle.on_removal = None
        if not flush:
            return
        try:
            await asyncio.wait_for(self.flush(), self._close_timeout_s)
        except Exception as e:  # the tail keeps it; the next open recovers it
            log.warning("final flush of %s-%d to Delta failed: %s", self.log.topic, self.log.partition, e,
                        extra={"topic": self.log.topic, "partition": self.log.partition})
