"""Recovering a partition log's state from its Delta table (on open, after a clean stop or a crash alike).

- log end offset (LEO) = max(``max.offset`` file statistic over the table's files) + 1, or the
  ``lakelog.log_end_offset`` recorded in the newest commit that has one if that is larger (a log emptied
  by retention keeps its offsets);
- log start offset = min(``min.offset``), or the LEO of an empty log;
- the leader epoch cache (KIP-101): the first offset of each leader epoch in the log, from the
  ``leader_epoch`` min/max file statistics (only files that span several epochs are read).

A Delta commit is atomic: Parquet files written by a commit that did not complete are never referenced,
so nothing here has to repair the table.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs
from deltalake import DeltaTable

from lakelog.log_tables.data_files import FileSnapshot, data_files
from lakelog.log_tables.leader_epochs import LeaderEpochCache
from lakelog.log_tables.table_writes import recorded_log_end_offset

__all__ = ["RecoveredLog", "file_snapshot", "recover"]


@dataclass(frozen=True)
class RecoveredLog:
    """A log's state as its table holds it.

    Attributes:
        files: the data files of the table's current version.
        log_start_offset: first offset in the log (the LEO when it holds no record).
        log_end_offset: offset the next appended record gets.
        epochs: the leader epoch cache (fence epoch = the newest epoch in the log).
    """

    files: FileSnapshot
    log_start_offset: int
    log_end_offset: int
    epochs: LeaderEpochCache


def file_snapshot(table: DeltaTable, uri: str, fs: pafs.FileSystem, root: str) -> FileSnapshot:
    """The data files of ``table``'s version in memory (no refresh from storage), read through ``fs``."""
    return FileSnapshot(uri, tuple(data_files(table)), fs, root)


def recover(table: DeltaTable, uri: str, fs: pafs.FileSystem, root: str) -> RecoveredLog:
    """Move ``table`` to its newest version and derive the log's offsets and epochs from it.

    Args:
        table: the partition table (updated in place).
        uri: its URI (for messages).
        fs, root: the filesystem and table root its data files are read through.

    Raises:
        deltalake.exceptions.DeltaError, OSError: the table is unreadable.
    """
    table.update_incremental()
    files = file_snapshot(table, uri, fs, root)
    leo = max(files.end_offset or 0, recorded_log_end_offset(table))
    first = files.first_offset
    return RecoveredLog(files, leo if first is None else first, leo, LeaderEpochCache.from_files(files))
