"""Which partition tables an outside committer holds the committer lease of (the broker's view).

A partition's Delta table has one committer at a time (DESIGN.md, "Storage"). The broker is the usual
one: its flusher appends the segment tail, merges small files, applies retention, cleans and vacuums.
A Spark maintenance job (``lakelog job optimize|vacuum|compact``, :mod:`lakelog.spark.maintenance`) that
commits to a table first takes the partition's *committer lease* in ZooKeeper
(``/lakelog/leases/{topic}-{partition}``, :mod:`lakelog.replication.committer_lease`). The broker
watches those leases and keeps the set here; while a partition is in it, the partition's log makes no
commit of its own except the appends of a log without a segment tail (produce never waits for a
job, and a blind append never conflicts with a rewrite in Delta's conflict checking): the flusher
leaves records in the segment tail (they stay acknowledged and readable), no small-file merge,
retention, cleaning or VACUUM runs. The first commit after the lease is gone re-reads the table, which
the job changed (:meth:`LogWriter.lake_commits_allowed
<lakelog.log_tables.log_writer.LogWriter.lake_commits_allowed>`).

This module holds no ZooKeeper code (``log_tables`` is below ``replication``): the watch calls
:meth:`LeasedTables.replace` with what ZooKeeper shows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

__all__ = ["LeasedTables", "PartitionLease"]


class LeasedTables:
    """The set of ``(topic, partition)`` whose table an outside committer holds the lease of. Thread-safe.

    :meth:`holds` is a set lookup (the flusher asks once per round, the writer before each commit of its
    own); :meth:`replace` is called from the ZooKeeper watch thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: frozenset[tuple[str, int]] = frozenset()
        self._taken: dict[tuple[str, int], int] = {}

    def holds(self, topic: str, partition: int) -> bool:
        """True while an outside committer holds the lease of ``topic``-``partition``'s table."""
        return (topic, partition) in self._held

    def times_taken(self, topic: str, partition: int) -> int:
        """How often a lease of the partition was seen taken since the broker started: a log that finds it
        changed since its last commit re-reads its table (even when it made no commit during the lease)."""
        return self._taken.get((topic, partition), 0)

    def replace(self, held: Iterable[tuple[str, int]]) -> None:
        """The leases held now (the whole set, as the watch sees it)."""
        new = frozenset(held)
        with self._lock:
            for key in new - self._held:
                self._taken[key] = self._taken.get(key, 0) + 1
            self._held = new

    @property
    def held(self) -> frozenset[tuple[str, int]]:
        """The leased partitions now."""
        return self._held


class PartitionLease:
    """One log's view of its partition's committer lease (the log's writer asks it before its own commits).

    A table in a shared lake (``lake.uri``: one table for all the partition's replicas) has one more
    outside committer: the partition's leader. A replica of such a table commits only while it leads
    (:attr:`leading`, set by the partition's role changes); while it follows, it is as if an outside
    committer held the lease, and the first commit after it becomes leader re-reads the table the
    previous leader wrote.

    Args:
        topic, partition: the log's partition.
        shared: the table is in a shared lake. Default: False (each replica's own table).
    """

    def __init__(self, topic: str, partition: int, *, shared: bool = False) -> None:
        self.topic, self.partition = topic, partition
        #: the broker's leases; None = no outside committer is ever honoured (a log opened alone)
        self.leases: LeasedTables | None = None
        self.shared = shared
        self._seen = 0
        self._leading = False
        self._terms = 0  # how often this replica became the table's committer (leader of a shared table)
        #: the leader epoch this replica leads a shared table in (its commits record it); None otherwise
        self.leader_epoch: int | None = None
        #: the epoch the table holds a commit of this replica's in (a new leader records its epoch at once)
        self.epoch_recorded: int | None = None
        #: the newer leader epoch found in the table after a refused commit (:meth:`fence`), or None
        self.fenced_by: int | None = None
        #: the table version up to which this leader saw no newer epoch (its last commit's); commits others
        #: made since are read for epochs before its next append. None: since it took the lead
        self.epochs_checked_version: int | None = None

    @property
    def leading(self) -> bool:
        """True while this replica leads the partition (meaningful for a shared table only)."""
        return self._leading

    @leading.setter
    def leading(self, value: bool) -> None:
        if value and not self._leading and self.shared:  # a table of its own changes under no one
            self._terms += 1
        self._leading = value

    def lead(self, leading: bool, *, leader_epoch: int | None) -> None:
        """This replica leads a shared table in ``leader_epoch`` (``leading``), or follows: a role change
        of the partition, which also lifts a :meth:`fence` of an older epoch."""
        if leading and self.fenced_by is not None:
            if leader_epoch is None or leader_epoch < self.fenced_by:
                return  # still deposed: a newer leader's commits are in the table
            self.fenced_by = None
        self.leading = leading
        self.leader_epoch = leader_epoch if leading else None
        self.epochs_checked_version = None

    def fence(self, newer_epoch: int) -> None:
        """The shared table holds a commit of ``newer_epoch``, above this replica's: another replica leads
        it, so this one commits nothing more (as a follower) until it leads in that epoch or a newer one."""
        self.fenced_by = newer_epoch
        self._leading = False

    def held(self) -> bool:
        """True while an outside committer holds the lease, or another replica leads a shared table."""
        if self.shared and not self._leading:
            return True
        return self.leases is not None and self.leases.holds(self.topic, self.partition)

    def taken_since_last_look(self) -> bool:
        """True once after each lease taken since the last call that answered True (and, for a shared table,
        once after each time this replica became leader): the table may have changed under the log, which
        re-reads it."""
        taken = 0 if self.leases is None else self.leases.times_taken(self.topic, self.partition)
        taken += self._terms
        if taken == self._seen:
            return False
        self._seen = taken
        return True
