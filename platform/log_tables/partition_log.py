"""One replica of one partition: a Delta table appended by the broker with delta-rs.

The log owns offset assignment (dense, from the log end offset), the Delta commit of each appended
batch, reads by offset range and the in-memory tail cache. It is synchronous and thread-safe: appends
are serialised by a lock (one writer per table), reads take a consistent snapshot of the in-memory
state without waiting for a running commit. Batching of concurrent produce requests into one commit
lives in :mod:`lakelog.log_tables.group_commit`.

State recovered on open (after a clean stop or a crash alike):

- log end offset (LEO) = max(``max.offset`` file statistic over the table's files) + 1, or the
  ``lakelog.log_end_offset`` recorded in the newest commit if that is larger (a log emptied by
  retention keeps its offsets);
- log start offset = min(``min.offset``), or the LEO of an empty log;
- the leader epoch cache (KIP-101): the first offset of each leader epoch in the log, from the
  ``leader_epoch`` min/max file statistics (only files that span several epochs are read).

Replication (see :mod:`lakelog.replication`) adds three operations: :meth:`PartitionLog.append_replicated`
(a follower appends the leader's records with the leader's offsets), :meth:`PartitionLog.truncate_to`
(a replica drops its un-replicated tail, KIP-101) and :meth:`PartitionLog.end_offset_for_epoch`
(the leader answers a follower's OffsetsForLeaderEpoch). Appends stamped with a leader epoch older
than the newest one the log has seen are refused (:class:`FencedLeaderEpochError`).

A Delta commit is atomic: a batch is either wholly in the table (and then it is acknowledged) or
not at all. Parquet files written by a commit that did not complete are never referenced.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, WriterProperties, write_deltalake

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import (
    CommitFailedError,
    FencedLeaderEpochError,
    LogClosedError,
    NonContiguousOffsetsError,
    OffsetOutOfRangeError,
)
from lakelog.log_tables.records import normalize_produce_batch
from lakelog.log_tables.schema import LOG_SCHEMA, TIMESTAMP_TYPE

log = logging.getLogger(__name__)

#: Kafka ``compression.type`` -> Parquet codec. ``producer`` keeps Parquet's usual default, snappy.
#: Target size of a compacted file: files under half of it are merged (:meth:`PartitionLog.compact_head`).
COMPACTION_TARGET_BYTES = 64 * 1024 * 1024
#: Rows per Parquet row group in compacted files, so readers can skip row groups by offset statistics.
COMPACTION_ROW_GROUP_ROWS = 64 * 1024

PARQUET_CODECS = {
    "producer": "SNAPPY",
    "uncompressed": "UNCOMPRESSED",
    "gzip": "GZIP",
    "snappy": "SNAPPY",
    "lz4": "LZ4_RAW",
    "zstd": "ZSTD",
}

LOG_END_OFFSET_KEY = "lakelog.log_end_offset"


@dataclass(frozen=True)
class AppendInfo:
    """Where an appended batch landed.

    Attributes:
        base_offset: offset of the batch's first record.
        last_offset: offset of its last record (``base_offset + count - 1``).
        count: number of records.
        log_append_time_ms: broker time of the commit, ms since the epoch.
        version: the Delta table version that holds the batch.
    """

    base_offset: int
    last_offset: int
    count: int
    log_append_time_ms: int
    version: int


@dataclass(frozen=True)
class _Segment:
    """One data file of the table: offsets ``[base_offset, last_offset]``."""

    base_offset: int
    last_offset: int
    path: str
    size_bytes: int


class PartitionLog:
    """The log of one partition replica, stored as the Delta table at ``table_uri``.

    Args:
        topic: topic name.
        partition: partition number.
        table_uri: local path or object-store URI of the table (``{log.dirs}/{topic}-{partition}``).
        config: the topic's configuration (``max.message.bytes``, ``message.timestamp.type``,
            ``compression.type`` are honoured here).
        tail_cache_max_bytes: bytes of the newest records kept in memory. Default: 32 MiB.
        initial_high_watermark: the high watermark after opening (capped at the log end offset).
            Default: None = the log end offset (a single-replica log: everything in it is committed).
            A replicated partition passes its log start offset and lets the ISR move it.

    Use :meth:`open`, which creates the table when it does not exist yet and recovers the offsets.
    """

    def __init__(self, *, topic: str, partition: int, table_uri: str, config: TopicConfig,
                 table: DeltaTable, tail_cache_max_bytes: int = 32 * 1024 * 1024,
                 initial_high_watermark: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.table_uri = table_uri
        self.config = config
        self._table = table
        self._tail_cache_max_bytes = tail_cache_max_bytes
        self._write_lock = threading.Lock()  # one writer per table
        self._state_lock = threading.Lock()  # guards the in-memory state below
        self._closed = False
        self._segments: list[_Segment] = []
        self._commits_since_index = 0
        self._segment_bases: list[int] = []
        self._cache: list[pa.Table] = []  # contiguous newest chunks, oldest first
        self._cache_bases: list[int] = []
        self._cache_bytes = 0
        self._log_start_offset = 0
        self._log_end_offset = 0
        self.high_watermark = 0
        self._hw_listeners: list = []
        #: leader epoch cache: (epoch, first offset of that epoch), ascending in both (KIP-101)
        self._epochs: list[tuple[int, int]] = []
        self._fence_epoch = -1  # newest leader epoch seen (appends below it are refused)
        self._fs, self._root = pafs.FileSystem.from_uri(table_uri)
        self._recover()
        self.high_watermark = (self._log_end_offset if initial_high_watermark is None
                               else max(self._log_start_offset, min(initial_high_watermark, self._log_end_offset)))

    # -- opening and recovery -------------------------------------------------------------------

    @classmethod
    def open(cls, *, topic: str, partition: int, table_uri: str | Path, config: TopicConfig,
             tail_cache_max_bytes: int = 32 * 1024 * 1024,
             initial_high_watermark: int | None = None) -> "PartitionLog":
        """Open the partition's table, creating it (empty, with :data:`LOG_SCHEMA`) if missing.

        Raises:
            deltalake.exceptions.DeltaError: the table exists with an incompatible schema or is unreadable.
        """
        uri = str(table_uri)
        if "://" not in uri:
            uri = os.path.abspath(uri)
            os.makedirs(uri, exist_ok=True)
        if DeltaTable.is_deltatable(uri):
            table = DeltaTable(uri)
        else:
            table = DeltaTable.create(
                uri, LOG_SCHEMA, mode="ignore", name=f"{topic}-{partition}",
                description=f"lakelog partition log of {topic}-{partition}",
                # Both engines must read it: no deletion vectors, no column mapping; stats on offset.
                configuration={"delta.dataSkippingNumIndexedCols": "9"},
            )
        return cls(topic=topic, partition=partition, table_uri=uri, config=config, table=table,
                   tail_cache_max_bytes=tail_cache_max_bytes, initial_high_watermark=initial_high_watermark)

    def _recover(self) -> None:
        """Rebuild the segment index, log start and log end offsets from the table's metadata."""
        self._table.update_incremental()
        self._load_segments()
        leo = self._segments[-1].last_offset + 1 if self._segments else 0
        recorded = self._recorded_log_end_offset()
        self._log_end_offset = max(leo, recorded)
        self._log_start_offset = self._segments[0].base_offset if self._segments else self._log_end_offset
        self._cache.clear()
        self._cache_bases.clear()
        self._cache_bytes = 0
        self._epochs = self._load_epochs()
        if self._epochs:
            self._fence_epoch = max(self._fence_epoch, self._epochs[-1][0])

    def _load_epochs(self) -> list[tuple[int, int]]:
        """The leader epoch cache from the table: ``[(epoch, first offset)]`` in offset order.

        Uses the ``min/max.leader_epoch`` file statistics; only files spanning several epochs are read
        (their ``offset`` and ``leader_epoch`` columns).
        """
        actions = pa.table(self._table.get_add_actions(flatten=True))
        if actions.num_rows == 0 or "min.leader_epoch" not in actions.column_names:
            return []
        actions = actions.filter(pc.is_valid(actions["min.offset"])).sort_by("min.offset")
        epochs: list[tuple[int, int]] = []
        for lo, e_lo, e_hi, path in zip(actions["min.offset"].to_pylist(), actions["min.leader_epoch"].to_pylist(),
                                        actions["max.leader_epoch"].to_pylist(), actions["path"].to_pylist()):
            if e_lo == e_hi:
                starts = [(int(e_lo), int(lo))]
            else:
                t = pq.read_table(f"{self._root}/{unquote(path)}", filesystem=self._fs,
                                  columns=["offset", "leader_epoch"]).sort_by("offset")
                starts = _epoch_starts(t["offset"].to_numpy(), t["leader_epoch"].to_numpy())
            for epoch, start in starts:
                if not epochs or epoch > epochs[-1][0]:
                    epochs.append((epoch, start))
        return epochs

    def _recorded_log_end_offset(self) -> int:
        if self._table.version() <= 0:
            return 0
        # Usually the newest commit is an append and carries it; maintenance commits (VACUUM,
        # OPTIMIZE) do not, so look further back in growing windows.
        for limit in (1, 32, None):
            for commit in self._table.history(limit):
                value = commit.get(LOG_END_OFFSET_KEY)
                if value is not None:
                    return int(value)
        return 0

    def _load_segments(self) -> None:
        actions = pa.table(self._table.get_add_actions(flatten=True))
        if actions.num_rows == 0:
            segments = []
        else:
            actions = actions.filter(pc.is_valid(actions["min.offset"]))
            actions = actions.sort_by("min.offset")
            segments = [
                _Segment(int(lo), int(hi), unquote(p), int(sz))
                for lo, hi, p, sz in zip(
                    actions["min.offset"].to_pylist(), actions["max.offset"].to_pylist(),
                    actions["path"].to_pylist(), actions["size_bytes"].to_pylist())
            ]
        with self._state_lock:
            self._segments = segments
            self._segment_bases = [s.base_offset for s in segments]
            self._commits_since_index = 0

    # -- offsets --------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still in the log."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets (LEO)."""
        return self._log_end_offset

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the high watermark up to ``offset`` (capped at the log end offset; never backwards).

        Returns True if it moved. The replica manager calls this once the ISR has the records
        (right after the append when the ISR is this replica alone).
        """
        with self._state_lock:
            new = min(offset, self._log_end_offset)
            if new <= self.high_watermark:
                return False
            self.high_watermark = new
        for listener in list(self._hw_listeners):
            listener(self)
        return True

    def add_high_watermark_listener(self, listener) -> None:
        """Call ``listener(log)`` after every high watermark move (from the appending thread)."""
        self._hw_listeners.append(listener)

    @property
    def version(self) -> int:
        """Current Delta table version."""
        return self._table.version()

    # -- leader epochs (KIP-101) ----------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch of a record in the log, or -1 for an empty log."""
        with self._state_lock:
            return self._epochs[-1][0] if self._epochs else -1

    def fence(self, leader_epoch: int) -> None:
        """Refuse, from now on, appends stamped with an epoch older than ``leader_epoch``.

        Called when the replica learns of a new leader epoch (it became leader or follower), so a
        commit queued under an older epoch can not land afterwards.
        """
        with self._state_lock:
            self._fence_epoch = max(self._fence_epoch, leader_epoch)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer for ``leader_epoch`` (KIP-101, KIP-279).

        Returns:
            ``(epoch, end_offset)``: ``epoch`` is the largest epoch in the log at or below
            ``leader_epoch``; ``end_offset`` is the first offset of the next larger epoch in the log,
            or the log end offset when there is none. ``(-1, log start offset)`` when the log has no
            epoch at or below ``leader_epoch`` (an empty log: a follower truncates everything).
        """
        with self._state_lock:
            epochs, leo = list(self._epochs), self._log_end_offset
            lso = self._log_start_offset
        i = bisect.bisect_right([e for e, _ in epochs], leader_epoch) - 1
        if i < 0:
            return -1, lso
        end = epochs[i + 1][1] if i + 1 < len(epochs) else leo
        return epochs[i][0], end

    # -- append ---------------------------------------------------------------------------------

    def append(self, records: pa.Table, *, leader_epoch: int = 0, now_ms: int | None = None) -> AppendInfo:
        """Assign offsets to ``records`` and commit them as one Delta transaction.

        Args:
            records: a produce batch (see :func:`~lakelog.log_tables.records.normalize_produce_batch`):
                any of ``key``, ``value``, ``headers``, ``timestamp`` (ms; null = broker time).
                At least one row.
            leader_epoch: epoch of the leader appending (stored per record).
            now_ms: broker time to use (tests); default the wall clock.

        Returns:
            :class:`AppendInfo` of the committed batch.

        Raises:
            LogClosedError: the log was closed.
            CommitFailedError: the Delta commit failed; the log re-read its state, nothing is
                acknowledged (retriable).
        """
        n = records.num_rows
        if n == 0:
            raise ValueError("append needs at least one record")
        with self._write_lock:
            if self._closed:
                raise LogClosedError(f"The log of {self.topic}-{self.partition} is closed")
            if leader_epoch < self._fence_epoch:
                raise FencedLeaderEpochError(
                    f"Append to {self.topic}-{self.partition} with leader epoch {leader_epoch} refused: the "
                    f"replica has seen leader epoch {self._fence_epoch} (this broker is no longer the leader).")
            now_ms = int(time.time() * 1000) if now_ms is None else now_ms
            base = self._log_end_offset
            batch = self._to_log_batch(records, base_offset=base, leader_epoch=leader_epoch,
                                       now_ms=now_ms).combine_chunks()
            # One group commit = one Delta transaction; the LEO after it is recorded in commitInfo.
            try:
                write_deltalake(
                    self._table, batch, mode="append",
                    writer_properties=WriterProperties(compression=PARQUET_CODECS[self.config.compression_type]),
                    commit_properties=CommitProperties(custom_metadata={LOG_END_OFFSET_KEY: str(base + n)}),
                )
            except Exception as e:  # ambiguous outcome: re-read the log before anything else
                log.warning("commit of %d records to %s-%d failed: %s", n, self.topic, self.partition, e)
                self._recover_after_failed_commit()
                raise CommitFailedError(
                    f"Writing {n} records to {self.topic}-{self.partition} failed: {e}") from e
            version = self._table.version()
            with self._state_lock:
                self._log_end_offset = base + n
                self._add_to_cache(base, batch)
                self._commits_since_index += 1
                if not self._epochs or leader_epoch > self._epochs[-1][0]:
                    self._epochs.append((leader_epoch, base))
                self._fence_epoch = max(self._fence_epoch, leader_epoch)
            return AppendInfo(base, base + n - 1, n, now_ms, version)

    def append_replicated(self, batch: pa.Table) -> AppendInfo:
        """Append the leader's records as they are (offsets, timestamps, leader epochs kept): one Delta commit.

        A follower's path. Steps:

        1. check the batch continues the log: ``offset[0]`` is the log end offset, offsets are dense;
        2. commit it as one Delta transaction, recording the new log end offset in commitInfo;
        3. move the log end offset, the tail cache and the leader epoch cache.

        Args:
            batch: rows with the columns of :data:`LOG_SCHEMA` (as served by the leader's replica
                fetch), in offset order, at least one.

        Raises:
            NonContiguousOffsetsError: the batch does not continue the log (the follower truncates
                and fetches again).
            LogClosedError, CommitFailedError: as :meth:`append`.
        """
        n = batch.num_rows
        if n == 0:
            raise ValueError("append_replicated needs at least one record")
        batch = batch.select(LOG_SCHEMA.names).cast(LOG_SCHEMA).combine_chunks()
        offsets = batch["offset"].to_numpy()
        with self._write_lock:
            if self._closed:
                raise LogClosedError(f"The log of {self.topic}-{self.partition} is closed")
            # 1. the batch must continue the log exactly
            base = self._log_end_offset
            if int(offsets[0]) != base or int(offsets[-1]) != base + n - 1 or (
                    n > 1 and not (np.diff(offsets) == 1).all()):
                raise NonContiguousOffsetsError(
                    f"Replicated batch for {self.topic}-{self.partition} holds offsets {int(offsets[0])}.."
                    f"{int(offsets[-1])} ({n} records) but the log end offset is {base}.")
            # 2. one Delta transaction, the new LEO recorded in commitInfo
            try:
                write_deltalake(
                    self._table, batch, mode="append",
                    writer_properties=WriterProperties(compression=PARQUET_CODECS[self.config.compression_type]),
                    commit_properties=CommitProperties(custom_metadata={LOG_END_OFFSET_KEY: str(base + n)}),
                )
            except Exception as e:
                log.warning("replicated commit of %d records to %s-%d failed: %s", n, self.topic, self.partition, e)
                self._recover_after_failed_commit()
                raise CommitFailedError(
                    f"Writing {n} replicated records to {self.topic}-{self.partition} failed: {e}") from e
            version = self._table.version()
            # 3. LEO, tail cache, leader epoch cache
            starts = _epoch_starts(offsets, batch["leader_epoch"].to_numpy())
            with self._state_lock:
                self._log_end_offset = base + n
                self._add_to_cache(base, batch)
                self._commits_since_index += 1
                for epoch, start in starts:
                    if not self._epochs or epoch > self._epochs[-1][0]:
                        self._epochs.append((epoch, start))
                        self._fence_epoch = max(self._fence_epoch, epoch)
            return AppendInfo(base, base + n - 1, n, int(time.time() * 1000), version)

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or above ``offset``; the log end offset becomes ``offset`` (KIP-101).

        Steps:

        1. nothing to do when ``offset`` is at or above the log end offset;
        2. one Delta commit: an overwrite with ``predicate = offset >= X`` and no rows (Delta's
           replaceWhere; files holding offsets below X are rewritten with just those rows), the new
           log end offset recorded in commitInfo, so recovery after a crash gives the same LEO;
        3. re-read the segment index, tail cache and leader epoch cache; the high watermark drops to
           at most ``offset``.

        Args:
            offset: the new log end offset; not below the log start offset.

        Returns:
            True if records were removed.

        Raises:
            ValueError: ``offset`` is below the log start offset.
            LogClosedError, CommitFailedError: as :meth:`append`.
        """
        with self._write_lock:
            if self._closed:
                raise LogClosedError(f"The log of {self.topic}-{self.partition} is closed")
            # 1. nothing above the point
            if offset >= self._log_end_offset:
                return False
            if offset < self._log_start_offset:
                raise ValueError(f"cannot truncate {self.topic}-{self.partition} to {offset}, below the log "
                                 f"start offset {self._log_start_offset}")
            old_leo = self._log_end_offset
            # 2. one commit: replaceWhere offset >= X with no rows
            try:
                write_deltalake(
                    self._table, LOG_SCHEMA.empty_table(), mode="overwrite", predicate=f"offset >= {offset}",
                    commit_properties=CommitProperties(custom_metadata={
                        LOG_END_OFFSET_KEY: str(offset), "lakelog.operation": "truncate"}),
                )
            except Exception as e:
                log.warning("truncating %s-%d to %d failed: %s", self.topic, self.partition, offset, e)
                self._recover_after_failed_commit()
                raise CommitFailedError(f"Truncating {self.topic}-{self.partition} to {offset} failed: {e}") from e
            # 3. in-memory state from the table
            fence = self._fence_epoch
            self._recover()
            with self._state_lock:
                self._log_end_offset = offset
                self.high_watermark = min(self.high_watermark, offset)
                self._fence_epoch = max(fence, self._fence_epoch)
            log.info("truncated %s-%d from log end offset %d to %d", self.topic, self.partition, old_leo, offset)
            return True

    def _recover_after_failed_commit(self) -> None:
        try:
            self._recover()
        except Exception:  # the table itself is unreachable; keep the old state, fail next time too
            log.exception("re-reading %s after a failed commit failed", self.table_uri)

    def _to_log_batch(self, records: pa.Table, *, base_offset: int, leader_epoch: int, now_ms: int) -> pa.Table:
        """Add offsets, final timestamps (CreateTime or LogAppendTime), leader epoch: a log batch."""
        records = normalize_produce_batch(records)
        n = records.num_rows
        if self.config.message_timestamp_type == "CreateTime":
            ts = pc.fill_null(records["timestamp"], pa.scalar(now_ms, pa.int64()))
        else:
            ts = pa.array(np.full(n, now_ms, dtype=np.int64))
        return pa.Table.from_arrays([
            pa.array(np.arange(base_offset, base_offset + n, dtype=np.int64)),
            pc.multiply(ts, 1000).cast(TIMESTAMP_TYPE),
            records["key"],
            records["value"],
            records["headers"],
            pa.array(np.full(n, leader_epoch, dtype=np.int32)),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int16()),
            pa.nulls(n, pa.int32()),
        ], schema=LOG_SCHEMA)

    def _add_to_cache(self, base: int, batch: pa.Table) -> None:
        if self._tail_cache_max_bytes <= 0:
            return
        self._cache.append(batch)
        self._cache_bases.append(base)
        self._cache_bytes += batch.nbytes
        while len(self._cache) > 1 and self._cache_bytes > self._tail_cache_max_bytes:
            self._cache_bytes -= self._cache.pop(0).nbytes
            self._cache_bases.pop(0)

    # -- read -----------------------------------------------------------------------------------

    def read(self, start_offset: int, *, max_bytes: int = 1024 * 1024, end_offset: int | None = None,
             columns: list[str] | None = None) -> pa.Table:
        """Records with ``start_offset <= offset < end_offset``, in offset order, up to about ``max_bytes``.

        Args:
            start_offset: first offset wanted; must be within ``[log_start_offset, high_watermark]``
                (``[log_start_offset, log_end_offset]`` when ``end_offset`` is given).
            max_bytes: soft limit on the Arrow bytes returned; as in Kafka (KIP-74) at least one record
                is returned even if it is larger, so a fetch always makes progress. Default: 1 MiB.
            end_offset: exclusive upper bound, at most the log end offset (replica fetches).
                Default: the high watermark (consumers never see records that are not committed).
            columns: the columns to return. Default: all of :data:`LOG_SCHEMA`.

        Returns:
            A table with the log schema (or the requested columns); empty when ``start_offset`` is the
            upper bound.

        Raises:
            OffsetOutOfRangeError: ``start_offset`` is below the log start offset or above the bound.
        """
        with self._state_lock:
            hw = self.high_watermark
            bound = hw if end_offset is None else self._log_end_offset
            upper = bound if end_offset is None else min(end_offset, bound)
            lso = self._log_start_offset
            cache = list(self._cache)
            cache_bases = list(self._cache_bases)
            segments = self._segments
            segment_bases = self._segment_bases
        if start_offset < lso or start_offset > bound:
            raise OffsetOutOfRangeError(topic=self.topic, partition=self.partition, offset=start_offset,
                                        log_start_offset=lso, high_watermark=hw)
        schema = LOG_SCHEMA if columns is None else pa.schema([LOG_SCHEMA.field(c) for c in columns])
        if start_offset >= upper:
            return schema.empty_table()
        chunks: list[pa.Table] = []
        budget = max_bytes
        offset = start_offset
        if not cache_bases or offset < cache_bases[0]:
            disk_end = min(upper, cache_bases[0] if cache_bases else upper)
            for attempt in range(2):
                for chunk in self._read_segments(offset, disk_end, segments, segment_bases, budget, columns):
                    trimmed = chunk.nbytes > budget
                    if trimmed:
                        chunk = chunk.slice(0, max(1, int(chunk.num_rows * budget / chunk.nbytes)))
                    chunks.append(chunk)
                    budget = 0 if trimmed else budget - chunk.nbytes
                    offset = chunk["offset"][-1].as_py() + 1
                if offset >= disk_end or budget <= 0 or attempt:
                    break
                # The index is older than the table (commits since the last refresh): reload it once.
                self._load_segments()
                with self._state_lock:
                    segments, segment_bases = self._segments, self._segment_bases
        if budget > 0 and cache_bases and offset >= cache_bases[0]:
            i = bisect.bisect_right(cache_bases, offset) - 1
            while i < len(cache) and offset < upper and budget > 0 and offset >= cache_bases[i]:
                chunk, base = cache[i], cache_bases[i]
                lo, hi = offset - base, min(chunk.num_rows, upper - base)
                if hi > lo:
                    piece = chunk.slice(lo, hi - lo)
                    if budget < piece.nbytes:
                        rows = max(1, int(piece.num_rows * budget / max(piece.nbytes, 1)))
                        piece = piece.slice(0, rows)
                    chunks.append(piece)
                    budget -= piece.nbytes
                    offset = base + lo + piece.num_rows
                i += 1
        if not chunks:
            return schema.empty_table()
        if columns is not None:
            chunks = [c.select(columns) for c in chunks]
        return pa.concat_tables(chunks)

    def _read_segments(self, start: int, end: int, segments: list[_Segment], bases: list[int],
                       budget: int, columns: list[str] | None):
        """Yield tables of ``start <= offset < end`` from the data files that hold them, in order.

        Only the files whose ``[min.offset, max.offset]`` statistics overlap the range are opened.
        """
        read_cols = None if columns is None else list(dict.fromkeys(["offset", *columns]))
        i = max(0, bisect.bisect_right(bases, start) - 1)
        expected = start
        while i < len(segments) and expected < end and budget > 0:
            seg = segments[i]
            i += 1
            if seg.last_offset < expected:
                continue
            if seg.base_offset > expected:
                break  # a gap the index does not cover yet: the caller refreshes the index
            table = pq.read_table(f"{self._root}/{seg.path}", filesystem=self._fs, columns=read_cols)
            table = table.filter(pc.and_(pc.greater_equal(table["offset"], expected),
                                         pc.less(table["offset"], end)))
            # delta-rs may write a commit's rows in another order than given: restore offset order.
            offsets = table["offset"].to_numpy()
            if len(offsets) > 1 and (offsets[1:] < offsets[:-1]).any():
                table = table.take(pc.sort_indices(table["offset"]))
            if table.num_rows == 0:
                continue
            table = table.cast(pa.schema([LOG_SCHEMA.field(c) for c in table.column_names]))
            expected = table["offset"][-1].as_py() + 1
            budget -= table.nbytes
            yield table

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first committed offset whose timestamp is at or after ``timestamp_ms`` (Kafka's ListOffsets by time).

        Delegates to :func:`lakelog.log_tables.reader.offset_for_timestamp` (only files whose
        ``max.timestamp`` statistic can match are opened). Returns the high watermark when no committed
        record is that recent.
        """
        from lakelog.log_tables.reader import offset_for_timestamp

        hw = self.high_watermark
        found = offset_for_timestamp(self.table_uri, timestamp_ms, start=self._log_start_offset, end=hw)
        return hw if found is None else found

    # -- compaction -----------------------------------------------------------------------------

    def needs_compaction(self, *, max_files: int = 64, max_file_bytes: int = COMPACTION_TARGET_BYTES) -> bool:
        """True when the table holds more than ``max_files`` small data files (a cheap, in-memory check).

        Every delta-rs commit costs time proportional to the files in the table's snapshot
        (about 0.1 ms per file measured on 2 cores), so many small group commits slow later ones.
        Only files :meth:`compact_head` may merge count (smaller than half of ``max_file_bytes``, and
        the commits not indexed yet): a table of large files does not ask for compaction after
        every commit.
        """
        small = sum(1 for seg in self._segments if seg.size_bytes < max_file_bytes // 2)
        return small + self._commits_since_index > max_files

    def compact_head(self, *, keep_newest: int = 16, max_file_bytes: int = COMPACTION_TARGET_BYTES,
                     max_run_bytes: int = 256 * 1024 * 1024) -> int:
        """Rewrite the oldest run of small data files into one file, in offset order; one Delta commit.

        Size-tiered, so no byte is rewritten more than a few times: among the files older than the
        ``keep_newest`` newest, a run is a sequence of files with contiguous offsets, each smaller than
        half of ``max_file_bytes`` (the target size), ending once the run holds ``max_file_bytes``
        (or would exceed ``max_run_bytes``). A run's leading file is left out while it is larger than
        the rest of the run together (an earlier merge's output is only rewritten once the run at
        least doubles it). The oldest run with two or more files is merged.
        The rewrite is an ``overwrite`` with ``predicate = offset in [first, last]`` (Delta's
        replaceWhere), so readers of an older version keep their files; a later VACUUM removes them.
        The broker is the table's only writer, so this never races an append. The output is written
        in row groups of at most :data:`COMPACTION_ROW_GROUP_ROWS` rows.

        Returns:
            The number of files replaced (0 when there was nothing worth compacting).
        """
        with self._write_lock:
            if self._closed:
                return 0
            self._load_segments()
            segments = self._segments[:-keep_newest] if keep_newest else self._segments
            small = max_file_bytes // 2
            run: list[_Segment] = []
            size = 0
            chosen: list[_Segment] = []
            for seg in [*segments, None]:
                ends = (seg is None or seg.size_bytes >= small or size >= max_file_bytes
                        or size + seg.size_bytes > max_run_bytes
                        or (run and seg.base_offset != run[-1].last_offset + 1))
                if ends:
                    # leave out leading files larger than the rest of the run together
                    while len(run) >= 2 and run[0].size_bytes > size - run[0].size_bytes:
                        size -= run.pop(0).size_bytes
                    if len(run) >= 2:
                        chosen = run
                        break
                    run, size = [], 0
                    if seg is None or seg.size_bytes >= small:
                        continue
                run.append(seg)
                size += seg.size_bytes
            run = chosen
            if len(run) < 2:
                return 0
            lo, hi = run[0].base_offset, run[-1].last_offset
            table = pa.concat_tables(
                pq.read_table(f"{self._root}/{seg.path}", filesystem=self._fs).cast(LOG_SCHEMA) for seg in run)
            table = table.take(pc.sort_indices(table["offset"])).combine_chunks()
            try:
                write_deltalake(
                    self._table, table, mode="overwrite", predicate=f"offset >= {lo} AND offset <= {hi}",
                    target_file_size=max_run_bytes * 4,
                    writer_properties=WriterProperties(compression=PARQUET_CODECS[self.config.compression_type],
                                                       max_row_group_size=COMPACTION_ROW_GROUP_ROWS),
                    commit_properties=CommitProperties(custom_metadata={
                        LOG_END_OFFSET_KEY: str(self._log_end_offset), "lakelog.operation": "compact"}),
                )
            except Exception:
                log.exception("compacting %s-%d offsets %d..%d failed", self.topic, self.partition, lo, hi)
                self._recover_after_failed_commit()
                return 0
            self._load_segments()
            log.info("compacted %d files (offsets %d..%d, %d bytes) of %s-%d", len(run), lo, hi, size,
                     self.topic, self.partition)
            return len(run)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the log: later appends raise :class:`LogClosedError`. Reads still work."""
        with self._write_lock:
            self._closed = True

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
                f"end={self._log_end_offset}, hw={self.high_watermark})")


def _epoch_starts(offsets: np.ndarray, epochs: np.ndarray) -> list[tuple[int, int]]:
    """``[(epoch, first offset)]`` where the epoch changes along offset-ordered rows (vectorised)."""
    if len(offsets) == 0:
        return []
    change = np.flatnonzero(np.diff(epochs) != 0) + 1
    idx = np.concatenate([[0], change])
    return [(int(e), int(o)) for e, o in zip(epochs[idx], offsets[idx])]
