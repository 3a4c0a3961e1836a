"""The groups' committed offsets on their coordinator: the ``__consumer_offsets`` partitions this broker
leads, loaded into memory, and the commits, reads and deletes made there.

Kafka's ``GroupMetadataManager`` for offsets (membership stays in ZooKeeper,
:mod:`lakelog.consumer_groups.membership`). The internal topic is created on first need with
``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor`` replicas (at most the
live brokers), ``cleanup.policy=compact`` and :func:`min_insync_replicas_for` its replication factor.

- **Loading.** When this broker becomes the leader of an ``__consumer_offsets`` partition (at a leader
  epoch), it reads the partition's log and folds its records into the groups' offsets (Kafka's
  ``onElection`` / ``loadGroupsForPartition``); requests for its groups wait for the load. When it stops
  leading, it drops them (``onResignation``). Loading, unloading and the topic's creation are the
  generic :class:`~lakelog.coordinators.coordinator_partitions.CoordinatorPartitions`, shared with the
  transaction coordinator.
- **Commits** (steps mirrored in :meth:`GroupMetadataManager.commit_local`): 1. this broker must lead the
  group's partition and have loaded it; 2. a commit from an older generation than the group's is refused
  (ILLEGAL_GENERATION); 3. an idempotent commit (``app_id``, ``version``) at or below the application's
  newest version is a replay: answered without writing; 4. its records are appended with ``acks=all``
  (one append: all records of a group go to one partition); 5. the view is updated and the commit answered.
- **Transactional commits** (Kafka's TxnOffsetCommit, KIP-98): a commit made for a transactional producer
  is appended in its transaction (the partition joins the transaction at the transaction coordinator) and
  stays pending; the producer's commit marker on the partition applies it, its abort marker drops it
  (:class:`OffsetsPartitionState`, live through the partition writer's marker listeners, and on a load
  from the markers in the log: :func:`fold_offsets`). So offsets consumed in a transaction count exactly
  when the transaction's output does.

Requests from any broker reach it through :class:`~lakelog.consumer_groups.coordinator.GroupCoordinator`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.errors import IllegalGenerationError, NotCoordinatorError
from lakelog.consumer_groups.offset_records import (
    OFFSETS_TOPIC,
    CommittedOffset,
    GroupOffsets,
    apply_records,
    commit_records,
    tombstone_records,
)
from lakelog.coordinators.coordinator_partitions import (
    CoordinatorPartitions,
    InternalTopic,
    LoadedPartition,
    capped_min_isr,
)
from lakelog.coordinators.partition_writer import PartitionRole, PartitionWriter
from lakelog.log_tables.records import normalize_produce_batch
from lakelog.log_tables.schema import ATTRIBUTES, CONTROL_BIT, TRANSACTIONAL_BIT
from lakelog.log_tables.transaction_index import control_type
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache


def min_insync_replicas_for(replication_factor: int) -> int:
    """``min.insync.replicas`` of the internal topic: 2 from 3 replicas on (a commit survives the loss of
    one broker while one more is down), else 1."""
    return capped_min_isr(replication_factor, min_isr=2)


class OffsetsPartitionState(dict):
    """The groups of one ``__consumer_offsets`` partition (group -> :class:`GroupOffsets`) and the
    transactional offset commits still pending there: producer id -> their records (``key``, ``value``
    tables), applied at the producer's commit marker, dropped at its abort marker (Kafka's
    ``pendingTransactionalOffsetCommits``)."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: dict[int, list[pa.Table]] = {}

    def end_transaction(self, producer_id: int, *, commit: bool) -> int:
        """The producer's transaction ended here: apply its pending commits (``commit``) or drop them;
        returns the records applied."""
        pending = self.pending.pop(producer_id, [])
        return sum(apply_records(self, rows) for rows in pending) if commit else 0


