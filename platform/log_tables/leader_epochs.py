"""The leader epoch cache of a partition log (KIP-101) and the fence against deposed leaders.

Every record carries the leader epoch of the leader that appended it. The cache keeps, for each epoch
in the log, the first offset of that epoch: ``[(epoch, start offset)]``, ascending in both. A follower
asks its leader for the end offset of its own latest epoch (OffsetsForLeaderEpoch) and truncates to
it, so replicas agree on the log after a leader change without relying on the high watermark.

The fence epoch is the newest leader epoch the replica has seen (in its log or told by the
controller): appends stamped with an older epoch are refused (:class:`FencedLeaderEpochError`).
"""

from __future__ import annotations

import bisect

import numpy as np
import pyarrow.parquet as pq

from lakelog.log_tables.data_files import FileSnapshot
from lakelog.log_tables.errors import FencedLeaderEpochError

__all__ = ["LeaderEpochCache", "epoch_starts"]


def epoch_starts(offsets: np.ndarray, epochs: np.ndarray) -> list[tuple[int, int]]:
    """``[(epoch, first offset)]`` where the epoch changes along offset-ordered rows (vectorised).

    An epoch starts at its first record present: where the log cleaner removed the first records of an
    epoch (gaps), at the first one it kept, as :meth:`LeaderEpochCache.from_files` finds it in a cleaned
    table, so a follower that replicated the gaps and its leader agree.

    Args:
        offsets: int64 offsets, ascending (gaps allowed).
        epochs: the leader epoch of each row, same length.
    """
    if len(offsets) == 0:
        return []
    change = np.flatnonzero(np.diff(epochs) != 0) + 1
    idx = np.concatenate([[0], change])
    return [(int(e), int(o)) for e, o in zip(epochs[idx], offsets[idx])]


class LeaderEpochCache:
    """``[(epoch, first offset)]`` of a log plus its fence epoch. Not locked: the log locks around it.

    Args:
        entries: the starts, ascending in epoch and offset. Default: none (an empty log).
        fence_epoch: the newest epoch seen. Default: the newest in ``entries``, or -1.
    """

    def __init__(self, entries: list[tuple[int, int]] | None = None, fence_epoch: int = -1) -> None:
        self.entries: list[tuple[int, int]] = list(entries or [])
        self.fence_epoch = max(fence_epoch, self.entries[-1][0] if self.entries else -1)

    @classmethod
    def from_files(cls, snapshot: FileSnapshot, *, fence_epoch: int = -1) -> "LeaderEpochCache":
        """The cache of a table, from its files' ``min/max.leader_epoch`` statistics.

        Only files spanning several epochs are read (their ``offset`` and ``leader_epoch`` columns).
        Files without offset statistics are ignored.
        """
        entries: list[tuple[int, int]] = []
        for f in snapshot.files:
            if not f.has_offset_stats or f.min_leader_epoch is None:
                continue
            if f.min_leader_epoch == f.max_leader_epoch:
                starts = [(int(f.min_leader_epoch), int(f.min_offset))]
            else:
                t = pq.read_table(snapshot.path(f), filesystem=snapshot.fs,
                                  columns=["offset", "leader_epoch"]).sort_by("offset")
                starts = epoch_starts(t["offset"].to_numpy(), t["leader_epoch"].to_numpy())
            for epoch, start in starts:
                if not entries or epoch > entries[-1][0]:
                    entries.append((epoch, start))
        return cls(entries, fence_epoch)

    @property
    def latest(self) -> int:
        """The newest epoch of a record in the log, or -1 for an empty log."""
        return self.entries[-1][0] if self.entries else -1

    def check(self, leader_epoch: int, *, topic: str, partition: int) -> None:
        """Refuse an append stamped with ``leader_epoch``, older than the fence epoch.

        Raises:
            FencedLeaderEpochError: ``leader_epoch`` < the fence epoch.
        """
        if leader_epoch < self.fence_epoch:
            raise FencedLeaderEpochError(
                f"Append to {topic}-{partition} with leader epoch {leader_epoch} refused: the "
                f"replica has seen leader epoch {self.fence_epoch} (this broker is no longer the leader).")

    def fence(self, leader_epoch: int) -> None:
        """Raise the fence epoch to ``leader_epoch`` (never lowers it)."""
        self.fence_epoch = max(self.fence_epoch, leader_epoch)

    def assign(self, leader_epoch: int, start_offset: int) -> None:
        """Records of ``leader_epoch`` were appended from ``start_offset``: start that epoch if newer."""
        if not self.entries or leader_epoch > self.entries[-1][0]:
            self.entries.append((leader_epoch, start_offset))
            self.fence(leader_epoch)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: epochs wholly below it go, the one it falls in starts
        there (Kafka's ``LeaderEpochFileCache.truncateFromStart``)."""
        below = [e for e in self.entries if e[1] <= start_offset]
        if not below:
            return
        epoch = below[-1][0]
        self.entries = [(epoch, start_offset)] + [e for e in self.entries if e[1] > start_offset]

    def end_offset_for(self, leader_epoch: int, *, log_start_offset: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer: see :meth:`PartitionLog.end_offset_for_epoch`."""
        i = bisect.bisect_right([e for e, _ in self.entries], leader_epoch) - 1
        if i < 0:
            return -1, log_start_offset
        end = self.entries[i + 1][1] if i + 1 < len(self.entries) else log_end_offset
        return self.entries[i][0], end
