"""The committer lease of a partition table in ZooKeeper: one outside committer at a time, honoured by brokers.

DESIGN.md ("Storage"): one committer at a time per table; a Spark job that commits (OPTIMIZE, compaction,
VACUUM) takes the partition's lease, which the broker's flusher honours. The lease is an *ephemeral*
znode ``/lakelog/leases/{topic}-{partition}`` (ZooKeeper's lock pattern without a queue): it exists while
the holder's ZooKeeper session lives, so a job that crashes or hangs up releases it when its session
expires (``zookeeper.session.timeout.ms``), with no clocks involved (kazoo's ``NonBlockingLease`` recipe
ends a lease by the holder's wall clock and has no release, so a finished job would block the broker's
flushes until the lease's time ran out). Its data is JSON ``{"holder": str, "host": str, "pid": int,
"acquired_ms": int}``.

- :class:`CommitterLease`: the job's side. ``with CommitterLease(zk, topic=..., partition=..., holder=...)``
  waits (an exists-watch, no polling) until no other job holds the lease, creates it, and deletes it on
  exit.
- :class:`LeaseWatch`: the broker's side. One kazoo ``ChildrenWatch`` on ``/lakelog/leases`` keeps
  :class:`~lakelog.log_tables.committer_leases.LeasedTables` current; every replica of a leased partition
  (leader and followers: the job names the leader's table, a follower's flusher pausing for as long costs
  nothing) stops making commits of its own but appends, and re-reads its table afterwards.

A broker's commit in flight when a job takes the lease finishes; Delta's optimistic concurrency orders the
two (a commit that conflicts fails and is retried after a re-read: the jobs retry, the broker's failed
commit is ambiguous and re-reads the table).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from lakelog.log_tables.committer_leases import LeasedTables
from lakelog.replication.errors import CommitterLeaseHeldError
from lakelog.replication.metadata import ROOT

log = logging.getLogger(__name__)

__all__ = ["LEASES_PATH", "CommitterLease", "LeaseWatch", "lease_path", "leased_partition"]

#: Parent of every committer lease.
LEASES_PATH = f"{ROOT}/leases"


def lease_path(topic: str, partition: int) -> str:
    """``/lakelog/leases/{topic}-{partition}``."""
    return f"{LEASES_PATH}/{topic}-{partition}"


def leased_partition(name: str) -> tuple[str, int] | None:
    """``"orders-3"`` -> ``("orders", 3)`` (topic names may hold ``-``: the partition is after the last one);
    None for a name that is not ``{topic}-{partition}``."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class CommitterLease:
    """The committer lease of one partition table, for an outside committer (a maintenance job).

    Args:
        zk: a started kazoo client (the lease lives as long as its session).
        topic, partition: the partition.
        holder: who holds it (shown to whoever waits), e.g. ``"lakelog job optimize"``.

    Use as a context manager (:meth:`acquire` with ``wait_s`` = :attr:`wait_s`, then :meth:`release`).
    """

    def __init__(self, zk: KazooClient, *, topic: str, partition: int, holder: str, wait_s: float = 300.0) -> None:
        self.zk, self.topic, self.partition, self.holder, self.wait_s = zk, topic, partition, holder, wait_s
        self.path = lease_path(topic, partition)
        self.held = False

    def acquire(self, *, wait_s: float) -> None:
        """Take the lease, waiting up to ``wait_s`` seconds while another committer holds it.

        Raises:
            CommitterLeaseHeldError: still held by another after ``wait_s`` (409 / 40914, retriable).
        """
        data = json.dumps({"holder": self.holder, "host": socket.gethostname(), "pid": os.getpid(),
                           "acquired_ms": int(time.time() * 1000)}).encode()
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.zk.create(self.path, data, ephemeral=True, makepath=True)
                self.held = True
                log.info("took the committer lease of %s-%d", self.topic, self.partition)
                return
            except NodeExistsError:
                pass
            gone = threading.Event()
            try:
                other, _ = self.zk.get(self.path, watch=lambda event: gone.set())
            except NoNodeError:
                continue  # released meanwhile: try again at once
            left = deadline - time.monotonic()
            if left <= 0 or not gone.wait(left):
                raise CommitterLeaseHeldError(
                    f"The committer lease of {self.topic}-{self.partition} ({self.path}) is held by "
                    f"{other.decode(errors='replace')}; waited {wait_s:.0f} s. Run the job again once it is done.")

    def release(self) -> None:
        """Give the lease up (delete the znode if this session owns it). Never raises."""
        if not self.held:
            return
        self.held = False
        try:
            _, stat = self.zk.get(self.path)
            if stat.ephemeralOwner == self.zk.client_id[0]:
                self.zk.delete(self.path, version=stat.version)
                log.info("released the committer lease of %s-%d", self.topic, self.partition)
        except Exception as e:  # noqa: BLE001 - the session's end releases it anyway
            log.warning("releasing the committer lease of %s-%d failed: %s", self.topic, self.partition, e)

    def __enter__(self) -> "CommitterLease":
        self.acquire(wait_s=self.wait_s)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class LeaseWatch:
    """Keeps ``leased`` equal to the leases in ZooKeeper (a kazoo ``ChildrenWatch`` on :data:`LEASES_PATH`).

    Args:
        zk: the broker's started kazoo client.
        leased: the set the broker's logs consult (:attr:`LogManager.leased_tables
            <lakelog.log_tables.log_manager.LogManager.leased_tables>`).

    :meth:`start` once the client is connected; the watch lives as long as the client (after a session
    loss kazoo sets it again on reconnect). :meth:`stop` stops applying changes.
    """

    def __init__(self, zk: KazooClient, leased: LeasedTables) -> None:
        self.zk, self.leased = zk, leased
        self._stopped = False

    def start(self) -> None:
        """Create :data:`LEASES_PATH` if missing and start watching it (blocking: a ZooKeeper round trip)."""
        self.zk.ensure_path(LEASES_PATH)
        self.zk.ChildrenWatch(LEASES_PATH, self._on_children)

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False  # kazoo drops the watch
        held = [p for p in map(leased_partition, children) if p is not None]
        if set(held) != self.leased.held:
            log.info("committer leases held by outside committers: %s",
                     ", ".join(f"{t}-{p}" for t, p in sorted(held)) or "none")
        self.leased.replace(held)
        return True

    def stop(self) -> None:
        """Stop applying changes (the broker is stopping)."""
        self._stopped = True