def fold_offsets(state: OffsetsPartitionState, rows: pa.Table) -> int:
    """Fold ``__consumer_offsets`` rows (:data:`~lakelog.coordinators.coordinator_partitions.LOAD_COLUMNS`,
    in offset order) into ``state``: plain records at once, transactional ones pending until their
    producer's marker. Returns the records applied."""
    attributes = rows[ATTRIBUTES].to_numpy(zero_copy_only=False) if ATTRIBUTES in rows.column_names else None
    if attributes is None or not attributes.any():
        return apply_records(state, rows)
    producers = pc.fill_null(rows["producer_id"], -1).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.concatenate(([True], (attributes[1:] != attributes[:-1])
                                            | (producers[1:] != producers[:-1]) | ((attributes[1:] & CONTROL_BIT) != 0))))
    ends, applied = np.append(starts[1:], len(attributes)), 0
    for start, end in zip(starts.tolist(), ends.tolist()):
        run, producer_id = rows.slice(start, end - start), int(producers[start])
        if attributes[start] & CONTROL_BIT:
            commit = control_type(run["key"][0].as_py() or b"") == "commit"
            applied += state.end_transaction(producer_id, commit=commit)
        elif attributes[start] & TRANSACTIONAL_BIT:
            state.pending.setdefault(producer_id, []).append(run)
        else:
            applied += apply_records(state, run)
    return applied


