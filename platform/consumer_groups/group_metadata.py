"""The groups' committed offsets on their coordinator: the ``__consumer_offsets`` partitions this broker
leads, loaded into memory, and the commits, reads and deletes made there.

Kafka's ``GroupMetadataManager`` for offsets (membership stays in ZooKeeper,
:mod:`lakelog.consumer_groups.membership`). The internal topic is created on first need with
``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor`` replicas (at most the
live brokers), ``cleanup.policy=compact`` and :func:`min_insync_replicas_for` its replication factor.

- **Loading.** When this broker becomes the leader of an ``__consumer_offsets`` partition (at a leader
  epoch), it reads the partition's log and folds its records into the groups' offsets (Kafka's
  ``onElection`` / ``loadGroupsForPartition``); requests for its groups wait for the load. When it stops
  leading, it drops them (``onResignation``).
- **Commits** (steps mirrored in :meth:`GroupMetadataManager.commit_local`): 1. this broker must lead the
  group's partition and have loaded it; 2. a commit from an older generation than the group's is refused
  (ILLEGAL_GENERATION); 3. an idempotent commit (``app_id``, ``version``) at or below the application's
  newest version is a replay: answered without writing; 4. its records are appended with ``acks=all``
  (one append: all records of a group go to one partition); 5. the view is updated and the commit answered.

Requests from any broker reach it through :class:`~lakelog.consumer_groups.coordinator.GroupCoordinator`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.errors import CoordinatorLoadInProgressError, IllegalGenerationError, NotCoordinatorError
from lakelog.consumer_groups.offset_records import (
    OFFSETS_TOPIC,
    CommittedOffset,
    GroupOffsets,
    apply_records,
    commit_records,
    partition_for,
    tombstone_records,
)
from lakelog.log_tables.records import normalize_produce_batch
from lakelog.replication.errors import TopicExistsError, UnknownTopicError
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.partition import Partition
from lakelog.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

#: Arrow bytes read per step of a load.
LOAD_BYTES = 16 * 1024 * 1024


@dataclasses.dataclass
class _Loaded:
    """The groups of one ``__consumer_offsets`` partition this broker leads (at ``leader_epoch``)."""

    leader_epoch: int
    groups: dict[str, GroupOffsets]
    ready: asyncio.Future  # done when loaded (or failed)


def min_insync_replicas_for(replication_factor: int) -> int:
    """``min.insync.replicas`` of the internal topic: 2 from 3 replicas on (a commit survives the loss of
    one broker while one more is down), else 1."""
    return 2 if replication_factor >= 3 else 1


class GroupMetadataManager:
    """The groups of the ``__consumer_offsets`` partitions this broker leads (see the module docstring).

    Args:
        settings: ``broker.id``, ``offsets.topic.num.partitions``, ``offsets.topic.replication.factor``.
        cache: topic metadata and live brokers.
        replica_manager: the local replicas (their roles, logs, produce).
        create_topic: creates a topic (``Broker.create_topic``).

    Call :meth:`start` inside the serving event loop (it listens to role changes), :meth:`stop` at the end.
    """

    def __init__(self, settings: BrokerSettings, *, cache: MetadataCache, replica_manager: ReplicaManager,
                 create_topic: Callable[..., Awaitable[TopicMetadata]]) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.cache = cache
        self.replica_manager = replica_manager
        self._create_topic = create_topic
        self._loaded: dict[int, _Loaded] = {}
        self._group_locks: dict[str, asyncio.Lock] = {}
        self._creating: asyncio.Task | None = None

    # -- roles ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen to the replica manager's role changes and load the partitions this broker leads already."""
        self.replica_manager.role_listeners.append(self.on_role_change)
        for part in self.replica_manager.partitions():
            self.on_role_change(part)

    def stop(self) -> None:
        """Stop listening; forget every group."""
        if self.on_role_change in self.replica_manager.role_listeners:
            self.replica_manager.role_listeners.remove(self.on_role_change)
        for p in list(self._loaded):
            self._unload(p)

    def on_role_change(self, part: Partition) -> None:
        """A replica changed role: load an ``__consumer_offsets`` partition this broker now leads (at a new
        leader epoch), drop one it stopped leading. In the event loop."""
        if part.topic != OFFSETS_TOPIC:
            return
        loaded = self._loaded.get(part.partition)
        if part.is_leader:
            if loaded is None or loaded.leader_epoch != part.leader_epoch:
                self._unload(part.partition)
                entry = _Loaded(part.leader_epoch, {}, asyncio.get_running_loop().create_future())
                self._loaded[part.partition] = entry
                asyncio.get_running_loop().create_task(self._load(part, entry), name=f"load-{part.name}")
        elif loaded is not None:
            self._unload(part.partition)

    def _unload(self, partition: int) -> None:
        loaded = self._loaded.pop(partition, None)
        if loaded is not None:
            if not loaded.ready.done():
                loaded.ready.set_exception(NotCoordinatorError(
                    f"Broker {self.broker_id} stopped leading {OFFSETS_TOPIC}-{partition}; retry."))
                loaded.ready.exception()
            log.info("broker %d no longer coordinates the groups of %s-%d (%d groups dropped)", self.broker_id,
                     OFFSETS_TOPIC, partition, len(loaded.groups))

    async def _load(self, part: Partition, entry: _Loaded) -> None:
        """Read the partition's log from its start to its end and fold it into ``entry``."""
        started = time.perf_counter()
        try:
            groups, records = await asyncio.to_thread(self._read_groups, part)
        except Exception as e:
            log.exception("loading the groups of %s failed", part.name)
            if not entry.ready.done():
                entry.ready.set_exception(CoordinatorLoadInProgressError(f"Loading {part.name} failed ({e}); retry."))
                entry.ready.exception()
            if self._loaded.get(part.partition) is entry:
                del self._loaded[part.partition]  # the next role change (or request) loads again
            return
        if self._loaded.get(part.partition) is not entry:
            return  # unloaded meanwhile
        entry.groups = groups
        entry.ready.set_result(None)
        log.info("broker %d coordinates the groups of %s at leader epoch %d: %d groups from %d records in %.0f ms",
                 self.broker_id, part.name, entry.leader_epoch, len(groups), records,
                 (time.perf_counter() - started) * 1000)

    @staticmethod
    def _read_groups(part: Partition) -> tuple[dict[str, GroupOffsets], int]:
        """The groups of a partition's log (blocking). Everything up to the log end offset: as the leader,
        every record in the log is one the coordinator's predecessors wrote (and the ISR will hold)."""
        plog, groups, records = part.log, {}, 0
        start, end = plog.log_start_offset, plog.log_end_offset
        while start < end:
            rows = plog.read(start, max_bytes=LOAD_BYTES, end_offset=end, columns=["offset", "key", "value"])
            if rows.num_rows == 0:
                break
            records += apply_records(groups, rows)
            start = rows["offset"][rows.num_rows - 1].as_py() + 1
        return groups, records

    async def _coordinated(self, group: str) -> tuple[int, GroupOffsets | None, _Loaded]:
        """``(partition, the group's offsets or None, the loaded partition)`` when this broker coordinates
        ``group``. Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        partition = partition_for(group, await self.num_partitions())
        entry = self._loaded.get(partition)
        part = self.replica_manager.local_partition(OFFSETS_TOPIC, partition)
        if part is not None and part.is_leader and (entry is None or entry.leader_epoch != part.leader_epoch):
            self.on_role_change(part)  # a role change not heard of yet (the listener runs after the lock)
            entry = self._loaded.get(partition)
        if entry is None:
            raise NotCoordinatorError(f"Broker {self.broker_id} is not the coordinator of group '{group}' "
                                      f"({OFFSETS_TOPIC}-{partition}); retry.")
        await asyncio.shield(entry.ready)
        return partition, entry.groups.get(group), entry

    # -- the internal topic ---------------------------------------------------------------------

    async def num_partitions(self, *, create: bool = False) -> int:
        """Partitions of ``__consumer_offsets``; with ``create``, the topic is created when missing.

        Raises: NotCoordinatorError (without ``create``: no group has committed yet, so there is none).
        """
        meta = self.cache.cached_topic(OFFSETS_TOPIC)
        if meta is None:
            try:
                meta = await self.replica_manager.topic_fresh(OFFSETS_TOPIC)
            except UnknownTopicError:
                if not create:
                    raise NotCoordinatorError(f"{OFFSETS_TOPIC} does not exist yet: no group has committed "
                                              "offsets.") from None
                meta = await self._ensure_topic()
        return meta.partitions_count

    async def _ensure_topic(self) -> TopicMetadata:
        """Create ``__consumer_offsets`` (one creation at a time on this broker; another broker's wins a race)."""
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        return await asyncio.shield(self._creating)

    async def _create(self) -> TopicMetadata:
        live = len(await self.cache.brokers())
        rf = min(self.settings.offsets_topic_replication_factor, max(live, 1))
        if rf < self.settings.offsets_topic_replication_factor:
            log.warning("creating %s with replication factor %d: offsets.topic.replication.factor=%d but only %d "
                        "broker(s) are live", OFFSETS_TOPIC, rf, self.settings.offsets_topic_replication_factor, live)
        try:
            meta = await self._create_topic(
                OFFSETS_TOPIC, partitions=self.settings.offsets_topic_num_partitions, replication_factor=rf,
                configs={"cleanup.policy": "compact", "min.insync.replicas": str(min_insync_replicas_for(rf))})
            log.info("created %s: %d partitions, replication factor %d", OFFSETS_TOPIC, meta.partitions_count, rf)
            return meta
        except TopicExistsError:
            return await self.replica_manager.topic_fresh(OFFSETS_TOPIC)

    # -- on the coordinator ---------------------------------------------------------------------

    async def commit_local(self, group: str, offsets: Sequence[CommittedOffset], *,
                           current_generation: int | None = None, only_newer: bool = False) -> bool:
        """Commit ``offsets`` (of ``group``, each with its generation, app id and version) as the group's
        coordinator; steps in the module docstring.

        Args:
            current_generation: the group's generation now (ZooKeeper membership); default the highest
                generation that committed.
            only_newer: an import (:mod:`lakelog.consumer_groups.offsets_import`): keep only offsets newer
                (``commit_timestamp_ms``) than the ones committed, without fencing or replay checks.

        Returns:
            False when nothing was written (a replayed idempotent commit), else True.

        Raises:
            NotCoordinatorError, CoordinatorLoadInProgressError (retriable); IllegalGenerationError;
            the append's errors (NotEnoughReplicasError, RequestTimedOutError, ...): then the commit may or
            may not be in the log, and the coordinator's view keeps the offsets from before it.
        """
        lock = self._group_locks.setdefault(group, asyncio.Lock())
        async with lock:
            # 1. this broker coordinates the group, and has loaded it
            partition, state, _ = await self._coordinated(group)
            first = offsets[0] if offsets else None
            # 2. fence an older generation
            known = current_generation if current_generation is not None else (state.generation if state else None)
            if not only_newer and first is not None and first.generation is not None and known is not None \
                    and first.generation < known:
                raise IllegalGenerationError(
                    f"Offset commit for group '{group}' has generation {first.generation}, but the group is at "
                    f"generation {known}: the member was fenced by a rebalance and must rejoin.")
            # 3. a replayed idempotent commit writes nothing
            if not only_newer and first is not None and first.app_id is not None and first.app_version is not None \
                    and state is not None and first.app_version <= state.app_versions.get(first.app_id, -1):
                return False
            if only_newer and state is not None:
                offsets = [o for o in offsets if (old := state.offsets.get((o.topic, o.partition))) is None
                           or old.commit_timestamp_ms < o.commit_timestamp_ms]
            if not offsets:
                return False
            # 4. one append, acks=all
            records = normalize_produce_batch(commit_records(offsets))
            await self.replica_manager.produce(OFFSETS_TOPIC, partition, records, acks="all")
            # 5. the view (of the partition loaded now: a re-election meanwhile reloaded it from the log)
            _, _, entry = await self._coordinated(group)
            entry.groups.setdefault(group, GroupOffsets()).apply(offsets)
            return True

    async def committed_local(self, group: str, topic: str | None = None) -> list[CommittedOffset]:
        """The group's latest committed offsets (optionally one topic), by topic and partition, as its
        coordinator. Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        try:
            _, state, _ = await self._coordinated(group)
        except NotCoordinatorError:
            if self.cache.cached_topic(OFFSETS_TOPIC) is None and not await self._topic_exists():
                return []  # no group has committed anywhere yet
            raise
        if state is None:
            return []
        return sorted((c for c in state.offsets.values() if topic is None or c.topic == topic),
                      key=lambda c: (c.topic, c.partition))

    async def delete_local(self, group: str, partitions: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
        """Delete the group's committed offsets of ``partitions`` (tombstones, acks=all) as its coordinator;
        returns the partitions that had one. Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        async with self._group_locks.setdefault(group, asyncio.Lock()):
            partition, state, _ = await self._coordinated(group)
            had = [tp for tp in partitions if state is not None and tp in state.offsets]
            if not had:
                return []
            await self.replica_manager.produce(OFFSETS_TOPIC, partition,
                                               normalize_produce_batch(tombstone_records(group, had)), acks="all")
            _, state, _ = await self._coordinated(group)
            if state is not None:
                for tp in had:
                    state.offsets.pop(tp, None)
            return had

    def groups_local(self) -> list[str]:
        """The groups with committed offsets among those this broker coordinates (loaded partitions)."""
        return sorted(g for e in self._loaded.values() if e.ready.done() and not e.ready.exception()
                      for g, s in e.groups.items() if s.offsets)

    async def _topic_exists(self) -> bool:
        try:
            await self.replica_manager.topic_fresh(OFFSETS_TOPIC)
            return True
        except UnknownTopicError:
            return False
