"""Recovering a partition log's state from its Delta table and segment tail (on open, after a clean stop
or a crash alike, and after a truncation).

- lake end offset = max(``max.offset`` file statistic over the table's files) + 1, or the lake end
  offset recorded in the newest commit that has one if that is larger (a log emptied by retention keeps
  its offsets; a follower's replicated range whose last offsets the leader's cleaner removed ends where
  its commit says);
- log start offset = the newest one recorded in the table's commits (every flush records it, so a head
  the log cleaner emptied is not taken for retention), else min(``min.offset``), or the lake end offset
  of an empty table;
- the segment tail from the lake end offset on (:meth:`SegmentLog.recover
  <lakelog.log_tables.segments.SegmentLog.recover>`: torn last batch dropped); log end offset (LEO) =
  the end of its last frame, or the lake end offset;
- the leader epoch cache (KIP-101): the first offset of each leader epoch in the log, from the
  ``leader_epoch`` min/max file statistics (only files that span several epochs are read), then from the
  tail's batches.

A Delta commit is atomic: Parquet files written by a commit that did not complete are never referenced,
so nothing here has to repair the table.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs
from deltalake import DeltaTable

import pyarrow as pa

from lakelog.log_tables.data_files import FileSnapshot, data_files
from lakelog.log_tables.leader_epochs import LeaderEpochCache, epoch_starts
from lakelog.log_tables.segments import SegmentLog, SegmentView
from lakelog.log_tables.table_writes import recorded_lake_end_offset, recorded_log_start_offset

__all__ = ["RecoveredLog", "file_snapshot", "log_start_offset_of", "recover"]


@dataclass(frozen=True)
class RecoveredLog:
    """A log's state as its table holds it.

    Attributes:
        files: the data files of the table's current version.
        log_start_offset: first offset in the log (the LEO when it holds no record).
        lake_end_offset: first offset not in the Delta table.
        log_end_offset: offset the next appended record gets.
        epochs: the leader epoch cache (fence epoch = the newest epoch in the log).
        segments: the segment tail's frames (empty without a tail).
        tail_batches: ``(base offset, batch)`` of the tail, oldest first (for the tail cache).
    """

    files: FileSnapshot
    log_start_offset: int
    lake_end_offset: int
    log_end_offset: int
    epochs: LeaderEpochCache
    segments: SegmentView | None = None
    tail_batches: tuple[tuple[int, pa.RecordBatch], ...] = ()


def file_snapshot(table: DeltaTable, uri: str, fs: pafs.FileSystem, root: str, *,
                  storage_options: dict[str, str] | None = None) -> FileSnapshot:
    """The data files of ``table``'s version in memory (no refresh from storage), read through ``fs``
    (``storage_options``: of an object-store table, so readers can open newer snapshots of it)."""
    return FileSnapshot(uri, tuple(data_files(table)), fs, root, storage_options)


def log_start_offset_of(first_offset: int | None, recorded: int | None, lake_end_offset: int, *,
                        log_end_offset: int | None = None) -> int:
    """A table's log start offset: the one its commits record (:func:`recorded_log_start_offset
    <lakelog.log_tables.table_writes.recorded_log_start_offset>`; it may lie inside a file, or before the
    first file when the log cleaner emptied the head), else the first offset its files hold
    (``first_offset``), else ``lake_end_offset`` (a table without records).

    A recorded start counts up to ``log_end_offset`` (the log's end with its segment tail; default
    ``lake_end_offset``): a follower that took its leader's log start offset, or DeleteRecords, may move it
    past the records its table holds yet (the tail holds the rest)."""
    upper = lake_end_offset if log_end_offset is None else max(lake_end_offset, log_end_offset)
    if recorded is not None and 0 <= recorded <= upper:
        return recorded
    return lake_end_offset if first_offset is None else first_offset


def lake_state(table: DeltaTable, uri: str, fs: pafs.FileSystem, root: str, *,
               storage_options: dict[str, str] | None = None) -> tuple[FileSnapshot, int]:
    """Move ``table`` to its newest version: ``(its files, its lake end offset)``.

    Raises:
        deltalake.exceptions.DeltaError, OSError: the table is unreadable.
    """
    table.update_incremental()
    files = file_snapshot(table, uri, fs, root, storage_options=storage_options)
    return files, max(files.end_offset or 0, recorded_lake_end_offset(table))


def recover(table: DeltaTable, uri: str, fs: pafs.FileSystem, root: str,
            segments: SegmentLog | None = None, *, storage_options: dict[str, str] | None = None) -> RecoveredLog:
    """Move ``table`` to its newest version and derive the log's offsets and epochs from it and the tail.

    Args:
        table: the partition table (updated in place).
        uri: its URI (for messages).
        fs, root: the filesystem and table root its data files are read through.
        segments: the log's segment tail, re-read from the lake end offset on; None = no tail.
        storage_options: the delta-rs storage options of an object-store table. Default: none.

    Raises:
        deltalake.exceptions.DeltaError, OSError: the table or the segments are unreadable.
    """
    files, lake_end = lake_state(table, uri, fs, root, storage_options=storage_options)
    epochs = LeaderEpochCache.from_files(files)
    tail = None if segments is None else segments.recover(lake_end)
    log_end = lake_end if tail is None else tail.log_end_offset
    log_start = log_start_offset_of(files.first_offset, recorded_log_start_offset(table), lake_end,
                                    log_end_offset=log_end)
    if tail is None:
        return RecoveredLog(files, log_start, lake_end, lake_end, epochs)
    for base, batch in tail.batches:
        for epoch, start in epoch_starts(batch.column("offset").to_numpy(), batch.column("leader_epoch").to_numpy()):
            epochs.assign(epoch, start)  # epochs the table already has are kept as they are
    return RecoveredLog(files, log_start, lake_end, tail.log_end_offset, epochs,
                        tail.view, tuple(tail.batches))
