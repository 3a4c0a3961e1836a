"""Cluster metadata in ZooKeeper: brokers, topics, partition state (DESIGN.md, "Coordination").

ZooKeeper layout (under the chroot of ``zookeeper.connect``)::

    /lakelog/cluster/id                            the cluster id (created once)
    /lakelog/brokers/ids/{id}                      ephemeral: {"host","port","rack","started_at"}
    /lakelog/controller                            ephemeral: {"broker_id","epoch"} of the elected controller
    /lakelog/controller_epoch                      the controller epoch, bumped by each new controller
    /lakelog/topics/{topic}                        {"topic_id","partitions":{"0":[1,2,3]},"config":{...}}
    /lakelog/topics/{topic}/partitions/{p}/state   {"leader","leader_epoch","isr","controller_epoch"}
    /lakelog/admin/delete_topics/{topic}           a pending deletion
    /lakelog/consumers/{group}                     {"generation": n}: bumped on each rebalance
    /lakelog/consumers/{group}/members/{member}    ephemeral: a live group member

Every znode holds UTF-8 JSON. Partition state is updated with znode-version checks.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
import zlib
from dataclasses import asdict, dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from lakelog.config import TopicConfig
from lakelog.replication.errors import (
    BrokerIdInUseError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)

ROOT = "/lakelog"
CLUSTER_ID_PATH = f"{ROOT}/cluster/id"
BROKERS_PATH = f"{ROOT}/brokers/ids"
TOPICS_PATH = f"{ROOT}/topics"
DELETE_TOPICS_PATH = f"{ROOT}/admin/delete_topics"
CONTROLLER_PATH = f"{ROOT}/controller"
CONTROLLER_EPOCH_PATH = f"{ROOT}/controller_epoch"
CONSUMERS_PATH = f"{ROOT}/consumers"

#: Kafka's legal topic characters and length (``org.apache.kafka.common.internals.Topic``).
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITIONS = 10_000


def validate_topic_name(name: str) -> None:
    """Refuse names Kafka refuses: empty, ``.``/``..``, longer than 249, chars outside ``[a-zA-Z0-9._-]``.

    Raises:
        InvalidTopicError: saying which rule the name breaks.
    """
    if not name or name in (".", ".."):
        raise InvalidTopicError(f"Topic name {name!r} is not allowed: it must not be empty, '.' or '..'.")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is {len(name)} characters; the limit is {MAX_TOPIC_NAME_LENGTH}.")
    if not _TOPIC_RE.match(name):
        raise InvalidTopicError(f"Topic name {name!r} is not allowed: use only ASCII letters, digits, '.', '_' and '-'.")


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def _load(data: bytes) -> dict:
    return json.loads(data.decode()) if data else {}


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker as registered in ZooKeeper."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    started_at: int = 0

    @property
    def url(self) -> str:
        """``http://host:port`` of the broker's gateway."""
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionState:
    """Leader, leader epoch and ISR of one partition (``.../partitions/{p}/state``)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int = 0
    version: int = field(default=-1, compare=False)  # znode version, for conditional updates

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("version")
        return d

    @classmethod
    def from_json(cls, data: bytes, version: int = -1) -> "PartitionState":
        """Parse the state znode's JSON (``version`` = its znode version)."""
        d = _load(data)
        return cls(d["leader"], d["leader_epoch"], list(d["isr"]), d.get("controller_epoch", 0), version)


@dataclass(frozen=True)
class TopicMetadata:
    """A topic as stored in ZooKeeper: id, replica assignment per partition, configs (Kafka names)."""

    name: str
    topic_id: str
    replicas: dict[int, list[int]]
    configs: dict[str, str]

    @property
    def partitions_count(self) -> int:
        return len(self.replicas)

    @property
    def replication_factor(self) -> int:
        return len(self.replicas[0]) if self.replicas else 0

    @property
    def config(self) -> TopicConfig:
        """The validated :class:`TopicConfig` (defaults filled in)."""
        return TopicConfig.parse(self.configs)


