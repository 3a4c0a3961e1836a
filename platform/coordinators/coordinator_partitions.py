"""The partitions of an internal compacted topic that this broker leads, each loaded into memory.

Kafka's coordinators keep their durable state in internal compacted topics and hold in memory the
partitions they lead: the group coordinator's ``GroupMetadataManager`` (``__consumer_offsets``) and the
transaction coordinator's ``TransactionStateManager`` (``__transaction_state``). The coordinator of a key
(a group, a transactional id) is the leader of partition ``abs(javaHashCode(key)) % partitions``
(:func:`~lakelog.protocol.partitioner.coordinator_partition`). :class:`CoordinatorPartitions` is their
common part, generic over the state of one partition (``S``) and the fold that builds it from records:

- **The topic, created on first need** (:meth:`CoordinatorPartitions.num_partitions` with ``create``):
  :attr:`InternalTopic.num_partitions` partitions, :attr:`InternalTopic.replication_factor` replicas
  capped at the live brokers (with a warning), ``cleanup.policy=compact`` and
  ``min.insync.replicas`` = :attr:`InternalTopic.min_isr` of the replication factor. One creation at a
  time on a broker; another broker's creation wins a race.
- **Loading** (Kafka's ``onElection``, ``loadGroupsForPartition`` / ``loadTransactionsForTxnTopicPartition``):
  when this broker becomes a partition's leader (at a leader epoch), the partition's log is read from its
  log start offset to its log end offset and its records are folded into a fresh state, off the event
  loop. Requests for its keys wait for the load (:meth:`CoordinatorPartitions.coordinated`); a failed load
  answers CoordinatorLoadInProgressError and loads again at the next request or role change.
- **Unloading** (``onResignation``): when it stops leading, the state is dropped; requests waiting for
  the load answer NotCoordinatorError.

Writes are the owner's: it appends records with ``acks=all`` and, once they are acknowledged, changes
the state of the partition loaded *then* (:meth:`CoordinatorPartitions.coordinated` again): a re-election
meanwhile reloaded it from the log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Generic, Sized, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.coordinators.partition_writer import PartitionRole, PartitionWriter
from lakelog.log_tables.schema import ATTRIBUTES, CONTROL_BIT
from lakelog.protocol.partitioner import coordinator_partition
from lakelog.replication.errors import (
    CoordinatorLoadInProgressError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    NotLeaderError,
    TopicExistsError,
    UnknownTopicError,
)
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

#: Arrow bytes read per step of a load.
LOAD_BYTES = 16 * 1024 * 1024

S = TypeVar("S", bound=Sized)
T = TypeVar("T")

#: Errors after which a request to a key's coordinator is sent again: the coordinator moved
#: (NOT_COORDINATOR), is loading (COORDINATOR_LOAD_IN_PROGRESS), or is being elected.
COORDINATOR_MOVING = (NotCoordinatorError, CoordinatorLoadInProgressError, NotLeaderError, LeaderNotAvailableError)


async def retry_while_moving(call: Callable[[], Awaitable[T]], *, timeout_ms: int) -> T:
    """``await call()``, again after each :data:`COORDINATOR_MOVING` error (backoff 50 ms doubling up to
    1 s) for up to ``timeout_ms`` (``request.timeout.ms``), as Kafka's clients look the coordinator up
    again and resend. Raises the last such error after the timeout, any other error at once."""
    deadline, backoff = time.monotonic() + timeout_ms / 1000.0, 0.05
    while True:
        try:
            return await call()
        except COORDINATOR_MOVING:
            if time.monotonic() + backoff > deadline:
                raise
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)


def capped_min_isr(replication_factor: int, *, min_isr: int) -> int:
    """``min.insync.replicas`` of an internal topic with ``replication_factor`` replicas: ``min_isr``, but at
    most ``replication_factor - 1`` and at least 1, so a write survives the loss of one broker while the
    partition stays writable with one replica down (3 replicas: 2; 1 or 2 replicas: 1)."""
    return max(1, min(min_isr, replication_factor - 1))


#: The columns a load folds: the records, and what says which belong to a transaction (a transactional
#: offset commit's records count only once their commit marker follows).
LOAD_COLUMNS = ["offset", "key", "value", "producer_id", ATTRIBUTES]


def without_control_records(rows: pa.Table) -> pa.Table:
    """``rows`` (with :data:`~lakelog.log_tables.schema.ATTRIBUTES`) without transaction markers."""
    if rows.num_rows == 0 or not pc.any(pc.not_equal(pc.bit_wise_and(rows[ATTRIBUTES], CONTROL_BIT), 0)).as_py():
        return rows
    return rows.filter(pc.equal(pc.bit_wise_and(rows[ATTRIBUTES], CONTROL_BIT), 0))


@dataclasses.dataclass(frozen=True)
class InternalTopic:
    """How an internal topic is created, and the words its coordinator logs and answers with.

    Attributes:
        name: the topic (``__consumer_offsets``).
        num_partitions: partitions at creation (``offsets.topic.num.partitions``).
        replication_factor: wanted replicas (``offsets.topic.replication.factor``), capped at the live brokers.
        replication_factor_key: the setting's Kafka name, for the warning when it is capped.
        min_isr: ``min.insync.replicas`` of a replication factor.
        keys: what the state holds, plural, for log lines (``groups``).
        missing: NotCoordinatorError's message when the topic does not exist and may not be created.
    """

    name: str
    num_partitions: int
    replication_factor: int
    replication_factor_key: str
    min_isr: Callable[[int], int]
    keys: str
    missing: str


@dataclasses.dataclass
class LoadedPartition(Generic[S]):
    """One partition this broker leads (at ``leader_epoch``): its ``state``, valid once ``ready`` is done
    without an exception."""

    leader_epoch: int
    state: S
    ready: asyncio.Future

    @property
    def loaded(self) -> bool:
        """True once the load finished without error."""
        return self.ready.done() and not self.ready.cancelled() and self.ready.exception() is None


class CoordinatorPartitions(Generic[S]):
    """The partitions of ``topic`` this broker leads, each folded into memory (see the module docstring).

    Args:
        topic: the internal topic.
        broker_id: this broker's ``broker.id`` (log lines, errors).
        cache: topic metadata and live brokers.
        writer: the local replicas (their roles, appends, local reads).
        create_topic: creates a topic (``Broker.create_topic``).
        new_state: an empty state (``dict``).
        fold: folds log rows (:data:`LOAD_COLUMNS`, in offset order, transaction markers included: see
            :func:`without_control_records`) into a state; returns the records applied.
        on_loaded: called in the event loop with ``(partition, state)`` after each load.

    Call :meth:`start` inside the serving event loop (it listens to role changes), :meth:`stop` at the end.
    """

    def __init__(self, topic: InternalTopic, *, broker_id: int, cache: MetadataCache, writer: PartitionWriter,
                 create_topic: Callable[..., Awaitable[TopicMetadata]], new_state: Callable[[], S],
                 fold: Callable[[S, pa.Table], int], on_loaded: Callable[[int, S], None] | None = None) -> None:
        self.topic = topic
        self.broker_id = broker_id
        self.cache = cache
        self.writer = writer
        self._create_topic = create_topic
        self._new_state = new_state
        self._fold = fold
        self.on_loaded = on_loaded
        self._loaded: dict[int, LoadedPartition[S]] = {}
        self._creating: asyncio.Task | None = None

    # -- roles ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen to the role changes of the local replicas and load the partitions this broker leads already."""
        self.writer.add_role_listener(self.on_role_change)
        for part in self.writer.roles():
            self.on_role_change(part)

    def stop(self) -> None:
        """Stop listening; drop every loaded partition."""
        self.writer.remove_role_listener(self.on_role_change)
        for p in list(self._loaded):
            self._unload(p)

    def on_role_change(self, part: PartitionRole) -> None:
        """A replica changed role: load a partition of the topic this broker now leads (at a new leader
        epoch), drop one it stopped leading. In the event loop."""
        if part.topic != self.topic.name:
            return
        loaded = self._loaded.get(part.partition)
        if part.is_leader:
            if loaded is None or loaded.leader_epoch != part.leader_epoch:
                self._unload(part.partition)
                entry = LoadedPartition(part.leader_epoch, self._new_state(),
                                        asyncio.get_running_loop().create_future())
                self._loaded[part.partition] = entry
                asyncio.get_running_loop().create_task(self._load(part, entry), name=f"load-{part.name}")
        elif loaded is not None:
            self._unload(part.partition)

    def _unload(self, partition: int) -> None:
        loaded = self._loaded.pop(partition, None)
        if loaded is not None:
            if not loaded.ready.done():
                loaded.ready.set_exception(NotCoordinatorError(
                    f"Broker {self.broker_id} stopped leading {self.topic.name}-{partition}; retry."))
                loaded.ready.exception()
            log.info("broker %d no longer coordinates the %s of %s-%d (%d %s dropped)", self.broker_id,
                     self.topic.keys, self.topic.name, partition, len(loaded.state), self.topic.keys)

    async def _load(self, part: PartitionRole, entry: LoadedPartition[S]) -> None:
        """Read the partition's log from its start to its end and fold it into ``entry``."""
        started = time.perf_counter()
        try:
            state, records = await asyncio.to_thread(self._read_state, part)
        except Exception as e:
            log.exception("loading the %s of %s failed", self.topic.keys, part.name)
            if not entry.ready.done():
                entry.ready.set_exception(CoordinatorLoadInProgressError(f"Loading {part.name} failed ({e}); retry."))
                entry.ready.exception()
            if self._loaded.get(part.partition) is entry:
                del self._loaded[part.partition]  # the next role change (or request) loads again
            return
        if self._loaded.get(part.partition) is not entry:
            return  # unloaded meanwhile
        entry.state = state
        entry.ready.set_result(None)
        log.info("broker %d coordinates the %s of %s at leader epoch %d: %d %s from %d records in %.0f ms",
                 self.broker_id, self.topic.keys, part.name, entry.leader_epoch, len(state), self.topic.keys,
                 records, (time.perf_counter() - started) * 1000)
        if self.on_loaded is not None:
            try:
                self.on_loaded(part.partition, state)
            except Exception:
                log.exception("the load listener of %s failed", part.name)

    def _read_state(self, part: PartitionRole) -> tuple[S, int]:
        """The state of a partition's log (blocking). Everything up to the log end offset: as the leader,
        every record in the log is one the coordinator's predecessors wrote (and the ISR will hold)."""
        state, records = self._new_state(), 0
        start, end = self.writer.log_offsets(part.topic, part.partition)
        while start < end:
            rows = self.writer.read_local(part.topic, part.partition, start, end_offset=end, max_bytes=LOAD_BYTES,
                                          columns=LOAD_COLUMNS)
            if rows.num_rows == 0:
                break
            records += self._fold(state, rows)
            start = rows["offset"][rows.num_rows - 1].as_py() + 1
        return state, records

    async def coordinated(self, key: str, *, what: str) -> tuple[int, LoadedPartition[S]]:
        """``(partition, the loaded partition)`` of ``key`` when this broker coordinates it, once loaded.

        Args:
            key: the group or transactional id.
            what: how errors name it (``group 'g1'``).

        Raises:
            NotCoordinatorError: this broker does not lead the key's partition, or the topic does not exist.
            CoordinatorLoadInProgressError: the partition's load failed (retriable).
        """
        partition = coordinator_partition(key, await self.num_partitions())
        entry = self._loaded.get(partition)
        part = self.writer.role(self.topic.name, partition)
        if part is not None and part.is_leader and (entry is None or entry.leader_epoch != part.leader_epoch):
            self.on_role_change(part)  # a role change not heard of yet (the listener runs after the lock)
            entry = self._loaded.get(partition)
        if entry is None:
            raise NotCoordinatorError(f"Broker {self.broker_id} is not the coordinator of {what} "
                                      f"({self.topic.name}-{partition}); retry.")
        await asyncio.shield(entry.ready)
        return partition, entry

    def holds(self, entry: LoadedPartition[S]) -> bool:
        """Whether ``entry`` (from :meth:`coordinated`) is still loaded here: False once this broker stopped
        leading its partition or reloaded it at a new leader epoch (what was kept beside it is stale)."""
        return any(loaded is entry for loaded in self._loaded.values())

    async def coordinator_url(self, key: str, *, what: str, create: bool = False) -> str | None:
        """The URL of ``key``'s coordinator (the leader of its partition); None when it is this broker.

        Args:
            key: the group or transactional id.
            what: how errors name it (``group 'g1'``).
            create: create the topic when missing.

        Raises:
            NotCoordinatorError: the topic does not exist (without ``create``).
            LeaderNotAvailableError: the partition has no live leader (retriable).
        """
        partition = coordinator_partition(key, await self.num_partitions(create=create))
        part = self.writer.role(self.topic.name, partition)
        if part is not None and part.is_leader:
            return None
        state = await self.cache.partition_state(self.topic.name, partition)
        if state.leader == self.broker_id:
            return None
        url = await self.cache.broker_url(state.leader) if state.leader >= 0 else None
        if url is None:
            raise LeaderNotAvailableError(f"The coordinator of {what} ({self.topic.name}-{partition}) is being "
                                          "elected; retry.")
        return url

    async def coordinator_id(self, key: str) -> int | None:
        """The broker id of ``key``'s coordinator (the leader of its partition; this broker's id without a
        ZooKeeper read when it leads it); None when the topic does not exist or the partition has no leader."""
        try:
            partition = coordinator_partition(key, await self.num_partitions())
        except NotCoordinatorError:
            return None
        part = self.writer.role(self.topic.name, partition)
        if part is not None and part.is_leader:
            return self.broker_id
        leader = (await self.cache.partition_state(self.topic.name, partition)).leader
        return leader if leader >= 0 else None

    async def coordinator_brokers(self) -> dict[int, str | None]:
        """Every broker that leads a partition of the topic: ``{broker id: its URL}``, None for this broker;
        ``{}`` when the topic does not exist. What a cluster-wide listing asks (Kafka's ListGroups and
        ListTransactions sent to every broker).

        Raises:
            LeaderNotAvailableError: a partition has no live leader, or a leader is not live (retriable).
        """
        try:
            count = await self.num_partitions()
        except NotCoordinatorError:
            return {}
        states = await asyncio.gather(*(self.cache.partition_state(self.topic.name, p) for p in range(count)))
        for p, state in enumerate(states):
            if state.leader < 0:
                raise LeaderNotAvailableError(f"{self.topic.name}-{p} has no leader; its {self.topic.keys} are "
                                              "unknown; retry.")
        brokers: dict[int, str | None] = {}
        for leader in sorted({state.leader for state in states}):
            url = None if leader == self.broker_id else await self.cache.broker_url(leader)
            if url is None and leader != self.broker_id:
                raise LeaderNotAvailableError(f"Broker {leader} (a coordinator) is not live; retry.")
            brokers[leader] = url
        return brokers

    async def wait_loaded(self) -> None:
        """Return once every partition of the topic that ZooKeeper says this broker leads is loaded (a listing
        right after a start or an election sees every key; Kafka answers COORDINATOR_LOAD_IN_PROGRESS then).
        Nothing to wait for when the topic does not exist.

        Raises:
            CoordinatorLoadInProgressError: a partition this broker leads is not being loaded yet, or its load
                failed (retriable: :func:`retry_while_moving`).
        """
        try:
            count = await self.num_partitions()
        except NotCoordinatorError:
            return
        for p in range(count):
            if (await self.cache.partition_state(self.topic.name, p)).leader != self.broker_id:
                continue
            entry = self._loaded.get(p)
            part = self.writer.role(self.topic.name, p)
            if part is not None and part.is_leader and (entry is None or entry.leader_epoch != part.leader_epoch):
                self.on_role_change(part)
                entry = self._loaded.get(p)
            if entry is None:
                raise CoordinatorLoadInProgressError(f"{self.topic.name}-{p} is led here but not loaded yet; retry.")
            await asyncio.shield(entry.ready)

    def loaded(self) -> Iterator[tuple[int, S]]:
        """``(partition, state)`` of every partition loaded now, by partition."""
        for p in sorted(self._loaded):
            entry = self._loaded.get(p)
            if entry is not None and entry.loaded:
                yield p, entry.state

    def apply_when_loaded(self, partition: int, change: Callable[[S], object]) -> None:
        """Run ``change(state)`` on ``partition``'s state now when it is loaded, or once its load under way
        finishes (a change that happened in the log meanwhile, e.g. a transaction marker written while the
        load read the log: it may or may not be in what the load read, so ``change`` must be idempotent).
        Nothing when this broker does not lead the partition."""
        entry = self._loaded.get(partition)
        if entry is None:
            return
        if entry.ready.done():
            if entry.loaded:
                change(entry.state)
            return

        def after_load(_: asyncio.Future) -> None:
            if self._loaded.get(partition) is entry and entry.loaded:
                change(entry.state)
        entry.ready.add_done_callback(after_load)

    # -- the internal topic ---------------------------------------------------------------------

    async def num_partitions(self, *, create: bool = False) -> int:
        """Partitions of the topic; with ``create``, the topic is created when missing.

        Raises: NotCoordinatorError (without ``create``: the topic does not exist yet).
        """
        meta = self.cache.cached_topic(self.topic.name)
        if meta is None:
            try:
                meta = await self.writer.topic(self.topic.name)
            except UnknownTopicError:
                if not create:
                    raise NotCoordinatorError(self.topic.missing) from None
                meta = await self._ensure_topic()
        return meta.partitions_count

    async def topic_exists(self) -> bool:
        """Whether the topic exists (read from ZooKeeper when not cached)."""
        if self.cache.cached_topic(self.topic.name) is not None:
            return True
        try:
            await self.writer.topic(self.topic.name)
            return True
        except UnknownTopicError:
            return False

    async def _ensure_topic(self) -> TopicMetadata:
        """Create the topic (one creation at a time on this broker; another broker's wins a race)."""
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        return await asyncio.shield(self._creating)

    async def _create(self) -> TopicMetadata:
        t = self.topic
        live = len(await self.cache.brokers())
        rf = min(t.replication_factor, max(live, 1))
        if rf < t.replication_factor:
            log.warning("creating %s with replication factor %d: %s=%d but only %d broker(s) are live", t.name, rf,
                        t.replication_factor_key, t.replication_factor, live)
        try:
            meta = await self._create_topic(
                t.name, partitions=t.num_partitions, replication_factor=rf,
                configs={"cleanup.policy": "compact", "min.insync.replicas": str(t.min_isr(rf))})
            log.info("created %s: %d partitions, replication factor %d", t.name, meta.partitions_count, rf)
            return meta
        except TopicExistsError:
            return await self.writer.topic(t.name)
