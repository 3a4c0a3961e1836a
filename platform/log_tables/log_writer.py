"""The one writer of a partition log: serialised appends and Delta commits that keep the log's state in step.

Two locks, always taken in this order: ``lake_lock`` serialises the Delta commits (flush of the
segment tail, truncation, merges of small files, and the appends of a log without a tail: one writer per table);
``lock`` serialises appends to the segment tail and the state changes. So an append to the tail never
waits for a Delta commit: the flusher holds only ``lake_lock`` while it commits.

A failed Delta commit has an ambiguous outcome, so the writer re-reads the table
(:mod:`~lakelog.log_tables.recovery`) before it raises :class:`CommitFailedError`, and the next batch
starts from what the table really holds. After an append the :class:`~lakelog.log_tables.log_state.LogState`
moves (log end offset, segment frames, tail cache, leader epochs) in one step.

Steps of a flush (:meth:`LogWriter.flush`, mirrored by comments in the code):

1. take the records from the lake end offset up to the high watermark (at most ``max_bytes``, at least
   one record) from the tail cache and the segment files;
2. commit them to the Delta table as one append recording the new lake end offset (a failed commit is
   ambiguous: the table's end is re-read and the error raised);
3. move the lake end offset and the file index; the segments wholly below it are released and, once
   readers see the new lake end offset, deleted (a reader of an older view that misses a file reads
   again from Delta); the active one rolls.

A follower's replicated batch (:meth:`LogWriter.append_replicated`) that is dense goes where every
append goes (a frame of the segment tail, or a Delta commit without one). A batch with gaps goes to the
Delta table as it is, in one commit recording the range's end as the lake end offset; only its dense last
run (if it ends with a record) goes to the tail. So the segment tail, its frames (``base + count``), the
flusher's reads and recovery's check of contiguous frames never see a gap, and the Delta table, which
holds the leader's gaps already, holds the follower's. The table must end at the log end offset first,
so the tail is flushed before (beyond the follower's high watermark: gaps exist only in the leader's
table, which holds only records below its high watermark, so everything before a gap is committed).
Catching up on a compacted range thus costs a Delta commit per fetch answer (replica.fetch.max.bytes of
records, a fair file size); a follower that keeps up fetches the leader's dense tail and appends to its own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from deltalake import DeltaTable

from lakelog.clock import SYSTEM_TIME, Time
from lakelog.config import TopicConfig
from lakelog.log_tables import file_merges
from lakelog.log_tables.committer_leases import PartitionLease
from lakelog.log_tables.data_files import FileSnapshot
from lakelog.log_tables.errors import (CommitFailedError, LakeUnavailableError, LogClosedError,
                                       NonContiguousOffsetsError, TransactionsNeedTailError)
from lakelog.log_tables.fetch import read_range
from lakelog.log_tables.leader_epochs import epoch_starts
from lakelog.log_tables.log_state import LogState
from lakelog.log_tables.recovery import file_snapshot, lake_state, recover
from lakelog.log_tables.records import check_replicated, dense_tail_start, fetched_range, has_gaps, to_log_batch
from lakelog.log_tables.schema import ATTRIBUTES, TAIL_SCHEMA, TRANSACTIONAL_BIT, with_attributes
from lakelog.log_tables.segments import SegmentLog
from lakelog.log_tables.table_writes import commit_append, commit_truncation, newer_leader_epoch
from lakelog.log_tables.typed_columns import RecordDecoder, with_typed_columns

if TYPE_CHECKING:
    from lakelog.protocol.producer_headers import ProducerBatch

log = logging.getLogger(__name__)

__all__ = ["AppendInfo", "LogWriter"]

T = TypeVar("T")


@dataclass(frozen=True)
class AppendInfo:
    """Where an appended batch landed.

    Attributes:
        base_offset: offset of the batch's first record.
        last_offset: offset of its last record (``base_offset + count - 1``); for a replicated range with
            gaps, the range's last offset (Kafka's batch ``lastOffset``).
        count: number of records.
        log_append_time_ms: broker time of the append, ms since the epoch.
        version: the Delta table version that holds the batch, or None when it went to the segment
            tail (the flusher commits it later).
        producer_appends: the idempotent requests of a leader's group commit, each ``(producer, base_offset,
            count)`` (:class:`~lakelog.protocol.producer_headers.ProducerBatch`), for the producer state;
            set by :class:`~lakelog.log_tables.group_commit.GroupCommitter`. Default: none.
        nbytes: Arrow bytes of the appended records as the group commit took them (set by
            :class:`~lakelog.log_tables.group_commit.GroupCommitter`, for the traffic counters). Default: 0.
    """

    base_offset: int
    last_offset: int
    count: int
    log_append_time_ms: int
    version: int | None
    producer_appends: tuple[tuple[ProducerBatch, int, int], ...] = ()
    nbytes: int = 0


class LogWriter:
    """Commits to one partition table and keeps ``state`` in step (the methods of
    :class:`~lakelog.log_tables.partition_log.PartitionLog` that write delegate here).

    Args:
        table: the open table (this writer is its only user for writes).
        uri: its URI.
        fs, root: the filesystem and table root its data files are read through.
        topic, partition: for messages.
        config: the topic's configuration (``message.timestamp.type``, ``compression.type``).
        state: the log's in-memory state.
        segments: the segment tail appends go to; None = every append is a Delta commit
            (``lake.commit.interval.ms=0``).
        clock: the broker time of appends. Default: the system clock.
        shared_lake: the table is one for all the partition's replicas (``lake.uri``): this writer commits
            to it only while its replica leads (:class:`~lakelog.log_tables.committer_leases.PartitionLease`).
            Default: False.
        storage_options: delta-rs storage options of an object-store table (the file indexes carry them,
            so a read that finds a file gone can open the newest snapshot). Default: none.
    """

    def __init__(self, table: DeltaTable, *, uri: str, fs: pafs.FileSystem, root: str, topic: str, partition: int,
                 config: TopicConfig, state: LogState, segments: SegmentLog | None,
                 clock: Time = SYSTEM_TIME, shared_lake: bool = False,
                 storage_options: dict[str, str] | None = None) -> None:
        self.table, self.uri, self._fs, self._root = table, uri, fs, root
        self.clock = clock  # broker time of appends (LogAppendTime, records without a timestamp)
        self.topic, self.partition, self.config, self.state = topic, partition, config, state
        self.segments = segments
        self.storage_options = storage_options  # of an object-store table (holds secrets: never logged)
        self.lake_lock = threading.Lock()
        self.lock = threading.Lock()
        self.closed = False
        # a Spark job's (no flush, merge, maintenance under it), and the leader's of a table in a shared lake
        self.lease = PartitionLease(topic, partition, shared=shared_lake)
        #: decodes a schema'd topic's records into its typed columns at each Delta append (given by the log
        #: manager; :mod:`~lakelog.log_tables.typed_columns`). None = no typed columns.
        self.record_decoder: RecordDecoder | None = None

    @property
    def name(self) -> str:
        """``topic-partition``."""
        return f"{self.topic}-{self.partition}"

    def recover(self) -> None:
        """Re-read the table (newest version) and the segment tail into the state; the fence epoch is kept."""
        self.state.reset(recover(self.table, self.uri, self._fs, self._root, self.segments,
                                 storage_options=self.storage_options))

    def load_index(self) -> FileSnapshot:
        """Re-list the data files of the table's version in memory (after this writer's commits)."""
        files = file_snapshot(self.table, self.uri, self._fs, self._root, storage_options=self.storage_options)
        self.state.set_index(files)
        return files

    def close(self) -> None:
        """Refuse later writes (:class:`LogClosedError`); waits for a running append or commit."""
        with self.lake_lock, self.lock:
            self.closed = True
            if self.segments is not None:
                self.segments.close()

    def append(self, records: pa.Table, *, leader_epoch: int, now_ms: int | None,
               producer_columns: tuple[pa.Array, pa.Array, pa.Array] | None = None,
               attributes: pa.Array | None = None) -> AppendInfo:
        """:meth:`PartitionLog.append <lakelog.log_tables.partition_log.PartitionLog.append>`."""
        n = records.num_rows
        if n == 0:
            raise ValueError("append needs at least one record")
        if attributes is not None and self.segments is None and pc.any(
                pc.not_equal(pc.bit_wise_and(attributes, TRANSACTIONAL_BIT), 0)).as_py():
            check_holds_transactions(self.name, tiered=False)
        with self._append_locks():
            self.check_open()
            self.state.epochs.check(leader_epoch, topic=self.topic, partition=self.partition)
            self._check_tail_bound()
            now_ms = int(self.clock.time() * 1000) if now_ms is None else now_ms
            base = self.state.log_end_offset
            batch = with_attributes(to_log_batch(records, base_offset=base, leader_epoch=leader_epoch, now_ms=now_ms,
                                                 timestamp_type=self.config.message_timestamp_type,
                                                 producer_columns=producer_columns),
                                    attributes).combine_chunks()
            # One group commit = one frame of the segment tail (or one Delta transaction without a tail).
            version = self._append(f"Writing {n} records", base, batch, [(leader_epoch, base)])
            return AppendInfo(base, base + n - 1, n, now_ms, version)

    def _check_tail_bound(self) -> None:
        """A leader of a table in a shared lake takes no more records while its tail holds more than
        ``lake.tail.max.bytes`` not yet in the table (the store is unreachable or slow): back-pressure, not
        an unbounded disk (followers replicate what the leader took)."""
        unflushed = self.state.segments.nbytes
        if self.lease.shared and self.segments is not None and unflushed > self.config.lake_tail_max_bytes:
            raise LakeUnavailableError(
                f"{self.name} holds {unflushed} bytes not yet in its table in the lake, more than "
                f"lake.tail.max.bytes ({self.config.lake_tail_max_bytes}): the object store is unreachable or "
                "slow. Nothing was written; retry once the flusher caught up.")

    def append_replicated(self, batch: pa.Table) -> AppendInfo:
        """:meth:`PartitionLog.append_replicated <lakelog.log_tables.partition_log.PartitionLog.append_replicated>`.

        ``batch`` may say which offset range it covers (:func:`~lakelog.log_tables.records.fetched_range`,
        the leader's replica fetch answer): then it starts at the log end offset, its offsets are strictly
        increasing, and the offsets of the range without a row are gaps the leader's log cleaner left; it
        may even have no rows (the whole range was compacted away). The log end offset becomes the range's
        end (Kafka's ``appendAsFollower``: a compacted batch keeps its offsets and its ``lastOffset``).
        Without a range the batch must be dense from the log end offset.

        Where a batch with gaps goes: see the module docstring.

        Returns:
            :class:`AppendInfo`; for a range with gaps ``last_offset`` is the range's last offset (Kafka's
            batch ``lastOffset``) and ``count`` the records it holds.
        """
        fetched = fetched_range(batch)
        batch = with_attributes(batch.select([c for c in TAIL_SCHEMA.names if c in batch.column_names])
                                ).cast(TAIL_SCHEMA).combine_chunks()
        offsets = batch["offset"].to_numpy()
        n = len(offsets)
        if n == 0 and not has_gaps(offsets, fetched):
            raise ValueError("append_replicated needs at least one record or a non-empty offset range")
        epochs = epoch_starts(offsets, batch["leader_epoch"].to_numpy())
        if not has_gaps(offsets, fetched):
            with self._append_locks():
                self.check_open()
                # 1. the batch must continue the log exactly
                base = self.state.log_end_offset
                check_replicated(offsets, base, fetched, topic=self.topic, partition=self.partition)
                # 2. one frame of the segment tail (or one Delta transaction); 3. LEO, tail cache, epochs
                version = self._append(f"Writing {n} replicated records", base, batch, epochs)
                return AppendInfo(base, base + n - 1, n, int(self.clock.time() * 1000), version)
        return _append_with_gaps(self, batch, offsets, fetched, epochs)

    def flush(self, *, max_bytes: int, beyond_high_watermark: bool = False) -> int:
        """:meth:`PartitionLog.flush_to_lake <lakelog.log_tables.partition_log.PartitionLog.flush_to_lake>`."""
        if self.segments is None:
            return 0
        with self.lake_lock:
            if self.closed or not self.lake_commits_allowed():
                return 0
            # 1. the records from the lake end offset up to the high watermark and the last stable offset,
            #    from cache and segments (reading up to the log end: roll the active segment, so this flush
            #    releases it); control records, aborted records and records below the log start offset are dropped
            with self.lock:
                view = self.state.view()
                start, leo = view.lake_end_offset, view.log_end_offset
                upper = leo if beyond_high_watermark else min(view.high_watermark, leo)
                first_open = view.transactions.first_unstable_offset
                upper = upper if first_open is None else min(upper, first_open)
                if upper == leo > start:
                    self.segments.roll_at_next_append()
            batch = _read_tail(self.state, start, upper, max_bytes) if upper > start else None
            end, failure = start, None
            epoch = self.lease.leader_epoch if self.lease.shared else None  # fences a deposed leader
            since_version = self.table.version()
            checked = self.lease.epochs_checked_version
            if epoch is not None and checked is not None and since_version > checked:
                # versions this replica did not commit came into its snapshot since it last looked (its own
                # merges or VACUUM rebased onto them): a successor's epoch may be among them
                self._fence_if_deposed(since_version=checked, leader_epoch=epoch)
                if not self.lease.leading:
                    return 0
                since_version = self.table.version()
            if batch is None and epoch is not None and self.lease.epoch_recorded != epoch:
                # a new leader of a shared table records its epoch at once, records or not: from then on
                # the replica it took over from can commit nothing
                batch = TAIL_SCHEMA.empty_table()
            if batch is not None:
                # 2. one Delta append recording the new lake end offset (the decided, committed records)
                read_end = start + batch.num_rows
                rows = batch.filter(view.transactions.keep_mask(batch, isolation_level="read_committed",
                                                                control_records=False)) \
                    if view.transactions.filters(start, read_end, isolation_level="read_committed",
                                                 control_records=False) else batch
                if view.log_start_offset > start:  # below the log start offset (a follower took its
                    # leader's, DeleteRecords): gone for readers, so never in the table either
                    rows = rows.filter(pc.greater_equal(rows["offset"], view.log_start_offset))
                lake = self.lake_rows(rows)  # TypedColumnsNotReadyError: nothing committed or moved yet
                try:
                    commit_append(self.table, lake, compression_type=self.config.compression_type,
                                  lake_end_offset=read_end, log_start_offset=view.log_start_offset,
                                  leader_epoch=epoch)
                    end, files = read_end, file_snapshot(self.table, self.uri, self._fs, self._root,
                                                         storage_options=self.storage_options)
                    self.lease.epoch_recorded = epoch
                    self.lease.epochs_checked_version = self.table.version() if epoch is not None else None
                except Exception as e:  # ambiguous: the table says where it ends
                    log.warning("flushing %s offsets %d.. to Delta failed: %s", self.name, start, e)
                    failure = e
                    if epoch is not None:
                        self._fence_if_deposed(since_version=since_version, leader_epoch=epoch)
                    files, end = lake_state(self.table, self.uri, self._fs, self._root,
                                            storage_options=self.storage_options)
                    if self.lease.shared:  # the table may be past this replica's log (its successor's)
                        end = max(start, min(end, view.log_end_offset))
            else:
                files = self.state.files
            # 3. lake end offset and file index; release the segments below it, delete them once published
            #    (outside the append lock: only lake_lock holders touch released segments)
            with self.lock:
                self.segments.release_below(end)
                self.state.flushed(end, files, self.segments.view)
            self.segments.delete_released()
            if failure is not None:
                raise CommitFailedError(f"Flushing {self.name} to Delta failed: {failure}") from failure
            return end - start

    def _fence_if_deposed(self, *, since_version: int, leader_epoch: int) -> None:
        """A commit to a shared table failed: when a commit after ``since_version`` records a newer leader
        epoch, another replica leads the table, and this one commits no more (it keeps its tail and
        follows the table as a follower does until its role changes)."""
        try:
            newer = newer_leader_epoch(self.table, since_version=since_version, leader_epoch=leader_epoch)
        except Exception as e:  # unreadable now: the next round tries again
            log.warning("%s: reading the table's leader epochs failed: %s", self.name, e)
            return
        if newer is not None:
            self.lease.fence(newer)
            log.warning("%s: fenced: the shared table holds commits of leader epoch %d, above this replica's "
                        "%d; it commits nothing more to the table", self.name, newer, leader_epoch)

    def drop_tail(self) -> None:
        """Commit the whole tail to Delta (high watermark or not) and append to Delta from now on: a topic
        that had a tail and now has ``lake.commit.interval.ms=0``."""
        while self.flush(max_bytes=self.config.lake_commit_bytes, beyond_high_watermark=True):
            pass
        with self.lake_lock, self.lock:
            if self.state.lake_end_offset < self.state.log_end_offset:  # an open transaction holds the rest
                log.warning("%s keeps its segment tail from offset %d: a transaction there is still open",
                            self.name, self.state.lake_end_offset)
                return
            if self.segments is not None:
                self.segments.delete_all()
            self.segments = None

    def update_config(self, config: TopicConfig, *, make_segments: Callable[[], SegmentLog | None]) -> None:
        """:meth:`PartitionLog.update_config <lakelog.log_tables.partition_log.PartitionLog.update_config>`."""
        # (a shared lake keeps the tail: followers never write the table, nor the leader above the HW)
        if config.lake_commit_interval_ms == 0 and self.segments is not None and not self.lease.shared:
            self.config = config
            self.drop_tail()  # every append is a Delta commit from now on
            return
        with self.lake_lock, self.lock:
            self.config = config
            if self.segments is not None:
                self.segments.configure(segment_bytes=file_merges.tail_segment_bytes(config),
                                        segment_ms=config.segment_ms, flush_messages=config.flush_messages,
                                        flush_ms=config.flush_ms)
            elif config.lake_commit_interval_ms > 0 and not self.closed:
                segments = make_segments()
                if segments is not None:  # a local table: a tail from the log end offset on
                    segments.recover(self.state.log_end_offset)
                    self.segments = segments
                    with self.state.lock:
                        self.state.segments = segments.view

    def sync_if_due(self) -> None:
        """fsync the segment tail if ``flush.ms`` says so."""
        if self.segments is not None:
            with self.lock:
                if not self.closed:
                    self.segments.sync_if_due()

    def truncate_to(self, offset: int) -> bool:
        """:meth:`PartitionLog.truncate_to <lakelog.log_tables.partition_log.PartitionLog.truncate_to>`."""
        with self.lake_lock, self.lock:
            self.check_open()
            # 1. nothing above the point
            old_leo, lso = self.state.log_end_offset, self.state.log_start_offset
            if offset >= old_leo:
                return False
            if offset < lso:
                raise ValueError(f"cannot truncate {self.name} to {offset}, below the log start offset {lso}")
            # 2. the segment tail is cut; the Delta table only below its end (an unclean election): the
            # tail goes first (all of it is above the point), then one commit, replaceWhere offset >= X with
            # no rows. The other way round, a crash between the two let a restart read the tail's frames
            # above the point back (recovery takes frames from the recorded lake end offset on)
            if self.segments is not None and offset >= self.state.lake_end_offset:
                self.segments.truncate_to(offset)
            elif self.lease.shared:  # the table holds only records below the HW, written by the leader
                raise CommitFailedError(
                    f"Cannot truncate {self.name} to {offset}: below the lake end offset "
                    f"{self.state.lake_end_offset} of its table in the shared lake (only an unclean election "
                    "truncates below it, which a shared lake does not support)")
            else:
                if self.segments is not None:
                    self.segments.delete_all()
                self.commit(f"Truncating {self.name} to {offset}", lambda: commit_truncation(self.table, offset))
            # 3. in-memory state from the table and the tail
            self.recover()
            self.state.truncated(offset)
            log.info("truncated %s from log end offset %d to %d", self.name, old_leo, offset)
            return True

    def merge_head(self, *, keep_newest: int, max_file_bytes: int, max_run_bytes: int) -> int:
        """:meth:`LogLifecycle.merge_head <lakelog.log_tables.lifecycle.LogLifecycle.merge_head>`."""
        with self.lake_lock:
            if self.closed or not self.lake_commits_allowed():
                return 0
            try:
                merged = file_merges.merge_oldest_run(
                    self.table, self.load_index(), name=self.name, keep_newest=keep_newest,
                    max_file_bytes=max_file_bytes, max_run_bytes=max_run_bytes,
                    compression_type=self.config.compression_type, lake_end_offset=self.state.lake_end_offset)
            except Exception:  # logged; an optimisation, the next call tries again
                with self.lock:
                    self._recover_after_failed_commit()
                return 0
            if merged:
                self.load_index()
            return merged

    def _append_locks(self) -> contextlib.AbstractContextManager:
        """``lock`` for an append to the tail; ``lake_lock`` then ``lock`` for a Delta commit."""
        if self.segments is not None:
            return self.lock
        stack = contextlib.ExitStack()
        stack.enter_context(self.lake_lock)
        stack.enter_context(self.lock)
        return stack

    def lake_commits_allowed(self) -> bool:
        """False while an outside committer holds the lease (:mod:`~lakelog.log_tables.committer_leases`);
        the first call after one re-reads the table it changed. The caller holds ``lake_lock``."""
        if self.lease.held():
            return False
        if self.lease.taken_since_last_look():
            self._reread_table()
        return True

    def _before_delta_append(self) -> None:
        """An append without a tail never waits for a lease: under one it is planned on the newest version
        (delta-rs refuses an append planned before a rewrite), after one on the re-read table."""
        if self.lease.held():
            self.table.update_incremental()
        elif self.lease.taken_since_last_look():
            self._reread_table()

    def _reread_table(self) -> None:  # the cleaned offset and the tail cache start over, as after a cleaning
        self.table.update_incremental()
        files = file_snapshot(self.table, self.uri, self._fs, self._root, storage_options=self.storage_options)
        with self.state.lock:
            self.state.cleaned_offset, self.state.files, self.state.commits_since_index = None, files, 0
            self.state.cache.clear()
        if self.lease.shared:
            self.catch_up_lake_end()
        log.info("%s: re-read the table after an outside committer's lease (v%d)", self.name, self.table.version())

    def catch_up_lake_end(self) -> int:
        """A table in a shared lake, written by whichever replica leads: read its lake end offset (the
        newest version's) and take it when it is past this replica's, releasing the segments below it.
        A new leader continues the table from there; a follower keeps only the tail the table lacks.
        Returns the lake end offset now. The caller holds ``lake_lock`` (or is the flusher of a follower).

        Raises:
            deltalake.exceptions.DeltaError, OSError: the table is unreadable.
        """
        files, end = lake_state(self.table, self.uri, self._fs, self._root,
                                storage_options=self.storage_options)
        if self.segments is None:
            return self.state.lake_end_offset
        with self.lock:
            end = min(end, self.state.log_end_offset)
            if end <= self.state.lake_end_offset:
                self.state.set_index(files)
                return self.state.lake_end_offset
            self.segments.release_below(end)
            self.state.flushed(end, files, self.segments.view)
        self.segments.delete_released()
        return end

    def check_open(self) -> None:
        """Raise :class:`LogClosedError` when the log was closed."""
        if self.closed:
            raise LogClosedError(f"The log of {self.name} is closed")

    def _append(self, what: str, base: int, batch: pa.Table, starts: list[tuple[int, int]]) -> int | None:
        """Write ``batch`` (one chunk) to the segment tail, or commit it to Delta without one; move the state."""
        if self.segments is None:
            self._before_delta_append()
            version = self.commit(f"{what} to {self.name}", lambda: commit_append(
                self.table, self.lake_rows(batch), compression_type=self.config.compression_type,
                lake_end_offset=base + batch.num_rows, log_start_offset=self.state.log_start_offset))
            self.state.appended(base, batch, starts, segments=None)
            return version
        try:  # a failed write is cut back by the segment log: the state has not moved
            frames = [self.segments.append(base, rb) for rb in batch.to_batches()]
        except OSError as e:
            log.warning("%s to the segment tail of %s failed: %s", what, self.name, e)
            raise CommitFailedError(f"{what} to {self.name} failed: {e}") from e
        for frame in frames:
            self.segments.published(frame)
        self.state.appended(base, batch, starts, segments=self.segments.view)
        return None

    def lake_rows(self, rows: pa.Table) -> pa.Table:
        """Tail rows as a Delta append takes them: without :data:`ATTRIBUTES`, with the typed columns of a
        schema'd topic (:func:`~lakelog.log_tables.typed_columns.with_typed_columns`)."""
        return with_typed_columns(rows.drop_columns([ATTRIBUTES]), topic=self.topic, config=self.config,
                                  decoder=self.record_decoder)

    def commit(self, what: str, write: Callable[[], T]) -> T:
        """Run one Delta commit, ``write()``, and return what it returns (the caller holds ``lake_lock``); on
        failure re-read the table (ambiguous outcome) and raise :class:`CommitFailedError` (retriable)
        saying ``what`` failed."""
        try:
            return write()
        except Exception as e:
            log.warning("%s failed: %s", what, e)
            self._recover_after_failed_commit()
            raise CommitFailedError(f"{what} failed: {e}") from e

    def _recover_after_failed_commit(self) -> None:
        try:
            self.recover()
        except Exception:  # the table itself is unreachable; keep the old state, fail next time too
            log.exception("re-reading %s after a failed commit failed", self.uri)


def check_holds_transactions(name: str, *, tiered: bool) -> None:
    """The rule for transactional records: only a log with a segment tail holds them (an open transaction
    is kept from read_committed readers there; without a tail every append is a Delta commit readers see).

    Raises:
        TransactionsNeedTailError: ``tiered`` is False (422 / 42224; nothing was written).
    """
    if not tiered:
        raise TransactionsNeedTailError(
            f"{name} has no segment tail (lake.commit.interval.ms=0, or a table on an object store): "
            "it cannot hold an open transaction back from readers. Nothing was written; produce "
            "transactions to a topic with lake.commit.interval.ms above 0.")


def _append_with_gaps(writer: LogWriter, batch: pa.Table, offsets, fetched: tuple[int, int] | None,
                      epochs: list[tuple[int, int]]) -> AppendInfo:
    """A follower's replicated batch with gaps (:meth:`LogWriter.append_replicated`; see the module docstring).

    Raises:
        NonContiguousOffsetsError: the log had an open transaction below the range's end; it was cut back
            to where that transaction began (the follower fetches from there again).
    """
    n = len(offsets)
    if writer.lease.shared and writer.lease.held():
        # a follower of a table in the shared lake: a range with gaps comes from the leader's table, which is
        # this replica's table too; it holds the range already. Take the log up to the table's end (the
        # segments below it go) and fetch from there.
        with writer.lake_lock, writer.lock:
            writer.check_open()
            writer.recover()
        raise NonContiguousOffsetsError(
            f"{writer.name}: a compacted range of the leader is in the shared table already; the log now "
            f"continues from the table's lake end offset {writer.state.log_end_offset}")
    # 0. a range with gaps comes from the leader's Delta table, where every transaction below is decided and
    #    its markers were dropped: a transaction open here would never see its marker. Fetch its
    #    records again from where it began (the leader's table holds them decided).
    first_open = writer.state.transactions.view().first_unstable_offset
    if first_open is not None and first_open < (fetched[1] if fetched else writer.state.log_end_offset):
        writer.truncate_to(max(first_open, writer.state.lake_end_offset))
        raise NonContiguousOffsetsError(
            f"{writer.name} had an open transaction from offset {first_open} below a compacted range of the "
            f"leader; truncated to {writer.state.log_end_offset} to fetch it decided.")
    # a range with gaps: 1. the tail to the table first, so that the table ends at the log end offset
    while writer.segments is not None and writer.flush(max_bytes=writer.config.lake_commit_bytes,
                                                       beyond_high_watermark=True):
        pass
    with writer.lake_lock, writer.lock:
        writer.check_open()
        base = writer.state.log_end_offset
        end = check_replicated(offsets, base, fetched, topic=writer.topic, partition=writer.partition)
        if writer.state.lake_end_offset != base:
            raise CommitFailedError(f"The segment tail of {writer.name} ({writer.state.lake_end_offset}..{base - 1}) "
                                    "must be in the Delta table before a replicated range with gaps; retry.")
        # 2. the records up to the dense last run, gaps included, as one Delta commit
        split = n if writer.segments is None else dense_tail_start(offsets, end)
        head, head_end = batch.slice(0, split), end if split == n else int(offsets[split])
        version = writer.commit(f"Writing {split} replicated records (offsets {base}..{head_end - 1}) to {writer.name}",
                                lambda: commit_append(writer.table, writer.lake_rows(head),
                                                      compression_type=writer.config.compression_type,
                                                      lake_end_offset=head_end,
                                                      log_start_offset=writer.state.log_start_offset))
        writer.state.appended(base, head, [s for s in epochs if s[1] < head_end], segments=None, end_offset=head_end)
        # 3. the dense last run to the segment tail
        if split < n:
            writer._append(f"Writing {n - split} replicated records", head_end, batch.slice(split),
                           [s for s in epochs if s[1] >= head_end])
        return AppendInfo(base, end - 1, n, int(writer.clock.time() * 1000), version)


def _read_tail(state: LogState, start: int, upper: int, max_bytes: int) -> pa.Table:
    """The records ``start <= offset < upper`` (at most about ``max_bytes``, at least one) of the tail, as one
    chunk of the tail schema (delta-rs writes a table of several chunks with its rows out of offset order:
    the copy into one chunk keeps each data file's rows in offset order); they must start at ``start`` and be
    contiguous.

    The tail is dense: appends assign dense offsets, and a follower commits a replicated range with gaps
    (the leader compacted it) straight to the Delta table (:meth:`LogWriter.append_replicated`), so
    ``start + num_rows`` is the new lake end offset. A gap here would be a bug, not data: it is refused.

    The caller holds the lake lock, so no segment file is released or cut meanwhile.
    """
    pieces = read_range(state.view(), start, upper, max_bytes=max_bytes, columns=None, reload_index=lambda: state.files)
    pieces = [with_attributes(p) for p in pieces]  # a frame written before transactions has none
    batch = pa.concat_tables(pieces).combine_chunks() if len(pieces) > 1 else pieces[0]
    offsets = batch["offset"]
    if offsets[0].as_py() != start or offsets[-1].as_py() != start + batch.num_rows - 1:
        raise AssertionError(f"the tail read from {start} is not contiguous: {offsets[0]}..{offsets[-1]}")
    return batch
