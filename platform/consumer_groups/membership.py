"""Consumer group membership in ZooKeeper: members, generations, assignments, revocation acks.

ZooKeeper layout (under ``/lakelog/consumers``, :data:`lakelog.replication.metadata.CONSUMERS_PATH`)::

    {group}                              {"generation": n}   the group's generation (offset commits are fenced by it)
    {group}/instances/{name}             ephemeral: a REST consumer instance and the broker it lives on
    {group}/members/{name}               ephemeral: a subscribed member {"topics", "assignor", "broker_id", "base_uri"}
    {group}/assignment                   {"generation", "assignor", "fingerprint", "members": {name: [[topic, p], ...]}}
    {group}/acks/{generation}-{name}     ephemeral: ``name`` gave up the partitions it loses in ``generation``
    {group}/kafka                        ephemeral: the group's Kafka-protocol members as its coordinator
                                         holds them (:mod:`lakelog.consumer_groups.classic_coordinator`)

A group has members of one kind at a time: HTTP consumer instances (``members``) or Kafka clients
(``kafka``); a member of the other kind is refused (INCONSISTENT_GROUP_PROTOCOL, as Kafka answers a
protocol type other than the group's).

Ephemeral znodes belong to the ZooKeeper session of the broker hosting the instance: when a broker
dies, its members leave the group with it.

Rebalance protocol (revoke before assign), run by every broker hosting a member of the group whenever
the members, their subscriptions, the partition counts of their topics or the assignment change
(kazoo watches on ``members``, ``assignment``, ``acks`` and the group znode):

1. **Compute** (:meth:`GroupMembership.rebalance`): if the stored assignment does not describe the
   live members (its *fingerprint*: member ids, their topics, the assignor, the partition counts) or
   its generation is not the group's, compute a new one with generation ``n + 1`` using the group's
   assignor, and write the group znode and the assignment in one ZooKeeper transaction, both
   version-checked. Several brokers may compute at once; assignors are deterministic and only one
   write wins; the losers re-read.
2. **Revoke**: each member of generation ``n + 1`` stops reading the partitions it owned and no longer
   has, commits their positions when ``auto.commit.enable`` (with generation ``n + 1``), then writes
   its ack ``acks/{n+1}-{name}``. Partitions it keeps stay readable throughout.
3. **Assign**: a member starts reading the partitions it gains in ``n + 1`` only when every member of
   generation ``n + 1`` has acked it (:meth:`GroupMembership.all_acknowledged`), so no partition is read
   by two members at once, and a new owner starts at the offset the previous owner committed.

A member that dies before acking leaves the group (its znode goes away), which changes the
fingerprint and starts generation ``n + 2``; so a rebalance never waits for a dead member.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from lakelog.consumer_groups.assignors import TopicPartition, get_assignor
from lakelog.consumer_groups.errors import ConsumerAlreadyExistsError, InconsistentGroupProtocolError
from lakelog.replication.metadata import CONSUMERS_PATH, ClusterMetadata, _dump, _load
from lakelog.replication.zookeeper_errors import zookeeper_errors_wrapped

log = logging.getLogger(__name__)


def group_path(group: str) -> str:
    """``/lakelog/consumers/{group}``."""
    return f"{CONSUMERS_PATH}/{group}"


@dataclass(frozen=True)
class MemberInfo:
    """A subscribed member as registered in ZooKeeper."""

    member_id: str
    topics: tuple[str, ...]
    assignor: str
    broker_id: int
    base_uri: str


@dataclass(frozen=True)
class GroupAssignment:
    """The assignment of one generation: member id -> sorted ``(topic, partition)`` list."""

    generation: int
    assignor: str
    fingerprint: str
    members: dict[str, list[TopicPartition]] = field(default_factory=dict)

    def partitions_of(self, member_id: str) -> list[TopicPartition]:
        """The partitions of ``member_id`` in this generation (empty if it is not a member of it)."""
        return self.members.get(member_id, [])

    def to_json(self) -> dict:
        return {"generation": self.generation, "assignor": self.assignor, "fingerprint": self.fingerprint,
                "members": {m: [[t, p] for t, p in tps] for m, tps in sorted(self.members.items())}}

    @classmethod
    def from_json(cls, data: dict) -> "GroupAssignment":
        return cls(int(data["generation"]), data.get("assignor", "range"), data.get("fingerprint", ""),
                   {m: [(str(t), int(p)) for t, p in tps] for m, tps in data.get("members", {}).items()})


def fingerprint(members: dict[str, MemberInfo], assignor: str, partition_counts: dict[str, int]) -> str:
    """A digest of everything an assignment depends on; equal inputs give equal fingerprints."""
    doc = {"assignor": assignor, "members": {m: sorted(i.topics) for m, i in sorted(members.items())},
           "partitions": dict(sorted(partition_counts.items()))}
    return hashlib.sha1(_dump(doc)).hexdigest()


def choose_assignor(members: dict[str, MemberInfo], default: str = "range") -> str:
    """The group's assignor: the one most members ask for (ties: alphabetical), ``default`` when empty."""
    if not members:
        return default
    votes = Counter(i.assignor for i in members.values())
    best = max(votes.values())
    return sorted(a for a, n in votes.items() if n == best)[0]