def assign_replicas(broker_ids: list[int], partitions: int, replication_factor: int, *,
                    start_index: int = 0) -> dict[int, list[int]]:
    """Spread replicas over brokers as Kafka's rack-unaware assignment does (AdminUtils).

    Partition ``p``'s first (preferred leader) replica is broker ``(start_index + p) % n``; the other
    replicas follow at a shift that grows every ``n`` partitions, so leaders are balanced and
    followers are spread.

    Raises:
        InvalidReplicationFactorError: ``replication_factor`` exceeds the number of live brokers.
    """
    brokers = sorted(broker_ids)
    n = len(brokers)
    if replication_factor < 1:
        raise InvalidReplicationFactorError("Replication factor must be at least 1.")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor {replication_factor} is larger than the number of live brokers ({n}).")
    assignment: dict[int, list[int]] = {}
    shift = start_index % n
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n] if n > 1 else brokers[first])
        assignment[p] = replicas
    return assignment


class ClusterMetadata:
    """Reads and writes lakelog's metadata in ZooKeeper through a started kazoo client.

    Args:
        zk: a connected :class:`kazoo.client.KazooClient` (its chroot, if any, already applied).
    """

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def ensure_paths(self) -> None:
        """Create the fixed parent znodes if missing (idempotent)."""
        for path in (BROKERS_PATH, TOPICS_PATH, DELETE_TOPICS_PATH, f"{ROOT}/cluster"):
            self.zk.ensure_path(path)

    # -- cluster and brokers --------------------------------------------------------------------

    def cluster_id(self) -> str:
        """The cluster id, created (a random 22-char base64url id, like Kafka's) on first call."""
        try:
            return self.zk.get(CLUSTER_ID_PATH)[0].decode()
        except NoNodeError:
            new_id = uuid.uuid4().bytes
            value = base64.urlsafe_b64encode(new_id).decode().rstrip("=")
            try:
                self.zk.create(CLUSTER_ID_PATH, value.encode(), makepath=True)
            except NodeExistsError:
                pass
            return self.zk.get(CLUSTER_ID_PATH)[0].decode()

    def register_broker(self, info: BrokerInfo) -> None:
        """Create the broker's ephemeral znode.

        Raises:
            BrokerIdInUseError: a live broker already holds this id.
        """
        data = {"host": info.host, "port": info.port, "rack": info.rack, "started_at": info.started_at or int(time.time() * 1000)}
        try:
            self.zk.create(f"{BROKERS_PATH}/{info.broker_id}", _dump(data), ephemeral=True, makepath=True)
        except NodeExistsError:
            raise BrokerIdInUseError(f"broker.id {info.broker_id} is already registered by a live broker") from None

    def brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers by id."""
        out = {}
        for child in self.zk.get_children(BROKERS_PATH):
            try:
                data = _load(self.zk.get(f"{BROKERS_PATH}/{child}")[0])
            except NoNodeError:
                continue
            out[int(child)] = BrokerInfo(int(child), data["host"], int(data["port"]), data.get("rack"), data.get("started_at", 0))
        return dict(sorted(out.items()))

    # -- topics ---------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        """Names of all topics, sorted."""
        try:
            return sorted(self.zk.get_children(TOPICS_PATH))
        except NoNodeError:
            return []

    def topic(self, name: str) -> TopicMetadata:
        """One topic's metadata. Raises :class:`UnknownTopicError`."""
        try:
            data = _load(self.zk.get(f"{TOPICS_PATH}/{name}")[0])
        except NoNodeError:
            raise UnknownTopicError(name) from None
        return TopicMetadata(
            name=name, topic_id=data["topic_id"],
            replicas={int(p): list(r) for p, r in data["partitions"].items()},
            configs=dict(data.get("config", {})),
        )

    def create_topic(self, name: str, *, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None, leader_epoch: int = 0) -> TopicMetadata:
        """Create a topic: its znode and one state znode per partition, in one ZooKeeper transaction.

        The first replica of each partition is its preferred leader and starts as leader; the ISR is
        the full replica list.

        Raises:
            InvalidTopicError, InvalidPartitionsError, InvalidReplicationFactorError,
            lakelog.errors.ConfigError (a bad config), TopicExistsError.
        """
        validate_topic_name(name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}.")
        config = TopicConfig.parse(configs or {})
        explicit = {k: v for k, v in config.to_kafka().items() if k in (configs or {})}
        brokers = list(self.brokers())
        if not brokers:
            raise InvalidReplicationFactorError("No live brokers to place replicas on.")
        replicas = assign_replicas(brokers, partitions, replication_factor,
                                   start_index=zlib.crc32(name.encode()) % len(brokers))
        meta = TopicMetadata(name=name, topic_id=uuid.uuid4().hex, replicas=replicas, configs=explicit)
        path = f"{TOPICS_PATH}/{name}"
        tx = self.zk.transaction()
        tx.create(path, _dump({"topic_id": meta.topic_id, "partitions": {str(p): r for p, r in replicas.items()},
                              "config": explicit}))
        tx.create(f"{path}/partitions")
        for p, r in replicas.items():
            tx.create(f"{path}/partitions/{p}")
            state = PartitionState(leader=r[0], leader_epoch=leader_epoch, isr=list(r))
            tx.create(f"{path}/partitions/{p}/state", _dump(state.to_json()))
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            if any(isinstance(r, NodeExistsError) for r in failed) and self.zk.exists(path):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            raise failed[0]
        return meta

    def delete_topic(self, name: str) -> None:
        """Delete a topic's znodes (brokers watching the topic list drop their logs).

        Raises:
            UnknownTopicError: no such topic.
        """
        path = f"{TOPICS_PATH}/{name}"
        if not self.zk.exists(path):
            raise UnknownTopicError(name)
        self.zk.ensure_path(DELETE_TOPICS_PATH)
        try:
            self.zk.create(f"{DELETE_TOPICS_PATH}/{name}")
        except NodeExistsError:
            pass
        try:
            self.zk.delete(path, recursive=True)
        except NoNodeError:
            pass
        try:
            self.zk.delete(f"{DELETE_TOPICS_PATH}/{name}")
        except NoNodeError:
            pass

    def state_path(self, topic: str, partition: int) -> str:
        """The partition's state znode."""
        return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """The partition's leader/epoch/ISR with its znode version. Raises :class:`UnknownTopicError`."""
        try:
            data, stat = self.zk.get(self.state_path(topic, partition))
        except NoNodeError:
            raise UnknownTopicError(topic) from None
        return PartitionState.from_json(data, stat.version)

    def set_partition_state(self, topic: str, partition: int, state: PartitionState) -> PartitionState:
        """Write a new state if the znode is still at ``state.version`` (compare-and-set).

        Raises:
            kazoo.exceptions.BadVersionError: someone else changed it first.
        """
        stat = self.zk.set(self.state_path(topic, partition), _dump(state.to_json()), version=state.version)
        return PartitionState(state.leader, state.leader_epoch, state.isr, state.controller_epoch, stat.version)

    # -- consumer groups ------------------------------------------------------------------------

    def group_generation(self, group: str) -> int | None:
        """The group's generation, or None when it has no membership state."""
        try:
            return int(_load(self.zk.get(f"{CONSUMERS_PATH}/{group}")[0]).get("generation"))
        except (NoNodeError, TypeError, ValueError):
            return None

    def bump_group_generation(self, group: str) -> int:
        """Start a new generation of ``group`` (a rebalance); returns it. Compare-and-set on the znode."""
        path = f"{CONSUMERS_PATH}/{group}"
        self.zk.ensure_path(path)
        while True:
            data, stat = self.zk.get(path)
            generation = int(_load(data).get("generation", 0)) + 1
            try:
                self.zk.set(path, _dump({"generation": generation}), version=stat.version)
                return generation
            except BadVersionError:
                continue

    def group_members(self, group: str) -> list[str]:
        """Ids of the group's live members."""
        try:
            return sorted(self.zk.get_children(f"{CONSUMERS_PATH}/{group}/members"))
        except NoNodeError:
            return []
