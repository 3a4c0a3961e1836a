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

Every znode holds UTF-8 JSON. Partition state and topic znodes are updated with znode-version checks
(a topic's configs change with ``lakelog topics alter``, its partition list grows with
``--partitions``; every broker watches the topic znodes, :mod:`lakelog.replication.topic_changes`).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from lakelog.config import TopicConfig
from lakelog.replication.errors import (
    BrokerIdInUseError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicChangeConflictError,
    TopicExistsError,
    UnknownTopicConfigError,
    UnknownTopicError,
)
from lakelog.replication.topic_configs import (
    ConfigChange,
    TopicConfigEntry,
    altered_configs,
    config_changes,
    config_entries,
    explicit_configs,
    known_configs,
)
from lakelog.replication.zookeeper_errors import zookeeper_errors_wrapped

log = logging.getLogger(__name__)

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
#: The internal topics (Kafka's ``Topic.INTERNAL_TOPICS``): written only by their coordinators, never by a
#: client's produce (Kafka: "Cannot append to internal topic", INVALID_TOPIC_EXCEPTION).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: Partitions one add_partitions call may add: its ZooKeeper transaction (the topic znode and two znodes
#: per new partition, 249-character topic names included) must stay below ZooKeeper's 1 MB request
#: limit (``jute.maxbuffer``), past which the server drops the connection instead of answering.
MAX_PARTITIONS_ADDED = 1000
#: compare-and-set attempts of a topic znode change before TopicChangeConflictError
_TOPIC_CAS_ATTEMPTS = 20

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


#: Deletes per ZooKeeper transaction when a subtree is removed (well inside the server's 1 MB request limit).
DELETE_TREE_BATCH = 1000


def delete_tree(zk: KazooClient, path: str) -> None:
    """Delete ``path`` and everything under it, if it exists.

    kazoo's ``delete(recursive=True)`` makes two round trips per znode (3 s for a topic of 1,000
    partitions); here each level is listed with pipelined requests and the znodes, leaves first, go in
    transactions of :data:`DELETE_TREE_BATCH` deletes. A transaction that fails (a znode created or
    removed meanwhile) leaves the rest to kazoo's recursive delete.
    """
    levels = [[path]]
    while levels[-1]:
        listed = [(parent, zk.get_children_async(parent)) for parent in levels[-1]]
        children = []
        for parent, answer in listed:
            try:
                children += [f"{parent}/{child}" for child in answer.get()]
            except NoNodeError:
                pass
        levels.append(children)
    doomed = [p for level in reversed(levels) for p in level]
    for i in range(0, len(doomed), DELETE_TREE_BATCH):
        tx = zk.transaction()
        for p in doomed[i:i + DELETE_TREE_BATCH]:
            tx.delete(p)
        if any(isinstance(r, Exception) for r in tx.commit()):
            try:
                zk.delete(path, recursive=True)
            except NoNodeError:
                pass
            return


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
    #: ``https`` when the broker serves TLS (``ssl.certfile``), else ``http``
    scheme: str = "http"
    #: the broker's Kafka listeners as Kafka registers them (``PLAINTEXT://host:port``, one per listener of
    #: ``advertised.listeners``); empty when the broker opens none
    endpoints: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        """``http://host:port`` (or ``https://``) of the broker's gateway."""
        return f"{self.scheme}://{self.host}:{self.port}"

    def kafka_endpoint(self, listener: str) -> tuple[str, int] | None:
        """``(host, port)`` of the Kafka listener named ``listener`` (``PLAINTEXT``), or None."""
        for endpoint in self.endpoints:
            name, _, address = endpoint.partition("://")
            if name == listener:
                host, _, port = address.rpartition(":")
                return host.strip("[]"), int(port)
        return None


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
    """A topic as stored in ZooKeeper: id, replica assignment per partition, configs (Kafka names).

    ``configs`` holds only the explicitly set configs (Kafka's DYNAMIC_TOPIC_CONFIG ones, what the
    topic znode stores); :attr:`config` fills in the rest from ``defaults`` (the broker's topic config
    defaults, :meth:`BrokerSettings.topic_config_defaults <lakelog.config.BrokerSettings.topic_config_defaults>`,
    not stored) and then :class:`TopicConfig`'s own. ``version`` is the topic znode's version (-1 when
    unknown): a change of configs or partitions bumps it, so a newer read can be told from an older one.
    """

    name: str
    topic_id: str
    replicas: dict[int, list[int]]
    configs: dict[str, str]
    version: int = field(default=-1, compare=False)
    defaults: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def partitions_count(self) -> int:
        return len(self.replicas)

    @property
    def replication_factor(self) -> int:
        return len(self.replicas[0]) if self.replicas else 0

    @property
    def config(self) -> TopicConfig:
        """The validated :class:`TopicConfig`: ``configs`` over the broker's ``defaults`` over the built-in ones."""
        return TopicConfig.parse(self.configs, defaults=self.defaults)

    def to_json(self) -> dict:
        """The topic znode's JSON: ``{"topic_id", "partitions": {"0": [1, 2]}, "config": {...}}``."""
        return {"topic_id": self.topic_id, "partitions": {str(p): r for p, r in sorted(self.replicas.items())},
                "config": dict(self.configs)}

    @classmethod
    def from_json(cls, name: str, data: bytes, version: int = -1, *,
                  defaults: dict[str, str] | None = None) -> "TopicMetadata":
        """Parse the topic znode's JSON (``version`` = its znode version; ``defaults`` = the broker's
        topic config defaults)."""
        d = _load(data)
        return cls(name=name, topic_id=d["topic_id"],
                   replicas={int(p): list(r) for p, r in d["partitions"].items()},
                   configs=dict(d.get("config", {})), version=version, defaults=dict(defaults or {}))

    def config_entries(self) -> list[TopicConfigEntry]:
        """Every topic config with its effective value and source (DYNAMIC_TOPIC_CONFIG,
        STATIC_BROKER_CONFIG from ``defaults``, DEFAULT_CONFIG), sorted by name (``kafka-configs
        --describe --all``); see :func:`~lakelog.replication.topic_configs.config_entries`. Raises
        :class:`ConfigError` when the stored configs do not validate."""
        return config_entries(self.configs, defaults=self.defaults)

    def config_entry(self, name: str) -> TopicConfigEntry:
        """One config of :meth:`config_entries`.

        Raises:
            UnknownTopicConfigError: ``name`` is not a topic config.
        """
        for entry in self.config_entries():
            if entry.name == name:
                return entry
        raise UnknownTopicConfigError(f"Config '{name}' of topic '{self.name}' not found: it is not a topic config "
                                      f"(known: {', '.join(known_configs())}).")


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


