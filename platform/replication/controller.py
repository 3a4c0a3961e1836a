"""The controller: one broker, elected through ZooKeeper, that moves partition leadership.

Election (Kafka's ZooKeeper-mode controller, ``KafkaController``): every broker watches the ephemeral
``/lakelog/controller`` znode; when it is missing each tries, in one ZooKeeper transaction, to bump
``/lakelog/controller_epoch`` (a version-checked set) and create the znode with its id and the new
epoch. One wins; the others keep watching. The winner's epoch is written into every partition state it
changes, and a controller that finds a larger controller epoch in a state znode steps down (a zombie
controller can not overwrite its successor's decisions). When the controller's session ends its znode
goes away and the others elect a new one.

What the active controller does (all writes are compare-and-set on the state znode's version):

- broker membership changes (ChildrenWatch on ``/lakelog/brokers/ids``): for every partition, dead
  brokers leave the ISR; a partition whose leader is dead (or that has none) gets a new leader, the
  first replica in assignment order that is alive and in the ISR, with ``leader_epoch + 1``. With
  ``unclean.leader.election.enable=true`` (topic config) and no such replica, the first live replica
  leads with ISR = [itself] (records only the old ISR had are lost). Otherwise the partition stays
  offline (leader -1) until an ISR member returns. See :func:`state_after_broker_change`.
- preferred leader election (``auto.leader.rebalance.enable``, every
  ``leader.imbalance.check.interval.seconds``): a partition whose preferred replica (the first of its
  assignment) is alive and in the ISR but not leading is moved back to it, ``leader_epoch + 1``.
  See :func:`state_for_preferred_leader`.

Controlled shutdown (:func:`controlled_shutdown`) is done by the stopping broker itself with the same
compare-and-set writes, so it does not depend on the controller being reachable.

The controller runs its work on one thread of its own (events queued from kazoo's watch threads), so
decisions are serialised and never block a broker's event loop.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import replace

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from lakelog.config import TopicConfig
from lakelog.errors import ConfigError
from lakelog.replication.errors import ControllerFencedError, UnknownTopicError
from lakelog.replication.metadata import (
    BROKERS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    ClusterMetadata,
    PartitionState,
)

log = logging.getLogger(__name__)

NO_LEADER = -1
_CAS_ATTEMPTS = 20


def state_after_broker_change(replicas: list[int], state: PartitionState, live: set[int], *,
                              unclean_leader_election_enable: bool, controller_epoch: int) -> PartitionState | None:
    """The partition state once the live brokers are ``live``, or None when nothing changes.

    Steps:

    1. dead brokers leave the ISR;
    2. a live leader keeps leading (only the ISR changes; the leader epoch stays);
    3. otherwise the first replica (assignment order) that is live and in the ISR leads, epoch + 1;
    4. otherwise, only with unclean leader election enabled, the first live replica leads with
       ISR = [itself], epoch + 1;
    5. otherwise the partition is offline: leader -1, the ISR kept as it was (its members hold every
       committed record; the first of them to come back leads).
    """
    # 1. dead brokers leave the ISR
    isr = [b for b in state.isr if b in live]
    # 2. a live leader stays
    if state.leader != NO_LEADER and state.leader in live:
        if isr == state.isr:
            return None
        return replace(state, isr=isr, controller_epoch=controller_epoch)
    # 3. clean election from the ISR
    candidates = [b for b in replicas if b in isr]
    if candidates:
        return PartitionState(candidates[0], state.leader_epoch + 1, isr, controller_epoch, state.version)
    # 4. unclean election: a live replica outside the ISR
    live_replicas = [b for b in replicas if b in live]
    if unclean_leader_election_enable and live_replicas:
        return PartitionState(live_replicas[0], state.leader_epoch + 1, [live_replicas[0]], controller_epoch,
                              state.version)
    # 5. offline
    if state.leader == NO_LEADER:
        return None
    return PartitionState(NO_LEADER, state.leader_epoch + 1, list(state.isr), controller_epoch, state.version)


def state_for_preferred_leader(replicas: list[int], state: PartitionState, live: set[int], *,
                               controller_epoch: int) -> PartitionState | None:
    """Leadership back to the preferred replica (``replicas[0]``) if it is live, in sync and not leading."""
    preferred = replicas[0]
    if state.leader == preferred or preferred not in live or preferred not in state.isr:
        return None
    return PartitionState(preferred, state.leader_epoch + 1, list(state.isr), controller_epoch, state.version)


def _unclean_enabled(configs: dict[str, str]) -> bool:
    """The topic's ``unclean.leader.election.enable``; False when its stored configs do not parse
    (the controller must not fail on one bad topic)."""
    try:
        return TopicConfig.parse(configs).unclean_leader_election_enable
    except ConfigError:
        return False


def update_partitions(metadata: ClusterMetadata, decide, *, controller_epoch: int | None = None,
                      topics: list[str] | None = None,
                      on_state: Callable[[str, int, PartitionState], None] | None = None) -> int:
    """Apply ``decide(topic, replicas, configs, state) -> new state | None`` to every partition with CAS.

    A write that loses a race (``BadVersionError``) re-reads the state and decides again. ``on_state(topic,
    partition, state)`` (optional) is called once per partition with the state it was left in (written or
    unchanged).

    Returns:
        The number of partition states written.

    Raises:
        ControllerFencedError: a state carries a controller epoch newer than ``controller_epoch``.
    """
    written = 0
    for topic in (metadata.topics() if topics is None else topics):
        try:
            meta = metadata.topic(topic)
        except UnknownTopicError:
            continue
        for p, replicas in sorted(meta.replicas.items()):
            for _ in range(_CAS_ATTEMPTS):
                try:
                    state = metadata.partition_state(topic, p)
                except UnknownTopicError:
                    break
                if controller_epoch is not None and state.controller_epoch > controller_epoch:
                    raise ControllerFencedError(state.controller_epoch)
                new = decide(topic, replicas, meta.configs, state)
                if new is None:
                    if on_state is not None:
                        on_state(topic, p, state)
                    break
                try:
                    metadata.set_partition_state(topic, p, new)
                except BadVersionError:
                    continue
                except NoNodeError:
                    break
                if on_state is not None:
                    on_state(topic, p, new)
                log.info("partition %s-%d: leader %d -> %d, leader epoch %d -> %d, ISR %s -> %s", topic, p,
                         state.leader, new.leader, state.leader_epoch, new.leader_epoch, state.isr, new.isr)
                written += 1
                break
    return written


def controlled_shutdown(metadata: ClusterMetadata, broker_id: int) -> int:
    """Move ``broker_id``'s leaderships to other live in-sync replicas and take it out of every ISR.

    Kafka's controlled shutdown (``controlled.shutdown.enable``): a partition it leads gets the next
    live ISR member (assignment order) as leader with ``leader_epoch + 1``; a partition it follows
    drops it from the ISR. A partition with no other live ISR member is left as it is (it goes
    offline when the broker's session ends, as after a crash). Compare-and-set writes.

    Returns:
        The number of partition states written.
    """
    live = set(metadata.brokers()) - {broker_id}

    def decide(topic, replicas, configs, state: PartitionState) -> PartitionState | None:
        others = [b for b in replicas if b in state.isr and b in live and b != broker_id]
        if not others or broker_id not in state.isr:
            return None
        isr = [b for b in state.isr if b != broker_id]
        if state.leader == broker_id:
            return PartitionState(others[0], state.leader_epoch + 1, isr, state.controller_epoch, state.version)
        return replace(state, isr=isr)

    return update_partitions(metadata, decide)


class Controller:
    """Takes part in controller election; while elected, reacts to broker changes and rebalances leaders.

    Args:
        zk: the broker's started kazoo client.
        broker_id: this broker's id.
        auto_leader_rebalance_enable: run preferred leader elections. Default: True.
        leader_imbalance_check_interval_s: seconds between preferred leader checks. Default: 300.
        metadata: the broker's :class:`ClusterMetadata` on ``zk``. Default: a new one.

    :meth:`start` after the broker registered; :meth:`stop` (resigns) before it leaves ZooKeeper.
    """

    def __init__(self, zk: KazooClient, broker_id: int, *, auto_leader_rebalance_enable: bool = True,
                 leader_imbalance_check_interval_s: float = 300.0, metadata: ClusterMetadata | None = None) -> None:
        self.zk = zk
        self.metadata = metadata if metadata is not None else ClusterMetadata(zk)
        self.broker_id = broker_id
        self.auto_leader_rebalance_enable = auto_leader_rebalance_enable
        self.leader_imbalance_check_interval_s = leader_imbalance_check_interval_s
        #: the controller epoch while this broker is the active controller, else None
        self.epoch: int | None = None
        #: partitions without a leader at the last broker change this controller handled (Kafka's
        #: ``OfflinePartitionsCount``, reported by the active controller only)
        self.offline_partitions = 0
        self._events: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-{broker_id}", daemon=True)
        self._stopped = threading.Event()
        self._watch_generation = 0

    @property
    def active(self) -> bool:
        """True while this broker is the elected controller."""
        return self.epoch is not None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the event thread and watch the controller znode (an election runs if it is missing)."""
        self.zk.ensure_path(CONTROLLER_EPOCH_PATH)
        self._thread.start()
        self.zk.add_listener(self._on_session)
        self.zk.DataWatch(CONTROLLER_PATH, self._on_controller_znode)

    def stop(self) -> None:
        """Stop; if active, delete the controller znode so another broker takes over at once."""
        self._stopped.set()
        self._events.put("stop")
        self._thread.join(10)
        if self.active:
            self.epoch = None
            try:
                data, _ = self.zk.get(CONTROLLER_PATH)
                if json.loads(data).get("broker_id") == self.broker_id:
                    self.zk.delete(CONTROLLER_PATH)
            except Exception:  # the session may be gone already: the znode goes with it
                pass

    def _on_session(self, state: str) -> None:
        if state == KazooState.LOST:
            self._events.put("resign")

    def _on_controller_znode(self, data, stat, event=None):
        if self._stopped.is_set():
            return False
        if data is None:
            self._events.put("elect")
        else:
            try:
                holder = json.loads(data).get("broker_id")
            except ValueError:
                holder = None
            if holder != self.broker_id and self.active:
                self._events.put("resign")
        return None

    # -- the event thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            event = self._events.get()
            if event == "stop":
                return
            try:
                if event == "elect":
                    self._elect()
                elif event == "resign":
                    self._resign()
                elif event == "brokers" and self.active:
                    self._on_brokers_changed()
                elif event == "rebalance" and self.active:
                    self._rebalance()
            except ControllerFencedError as e:
                log.warning("controller %d fenced: %s", self.broker_id, e)
                self._resign()
            except Exception:
                log.exception("controller event %r failed", event)

    def _elect(self) -> None:
        """Try to become controller: bump the controller epoch and create the znode in one transaction."""
        if self.active or self._stopped.is_set():
            return
        data, stat = self.zk.get(CONTROLLER_EPOCH_PATH)
        epoch = int(data or b"0") + 1
        tx = self.zk.transaction()
        tx.set_data(CONTROLLER_EPOCH_PATH, str(epoch).encode(), version=stat.version)
        tx.create(CONTROLLER_PATH, json.dumps({"broker_id": self.broker_id, "epoch": epoch}).encode(), ephemeral=True)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            if any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
                return  # another broker won
            raise next(r for r in results if isinstance(r, Exception))
        self.epoch = epoch
        self._watch_generation += 1
        generation = self._watch_generation
        log.info("broker %d is the controller (controller epoch %d)", self.broker_id, epoch)

        def on_brokers(children):
            if not self.active or generation != self._watch_generation or self._stopped.is_set():
                return False
            self._events.put("brokers")
            return None

        self.zk.ChildrenWatch(BROKERS_PATH, on_brokers)
        if self.auto_leader_rebalance_enable:
            threading.Thread(target=self._rebalance_timer, args=(generation,), daemon=True,
                             name=f"controller-{self.broker_id}-rebalance").start()

    def _resign(self) -> None:
        if self.active:
            log.info("broker %d is no longer the controller", self.broker_id)
        self.epoch = None
        self._watch_generation += 1

    def _rebalance_timer(self, generation: int) -> None:
        while not self._stopped.wait(self.leader_imbalance_check_interval_s):
            if not self.active or generation != self._watch_generation:
                return
            self._events.put("rebalance")

    def _on_brokers_changed(self) -> None:
        """New leaders for partitions whose leader died; dead brokers out of every ISR."""
        live = set(self.metadata.brokers())
        epoch = self.epoch
        assert epoch is not None

        offline: set[tuple[str, int]] = set()

        def decide(topic, replicas, configs, state):
            return state_after_broker_change(replicas, state, live, controller_epoch=epoch,
                                             unclean_leader_election_enable=_unclean_enabled(configs))

        def left_in(topic: str, partition: int, state: PartitionState) -> None:
            if state.leader == NO_LEADER:
                offline.add((topic, partition))

        n = update_partitions(self.metadata, decide, controller_epoch=epoch, on_state=left_in)
        self.offline_partitions = len(offline)
        log.info("controller %d: live brokers %s, %d partition state(s) changed", self.broker_id, sorted(live), n)

    def _rebalance(self) -> None:
        """Preferred leader election for every partition whose preferred replica is in sync."""
        live = set(self.metadata.brokers())
        epoch = self.epoch
        assert epoch is not None

        def decide(topic, replicas, configs, state):
            return state_for_preferred_leader(replicas, state, live, controller_epoch=epoch)

        n = update_partitions(self.metadata, decide, controller_epoch=epoch)
        if n:
            log.info("controller %d: %d preferred leader election(s)", self.broker_id, n)