class GroupWatch:
    """Kazoo watches on one group; :meth:`stop` ends them (each callback then returns False)."""

    def __init__(self, zk: KazooClient, group: str, on_change: Callable[[], None]) -> None:
        self._stopped = threading.Event()
        base = group_path(group)

        def fire(*_args) -> bool | None:
            if self._stopped.is_set():
                return False
            on_change()
            return None

        zk.ChildrenWatch(f"{base}/members", fire)
        zk.ChildrenWatch(f"{base}/acks", fire)
        zk.DataWatch(f"{base}/assignment", fire)
        zk.DataWatch(base, fire)

    def stop(self) -> None:
        """Stop calling back (kazoo drops a watch when its callback returns False)."""
        self._stopped.set()


@zookeeper_errors_wrapped
class GroupMembership:
    """Group membership of the consumer instances of one broker, through its ZooKeeper session.

    Methods block on ZooKeeper: call them with ``asyncio.to_thread`` from the event loop. Every public
    method raises :class:`~lakelog.replication.errors.ZooKeeperUnavailableError` (503 / 50304, retriable),
    never kazoo's error, when ZooKeeper is not reachable (:mod:`lakelog.replication.zookeeper_errors`).

    Args:
        zk: the broker's started ``KazooClient`` (ephemeral znodes live as long as its session).
        partition_counts: topic names -> partition count of those that exist (ZooKeeper metadata).
        default_assignor: assignor of a group whose members name none. Default: ``range``.
    """

    def __init__(self, zk: KazooClient, *, partition_counts: Callable[[Iterable[str]], dict[str, int]],
                 default_assignor: str = "range") -> None:
        self.zk = zk
        self._metadata = ClusterMetadata(zk)
        self.partition_counts = partition_counts
        self.default_assignor = default_assignor

    def ensure_group(self, group: str) -> None:
        """Create the group's znodes (persistent) if missing."""
        base = group_path(group)
        for sub in ("instances", "members", "acks"):
            self.zk.ensure_path(f"{base}/{sub}")

    def groups_with_members(self) -> list[str]:
        """The groups with live members (a znode under ``{group}/members``, or Kafka-protocol members
        published in ``{group}/kafka``), in ZooKeeper's order."""
        try:
            names = self.zk.get_children(CONSUMERS_PATH)
        except NoNodeError:
            return []
        out = []
        for name in names:
            try:
                if self.zk.exists(f"{group_path(name)}/kafka") or self.zk.get_children(f"{group_path(name)}/members"):
                    out.append(name)
            except NoNodeError:
                continue
        return out

    # -- Kafka-protocol members -----------------------------------------------------------------

    def publish_kafka_group(self, group: str, data: dict | None) -> None:
        """Publish the group's Kafka-protocol membership (its coordinator's view: generation, state,
        protocol, members with client id, host, topics and partitions) as ``{group}/kafka``, ephemeral to
        this broker's session; None deletes it (the group is empty)."""
        path = f"{group_path(group)}/kafka"
        if data is None:
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass
            return
        self.zk.ensure_path(group_path(group))
        try:
            self.zk.create(path, _dump(data), ephemeral=True)
        except NodeExistsError:
            self.zk.set(path, _dump(data))

    def kafka_group(self, group: str) -> dict | None:
        """The group's published Kafka-protocol membership (:meth:`publish_kafka_group`), None when it has none."""
        try:
            data, _ = self.zk.get(f"{group_path(group)}/kafka")
        except NoNodeError:
            return None
        return _load(data) if data else None

    # -- instances ------------------------------------------------------------------------------

    def register_instance(self, group: str, name: str, *, broker_id: int, base_uri: str) -> None:
        """Claim the instance name ``name`` in ``group`` cluster-wide (ephemeral znode).

        Raises:
            ConsumerAlreadyExistsError: a live instance of that name exists (409 / 40902).
        """
        self.ensure_group(group)
        try:
            self.zk.create(f"{group_path(group)}/instances/{name}",
                           _dump({"broker_id": broker_id, "base_uri": base_uri}), ephemeral=True)
        except NodeExistsError:
            raise ConsumerAlreadyExistsError(
                f"Consumer with specified consumer ID already exists in the specified consumer group: "
                f"instance '{name}' of group '{group}'.") from None

    def unregister_instance(self, group: str, name: str) -> None:
        """Release the instance name (idempotent)."""
        try:
            self.zk.delete(f"{group_path(group)}/instances/{name}")
        except NoNodeError:
            pass

    # -- members --------------------------------------------------------------------------------

    def join(self, group: str, member_id: str, *, topics: Iterable[str], assignor: str, broker_id: int,
             base_uri: str) -> None:
        """Become (or stay) a member subscribed to ``topics``; a changed subscription updates the znode.

        Raises:
            InconsistentGroupProtocolError: the group has Kafka-protocol members (409 / 40953).
        """
        self.ensure_group(group)
        if self.zk.exists(f"{group_path(group)}/kafka"):
            log.warning("HTTP consumer instance %s refused in group '%s': the group has Kafka-protocol members",
                        member_id, group)
            raise InconsistentGroupProtocolError(
                f"Group '{group}' has members that use Kafka's protocol: an HTTP consumer instance cannot join "
                "it. Use another group id, or stop the Kafka consumers first (the committed offsets are shared).")
        path = f"{group_path(group)}/members/{member_id}"
        data = _dump({"topics": sorted(set(topics)), "assignor": assignor, "broker_id": broker_id,
                      "base_uri": base_uri})
        try:
            self.zk.create(path, data, ephemeral=True)
        except NodeExistsError:
            current, _ = self.zk.get(path)
            if current != data:
                self.zk.set(path, data)

    def leave(self, group: str, member_id: str) -> None:
        """Leave the group: delete the member znode and its acks (idempotent)."""
        base = group_path(group)
        try:
            self.zk.delete(f"{base}/members/{member_id}")
        except NoNodeError:
            pass
        self._delete_acks(group, member_id, below=None)

    def members(self, group: str) -> dict[str, MemberInfo]:
        """The live members of ``group`` by id."""
        base = f"{group_path(group)}/members"
        try:
            children = self.zk.get_children(base)
        except NoNodeError:
            return {}
        out = {}
        for child in sorted(children):
            try:
                d = _load(self.zk.get(f"{base}/{child}")[0])
            except NoNodeError:
                continue
            out[child] = MemberInfo(child, tuple(d.get("topics", [])), d.get("assignor", self.default_assignor),
                                    int(d.get("broker_id", -1)), d.get("base_uri", ""))
        return out

    # -- assignment -----------------------------------------------------------------------------

    def assignment(self, group: str) -> GroupAssignment | None:
        """The stored assignment, or None before the first rebalance."""
        try:
            data, _ = self.zk.get(f"{group_path(group)}/assignment")
        except NoNodeError:
            return None
        return GroupAssignment.from_json(_load(data)) if data else None

    def rebalance(self, group: str) -> GroupAssignment | None:
        """Step 1 of the protocol: make the stored assignment describe the live members.

        Returns the current assignment (new or unchanged), or None when the group never had members.
        Writes, when needed, generation ``n + 1`` to the group znode and the assignment in one
        transaction checked against both znodes' versions; retries when another broker won.
        """
        self.ensure_group(group)
        base = group_path(group)
        while True:
            gdata, gstat = self.zk.get(base)
            group_generation = int(_load(gdata).get("generation") or 0)
            try:
                adata, astat = self.zk.get(f"{base}/assignment")
                current = GroupAssignment.from_json(_load(adata)) if adata else None
            except NoNodeError:
                astat, current = None, None
            members = self.members(group)
            if current is None and not members:
                return None
            assignor = choose_assignor(members, self.default_assignor)
            counts = self.partition_counts(sorted({t for i in members.values() for t in i.topics}))
            fp = fingerprint(members, assignor, counts)
            if current is not None and current.fingerprint == fp and current.generation == group_generation:
                return current
            generation = max(group_generation, current.generation if current else 0) + 1
            result = get_assignor(assignor).assign(
                counts, {m: i.topics for m, i in members.items()},
                previous=current.members if current else None)
            new = GroupAssignment(generation, assignor, fp, result)
            tx = self.zk.transaction()
            tx.set_data(base, _dump({**_load(gdata), "generation": generation}), version=gstat.version)
            if astat is None:
                tx.create(f"{base}/assignment", _dump(new.to_json()))
            else:
                tx.set_data(f"{base}/assignment", _dump(new.to_json()), version=astat.version)
            if any(isinstance(r, Exception) for r in tx.commit()):
                continue  # another broker changed the group first: re-read
            log.info("group %s: generation %d, assignor %s, %d member(s)", group, generation, assignor, len(members))
            return new

    # -- revocation acks ------------------------------------------------------------------------

    def acknowledge(self, group: str, member_id: str, generation: int) -> None:
        """Step 2's end: ``member_id`` gave up what it loses in ``generation`` (ephemeral ack znode)."""
        self.ensure_group(group)
        try:
            self.zk.create(f"{group_path(group)}/acks/{generation:010d}-{member_id}", ephemeral=True)
        except NodeExistsError:
            pass
        self._delete_acks(group, member_id, below=generation)

    def all_acknowledged(self, group: str, assignment: GroupAssignment) -> bool:
        """Step 3's condition: every member of ``assignment`` acked its generation, still the current one."""
        base = group_path(group)
        try:
            acks = set(self.zk.get_children(f"{base}/acks"))
        except NoNodeError:
            return False
        if self._metadata.group_generation(group) != assignment.generation:
            return False
        return all(f"{assignment.generation:010d}-{m}" in acks for m in assignment.members)

    def _delete_acks(self, group: str, member_id: str, *, below: int | None) -> None:
        base = f"{group_path(group)}/acks"
        try:
            children = self.zk.get_children(base)
        except NoNodeError:
            return
        for child in children:
            gen, _, name = child.partition("-")
            if name == member_id and (below is None or int(gen) < below):
                try:
                    self.zk.delete(f"{base}/{child}")
                except NoNodeError:
                    pass

    # -- watches --------------------------------------------------------------------------------

    def watch(self, group: str, on_change: Callable[[], None]) -> GroupWatch:
        """Call ``on_change()`` (in kazoo's thread) whenever the group's membership state changes."""
        self.ensure_group(group)
        return GroupWatch(self.zk, group, on_change)
