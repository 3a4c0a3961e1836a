"""The lifecycle of a partition log: retention, log compaction, VACUUM and the Delta log, so a log can
run for months.

Kafka removes old records by whole segments: ``retention.ms`` deletes the oldest segments whose newest
record is older than that, ``retention.bytes`` the oldest segments while the log without them still holds
that many bytes, and the log start offset moves to the first offset left (Kafka's
``UnifiedLog.deleteOldSegments``; the log start offset also follows the leader's on followers and
DeleteRecords). Here the Delta table's data files play the segments' part (the segment tail holds only
records not yet flushed, deleted once they are in Delta):

- :func:`retention_start_offset` decides, from the file index alone, where the log starts after
  retention (only files wholly below the high watermark and the lake end offset may go);
- :meth:`LogLifecycle.advance_log_start_offset` removes the files wholly below a new log start offset in
  one metadata-only Delta commit (``delete`` with ``offset < X`` at a file boundary: no file is
  rewritten) and moves the log start offset; reads below it answer
  :class:`~lakelog.log_tables.errors.OffsetOutOfRangeError`;
- a file that left the table (retention, compaction, merges, truncation) stays on disk for
  ``lake.vacuum.retention.ms`` (Delta's ``delta.deletedFileRetentionDuration``: readers of an older
  version and time travel keep working), then :meth:`LogLifecycle.vacuum` deletes it (delta-rs VACUUM).
  delta-rs deletes a removed file once its ``remove`` action's ``deletionTimestamp`` (the commit's
  time) is older than that duration (``get_stale_files`` in delta-rs ``operations/vacuum.rs``), so a
  VACUUM run on a fixed period leaves each file on disk for the grace plus up to one period. Kafka
  schedules each removed segment's deletion ``file.delete.delay.ms`` after its removal
  (``LocalLog.deleteSegmentFiles``; ``Log.deleteSegmentFiles`` before Kafka 3.0); so does the log:
  every commit that removes files records when they expire (:meth:`LogLifecycle.note_removal`) and the
  flusher runs :meth:`LogLifecycle.vacuum_if_due` then (:mod:`~lakelog.log_tables.flusher`);
- the Delta log keeps commits as long (``delta.logRetentionDuration``): delta-rs writes a checkpoint
  every ``delta.checkpointInterval`` commits and then deletes the expired commit files, so
  ``_delta_log`` stays bounded.

Steps of one maintenance round (:meth:`LogLifecycle.run`, every ``log.retention.check.interval.ms``,
mirrored by comments in the code):

1. the table's Delta properties follow the topic config (one metadata commit when they changed);
2. retention, when ``cleanup.policy`` has ``delete``: the new log start offset, then the files below it go;
3. the log cleaner, when ``cleanup.policy`` has ``compact`` (:mod:`~lakelog.log_tables.cleaner`): once the
   dirty ratio passes ``min.cleanable.dirty.ratio`` (or ``max.compaction.lag.ms`` is due) the cleanable
   range keeps the latest record per key, in one commit. It runs here, in the broker with pyarrow, because
   the broker is the table's one committer and has the table's files at hand: no JVM, no lease, and the
   cleaning of a compacted topic is bounded by its live keys;
4. VACUUM: files removed longer than ``lake.vacuum.retention.ms`` ago are deleted from disk (also the
   files whose removal no :meth:`LogLifecycle.note_removal` recorded: a truncation's, an outside
   committer's, a failed commit's, those of before a restart).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltalake import CommitProperties, write_deltalake

from lakelog.clock import SYSTEM_TIME, Time
from lakelog.config import TopicConfig
from lakelog.log_tables.cleaner import CLEANED_FILE_TARGET_BYTES, CleanResult, clean, cleaned_offset, needs_cleaning
from lakelog.log_tables import file_merges
from lakelog.log_tables.file_merges import MERGE_TARGET_BYTES, merge_target_bytes
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.leader_epochs import LeaderEpochCache
from lakelog.log_tables.recovery import RecoveredLog
from lakelog.log_tables.table_writes import (LAKE_END_OFFSET_KEY, LOG_START_OFFSET_KEY, OPERATION_KEY,
                                             table_arrow_schema)

if TYPE_CHECKING:
    from lakelog.log_tables.log_scheduler import LogScheduler
    from lakelog.log_tables.log_state import LogState
    from lakelog.log_tables.log_writer import LogWriter

log = logging.getLogger(__name__)

__all__ = ["LOG_START_OFFSET_KEY", "LogLifecycle", "MaintenanceResult", "VACUUM_MARGIN_S", "retention_start_offset",
           "table_properties"]

#: Seconds added to a removal's expiry: delta-rs compares whole milliseconds (a tombstone goes when
#: ``deletionTimestamp < now - retention``), and the commit's timestamp precedes the moment the commit returns.
VACUUM_MARGIN_S = 0.005


def retention_start_offset(files: Sequence[DataFile], *, log_start_offset: int, upper_offset: int,
                           retention_ms: int, retention_bytes: int, tail_bytes: int, now_ms: int) -> int:
    """Where the log starts after ``retention.ms`` and ``retention.bytes`` (Kafka's ``deleteOldSegments``).

    Only a prefix of whole files goes, each wholly below ``upper_offset``; a file goes when its newest
    record (``max.timestamp`` statistic) is older than ``now_ms - retention_ms``, or while the log
    without it still holds at least ``retention_bytes`` bytes (data files plus ``tail_bytes``). A file
    without offset or timestamp statistics stops the prefix.

    Args:
        files: the table's data files in offset order (:attr:`FileSnapshot.files
            <lakelog.log_tables.data_files.FileSnapshot.files>`).
        log_start_offset: the log start offset now (never moves back).
        upper_offset: no record at or above it goes (the high watermark, at most the lake end offset).
        retention_ms: ``retention.ms``; -1 = no limit by time.
        retention_bytes: ``retention.bytes`` per partition; -1 = no limit by size.
        tail_bytes: bytes of the segment tail (counted in the log's size).
        now_ms: the time, ms since the epoch.

    Returns:
        The new log start offset: the first offset of the first file kept, or ``upper_offset`` when
        every file below it goes; ``log_start_offset`` when nothing goes.
    """
    if retention_ms < 0 and retention_bytes < 0:
        return log_start_offset
    size = sum(f.size_bytes for f in files) + tail_bytes
    start = log_start_offset
    for f in files:
        if not f.has_offset_stats or f.max_offset >= upper_offset:
            break
        expired = (retention_ms >= 0 and f.max_timestamp_us is not None
                   and f.max_timestamp_us // 1000 < now_ms - retention_ms)
        too_big = retention_bytes >= 0 and size - f.size_bytes >= retention_bytes
        if not (expired or too_big):
            break
        size -= f.size_bytes
        start = max(start, f.max_offset + 1)
    return start


def table_properties(config: TopicConfig) -> dict[str, str]:
    """The Delta table properties a topic config asks for: how long removed files and old commits stay
    (``lake.vacuum.retention.ms``), and that expired commit files are cleaned up at checkpoints."""
    interval = f"interval {config.lake_vacuum_retention_ms} milliseconds"
    return {"delta.deletedFileRetentionDuration": interval, "delta.logRetentionDuration": interval,
            "delta.enableExpiredLogCleanup": "true"}


@dataclass(frozen=True)
class MaintenanceResult:
    """What a maintenance round did.

    Attributes:
        log_start_offset: the log start offset after it.
        files_removed: data files removed from the table by retention.
        files_vacuumed: removed data files deleted from disk.
        cleaned: what the log cleaner did, or None.
    """

    log_start_offset: int
    files_removed: int = 0
    files_vacuumed: int = 0
    cleaned: "CleanResult | None" = None


class LogLifecycle:
    """Retention, log start offset moves, merges of small files and VACUUM of one partition log (see the
    module docstring).

    Args:
        writer: the log's one writer (its ``lake_lock`` serialises these commits with the flush).
        state: the log's in-memory state.

    Methods are blocking (Delta I/O): call them from a worker thread.

    Attributes:
        on_removal: called (from any thread) after :meth:`note_removal`, e.g. to wake the flusher's
            VACUUM timer; None = nobody listens.
        clock: what removals' expiries and default ``now`` are read on. Default: the system clock.
        scheduler: the broker's log scheduler (set by the :class:`~lakelog.log_tables.log_manager.LogManager`
            that opened the log), on which the log's flusher runs; None = the flusher makes its own.
    """

    def __init__(self, writer: "LogWriter", state: "LogState") -> None:
        self._writer = writer
        self._state = state
        self.on_removal: "Callable[[], None] | None" = None
        self.clock: Time = SYSTEM_TIME
        self.scheduler: "LogScheduler | None" = None
        # wall-clock seconds at which the files removed by recorded commits may leave the disk
        self._expiries: list[float] = []
        self._expiries_lock = threading.Lock()
        self._last_vacuum = float("-inf")  # clock.monotonic() at the start of the last VACUUM

    def needs_merge(self, *, max_files: int = 64, max_file_bytes: int = MERGE_TARGET_BYTES) -> bool:
        """True when the table holds more than ``max_files`` data files that :meth:`merge_head` may merge
        (smaller than half of ``max_file_bytes``, plus commits not indexed yet): a cheap, in-memory check."""
        state = self._state
        return file_merges.small_files(state.files.files, max_file_bytes) + state.commits_since_index > max_files

    def merge_head(self, *, keep_newest: int = 16, max_file_bytes: int = MERGE_TARGET_BYTES,
                     max_run_bytes: int = 256 * 1024 * 1024) -> int:
        """Merge the oldest run of small data files into one, in offset order (one Delta commit; see
        :mod:`~lakelog.log_tables.file_merges`, sizes in bytes). A failed commit is logged, the log re-read,
        and 0 returned. Returns the number of files replaced."""
        return self._writer.merge_head(keep_newest=keep_newest, max_file_bytes=max_file_bytes,
                                         max_run_bytes=max_run_bytes)

    def run(self, *, now_ms: int | None = None, skip_vacuum_within_s: float = 0.0) -> MaintenanceResult:
        """One maintenance round (steps in the module docstring). A failed step is logged and the round
        goes on; the next round tries again.

        Args:
            now_ms: the time, ms since the epoch (tests). Default: the wall clock.
            skip_vacuum_within_s: step 4 is left out when a VACUUM started less than this many seconds
                ago (the flusher's VACUUM timer ran one: a full VACUUM deletes every file expired by its
                start, recorded removal or not). Default: 0 (always VACUUM).
        """
        now_ms = int(self.clock.time() * 1000) if now_ms is None else now_ms
        config = self._writer.config
        # 1. Delta table properties follow the topic config
        self._step("setting the table properties of", self.sync_table_properties)
        # 2. retention: whole files below the new log start offset go
        removed = config.deletes and self._step("applying retention to", lambda: self.apply_retention(now_ms=now_ms))
        # 3. the log cleaner: the latest record per key once the dirty ratio asks for it
        cleaned = self._step("cleaning", lambda: self.clean(now_ms=now_ms)) if config.compacts else None
        # 4. VACUUM: files removed longer than lake.vacuum.retention.ms ago leave the disk
        vacuumed = None
        if self.clock.monotonic() - self._last_vacuum >= skip_vacuum_within_s:
            vacuumed = self._step("vacuuming", self.vacuum)
        return MaintenanceResult(self._state.log_start_offset, removed or 0, vacuumed or 0, cleaned)

    def clean(self, *, now_ms: int, force: bool = False) -> "CleanResult | None":
        """Run the log cleaner when the table needs it (:func:`~lakelog.log_tables.cleaner.needs_cleaning`),
        or always with ``force`` (tombstones past ``delete.retention.ms``): one Delta commit keeping the
        latest record per key of the cleanable range (:func:`~lakelog.log_tables.cleaner.clean`), in files of
        at most :func:`~lakelog.log_tables.file_merges.merge_target_bytes` (so ``retention.bytes`` of a
        ``compact,delete`` topic can remove them).

        The cleaned offset (Kafka's cleaner checkpoint) is kept in the log's state; after a restart or a
        truncation it is read back from the table's history (lowered by a later truncation), or 0 once the
        Delta log no longer holds the cleaning commit (the next cleaning then covers the whole range once).

        Returns:
            What the cleaning did, or None when there was nothing to clean.

        Raises:
            CommitFailedError: the commit failed (the state was re-read; the next round retries).
        """
        writer, state = self._writer, self._state
        with writer.lake_lock:
            if writer.closed:
                return None
            files = writer.load_index()
            lake_end = state.lake_end_offset
            if state.cleaned_offset is None:
                state.cleaned_offset = cleaned_offset(writer.table)
            if not force and not needs_cleaning(files.files, config=writer.config, cleaned_offset=state.cleaned_offset,
                                                lake_end_offset=lake_end, now_ms=now_ms):
                return None
            # cleaned files of a compact,delete topic stay small enough for retention.bytes to remove
            target = merge_target_bytes(writer.config, default=CLEANED_FILE_TARGET_BYTES)
            result = writer.commit(f"Cleaning {writer.name}", lambda: clean(
                writer.table, files, config=writer.config, cleaned_offset=state.cleaned_offset,
                lake_end_offset=lake_end, now_ms=now_ms, name=writer.name, force=force, target_file_size=target))
            if result is None:
                return None
            if result.files_replaced:
                self.note_removal()
            with writer.lock:
                state.cleaned(result.new_cleaned_offset, writer.load_index())
        return result

    def _step(self, what: str, step):
        try:
            return step()
        except Exception:
            log.exception("%s %s failed", what, self._writer.name)
            return None

    def retention_bytes_due(self) -> bool:
        """True when ``retention.bytes`` lets the oldest data file go now (:func:`retention_start_offset`
        by size alone: the log without it, data files plus the segment tail, still holds at least
        ``retention.bytes``, and it lies wholly below the high watermark and the lake end offset). In
        memory, cheap enough for every high watermark move: the flusher runs
        :meth:`apply_retention` when it says so (:mod:`~lakelog.log_tables.flusher`), so a log written
        faster than ``log.retention.check.interval.ms`` lets it grow by about one file, not by one check
        interval of records, past ``retention.bytes``. A log without a segment tail lists the files of its
        appends only at its next maintenance round: its ``retention.bytes`` waits for the check interval,
        as Kafka's does."""
        config = self._writer.config
        if not config.deletes or config.retention_bytes < 0:
            return False
        state = self._state
        with state.lock:
            files, tail_bytes, start = state.files.files, state.segments.nbytes, state.log_start_offset
            upper = min(state.high_watermark, state.lake_end_offset)
        return retention_start_offset(files, log_start_offset=start, upper_offset=upper, retention_ms=-1,
                                      retention_bytes=config.retention_bytes, tail_bytes=tail_bytes, now_ms=0) > start

    def apply_retention(self, *, now_ms: int) -> int:
        """Remove the oldest data files that ``retention.ms`` / ``retention.bytes`` let go
        (:func:`retention_start_offset`) and move the log start offset past them.

        Returns:
            The number of files removed.

        Raises:
            CommitFailedError: the Delta commit failed (the state was re-read; the next round retries).
        """
        config, writer = self._writer.config, self._writer
        if config.retention_ms < 0 and config.retention_bytes < 0:
            return 0
        with writer.lake_lock:
            if writer.closed or not writer.lake_commits_allowed():  # under an outside committer's lease
                return 0
            files = writer.load_index()  # appends without a tail do not update the index
            view = self._state.view()
            start = retention_start_offset(
                files.files, log_start_offset=view.log_start_offset,
                upper_offset=min(view.high_watermark, view.lake_end_offset),
                retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
                tail_bytes=view.segments.nbytes, now_ms=now_ms)
            return self._advance(start, files, reason="retention")

    def advance_log_start_offset(self, offset: int, *, reason: str) -> int:
        """Move the log start offset up to ``offset`` (never back; at most the high watermark) and remove
        the data files wholly below it: one metadata-only Delta commit, recording the new log start
        offset and the lake end offset. Kafka's ``maybeIncrementLogStartOffset``: retention, a follower
        taking its leader's log start offset, DeleteRecords.

        Files that hold offsets on both sides stay (the log start offset may lie inside a file: reads
        below it are refused all the same). Every record below ``offset`` is gone for readers at once;
        its file leaves the disk after ``lake.vacuum.retention.ms`` (:meth:`vacuum`).

        Args:
            offset: the new log start offset.
            reason: for the log (``retention``, ``leader``, ``delete-records``).

        Returns:
            The number of data files removed.

        Raises:
            CommitFailedError: the Delta commit failed (the state was re-read from the table).
        """
        writer = self._writer
        with writer.lake_lock:
            if writer.closed or offset <= self._state.log_start_offset:
                return 0
            return self._advance(offset, writer.load_index(), reason=reason)

    def _advance(self, offset: int, files: FileSnapshot, *, reason: str) -> int:
        """:meth:`advance_log_start_offset` with ``lake_lock`` held and ``files`` the table's files now."""
        writer, state = self._writer, self._state
        view = state.view()
        new_start = min(max(offset, view.log_start_offset), view.high_watermark)
        if new_start <= view.log_start_offset:
            return 0
        gone = [f for f in files.files if f.has_offset_stats and f.max_offset < new_start]
        if gone and writer.lease.shared and writer.lease.held():
            gone = []  # a follower of a table in the shared lake: its leader removes them from the table
        if gone:
            # every record of these files is below the new start: a DELETE up to their last offset removes
            # them whole (the files are disjoint, so no other file is touched) and writes nothing
            last = max(f.max_offset for f in gone)
            writer.commit(f"Removing {len(gone)} files below offset {new_start} of {writer.name}",
                          lambda: self._delete(f"offset <= {last}", new_start, view.lake_end_offset, reason))
            self.note_removal()
            files = writer.load_index()
        with writer.lock:
            state.start_advanced(new_start, files)
        log.info("log start offset of %s moved to %d (%s): %d data files removed", writer.name, new_start,
                 reason, len(gone))
        return len(gone)

    def _delete(self, predicate: str, log_start_offset: int, lake_end_offset: int, reason: str) -> int:
        table = self._writer.table
        table.delete(predicate, commit_properties=CommitProperties(custom_metadata={
            LAKE_END_OFFSET_KEY: str(lake_end_offset), LOG_START_OFFSET_KEY: str(log_start_offset),
            OPERATION_KEY: reason}))
        return table.version()

    def reset_to(self, offset: int) -> None:
        """Drop the whole log and start it over, empty, at ``offset``: log start, lake end and log end offset
        all become ``offset`` (Kafka's ``truncateFullyAndStartAt``: a follower whose log ends below its
        leader's log start offset). One Delta commit removing every data file and recording ``offset``
        as the lake end offset, so a restart recovers the same; the segment tail is deleted.

        Raises:
            LogClosedError: the log is closed.
            CommitFailedError: the Delta commit failed (the state was re-read from the table).
        """
        writer, state = self._writer, self._state
        with writer.lake_lock, writer.lock:
            writer.check_open()
            if writer.lease.shared and writer.lease.held():
                self._start_tail_over(offset)
                return
            writer.commit(f"Starting {writer.name} over at offset {offset}", lambda: self._remove_all(offset))
            self.note_removal()
            if writer.segments is not None:
                writer.segments.delete_all()
            writer.recover()
            with state.lock:
                state.high_watermark = max(state.high_watermark, state.log_end_offset)
        log.info("%s starts over at offset %d", writer.name, offset)

    def _start_tail_over(self, offset: int) -> None:
        """:meth:`reset_to` on a follower of a table in the shared lake: the leader's table stays as it is;
        this replica's tail is deleted and its log starts over, empty, at ``offset``. Holds both locks."""
        writer, state = self._writer, self._state
        tail = None
        if writer.segments is not None:
            writer.segments.delete_all()
            tail = writer.segments.recover(offset)
        state.reset(RecoveredLog(state.files, offset, offset, offset, LeaderEpochCache(),
                                 None if tail is None else tail.view, ()))
        with state.lock:
            state.high_watermark = max(state.high_watermark, state.log_end_offset)
        log.info("%s starts over at offset %d (its tail; the shared table is its leader's)", writer.name, offset)

    def _remove_all(self, offset: int) -> int:
        table = self._writer.table
        write_deltalake(table, table_arrow_schema(table).empty_table(), mode="overwrite", commit_properties=CommitProperties(
            custom_metadata={LAKE_END_OFFSET_KEY: str(offset), LOG_START_OFFSET_KEY: str(offset),
                             OPERATION_KEY: "reset"}))
        return table.version()

    def vacuum(self) -> int:
        """Delete from disk the data files removed from the table longer than ``lake.vacuum.retention.ms``
        ago (delta-rs VACUUM, honouring the table's ``delta.deletedFileRetentionDuration``), and files no
        commit ever referenced (a failed commit's). The segment tail (``_lakelog_segments``) is never
        touched: VACUUM skips names starting with ``_``.

        Every removal recorded by :meth:`note_removal` that had expired when it started is done with.

        Returns:
            The number of files deleted.
        """
        writer = self._writer
        with writer.lake_lock:
            # a follower of a table in a shared lake: a full VACUUM would delete the files of the leader's
            # commit in progress (referenced by no commit yet)
            if writer.closed or (writer.lease.shared and writer.lease.held()):
                return 0
            table = writer.table
            started = self.clock.time()  # delta-rs reads its clock after this: what expired before is deleted
            self._last_vacuum = self.clock.monotonic()
            # full: the directory is listed, so a removed file whose tombstone a checkpoint already dropped
            # (it expired before this round) is deleted too, not left behind
            deleted = table.vacuum(dry_run=False, full=True, commit_properties=CommitProperties(custom_metadata={
                LAKE_END_OFFSET_KEY: str(self._state.lake_end_offset), OPERATION_KEY: "vacuum"}))
            if deleted:  # VACUUM committed (it does not when nothing was deleted)
                table.update_incremental()
        with self._expiries_lock:
            self._expiries = [t for t in self._expiries if t > started]
        if deleted:
            log.info("vacuum of %s deleted %d files", writer.name, len(deleted))
        return len(deleted)

    def note_removal(self) -> None:
        """Record that a commit just removed data files from the table: they may leave the disk
        ``lake.vacuum.retention.ms`` from now (the commit's ``deletionTimestamp`` is earlier), when
        :meth:`vacuum_due_at` says so; then tell :attr:`on_removal`. Kafka schedules a removed segment's
        deletion ``file.delete.delay.ms`` after its removal (``LocalLog.deleteSegmentFiles``)."""
        expiry = self.clock.time() + self._writer.config.lake_vacuum_retention_ms / 1000.0 + VACUUM_MARGIN_S
        with self._expiries_lock:
            self._expiries.append(expiry)
        if self.on_removal is not None:
            self.on_removal()

    def vacuum_due_at(self) -> float | None:
        """When the earliest recorded removal expires (wall-clock seconds since the epoch), or None when
        every recorded removal was vacuumed."""
        with self._expiries_lock:
            return min(self._expiries, default=None)

    def vacuum_if_due(self, *, now: float | None = None) -> int:
        """:meth:`vacuum` when a recorded removal has expired (``now``: wall-clock seconds, default the
        clock); returns the number of files deleted (0 when none was due).

        Raises:
            Exception: whatever delta-rs raises; the removals stay recorded (the caller retries later).
        """
        due = self.vacuum_due_at()
        if due is None or due > (self.clock.time() if now is None else now):
            return 0
        return self.vacuum()

    def sync_table_properties(self) -> bool:
        """Set the table's Delta properties to :func:`table_properties` of the topic config, if they
        differ (one metadata commit). Returns True when they changed."""
        writer = self._writer
        with writer.lake_lock:
            if writer.closed or (writer.lease.shared and writer.lease.held()):  # the leader's table
                return False
            table = writer.table
            wanted = table_properties(writer.config)
            current = table.metadata().configuration
            if all(current.get(k) == v for k, v in wanted.items()):
                return False
            table.alter.set_table_properties(wanted, commit_properties=CommitProperties(custom_metadata={
                LAKE_END_OFFSET_KEY: str(self._state.lake_end_offset), OPERATION_KEY: "set-properties"}))
            return True
