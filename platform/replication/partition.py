"""One partition replica on this broker: its role, high watermark, ISR decisions and acks waits.

Kafka's ``kafka.cluster.Partition`` and ``Replica`` state, with no ZooKeeper or HTTP inside: the replica
manager (:mod:`lakelog.replication.replica_manager`) applies ZooKeeper states and writes ISR changes;
everything here is decided from the partition's own fields and the clock passed in, so it is tested
directly (``tests/replication/test_partition.py``).

Rules (Kafka's replication design, KIP-101 for epochs):

- the high watermark is the smallest log end offset among the ISR (the leader's own included) and never
  moves back; a follower whose LEO is unknown (-1, not fetched from this leader yet) holds it back;
- a follower's LEO is the offset of its latest fetch; it is *caught up* when that offset reaches the
  leader's LEO, or reached the leader's LEO at its previous fetch;
- a follower not caught up for ``replica.lag.time.max.ms`` leaves the ISR; an out-of-sync follower whose
  fetch offset reaches the HW and this leader epoch's start offset rejoins it;
- ``acks=all`` is refused before writing when the ISR is smaller than ``min.insync.replicas``, and answered
  once the HW passed the batch while this broker still leads at the same epoch.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakelog.log_tables.errors import FencedLeaderEpochError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.producers.producer_state import ProducerStateManager
from lakelog.replication.acks import Acks
from lakelog.replication.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownPartitionError,
)
from lakelog.replication.metadata import PartitionState

if TYPE_CHECKING:
    from lakelog.log_tables.flusher import LakeFlusher
    from lakelog.log_tables.group_commit import GroupCommitter
    from lakelog.replication.follower import ReplicaFetcher


class ReplicaRole(str, enum.Enum):
    """What this broker is for a partition: ``leader``, ``follower`` or ``none`` (not yet told, or fenced
    after its ZooKeeper session ended)."""

    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"


def now_ms() -> float:
    """Monotonic clock in milliseconds (lag and ISR decisions)."""
    return time.monotonic() * 1000.0


@dataclass
class ReplicaProgress:
    """The leader's view of one follower (Kafka's ``Replica`` state on the leader).

    Attributes:
        log_end_offset: the follower's LEO = the offset of its last fetch; -1 until it fetched
            from this leader (an ISR member with an unknown LEO holds the high watermark back).
        last_caught_up_ms: last time (monotonic ms) the follower had everything the leader had.
        last_fetch_ms: time of its previous fetch; last_fetch_leader_leo: the leader's LEO then.
        log_start_offset: the follower's log start offset as its last fetch said; -1 until it said
            (Kafka's ``ReplicaState.logStartOffset``: DeleteRecords waits for it, :meth:`Partition.low_watermark`).
    """

    log_end_offset: int = -1
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_leo: int = 0
    log_start_offset: int = -1


@dataclass
class Partition:
    """A partition replica this broker holds: its log, committer, role, followers' progress, waits.

    Attributes:
        topic, partition, topic_id: which partition (the topic id tells re-created topics apart).
        broker_id: this broker's id.
        log: the local replica's log; committer: its group committer (appends on the leader);
            flusher: commits its segment tail to its Delta table (leader and followers).
        leader_epoch: the epoch of the role this broker took up last.
        replicas: the assigned replicas, preferred leader first.
        role: :class:`ReplicaRole`.
        state: the last partition state applied from ZooKeeper (leader, epoch, ISR, znode version).
        progress: follower id -> :class:`ReplicaProgress` (leader only).
        fetcher: the replica fetcher while following.
        producer_state: the idempotent producers' state of the replica (leader and follower alike).
        epoch_start_offset: the LEO when this broker became leader for the current epoch.
        lock: serialises role changes and ISR writes (event loop).
    """

    topic: str
    partition: int
    topic_id: str
    broker_id: int
    log: PartitionLog
    committer: "GroupCommitter | None" = None
    flusher: "LakeFlusher | None" = None
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    role: ReplicaRole = ReplicaRole.NONE
    state: PartitionState | None = None
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    fetcher: "ReplicaFetcher | None" = None
    producer_state: ProducerStateManager | None = None
    epoch_start_offset: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    isr_update_running: bool = False
    _hw_moved: asyncio.Event = field(default_factory=asyncio.Event)
    _leo_moved: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        """``topic-partition``, as in log lines and messages."""
        return f"{self.topic}-{self.partition}"

    @property
    def isr(self) -> list[int]:
        """The in-sync replicas as last read from ZooKeeper."""
        return list(self.state.isr) if self.state is not None else []

    @property
    def is_leader(self) -> bool:
        """True while this broker leads the partition."""
        return self.role is ReplicaRole.LEADER

    # -- signals --------------------------------------------------------------------------------

    def notify_high_watermark(self) -> None:
        """Wake every fetch and acks=all produce waiting on the high watermark or the role (event loop)."""
        event, self._hw_moved = self._hw_moved, asyncio.Event()
        event.set()

    def notify_log_end_offset(self) -> None:
        """Wake every follower fetch waiting for new records (event loop)."""
        event, self._leo_moved = self._leo_moved, asyncio.Event()
        event.set()

    def notify_all(self) -> None:
        """Wake every waiter (after a role change)."""
        self.notify_high_watermark()
        self.notify_log_end_offset()

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float, *, log_end: bool = False) -> bool:
        """Wait until ``condition()`` holds or ``timeout_s`` seconds passed; return ``condition()``.

        The condition is re-checked whenever the high watermark or the role moves (with ``log_end``:
        whenever the log end offset or the role moves), and at least once a second.
        """
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            event = self._leo_moved if log_end else self._hw_moved
            try:
                await asyncio.wait_for(event.wait(), min(remaining, 1.0))
            except asyncio.TimeoutError:
                pass
        return True

    async def wait_for_records(self, offset: int, timeout_s: float) -> None:
        """Return once the high watermark is above ``offset`` or after ``timeout_s`` seconds."""
        await self.wait_until(lambda: self.log.high_watermark > offset, timeout_s)

    async def wait_for_log_end(self, offset: int, timeout_s: float) -> None:
        """Return once the log end offset is above ``offset``, this broker stopped leading, or after
        ``timeout_s`` seconds."""
        await self.wait_until(lambda: self.log.log_end_offset > offset or not self.is_leader, timeout_s,
                              log_end=True)

    def low_watermark(self, live_brokers: Collection[int]) -> int:
        """The lowest log start offset of the partition's replicas on live brokers: this leader's, and each
        follower's as its last fetch said (-1 for a follower that has not said yet). Kafka's
        ``Partition.lowWatermarkIfLeader``: what a DeleteRecords answers once it reached the offset asked."""
        low = self.log.log_start_offset
        for b in self.replicas:
            if b != self.broker_id and b in live_brokers:
                prog = self.progress.get(b)
                low = min(low, prog.log_start_offset if prog is not None else -1)
        return low

    # -- roles ----------------------------------------------------------------------------------

    def make_leader(self, state: PartitionState, *, at_ms: float) -> None:
        """Kafka's makeLeader, local part: fence older epochs, remember where this epoch starts, start
        tracking every follower with an unknown LEO (the fetcher must be stopped first)."""
        self.log.fence(state.leader_epoch)
        self.leader_epoch = state.leader_epoch
        self.epoch_start_offset = self.log.log_end_offset
        self.progress = {b: ReplicaProgress(-1, at_ms, at_ms, 0) for b in self.replicas if b != self.broker_id}
        self.role = ReplicaRole.LEADER
        self.maybe_advance_high_watermark()

    def make_follower(self, state: PartitionState) -> None:
        """Kafka's makeFollower, local part: no more appends here, fence older epochs."""
        self.role = ReplicaRole.FOLLOWER
        self.leader_epoch = state.leader_epoch
        self.log.fence(state.leader_epoch)

    async def fence(self) -> None:
        """Stop leading or following (the ZooKeeper session ended: another broker may lead now)."""
        async with self.lock:
            if self.fetcher is not None:
                await self.fetcher.stop()
                self.fetcher = None
            self.role = ReplicaRole.NONE
            self.notify_all()

    def append_epoch(self) -> int:
        """The epoch to stamp on a group commit.

        Raises:
            NotLeaderError: this broker no longer leads (the commit is refused).
        """
        if not self.is_leader:
            raise NotLeaderError(f"Broker {self.broker_id} is no longer the leader of {self.name}.")
        return self.leader_epoch

    # -- high watermark and ISR (leader) --------------------------------------------------------

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest LEO in the ISR (the leader's own included); never moves back.

        Returns True when the HW moved (the waiters were woken)."""
        if not self.is_leader or self.state is None:
            return False
        leos = [self.log.log_end_offset]
        for b in self.state.isr:
            if b != self.broker_id:
                prog = self.progress.get(b)
                leos.append(prog.log_end_offset if prog is not None else -1)
        hw = min(leos)
        if hw >= 0 and self.log.advance_high_watermark(hw):
            self.notify_high_watermark()
            return True
        return False

    def record_follower_fetch(self, replica_id: int, offset: int, *, at_ms: float, log_start_offset: int = -1) -> bool:
        """A follower fetched at ``offset``: it has every record below it (Kafka's updateFollowerFetchState).
        ``log_start_offset``: the follower's, when its fetch said (-1: not said); a DeleteRecords waiting
        for the low watermark is woken.

        Its LEO becomes ``offset``; it is caught up now if ``offset`` reaches the leader's LEO, or was at its
        previous fetch if ``offset`` reaches the leader's LEO of then. Then maybe the HW moves.

        Returns:
            True when the follower is out of the ISR and may rejoin it: its offset reached the HW and
            this epoch's start offset (the caller writes the new ISR).
        """
        prog = self.progress.setdefault(replica_id, ReplicaProgress(-1, at_ms, at_ms, 0))
        leo = self.log.log_end_offset
        if offset >= leo:
            prog.last_caught_up_ms = at_ms
        elif offset >= prog.last_fetch_leader_leo:
            prog.last_caught_up_ms = max(prog.last_caught_up_ms, prog.last_fetch_ms)
        prog.last_fetch_leader_leo, prog.last_fetch_ms = leo, at_ms
        prog.log_end_offset = offset
        if log_start_offset >= 0 and log_start_offset != prog.log_start_offset:
            prog.log_start_offset = log_start_offset
            self.notify_log_end_offset()  # DeleteRecords waits on the followers' log start offsets
        rejoins = (replica_id not in self.isr and offset >= self.log.high_watermark
                   and offset >= self.epoch_start_offset)
        self.maybe_advance_high_watermark()
        return rejoins

    def lagging_followers(self, *, at_ms: float, replica_lag_time_max_ms: int) -> set[int]:
        """ISR followers that have not caught up for more than ``replica_lag_time_max_ms`` (Kafka's
        ``getOutOfSyncReplicas``); empty unless this broker leads."""
        if not self.is_leader or self.state is None or self.state.isr == [self.broker_id]:  # no follower in the ISR
            return set()
        return {b for b in self.state.isr if b != self.broker_id
                and at_ms - self.progress.get(b, ReplicaProgress()).last_caught_up_ms > replica_lag_time_max_ms}

    def proposed_isr(self, *, add: set[int], remove: set[int]) -> list[int] | None:
        """The ISR to write after adding ``add`` and removing ``remove`` (replica order, the leader always
        in), or None when nothing changes or this broker does not lead the current state."""
        state = self.state
        if not self.is_leader or state is None or state.leader != self.broker_id:
            return None
        isr = [b for b in self.replicas if (b in state.isr or b in add) and b not in remove]
        if self.broker_id not in isr:
            isr.insert(0, self.broker_id)
        return None if sorted(isr) == sorted(state.isr) else isr

    def isr_written(self, state: PartitionState, *, added: set[int], at_ms: float) -> None:
        """Apply the state the leader wrote with a new ISR: re-admitted followers start a fresh lag
        clock, the HW may move (a smaller ISR), waiters wake."""
        self.state = state
        for b in added:
            if b in self.progress:
                self.progress[b].last_caught_up_ms = max(self.progress[b].last_caught_up_ms, at_ms)
        self.maybe_advance_high_watermark()
        self.notify_high_watermark()

    # -- requests -------------------------------------------------------------------------------

    def check_replica_request(self, replica_id: int, leader_epoch: int, *, partitions_count: int) -> None:
        """Validate a follower's request against this leader (Kafka's fetch-request epoch checks).

        Raises:
            FencedLeaderEpochError: the follower's epoch is older (it has not seen the new state yet).
            UnknownLeaderEpochError: the follower's epoch is newer than this leader's (deposed leader).
            UnknownPartitionError: ``replica_id`` is not a replica of the partition.
        """
        if leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(f"Leader epoch {leader_epoch} of broker {replica_id} is older than "
                                         f"{self.leader_epoch} for {self.name}.")
        if leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(f"Leader epoch {leader_epoch} is newer than this leader's "
                                          f"{self.leader_epoch} for {self.name}.")
        if replica_id not in self.replicas or replica_id == self.broker_id:
            raise UnknownPartitionError(self.topic, self.partition, partitions_count)

    def check_min_insync_replicas(self, acks: Acks) -> None:
        """Kafka's NOT_ENOUGH_REPLICAS check before an ``acks=all`` append (nothing is written).

        Raises:
            NotEnoughReplicasError: the ISR is smaller than the topic's ``min.insync.replicas``.
        """
        min_isr = self.log.config.min_insync_replicas
        if acks == "all" and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"{self.name} has {len(self.isr)} in-sync replica(s) {self.isr}, fewer than "
                f"min.insync.replicas={min_isr}; nothing was written.")

    async def wait_for_commit(self, epoch: int, end_offset: int, *, request_timeout_ms: int) -> None:
        """``acks=all``: wait until the HW reaches ``end_offset`` while this broker still leads at ``epoch``.

        Raises:
            NotLeaderError: this broker stopped leading first (the batch may or may not be in the log).
            NotEnoughReplicasAfterAppendError: committed (or timed out) with an ISR smaller than
                ``min.insync.replicas``.
            RequestTimedOutError: not committed within ``request_timeout_ms``.
        """
        min_isr = self.log.config.min_insync_replicas

        def leading() -> bool:
            return self.is_leader and self.leader_epoch == epoch

        await self.wait_until(lambda: not leading() or self.log.high_watermark >= end_offset,
                              request_timeout_ms / 1000.0)
        if not leading():
            raise NotLeaderError(
                f"Broker {self.broker_id} stopped leading {self.name} before the batch ending at offset "
                f"{end_offset} was committed; it may or may not be in the log.")
        if self.log.high_watermark >= end_offset:
            if len(self.isr) < min_isr:
                raise NotEnoughReplicasAfterAppendError(
                    f"{self.name}: the batch is committed by the ISR {self.isr}, fewer than "
                    f"min.insync.replicas={min_isr}.")
            return
        if len(self.isr) < min_isr:
            raise NotEnoughReplicasAfterAppendError(
                f"{self.name}: the batch ending at {end_offset} did not reach "
                f"min.insync.replicas={min_isr} in request.timeout.ms={request_timeout_ms}.")
        raise RequestTimedOutError(
            f"{self.name}: the high watermark did not pass offset {end_offset - 1} in "
            f"request.timeout.ms={request_timeout_ms}.")