@zookeeper_errors_wrapped
class ClusterMetadata:
    """Reads and writes lakelog's metadata in ZooKeeper through a started kazoo client.

    Every public method raises :class:`~lakelog.replication.errors.ZooKeeperUnavailableError` (503 / 50304,
    retriable) when ZooKeeper cannot be reached, never kazoo's own errors
    (:mod:`lakelog.replication.zookeeper_errors`).

    Args:
        zk: a connected :class:`kazoo.client.KazooClient` (its chroot, if any, already applied).
        topic_defaults: the broker's topic config defaults
            (:meth:`BrokerSettings.topic_config_defaults <lakelog.config.BrokerSettings.topic_config_defaults>`):
            every :class:`TopicMetadata` read or written here carries them, so a config a topic does not
            set takes the broker's value; they are never written to a topic znode. Default: none.
    """

    def __init__(self, zk: KazooClient, *, topic_defaults: dict[str, str] | None = None) -> None:
        self.zk = zk
        self.topic_defaults = dict(topic_defaults or {})

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

    def register_broker(self, info: BrokerInfo, *, previous_session_wait_ms: int = 0) -> None:
        """Create the broker's ephemeral znode ``/lakelog/brokers/ids/{id}``.

        A registration left by an earlier process of this broker (killed with SIGKILL: its ZooKeeper
        session lives on until ``zookeeper.session.timeout.ms`` after its last heartbeat) is waited for, up
        to ``previous_session_wait_ms`` (logged): once ZooKeeper expires that session its znode goes and
        this one is created, so a supervisor restarting the broker at once succeeds. Kafka does the same
        since KAFKA-7165 (``KafkaZkClient.registerBroker``: a node whose ephemeral owner is not this
        session is another session's). A znode this session already owns (a retried create) counts as
        registered. A registration still there after the wait belongs to a live broker.

        Raises:
            BrokerIdInUseError: a live broker holds this id (its registration outlived the wait).
        """
        path = f"{BROKERS_PATH}/{info.broker_id}"
        data = {"host": info.host, "port": info.port, "rack": info.rack, "started_at": info.started_at or int(time.time() * 1000),
                "scheme": info.scheme, "endpoints": list(info.endpoints)}
        deadline = time.monotonic() + previous_session_wait_ms / 1000.0
        waited = False
        while True:
            try:
                self.zk.create(path, _dump(data), ephemeral=True, makepath=True)
                if waited:
                    log.info("broker.id %d registered once the earlier registration expired", info.broker_id)
                return
            except NodeExistsError:
                pass
            gone = threading.Event()
            stat = self.zk.exists(path, watch=lambda _event: gone.set())
            if stat is None:
                continue  # it went between the create and the look
            if stat.ephemeralOwner == self.zk.client_id[0]:
                return  # ours: a create retried after a connection loss
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise BrokerIdInUseError(
                    f"broker.id {info.broker_id} is already registered by a live broker (ZooKeeper session "
                    f"0x{stat.ephemeralOwner:x}, still there after {previous_session_wait_ms} ms): give this "
                    f"broker another broker.id or stop the other one")
            if not waited:
                log.warning("broker.id %d is registered by ZooKeeper session 0x%x, not this one (a process of this "
                            "broker killed just before?): waiting up to %d ms (zookeeper.session.timeout.ms) for "
                            "that session to expire", info.broker_id, stat.ephemeralOwner, previous_session_wait_ms)
                waited = True
            gone.wait(remaining_s)

    def brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers by id."""
        out = {}
        for child in self.zk.get_children(BROKERS_PATH):
            try:
                data = _load(self.zk.get(f"{BROKERS_PATH}/{child}")[0])
            except NoNodeError:
                continue
            out[int(child)] = BrokerInfo(int(child), data["host"], int(data["port"]), data.get("rack"), data.get("started_at", 0),
                                         data.get("scheme", "http"), tuple(data.get("endpoints", ())))
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
            data, stat = self.zk.get(self.topic_path(name))
        except NoNodeError:
            raise UnknownTopicError(name) from None
        return self.topic_from_json(name, data, stat.version)

    def topic_from_json(self, name: str, data: bytes, version: int = -1) -> TopicMetadata:
        """Parse a topic znode's data (read by a watch, say), with this broker's topic config defaults."""
        return TopicMetadata.from_json(name, data, version, defaults=self.topic_defaults)

    def topic_path(self, name: str) -> str:
        """The topic's znode."""
        return f"{TOPICS_PATH}/{name}"

    def create_topic(self, name: str, *, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None, leader_epoch: int = 0,
                     validate_only: bool = False) -> TopicMetadata:
        """Create a topic: its znode and one state znode per partition, in one ZooKeeper transaction.

        The first replica of each partition is its preferred leader and starts as leader; the ISR is
        the full replica list. Only ``configs`` are stored (validated over the broker's topic defaults,
        which stay out of the znode: a config the topic does not set follows the broker's setting).
        ``validate_only`` (Kafka's CreateTopics ``validateOnly``): every check, the topic's existence
        included, and the topic as it would be created; nothing is written.

        Raises:
            InvalidTopicError, InvalidPartitionsError, InvalidReplicationFactorError,
            lakelog.errors.ConfigError (a bad config), TopicExistsError.
        """
        validate_topic_name(name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}.")
        explicit = explicit_configs(configs or {}, defaults=self.topic_defaults)
        brokers = list(self.brokers())
        if not brokers:
            raise InvalidReplicationFactorError("No live brokers to place replicas on.")
        replicas = assign_replicas(brokers, partitions, replication_factor,
                                   start_index=zlib.crc32(name.encode()) % len(brokers))
        meta = TopicMetadata(name=name, topic_id=uuid.uuid4().hex, replicas=replicas, configs=explicit, version=0,
                             defaults=self.topic_defaults)
        path = f"{TOPICS_PATH}/{name}"
        if validate_only:
            if self.zk.exists(path):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            return meta
        tx = self.zk.transaction()
        tx.create(path, _dump(meta.to_json()))
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
        delete_tree(self.zk, path)
        try:
            self.zk.delete(f"{DELETE_TOPICS_PATH}/{name}")
        except NoNodeError:
            pass

    def alter_topic_configs(self, name: str, changes: Iterable[ConfigChange] = (), *,
                            set: dict[str, str] | None = None, delete: list[str] | None = None,
                            validate_only: bool = False) -> TopicMetadata:
        """Set and delete configs of an existing topic (``kafka-configs --alter``, Kafka's
        IncrementalAlterConfigs with SET and DELETE).

        Steps: 1. read the topic znode and its version; 2. compute and validate the merged configs
        (:func:`altered_configs`: a key named twice is refused); 3. write them back if the znode is still at that version, else start
        again from 1 (a concurrent change of configs or partitions is never lost). Every broker's watch
        on the topic znode applies the new configs to its open logs (:mod:`lakelog.replication.topic_changes`).

        Args:
            name: the topic.
            changes: ``(name, "SET", value)`` and ``(name, "DELETE", None)`` (REST Proxy's batch alter).
            set: more configs to set, Kafka names and string values (``{"retention.ms": "86400000"}``).
            delete: more configs to delete; each goes back to its default (the broker's, if it has one).
            validate_only: check the change, write nothing (REST Proxy's ``validate_only``).

        Returns:
            The topic as written (or as it would be, with ``validate_only``).

        Raises:
            UnknownTopicError; lakelog.errors.ConfigError naming the key (nothing written);
            TopicChangeConflictError: the znode kept changing under us (retriable).
        """
        changes = [*changes, *config_changes(set=set, delete=delete)]
        for _ in range(_TOPIC_CAS_ATTEMPTS):
            meta = self.topic(name)
            configs = altered_configs(meta.configs, changes, defaults=self.topic_defaults)
            new = replace(meta, configs=configs)
            if validate_only or configs == meta.configs:
                return new
            try:
                stat = self.zk.set(self.topic_path(name), _dump(new.to_json()), version=meta.version)
            except BadVersionError:
                continue
            except NoNodeError:
                raise UnknownTopicError(name) from None
            return replace(new, version=stat.version)
        raise TopicChangeConflictError(f"Topic '{name}' kept changing while its configs were altered; retry.")

    def add_partitions(self, name: str, *, partitions_count: int, validate_only: bool = False) -> TopicMetadata:
        """Grow a topic to ``partitions_count`` partitions (``kafka-topics --alter --partitions``, Kafka's
        CreatePartitions). Partitions are never removed.

        The new partitions' replicas are assigned as :meth:`create_topic` assigns them
        (:func:`assign_replicas` over the live brokers, the existing replication factor), continuing
        the topic's pattern: the start index is the position of partition 0's first replica among the
        live brokers, as Kafka's ``AdminZkClient.addPartitions``. In one ZooKeeper transaction the
        topic znode gets the longer partition list (version-checked; a concurrent change starts the
        step again) and each new partition its state znode: the first replica leads at leader epoch 0
        with the full replica list as ISR (as topic creation writes them; every replica starts empty).
        The brokers' watches open the new partitions' logs and take up their roles.

        Raises:
            UnknownTopicError; InvalidPartitionsError: ``partitions_count`` not above the current count
            (Kafka's message), above :data:`MAX_PARTITIONS`, or more than :data:`MAX_PARTITIONS_ADDED` new
            ones (ask in steps); InvalidReplicationFactorError: fewer live brokers than
            the replication factor; TopicChangeConflictError (retriable).
        """
        for _ in range(_TOPIC_CAS_ATTEMPTS):
            meta = self.topic(name)
            current = meta.partitions_count
            if partitions_count < current:
                raise InvalidPartitionsError(f"Topic currently has {current} partitions, which is higher than "
                                             f"the requested {partitions_count}.")
            if partitions_count == current:
                raise InvalidPartitionsError(f"Topic already has {current} partitions.")
            if partitions_count > MAX_PARTITIONS:
                raise InvalidPartitionsError(f"Number of partitions must be between 1 and {MAX_PARTITIONS}, "
                                             f"got {partitions_count}.")
            if partitions_count - current > MAX_PARTITIONS_ADDED:
                raise InvalidPartitionsError(
                    f"At most {MAX_PARTITIONS_ADDED} partitions can be added at a time (one ZooKeeper transaction); "
                    f"topic '{name}' has {current}, so ask for at most {current + MAX_PARTITIONS_ADDED} and "
                    f"grow it in steps.")
            added = self._assign_new_partitions(meta, partitions_count)
            new = replace(meta, replicas={**meta.replicas, **added})
            if validate_only:
                return new
            path = self.topic_path(name)
            tx = self.zk.transaction()
            tx.set_data(path, _dump(new.to_json()), version=meta.version)  # create_topic made .../partitions
            for p, r in sorted(added.items()):
                tx.create(f"{path}/partitions/{p}")
                tx.create(f"{path}/partitions/{p}/state", _dump(PartitionState(leader=r[0], leader_epoch=0,
                                                                               isr=list(r)).to_json()))
            results = tx.commit()
            failed = [r for r in results if isinstance(r, Exception)]
            if not failed:
                return replace(new, version=meta.version + 1)
            if any(isinstance(r, (BadVersionError, NodeExistsError)) for r in failed):
                continue  # the topic changed (or another alter added these partitions): decide again
            if any(isinstance(r, NoNodeError) for r in failed):
                raise UnknownTopicError(name)
            raise failed[0]
        raise TopicChangeConflictError(f"Topic '{name}' kept changing while partitions were added; retry.")

    def _assign_new_partitions(self, meta: TopicMetadata, partitions_count: int) -> dict[int, list[int]]:
        """Replicas of partitions ``meta.partitions_count .. partitions_count - 1``."""
        brokers = sorted(self.brokers())
        if not brokers:
            raise InvalidReplicationFactorError("No live brokers to place replicas on.")
        first = meta.replicas.get(0, [None])[0]
        start = brokers.index(first) if first in brokers else zlib.crc32(meta.name.encode()) % len(brokers)
        full = assign_replicas(brokers, partitions_count, meta.replication_factor, start_index=start)
        return {p: full[p] for p in range(meta.partitions_count, partitions_count)}

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