class GroupMetadataManager:
    """The groups of the ``__consumer_offsets`` partitions this broker leads (see the module docstring).

    Args:
        settings: ``broker.id``, ``offsets.topic.num.partitions``, ``offsets.topic.replication.factor``.
        cache: topic metadata and live brokers.
        writer: the local replicas (their roles, appends, local reads, transaction markers).
        create_topic: creates a topic (``Broker.create_topic``).

    Call :meth:`start` inside the serving event loop (it listens to role changes), :meth:`stop` at the end.
    The loading, unloading and topic creation are :class:`~lakelog.coordinators.coordinator_partitions.
    CoordinatorPartitions`' (:attr:`partitions`).
    """

    def __init__(self, settings: BrokerSettings, *, cache: MetadataCache, writer: PartitionWriter,
                 create_topic: Callable[..., Awaitable[TopicMetadata]]) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.cache = cache
        self.writer = writer
        topic = InternalTopic(
            OFFSETS_TOPIC, num_partitions=settings.offsets_topic_num_partitions,
            replication_factor=settings.offsets_topic_replication_factor,
            replication_factor_key="offsets.topic.replication.factor", min_isr=min_insync_replicas_for,
            keys="groups", missing=f"{OFFSETS_TOPIC} does not exist yet: no group has committed offsets.")
        self.partitions: CoordinatorPartitions[OffsetsPartitionState] = CoordinatorPartitions(
            topic, broker_id=self.broker_id, cache=cache, writer=writer, create_topic=create_topic,
            new_state=OffsetsPartitionState, fold=fold_offsets)
        self._group_locks: dict[str, asyncio.Lock] = {}
        self._sequence_locks: dict[int, asyncio.Lock] = {}

    # -- roles ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen to the role changes of the local replicas and load the partitions this broker leads already;
        listen to the transaction markers written here."""
        self.partitions.start()
        self.writer.add_marker_listener(self._on_marker)

    def stop(self) -> None:
        """Stop listening; forget every group."""
        self.writer.remove_marker_listener(self._on_marker)
        self.partitions.stop()

    def _on_marker(self, part: PartitionRole, producer_id: int, control: str) -> None:
        """A transaction marker was written on a partition this broker leads: on an ``__consumer_offsets``
        partition, the producer's pending offset commits apply or go (once its load finished, if one is under
        way: ending a transaction twice changes nothing)."""
        if part.topic == OFFSETS_TOPIC:
            self.partitions.apply_when_loaded(part.partition, lambda state: state.end_transaction(
                producer_id, commit=control == "commit"))

    def on_role_change(self, part: PartitionRole) -> None:
        """A replica changed role: load an ``__consumer_offsets`` partition this broker now leads (at a new
        leader epoch), drop one it stopped leading. In the event loop."""
        self.partitions.on_role_change(part)

    async def _coordinated(self, group: str) -> tuple[int, GroupOffsets | None, LoadedPartition]:
        """``(partition, the group's offsets or None, the loaded partition)`` when this broker coordinates
        ``group``. Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        partition, entry = await self.partitions.coordinated(group, what=f"group '{group}'")
        return partition, entry.state.get(group), entry

    # -- the internal topic ---------------------------------------------------------------------

    async def num_partitions(self, *, create: bool = False) -> int:
        """Partitions of ``__consumer_offsets``; with ``create``, the topic is created when missing.

        Raises: NotCoordinatorError (without ``create``: no group has committed yet, so there is none).
        """
        return await self.partitions.num_partitions(create=create)

    # -- on the coordinator ---------------------------------------------------------------------

    async def commit_local(self, group: str, offsets: Sequence[CommittedOffset], *,
                           current_generation: int | None = None, only_newer: bool = False,
                           producer: ProducerBatch | None = None) -> bool:
        """Commit ``offsets`` (of ``group``, each with its generation, app id and version) as the group's
        coordinator; steps in the module docstring.

        Args:
            current_generation: the group's generation now (ZooKeeper membership); default the highest
                generation that committed.
            only_newer: an import (:mod:`lakelog.consumer_groups.offsets_import`): keep only offsets newer
                (``commit_timestamp_ms``) than the ones committed, without fencing or replay checks.
            producer: a transactional producer (its id, epoch and transactional id; the sequence is the
                coordinator's): the commit is written in its open transaction and counts once the
                transaction commits (TxnOffsetCommit). Default: None (counts at once).

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
            # 4. one append, acks=all (in the producer's transaction for a transactional commit)
            records = normalize_produce_batch(commit_records(offsets))
            if producer is None:
                await self.writer.append(OFFSETS_TOPIC, partition, records)
            else:
                await self._produce_in_transaction(partition, records, producer)
            # 5. the view (of the partition loaded now: a re-election meanwhile reloaded it from the log)
            _, _, entry = await self._coordinated(group)
            if producer is None:
                entry.state.setdefault(group, GroupOffsets()).apply(offsets)
            else:
                entry.state.pending.setdefault(producer.producer_id, []).append(records)
            return True

    async def _produce_in_transaction(self, partition: int, records: pa.Table, producer: ProducerBatch) -> None:
        """Append a transactional offset commit: the next sequence of the producer on the partition (a
        commit is the coordinator's request, not the client's: one at a time per partition)."""
        async with self._sequence_locks.setdefault(partition, asyncio.Lock()):
            sequence = self.writer.next_sequence(OFFSETS_TOPIC, partition, producer_id=producer.producer_id,
                                                 producer_epoch=producer.producer_epoch)
            await self.writer.append(OFFSETS_TOPIC, partition, records,
                                     producer=dataclasses.replace(producer, sequence=sequence))

    async def committed_local(self, group: str, topic: str | None = None) -> list[CommittedOffset]:
        """The group's latest committed offsets (optionally one topic), by topic and partition, as its
        coordinator. Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        try:
            _, state, _ = await self._coordinated(group)
        except NotCoordinatorError:
            if not await self.partitions.topic_exists():
                return []  # no group has committed anywhere yet
            raise
        if state is None:
            return []
        return sorted((c for c in state.offsets.values() if topic is None or c.topic == topic),
                      key=lambda c: (c.topic, c.partition))

    async def delete_local(self, group: str, partitions: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
        """Delete the group's committed offsets of ``partitions`` (tombstones, acks=all) as its coordinator;
        returns the partitions that had one. A group left with no offset forgets its applications' idempotent
        commit versions too (their tombstones in the same append): versions count the offsets that are gone,
        and an application starting over, on a topic deleted and made again, commits from low versions.
        Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        async with self._group_locks.setdefault(group, asyncio.Lock()):
            partition, state, _ = await self._coordinated(group)
            had = [tp for tp in partitions if state is not None and tp in state.offsets]
            if not had:
                return []
            emptied = state is not None and not set(state.offsets) - set(had)
            apps = sorted(state.app_versions) if emptied and state is not None else []
            await self.writer.append(OFFSETS_TOPIC, partition,
                                     normalize_produce_batch(tombstone_records(group, had, app_ids=apps)))
            _, state, _ = await self._coordinated(group)
            if state is not None:
                for tp in had:
                    state.offsets.pop(tp, None)
                for app_id in apps:
                    state.app_versions.pop(app_id, None)
            return had

    async def groups_loaded(self) -> list[str]:
        """:meth:`groups_local` once every partition this broker leads is loaded (a listing right after a
        start or an election misses no group). Raises CoordinatorLoadInProgressError (retriable)."""
        await self.partitions.wait_loaded()
        return self.groups_local()

    def groups_local(self) -> list[str]:
        """The groups with committed offsets among those this broker coordinates (loaded partitions)."""
        return sorted(g for _, groups in self.partitions.loaded() for g, s in groups.items() if s.offsets)
