"""One replica of one partition: a segment tail in front of a Delta table (DESIGN.md, "Storage").

The log owns offset assignment (dense, from the log end offset), the append of each batch to the
segment tail (:mod:`~lakelog.log_tables.segments`; acknowledged once written), the flush of the tail
below the high watermark to the Delta table in large commits (:meth:`PartitionLog.flush_to_lake`,
driven by :mod:`~lakelog.log_tables.flusher`), reads by offset range and the in-memory tail cache.
With ``lake.commit.interval.ms=0`` (or a table on an object store) there is no tail: every append is
a synchronous Delta commit and the lake end offset is the log end offset. It is synchronous and thread-safe: appends
are serialised by a lock (one writer per table), reads take a consistent snapshot of the in-memory
state without waiting for a running commit. Batching of concurrent produce requests into one commit
lives in :mod:`lakelog.log_tables.group_commit`.

:class:`PartitionLog` composes the parts, each in its own module:

- :mod:`~lakelog.log_tables.log_writer`: the log's one writer (serialised appends and Delta commits,
  re-reading the table after a failed one; the flush);
- :mod:`~lakelog.log_tables.log_state`: offsets, high watermark, file index, tail cache
  (:mod:`~lakelog.log_tables.tail_cache`) and leader epoch cache (:mod:`~lakelog.log_tables.leader_epochs`,
  KIP-101), changed atomically;
- :mod:`~lakelog.log_tables.recovery`: that state from the table and the tail on open and after truncation;
- :mod:`~lakelog.log_tables.table_writes`: the Delta commits (append, truncate, merge rewrite);
- :mod:`~lakelog.log_tables.fetch`: reads, the tail cache first, then the data files through
  :mod:`~lakelog.log_tables.offset_scan` (the same code as Spark's
  :func:`~lakelog.log_tables.reader.read_offset_range`);
- :mod:`~lakelog.log_tables.file_merges`: which small files to merge, and the merge;
- :mod:`~lakelog.log_tables.lifecycle`: retention, log start offset moves, VACUUM (:attr:`PartitionLog.lifecycle`).

Replication (see :mod:`lakelog.replication`) adds three operations: :meth:`PartitionLog.append_replicated`
(a follower appends the leader's records with the leader's offsets), :meth:`PartitionLog.truncate_to`
(a replica drops its un-replicated tail, KIP-101) and :meth:`PartitionLog.end_offset_for_epoch`
(the leader answers a follower's OffsetsForLeaderEpoch). Appends stamped with a leader epoch older
than the newest one the log has seen are refused (:class:`FencedLeaderEpochError`).

A frame of the tail is checked by its CRC on recovery (a torn last one is dropped: it was never
acknowledged); a Delta commit is atomic, and Parquet files written by a commit that did not complete
are never referenced.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable

from lakelog.clock import SYSTEM_TIME, Time
from lakelog.config import TopicConfig
from lakelog.log_tables.committer_leases import LeasedTables
from lakelog.log_tables.file_merges import MERGED_ROW_GROUP_ROWS, MERGE_TARGET_BYTES, tail_segment_bytes
from lakelog.log_tables.data_files import FileSnapshot, filesystem
from lakelog.log_tables.errors import LakeUnavailableError
from lakelog.log_tables.fetch import log_offset_for_timestamp, read_log
from lakelog.log_tables.lifecycle import LogLifecycle
from lakelog.log_tables.log_state import LogState
from lakelog.log_tables.log_writer import AppendInfo, LogWriter
from lakelog.log_tables.segments import SEGMENT_DIR, SegmentLog, SegmentView
from lakelog.log_tables.table_writes import (LAKE_END_OFFSET_KEY, LOG_END_OFFSET_KEY, PARQUET_CODECS, open_log_table,
                                          storage_errors)
from lakelog.log_tables.log_transactions import LogTransactions
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.log_tables.typed_columns import RecordDecoder

log = logging.getLogger(__name__)

#: Appends to the segment tail up to this many Arrow bytes take tens of microseconds: less than the
#: hand-off to a worker thread (see :meth:`PartitionLog.append_is_quick`).
QUICK_APPEND_MAX_BYTES = 256 * 1024

__all__ = ["MERGED_ROW_GROUP_ROWS", "MERGE_TARGET_BYTES", "LAKE_END_OFFSET_KEY", "LOG_END_OFFSET_KEY",
           "PARQUET_CODECS", "AppendInfo", "PartitionLog"]


class PartitionLog:
    """The log of one partition replica, stored as the Delta table at ``table_uri``.

    Args:
        topic, partition: which partition.
        table_uri: local path or object-store URI of the table (``{log.dirs}/{topic}-{partition}``).
        config: the topic's configuration (``max.message.bytes``, ``message.timestamp.type``,
            ``compression.type``, ``segment.*``, ``flush.*``, ``lake.commit.interval.ms`` (0 = no tail) and
            ``lake.commit.bytes`` are honoured here).
        table: the open table.
        tail_cache_max_bytes: bytes of the newest records kept in memory. Default: 32 MiB.
        initial_high_watermark: the high watermark after opening (capped at the log end offset).
            Default: None = the log end offset (a single-replica log: everything in it is committed).
            A replicated partition passes 0 and lets the ISR move it; it starts at the lake end offset
            at least when the log has a tail (the flusher only commits records below the HW).
        clock: the broker time of appends and markers, ``segment.ms`` / ``flush.ms`` and the timers of
            retention and VACUUM (Kafka's ``Time``). Default: the system clock.

    Use :meth:`open`: it creates the table if needed and recovers the offsets (:mod:`~lakelog.log_tables.recovery`).
    """

    def __init__(self, *, topic: str, partition: int, table_uri: str, config: TopicConfig,
                 table: DeltaTable, tail_cache_max_bytes: int = 32 * 1024 * 1024,
                 initial_high_watermark: int | None = None, clock: Time = SYSTEM_TIME,
                 local_dir: str | Path | None = None, storage_options: dict[str, str] | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.table_uri = table_uri
        self.config = config
        #: the broker-local directory of this replica: its segment tail and producer snapshots (the table
        #: directory itself for a local table)
        self.local_dir = Path(local_dir) if local_dir is not None else (None if "://" in table_uri else Path(table_uri))
        #: True when the table is one for all the partition's replicas (``lake.uri``): only the leader commits
        self.shared_lake = local_dir is not None and "://" in table_uri
        self.table_id: str = table.metadata().id  #: the table's metaData.id: tells replicas' tables apart
        fs, root = (filesystem(table, storage_options) if "://" in table_uri else pafs.FileSystem.from_uri(table_uri))
        segments = _segment_log(self.local_dir, config, clock)
        tail_dir = (self.local_dir or Path(table_uri)) / SEGMENT_DIR
        self._state = state = LogState(FileSnapshot(table_uri, (), fs, root, storage_options), SegmentView(tail_dir),
                                       tail_cache_max_bytes)
        self._writer = writer = LogWriter(table, uri=table_uri, fs=fs, root=root, topic=topic, partition=partition,
                                          config=config, state=state, segments=segments, clock=clock,
                                          shared_lake=self.shared_lake, storage_options=storage_options)
        writer.recover()
        #: retention, log start offset moves, VACUUM (:class:`~lakelog.log_tables.lifecycle.LogLifecycle`)
        self.lifecycle = LogLifecycle(writer, state)
        self.lifecycle.clock = clock
        #: transaction markers, open and aborted transactions (:class:`~lakelog.log_tables.log_transactions.LogTransactions`)
        self.transactions = LogTransactions(self.append, state, clock=clock)
        if segments is not None and config.lake_commit_interval_ms == 0 and not self.shared_lake:
            writer.drop_tail()  # a shared lake keeps the tail: followers never write the table
        state.high_watermark = (state.log_end_offset if initial_high_watermark is None else
                                max(state.log_start_offset, min(initial_high_watermark, state.log_end_offset)))
        if writer.segments is not None:
            state.high_watermark = max(state.high_watermark, state.lake_end_offset)

    @classmethod
    def open(cls, *, topic: str, partition: int, table_uri: str | Path, config: TopicConfig,
             tail_cache_max_bytes: int = 32 * 1024 * 1024, initial_high_watermark: int | None = None,
             clock: Time = SYSTEM_TIME, local_dir: str | Path | None = None,
             storage_options: dict[str, str] | None = None) -> "PartitionLog":
        """Open the partition's table, creating it (empty, with :data:`LOG_SCHEMA`) if missing.

        ``local_dir`` and ``storage_options``: a table in a shared lake (``table_uri`` an object-store URI
        such as ``s3://bucket/prefix/orders-<id>/0``, opened with delta-rs ``storage_options``): the replica's
        segment tail lives in ``local_dir`` and only the leader commits to the table
        (:attr:`shared_lake`, :meth:`set_lake_leader`). Default: none (the tail beside a local table).

        Raises :class:`~lakelog.log_tables.errors.LogStorageError`: the table exists with another schema or is
        unreadable."""
        with storage_errors(topic=topic, partition=partition, table_uri=table_uri):
            uri, table = open_log_table(table_uri, topic=topic, partition=partition, storage_options=storage_options)
            return cls(topic=topic, partition=partition, table_uri=uri, config=config, table=table,
                       tail_cache_max_bytes=tail_cache_max_bytes, initial_high_watermark=initial_high_watermark,
                       clock=clock, local_dir=local_dir, storage_options=storage_options)

    @property
    def record_decoder(self) -> RecordDecoder | None:
        """What decodes this log's records into typed columns at flush (:mod:`~lakelog.log_tables.typed_columns`;
        used when the topic names a subject). None = none."""
        return self._writer.record_decoder

    @record_decoder.setter
    def record_decoder(self, decoder: RecordDecoder | None) -> None:
        self._writer.record_decoder = decoder

    # -- offsets --------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still in the log."""
        return self._state.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets (LEO)."""
        return self._state.log_end_offset

    @property
    def lake_end_offset(self) -> int:
        """First offset not in the Delta table yet: the table holds ``[log_start_offset, lake_end_offset)``,
        the segment tail the rest. Below the high watermark (or equal), except without a tail."""
        return self._state.lake_end_offset

    @property
    def tiered(self) -> bool:
        """True when appends go to the segment tail (and a flusher commits them to Delta)."""
        return self._writer.segments is not None

    def append_is_quick(self, nbytes: int) -> bool:
        """True when an append of ``nbytes`` Arrow bytes is a small write to the segment tail without fsync
        (at most :data:`QUICK_APPEND_MAX_BYTES`): callers in an event loop make it there, not in a thread."""
        return self.tiered and not self.fsyncs and nbytes <= QUICK_APPEND_MAX_BYTES

    @property
    def unflushed_bytes(self) -> int:
        """Bytes of the segment tail at or above the lake end offset (Arrow IPC payloads)."""
        return self._state.segments.nbytes

    @property
    def high_watermark(self) -> int:
        """First offset not yet replicated to the ISR: consumers see offsets below it."""
        return self._state.high_watermark

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the high watermark up to ``offset`` (capped at the log end offset; never backwards); True if
        it moved. Called once the ISR has the records (at once when the ISR is this replica alone);
        listeners run after the move."""
        return self._state.advance_high_watermark(offset)

    def add_high_watermark_listener(self, listener: Callable[["PartitionLog"], None]) -> None:
        """Call ``listener(log)`` after every high watermark move (from the appending thread)."""
        self._state.add_high_watermark_listener(lambda: listener(self))

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of an open transaction, at most the HW (read_committed reads end there)."""
        return self._state.view().last_stable_offset

    @property
    def version(self) -> int:
        """Current Delta table version."""
        return self._writer.table.version()

    def table_files(self) -> int:
        """Data files in the table's current version. Blocking: call from a worker thread."""
        return len(self._writer.table.file_uris())

    # -- leader epochs (KIP-101) ----------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch of a record in the log, or -1 for an empty log."""
        with self._state.lock:
            return self._state.epochs.latest

    def fence(self, leader_epoch: int) -> None:
        """Refuse, from now on, appends stamped with an epoch older than ``leader_epoch`` (called when the
        replica learns of a new leader epoch, so a commit queued under an older one can not land)."""
        with self._state.lock:
            self._state.epochs.fence(leader_epoch)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer for ``leader_epoch`` (KIP-101, KIP-279).

        Returns:
            ``(epoch, end_offset)``: ``epoch`` is the largest epoch in the log at or below
            ``leader_epoch``; ``end_offset`` is the first offset of the next larger epoch in the log,
            or the log end offset when there is none. ``(-1, log start offset)`` when the log has no
            epoch at or below ``leader_epoch`` (an empty log: a follower truncates everything).
        """
        return self._state.end_offset_for_epoch(leader_epoch)

    # -- writes (:class:`~lakelog.log_tables.log_writer.LogWriter`) ------------------------------

    def append(self, records: pa.Table, *, leader_epoch: int = 0, now_ms: int | None = None,
               producer_columns: tuple[pa.Array, pa.Array, pa.Array] | None = None,
               attributes: pa.Array | None = None) -> AppendInfo:
        """Assign offsets to ``records`` and write them to the segment tail as one frame (without a tail:
        commit them as one Delta transaction). Returns once written (no fsync unless ``flush.messages``
        / ``flush.ms`` ask for it).

        Args:
            records: a produce batch (see :func:`~lakelog.log_tables.records.normalize_produce_batch`):
                any of ``key``, ``value``, ``headers``, ``timestamp`` (ms; null = broker time).
                At least one row.
            leader_epoch: epoch of the leader appending (stored per record).
            now_ms: broker time to use (tests); default the wall clock. producer_columns: see
                :func:`~lakelog.log_tables.records.to_log_batch`. Default: nulls.
            attributes: int8, one a record: Kafka's batch attributes,
                :data:`~lakelog.log_tables.schema.TRANSACTIONAL_BIT` for a record of a transaction (its
                producer's open transaction begins at its first one). Default: zeros.

        Returns:
            :class:`AppendInfo` of the committed batch (with its rows).

        Raises:
            ValueError: no rows, or a column that is not a produce column.
            LogClosedError: the log was closed.
            FencedLeaderEpochError: ``leader_epoch`` is older than an epoch the replica has seen.
            TransactionsNeedTailError: transactional records for a log without a segment tail.
            CommitFailedError: the write or Delta commit failed; the log re-read its state, nothing is
                acknowledged (retriable).
        """
        return self._writer.append(records, leader_epoch=leader_epoch, now_ms=now_ms,
                                   producer_columns=producer_columns, attributes=attributes)

    def flush_to_lake(self, *, max_bytes: int | None = None) -> int:
        """Commit the segment tail from the lake end offset up to the high watermark and the last stable
        offset to the Delta table, without control records and the records of aborted transactions.

        One Delta append of at most about ``max_bytes`` Arrow bytes (at least one record) recording the
        new lake end offset; then the segments wholly below it are deleted and the active segment
        rolls. Steps in :mod:`~lakelog.log_tables.log_writer`. Appends go on
        while the commit runs. Call repeatedly until it returns 0 to flush everything.

        Args:
            max_bytes: Default: the topic's ``lake.commit.bytes``.

        Returns:
            Records committed (0: nothing below the high watermark to flush, or no tail).

        Raises:
            CommitFailedError: the Delta commit failed; the lake end offset was re-read from the table
                (retriable: the next flush starts from it).
        """
        return self._writer.flush(max_bytes=self.config.lake_commit_bytes if max_bytes is None else max_bytes)

    def update_config(self, config: TopicConfig) -> None:
        """Take a changed topic configuration (``lakelog topics alter``) without reopening the log: it
        applies from the next append or flush. ``lake.commit.interval.ms`` set to 0 commits the whole tail
        to Delta first; set above 0 on a log without a tail starts one. Blocking: call from a worker thread."""
        self.config = config
        clock = self._writer.clock
        self._writer.update_config(config, make_segments=lambda: _segment_log(self.local_dir, config, clock))

    @property
    def fsyncs(self) -> bool:
        """True when the topic's ``flush.messages`` / ``flush.ms`` ask for fsyncs of the segment tail."""
        return self.tiered and self._writer.segments.fsyncs

    def sync_if_due(self) -> None:
        """fsync the segment tail when ``flush.ms`` passed since the last fsync (Kafka's log flush)."""
        self._writer.sync_if_due()

    def append_replicated(self, batch: pa.Table) -> AppendInfo:
        """Append the leader's records as they are (offsets, timestamps, leader epochs kept): one frame
        of the segment tail (one Delta commit without a tail).

        A follower's path. Steps:

        1. check the batch continues the log: ``offset[0]`` is the log end offset, offsets are dense, or
           increase within the range the leader's answer declares (a compacted range: gaps kept);
        2. write it to the segment tail, or commit it to Delta (without a tail, and a range's gapped part);
        3. move the log end offset, the tail cache and the leader epoch cache.

        Args:
            batch: rows with the columns of :data:`LOG_SCHEMA` (as served by the leader's replica
                fetch), in offset order; none only when it declares a range (compacted away entirely).

        Returns:
            :class:`AppendInfo` of the committed batch (``log_append_time_ms``: the follower's clock).

        Raises:
            ValueError: no rows and no range.
            NonContiguousOffsetsError: the batch does not continue the log (the follower truncates
                and fetches again).
            LogClosedError, CommitFailedError: as :meth:`append`.
        """
        return self._writer.append_replicated(batch)

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or above ``offset``; the log end offset becomes ``offset`` (KIP-101).

        The segment tail is cut; below the lake end offset one Delta commit (replaceWhere ``offset >= X``
        with no rows) records the new end. The state is re-read and the HW drops to at most ``offset``.

        Args:
            offset: the new log end offset; not below the log start offset.

        Returns:
            True if records were removed (False when ``offset`` is at or above the log end offset).

        Raises:
            ValueError: ``offset`` is below the log start offset.
            LogClosedError, CommitFailedError: as :meth:`append`.
        """
        return self._writer.truncate_to(offset)

    # -- read -----------------------------------------------------------------------------------

    def read(self, start_offset: int, *, max_bytes: int = 1024 * 1024, end_offset: int | None = None,
             columns: list[str] | None = None, isolation_level: IsolationLevel = "read_uncommitted",
             control_records: bool = False) -> pa.Table:
        """Records with ``start_offset <= offset < end_offset``, in offset order, up to about ``max_bytes``.

        The tail cache serves what it holds; older records come from the data files whose offset
        statistics overlap the range (:func:`~lakelog.log_tables.fetch.read_log`).

        Args:
            start_offset: first offset wanted; must be within ``[log_start_offset, high_watermark]``
                (``[log_start_offset, log_end_offset]`` when ``end_offset`` is given).
            max_bytes: soft limit on the Arrow bytes returned; as in Kafka (KIP-74) at least one record
                is returned even if it is larger, so a fetch always makes progress. Default: 1 MiB.
            end_offset: exclusive upper bound, at most the log end offset (replica fetches).
                Default: the high watermark (consumers never see records that are not committed).
            columns: the columns to return; ``attributes`` too (:data:`~lakelog.log_tables.schema.TAIL_SCHEMA`,
                0 for a record read from the Delta table). Default: all of :data:`LOG_SCHEMA`.
            isolation_level: Kafka's ``isolation.level``: read_committed reads below the last stable offset
                only, without aborted records. Default: read_uncommitted.
            control_records: keep transaction markers (a replica fetch). Default: False (as Kafka's consumer).

        Returns:
            A table with the log schema (or the requested columns); empty when ``start_offset`` is the
            upper bound. It ends early where the table lost records under the log (see Raises). Where it
            ended, past dropped markers: :func:`~lakelog.log_tables.fetch.read_end_offset`.

        Raises:
            OffsetOutOfRangeError: ``start_offset`` is below the log start offset or above the bound,
                or the table no longer holds it (a file was removed under the log by another writer).
            KeyError: an unknown column.
            LakeUnavailableError: the records wanted are in the table in a shared lake, whose object store
                cannot be reached (the tail's records are read without it).
        """
        try:
            return read_log(self._state.view, start_offset, max_bytes=max_bytes, end_offset=end_offset,
                            columns=columns, reload_index=self._writer.load_index, topic=self.topic,
                            partition=self.partition, isolation_level=isolation_level,
                            control_records=control_records)
        except OSError as e:  # pyarrow's S3 errors (and delta-rs' object store errors as the reader meets them)
            if not self.shared_lake:
                raise
            first_line = (str(e).strip().splitlines() or [""])[0]
            raise LakeUnavailableError(
                f"Records of {self.topic}-{self.partition} from offset {start_offset} are in its table in the lake "
                f"({self.table_uri}), whose object store cannot be reached now: {first_line}. Retry; the "
                f"newest records (from offset {self.lake_end_offset}) are served meanwhile.") from e

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first committed offset whose timestamp is at or after ``timestamp_ms`` (Kafka's ListOffsets by
        time), or the high watermark when no committed record is that recent
        (:func:`~lakelog.log_tables.fetch.log_offset_for_timestamp`)."""
        return log_offset_for_timestamp(self._state.view(), self.table_uri, self.read, timestamp_ms)

    # -- lifecycle (also :attr:`lifecycle`: retention, merges of small files, VACUUM) -----------

    def honour_leases(self, leases: LeasedTables) -> None:
        """Make no Delta commit of this replica's own but appends while an outside committer holds the
        table's lease in ``leases`` (:mod:`~lakelog.log_tables.committer_leases`); re-read the table after."""
        self._writer.lease.leases = leases

    def set_lake_leader(self, leading: bool, *, leader_epoch: int | None = None) -> None:
        """A table in a shared lake: this replica leads the partition (``True``: it commits the tail to the
        table from the table's lake end offset on, and runs retention, merges and VACUUM) or follows it
        (``False``: it keeps its tail and commits nothing). No effect on a table of its own.

        ``leader_epoch``: the partition's leader epoch this replica leads in. Its appends to the table
        record it, the first at its next flusher round (an empty commit when it has no records to commit),
        and are made only at the version after the one it read: once a newer leader recorded a higher
        epoch, this replica's commits are refused and it commits nothing more
        (:func:`~lakelog.log_tables.table_writes.newer_leader_epoch`). None: appends without a fence (a
        log opened alone, as in tests)."""
        self._writer.lease.lead(leading, leader_epoch=leader_epoch)

    lake_fenced_by = property(lambda self: self._writer.lease.fenced_by,
                              doc="The newer leader epoch that fenced this replica's commits to its shared table, or None.")

    def catch_up_lake_end(self) -> int:
        """A table in a shared lake: take the lake end offset the leader's commits reached and release the
        segments below it (a follower's tail then holds only what the table lacks); returns the lake end
        offset. Blocking (reads the table's log): call from a worker thread."""
        if not self.shared_lake:
            return self.lake_end_offset
        with self._writer.lake_lock:
            end = self._writer.catch_up_lake_end()
        # the table holds only records below the leader's high watermark: committed
        self._state.advance_high_watermark(end)
        return end

    lake_commits_held = property(lambda self: self._writer.lease.held(),
                                 doc="True while an outside committer holds the table's lease (the flusher waits).")

    def close(self) -> None:
        """Close the log: later appends raise :class:`LogClosedError`. Reads still work."""
        self._writer.close()

    def delete_shared_table(self) -> int:
        """A table in a shared lake whose topic was deleted: remove every object of it from the store (data
        files and Delta log); the number of objects removed. Every broker that held a replica calls it; a
        table already gone removes nothing. The log must be closed. Blocking (object store I/O).

        Raises:
            ValueError: the table is not in a shared lake (a replica's own table goes with its directory).
            OSError: the store refused a deletion (what is left stays; a later call removes it).
        """
        if not self.shared_lake:
            raise ValueError(f"{self.table_uri} is not in a shared lake")
        fs, root = self._writer._fs, self._writer._root
        found = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        files = [f.path for f in found if f.type == pafs.FileType.File]
        # the Delta log first: readers find no table at once, and a removal cut short (the store went away)
        # leaves data files no table names, not a table whose files are missing
        for path in sorted(files, key=lambda path: "/_delta_log/" not in path):
            with contextlib.suppress(FileNotFoundError):
                fs.delete_file(path)
        return len(files)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, hw={self.high_watermark})")


def _segment_log(local_dir: Path | None, config: TopicConfig, clock: Time = SYSTEM_TIME) -> SegmentLog | None:
    """The segment tail in the replica's local directory (an object-store table opened without one has no
    tail: every append is a Delta commit)."""
    if local_dir is None:
        return None
    return SegmentLog(Path(local_dir) / SEGMENT_DIR, segment_bytes=tail_segment_bytes(config),
                      segment_ms=config.segment_ms, flush_messages=config.flush_messages, flush_ms=config.flush_ms,
                      clock=clock)
