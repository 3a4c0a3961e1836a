"""The one writer of a partition table: serialised Delta commits that keep the log's state in step.

Every commit (append, replicated append, truncation, compaction) runs under one lock: one writer per
table. A failed commit has an ambiguous outcome, so the writer re-reads the table
(:mod:`~lakelog.log_tables.recovery`) before it raises :class:`CommitFailedError`, and the next batch
starts from what the table really holds. After a commit the :class:`~lakelog.log_tables.log_state.LogState`
moves (log end offset, tail cache, leader epochs) in one step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables import compaction
from lakelog.log_tables.data_files import FileSnapshot
from lakelog.log_tables.errors import CommitFailedError, LogClosedError
from lakelog.log_tables.leader_epochs import epoch_starts
from lakelog.log_tables.log_state import LogState
from lakelog.log_tables.recovery import file_snapshot, recover
from lakelog.log_tables.records import check_continues, to_log_batch
from lakelog.log_tables.schema import LOG_SCHEMA
from lakelog.log_tables.table_writes import commit_append, commit_truncation

log = logging.getLogger(__name__)

__all__ = ["AppendInfo", "LogWriter"]


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
    """

    def __init__(self, table: DeltaTable, *, uri: str, fs: pafs.FileSystem, root: str, topic: str, partition: int,
                 config: TopicConfig, state: LogState) -> None:
        self.table, self.uri, self._fs, self._root = table, uri, fs, root
        self.topic, self.partition, self.config, self.state = topic, partition, config, state
        self.lock = threading.Lock()
        self.closed = False

    @property
    def name(self) -> str:
        """``topic-partition``."""
        return f"{self.topic}-{self.partition}"

    def recover(self) -> None:
        """Re-read the table (newest version) into the state; the fence epoch is kept."""
        self.state.reset(recover(self.table, self.uri, self._fs, self._root))

    def load_index(self) -> FileSnapshot:
        """Re-list the data files of the table's version in memory (after this writer's commits)."""
        files = file_snapshot(self.table, self.uri, self._fs, self._root)
        self.state.set_index(files)
        return files

    def close(self) -> None:
        """Refuse later writes (:class:`LogClosedError`); waits for a running commit."""
        with self.lock:
            self.closed = True

    def append(self, records: pa.Table, *, leader_epoch: int, now_ms: int | None) -> AppendInfo:
        """:meth:`PartitionLog.append <lakelog.log_tables.partition_log.PartitionLog.append>`."""
        n = records.num_rows
        if n == 0:
            raise ValueError("append needs at least one record")
        with self.lock:
            self._check_open()
            self.state.epochs.check(leader_epoch, topic=self.topic, partition=self.partition)
            now_ms = int(time.time() * 1000) if now_ms is None else now_ms
            base = self.state.log_end_offset
            batch = to_log_batch(records, base_offset=base, leader_epoch=leader_epoch, now_ms=now_ms,
                                 timestamp_type=self.config.message_timestamp_type).combine_chunks()
            # One group commit = one Delta transaction; the LEO after it is recorded in commitInfo.
            version = self._append_commit(f"Writing {n} records", base, batch, [(leader_epoch, base)])
            return AppendInfo(base, base + n - 1, n, now_ms, version)

    def append_replicated(self, batch: pa.Table) -> AppendInfo:
        """:meth:`PartitionLog.append_replicated <lakelog.log_tables.partition_log.PartitionLog.append_replicated>`."""
        n = batch.num_rows
        if n == 0:
            raise ValueError("append_replicated needs at least one record")
        batch = batch.select(LOG_SCHEMA.names).cast(LOG_SCHEMA).combine_chunks()
        offsets = batch["offset"].to_numpy()
        with self.lock:
            self._check_open()
            # 1. the batch must continue the log exactly
            base = self.state.log_end_offset
            check_continues(offsets, base, topic=self.topic, partition=self.partition)
            # 2. one Delta transaction, the new LEO recorded in commitInfo; 3. LEO, tail cache, epochs
            version = self._append_commit(f"Writing {n} replicated records", base, batch,
                                          epoch_starts(offsets, batch["leader_epoch"].to_numpy()))
            return AppendInfo(base, base + n - 1, n, int(time.time() * 1000), version)

    def truncate_to(self, offset: int) -> bool:
        """:meth:`PartitionLog.truncate_to <lakelog.log_tables.partition_log.PartitionLog.truncate_to>`."""
        with self.lock:
            self._check_open()
            # 1. nothing above the point
            old_leo, lso = self.state.log_end_offset, self.state.log_start_offset
            if offset >= old_leo:
                return False
            if offset < lso:
                raise ValueError(f"cannot truncate {self.name} to {offset}, below the log start offset {lso}")
            # 2. one commit: replaceWhere offset >= X with no rows
            self._commit(f"Truncating {self.name} to {offset}", lambda: commit_truncation(self.table, offset))
            # 3. in-memory state from the table
            self.recover()
            self.state.truncated(offset)
            log.info("truncated %s from log end offset %d to %d", self.name, old_leo, offset)
            return True

    def compact_head(self, *, keep_newest: int, max_file_bytes: int, max_run_bytes: int) -> int:
        """:meth:`PartitionLog.compact_head <lakelog.log_tables.partition_log.PartitionLog.compact_head>`."""
        with self.lock:
            if self.closed:
                return 0
            try:
                merged = compaction.compact_oldest_run(
                    self.table, self.load_index(), name=self.name, keep_newest=keep_newest,
                    max_file_bytes=max_file_bytes, max_run_bytes=max_run_bytes,
                    compression_type=self.config.compression_type, log_end_offset=self.state.log_end_offset)
            except Exception:  # logged; an optimisation, the next call tries again
                self._recover_after_failed_commit()
                return 0
            if merged:
                self.load_index()
            return merged

    def _check_open(self) -> None:
        if self.closed:
            raise LogClosedError(f"The log of {self.name} is closed")

    def _append_commit(self, what: str, base: int, batch: pa.Table, starts: list[tuple[int, int]]) -> int:
        version = self._commit(f"{what} to {self.name}", lambda: commit_append(
            self.table, batch, compression_type=self.config.compression_type, log_end_offset=base + batch.num_rows))
        self.state.appended(base, batch, starts)
        return version

    def _commit(self, what: str, write: Callable[[], int]) -> int:
        """Run one Delta commit; on failure re-read the table (ambiguous outcome) and raise CommitFailedError."""
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
