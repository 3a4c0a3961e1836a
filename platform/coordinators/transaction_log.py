"""The transaction coordinator's durable state: the ``__transaction_state`` partitions this broker leads,
loaded into memory, and every change of a transactional id written there before it takes effect.

Kafka's ``TransactionStateManager`` (with the state-changing half of ``TransactionCoordinator``); the
decisions themselves are the pure functions of :mod:`lakelog.coordinators.transaction_state` and the records
those of :mod:`lakelog.coordinators.transaction_records`. The internal topic ``__transaction_state`` is
created on first need (the first InitProducerId of a transactional producer) with
``transaction.state.log.num.partitions`` partitions, ``transaction.state.log.replication.factor``
replicas (at most the live brokers, with a warning), ``cleanup.policy=compact`` and
``min.insync.replicas`` = ``transaction.state.log.min.isr`` capped at the replication factor - 1
(:func:`~lakelog.coordinators.coordinator_partitions.capped_min_isr`). The coordinator of a transactional
id is the leader of its partition (:func:`~lakelog.coordinators.transaction_records.partition_for`).

- **Loading.** When this broker becomes the leader of a ``__transaction_state`` partition (at a leader
  epoch), it folds the partition's records into ``transactional id -> TransactionMetadata`` (Kafka's
  ``loadTransactionsForTxnTopicPartition``); requests for its ids wait for the load; when it stops
  leading, it drops them (:class:`~lakelog.coordinators.coordinator_partitions.CoordinatorPartitions`).
- **Changes** (steps mirrored in :meth:`TransactionStateManager._write`): 1. this broker must coordinate
  the id and have loaded its partition; 2. the pure function decides from the current metadata, with
  ``pending=True`` while another change of the id is being written (ConcurrentTransactionsError, as
  Kafka's ``pendingState``); 3. the new metadata is appended with ``acks=all``; 4. only once acknowledged
  does it become current (a failed append leaves the current metadata as it was: a retry decides again).
- **Decisions are carried out** (KIP-98: "a decision once written is carried out after a coordinator
  failover"). A transaction in PrepareCommit or PrepareAbort needs its commit or abort markers written on
  each of its partitions, then :meth:`TransactionStateManager.complete`. Markers are not written by this
  module: every decided transaction, written here (EndTxn, the abort of InitProducerId over an open
  transaction, a timeout) or found by a load, is handed to the ``on_decided`` hook, which writes the
  markers and then calls ``complete``. Without a hook, decided transactions wait in Prepare* (listed by
  :meth:`TransactionStateManager.decided`) until something calls ``complete``.
- **Timeouts and expiration.** Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` a
  background task aborts the transactions open longer than their ``transaction_timeout_ms`` (PrepareAbort
  under a bumped epoch, fencing their producer; Kafka's ``abortTimedOutTransactions``) and writes a
  tombstone for each transactional id idle for ``transactional.id.expiration.ms`` (Kafka's
  ``removeExpiredTransactionalIds``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from lakelog.config import BrokerSettings
from lakelog.coordinators import transaction_state as txn
from lakelog.coordinators.coordinator_partitions import (
    CoordinatorPartitions,
    InternalTopic,
    LoadedPartition,
    capped_min_isr,
    without_control_records,
)
from lakelog.coordinators.partition_writer import PartitionWriter
from lakelog.coordinators.producer_id_manager import ProducerIdManager
from lakelog.coordinators.transaction_records import TRANSACTION_STATE_TOPIC, apply_records, records_table
from lakelog.coordinators.transaction_state import TopicPartition, TransactionMetadata, TransactionState
from lakelog.log_tables.records import normalize_produce_batch
from lakelog.producers.errors import ConcurrentTransactionsError, InvalidTxnStateError
from lakelog.producers.producer_ids import ProducerIdAndEpoch
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

#: What carries out a decided transaction (PrepareCommit / PrepareAbort): writes its markers, then calls
#: :meth:`TransactionStateManager.complete`.
DecidedHook = Callable[[TransactionMetadata], Awaitable[None]]

_PREPARED = (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
State = dict[str, TransactionMetadata]


def _now_ms() -> int:
    return int(time.time() * 1000)


class _NewProducerIdNeeded(Exception):
    """The decision needs a new producer id (allocated off the event loop, then decided again)."""


def _no_producer_id() -> int:
    raise _NewProducerIdNeeded


def _fold(state: State, rows) -> int:
    rows = without_control_records(rows)  # __transaction_state is never written in a transaction
    return apply_records(state, rows["key"], rows["value"])


async def _run_hook(hook: DecidedHook, metadata: TransactionMetadata) -> None:
    try:
        await hook(metadata)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("carrying out the %s of transactional id %r failed", metadata.state, metadata.transactional_id)


async def _every(interval_s: float, *steps: Callable[[], Awaitable[object]]) -> None:
    """Run ``steps`` one after the other every ``interval_s`` until cancelled; a failed step is logged."""
    while True:
        await asyncio.sleep(interval_s)
        for step in steps:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; the next run tries again", step.__name__)


#: Event-loop turns an AddPartitionsToTxn waits before its write, so that the adds of the other partitions
#: of a producer's round, already received, go in the same write (Kafka's producer sends one
#: AddPartitionsToTxn for every partition it has records for). Costs microseconds when none come.
ADD_PARTITIONS_JOIN_YIELDS = 3


class _JoinedAdds:
    """AddPartitionsToTxn requests of one transactional id share writes: the first waits
    :data:`ADD_PARTITIONS_JOIN_YIELDS` turns of the event loop, then writes its partitions with those of the
    requests that came meanwhile; requests that come while a write is under way wait, and go in the next
    one together. One write for each producer epoch among them; ``add_now(id, producer_id, producer_epoch,
    partitions)`` decides and writes."""

    def __init__(self, add_now: Callable[[str, int, int, frozenset[TopicPartition]], Awaitable[TransactionMetadata]]
                 ) -> None:
        self._add_now = add_now
        self._queued: dict[str, list[tuple[int, int, frozenset[TopicPartition], asyncio.Future]]] = {}

    async def add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                  partitions: frozenset[TopicPartition]) -> TransactionMetadata:
        queued = self._queued.get(transactional_id)
        future = asyncio.get_running_loop().create_future()
        if queued is not None:  # another request writes: join it or the next write
            queued.append((producer_id, producer_epoch, partitions, future))
            return await future
        self._queued[transactional_id] = queued = [(producer_id, producer_epoch, partitions, future)]
        taken: list = []
        try:
            for _ in range(ADD_PARTITIONS_JOIN_YIELDS):
                await asyncio.sleep(0)
            while queued:
                taken = queued[:]
                queued.clear()
                for key in dict.fromkeys((pid, epoch) for pid, epoch, _, _ in taken):
                    futures = [f for pid, epoch, _, f in taken if (pid, epoch) == key]
                    wanted = frozenset().union(*(ps for pid, epoch, ps, _ in taken if (pid, epoch) == key))
                    try:
                        added = await self._add_now(transactional_id, key[0], key[1], wanted)
                    except Exception as e:
                        for f in futures:
                            f.done() or f.set_exception(e)
                    else:
                        for f in futures:
                            f.done() or f.set_result(added)
        finally:
            del self._queued[transactional_id]
            for _, _, _, f in taken + queued:  # cancelled meanwhile: no waiting request is left hanging
                if f is future:
                    f.cancel()  # this request's own: nobody awaits it any more
                elif not f.done():
                    f.set_exception(ConcurrentTransactionsError(
                        f"transactional id {transactional_id!r}: the partitions were not added; retry"))
        return await future


class TransactionStateManager:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads, and their
    changes (see the module docstring). Kafka's ``TransactionStateManager``.

    Args:
        settings: ``broker.id``, ``transaction.state.log.*``, ``transaction.max.timeout.ms``, ``request.timeout.ms``,
            ``transactional.id.expiration.ms``, ``transaction.abort.timed.out.transaction.cleanup.interval.ms``.
        cache: topic metadata and live brokers.
        writer: the local replicas (their roles, appends, local reads).
        create_topic: creates a topic (``Broker.create_topic``).
        producer_ids: hands out new producer ids.
        on_decided: carries out a decided transaction (markers, then :meth:`complete`); run as a task, its
            errors logged. May also be set later as the attribute ``on_decided``.

    Call :meth:`start` inside the serving event loop, :meth:`stop` at the end. Every method acts as the
    coordinator of the transactional id it names: NotCoordinatorError (503 / 50320, retriable) when this
    broker is not, CoordinatorLoadInProgressError (503 / 50321, retriable) when its load failed.
    """

    def __init__(self, settings: BrokerSettings, *, cache: MetadataCache, writer: PartitionWriter,
                 create_topic: Callable[..., Awaitable[TopicMetadata]], producer_ids: ProducerIdManager,
                 on_decided: DecidedHook | None = None) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.writer = writer
        self.producer_ids = producer_ids
        self.on_decided = on_decided
        min_isr = settings.transaction_state_log_min_isr
        topic = InternalTopic(
            TRANSACTION_STATE_TOPIC, num_partitions=settings.transaction_state_log_num_partitions,
            replication_factor=settings.transaction_state_log_replication_factor,
            replication_factor_key="transaction.state.log.replication.factor",
            min_isr=lambda rf: capped_min_isr(rf, min_isr=min_isr), keys="transactional ids",
            missing=f"{TRANSACTION_STATE_TOPIC} does not exist yet: no transactional producer has initialized.")
        self.partitions: CoordinatorPartitions[State] = CoordinatorPartitions(
            topic, broker_id=self.broker_id, cache=cache, writer=writer,
            create_topic=create_topic, new_state=dict, fold=_fold, on_loaded=self._on_loaded)
        #: transactional ids with a change being written (Kafka's ``pendingState``)
        self._pending: set[str] = set()
        #: transactional id -> set when its current metadata changes (:meth:`wait_for_change`)
        self._changed: dict[str, asyncio.Event] = {}
        #: AddPartitionsToTxn requests that come while one of the id is written join the next write
        self._adds = _JoinedAdds(self._add_partitions_now)
        self._tasks: set[asyncio.Task] = set()
        self._cleanup: asyncio.Task | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the partitions this broker leads (and those it comes to lead); start the timeout task."""
        self.partitions.start()
        self._cleanup = asyncio.get_running_loop().create_task(_every(
            self.settings.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000,
            self.abort_timed_out, self.expire_transactional_ids), name="transaction-timeouts")

    def stop(self) -> None:
        """Stop the timeout task and the running hooks; forget every transactional id."""
        if self._cleanup is not None:
            self._cleanup.cancel()
        for task in list(self._tasks):
            task.cancel()
        self.partitions.stop()

    def _on_loaded(self, partition: int, state: State) -> None:
        """After a load: carry out the decisions its records hold (PrepareCommit / PrepareAbort)."""
        decided = [m for m in state.values() if m.state in _PREPARED]
        if decided:
            log.info("%s-%d holds %d decided transaction(s) to carry out: %s", TRANSACTION_STATE_TOPIC, partition,
                     len(decided), ", ".join(sorted(m.transactional_id for m in decided)))
        for m in decided:
            self._carry_out(m)

    def _carry_out(self, metadata: TransactionMetadata) -> None:
        """Hand a decided transaction to the ``on_decided`` hook (as a task)."""
        if self.on_decided is None:
            log.debug("transactional id %r is in %s: waiting for its markers", metadata.transactional_id,
                      metadata.state)
            return
        task = asyncio.get_running_loop().create_task(_run_hook(self.on_decided, metadata),
                                                      name=f"decided-{metadata.transactional_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- reads and writes of the coordinator ------------------------------------------------------

    async def _coordinated(self, transactional_id: str, *, create: bool = False) -> tuple[int, LoadedPartition[State]]:
        """``(partition, the loaded partition)`` of ``transactional_id``; with ``create`` the topic is
        created when missing. Raises NotCoordinatorError, CoordinatorLoadInProgressError."""
        await self.partitions.num_partitions(create=create)
        return await self.partitions.coordinated(transactional_id, what=f"transactional id '{transactional_id}'")

    async def _current(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """``(partition, the id's metadata or None)``; ``(-1, None)`` when the topic does not exist yet."""
        if not await self.partitions.topic_exists():
            return -1, None
        partition, entry = await self._coordinated(transactional_id)
        return partition, entry.state.get(transactional_id)

    async def _write(self, partition: int, metadatas: Iterable[TransactionMetadata] = (), *,
                     tombstones: Iterable[str] = ()) -> None:
        """Write changes of transactional ids of one partition; the steps of the module docstring. Called
        right after the decision, with no await between, so the ids are marked pending atomically.

        Raises: the append's errors (NotEnoughReplicasError, RequestTimedOutError, ...): the change may
        or may not be in the log; the current metadata stays as it was.
        """
        metadatas, tombstones = list(metadatas), list(tombstones)
        ids = [m.transactional_id for m in metadatas] + tombstones
        if not ids:
            return
        # 1. and 2. were the caller's (_coordinated, then the pure decision, with no await since):
        # no other change of these ids is decided until this one is written
        self._pending.update(ids)
        try:
            # 3. append with acks=all
            records = normalize_produce_batch(records_table(metadatas, tombstones=tombstones))
            await self.writer.append(TRANSACTION_STATE_TOPIC, partition, records)
            # 4. current now (in the partition loaded now: a re-election meanwhile reloaded it from the log)
            _, entry = await self._coordinated(ids[0])
            for m in metadatas:
                entry.state[m.transactional_id] = m
            for transactional_id in tombstones:
                entry.state.pop(transactional_id, None)
            for transactional_id in ids:
                changed = self._changed.pop(transactional_id, None)
                if changed is not None:
                    changed.set()
        finally:
            self._pending.difference_update(ids)
        for m in metadatas:
            if m.state in _PREPARED:
                self._carry_out(m)

    # -- the requests -----------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, *, transaction_timeout_ms: int) -> ProducerIdAndEpoch:
        """InitProducerId of a transactional producer (Kafka's ``TransactionCoordinator.handleInitProducerId``):
        a new producer id with epoch 0 for an unknown id, else the epoch + 1 (fencing the previous
        instance); creates ``__transaction_state`` on first need.

        Args:
            transactional_id: the producer's ``transactional.id`` (non-empty).
            transaction_timeout_ms: its ``transaction.timeout.ms``, in ``(0, transaction.max.timeout.ms]``.

        Returns:
            The producer id and epoch, once written.

        Raises:
            ConcurrentTransactionsError (retriable): a transaction of the id is being completed or a change
                is being written; or an open transaction was just aborted under a bumped epoch (written
                as PrepareAbort and handed to ``on_decided``): retry, as Kafka's producer does.
            InvalidTransactionTimeoutError: the timeout is out of range.
            NotCoordinatorError, CoordinatorLoadInProgressError (retriable); ValueError: an empty id; the
            append's errors.
        """
        if not transactional_id:
            raise ValueError("a transactional id must not be empty")
        partition, entry = await self._coordinated(transactional_id, create=True)

        def decide(new_producer_id):
            return txn.init_producer_id(
                entry.state.get(transactional_id), transactional_id=transactional_id,
                transaction_timeout_ms=transaction_timeout_ms, now_ms=_now_ms(), new_producer_id=new_producer_id,
                transaction_max_timeout_ms=self.settings.transaction_max_timeout_ms,
                pending=transactional_id in self._pending)

        try:
            decision = decide(_no_producer_id)
        except _NewProducerIdNeeded:
            new_producer_id = await asyncio.to_thread(self.producer_ids.generate_producer_id)
            partition, entry = await self._coordinated(transactional_id)
            decision = decide(new_producer_id)
        if decision.error is not None:
            raise decision.error
        await self._write(partition, [decision.metadata])
        if decision.aborts_open_transaction:
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r}: its open transaction is being aborted under producer "
                f"epoch {decision.metadata.producer_epoch}; retry")
        return ProducerIdAndEpoch(decision.producer_id, decision.producer_epoch)

    async def add_partitions(self, transactional_id: str, *, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> TransactionMetadata:
        """AddPartitionsToTxn (Kafka's ``handleAddPartitionsToTransaction``): ``(topic, partition)`` pairs
        join the producer's transaction, which begins (Ongoing) if none is open.

        Returns:
            The id's current metadata (Ongoing) once written.

        Concurrent requests of one id (its partition leaders) share writes: those that come while one is
        written go in the next one together; a busy id (a previous transaction completing) is waited for.

        Raises:
            InvalidProducerIdMappingError (unknown id or another producer id), InvalidProducerEpochError
            (fenced), ConcurrentTransactionsError (retriable: still busy after ``request.timeout.ms``);
            NotCoordinatorError, CoordinatorLoadInProgressError (retriable); the append's errors.
        """
        return await self._adds.add(transactional_id, producer_id, producer_epoch, frozenset(partitions))

    async def _add_partitions_now(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                  partitions: Iterable[TopicPartition]) -> TransactionMetadata:
        """One AddPartitionsToTxn decision and write, after waiting out a busy id (see :meth:`add_partitions`)."""
        deadline = time.monotonic() + self.settings.request_timeout_ms / 1000.0
        partition, current = await self._current(transactional_id)
        while (transactional_id in self._pending or (current and current.state in _PREPARED)) \
                and time.monotonic() < deadline:
            await self.wait_for_change(transactional_id, timeout_s=deadline - time.monotonic())
            partition, current = await self._current(transactional_id)
        decision = txn.add_partitions(current, producer_id=producer_id, producer_epoch=producer_epoch,
                                      partitions=partitions, now_ms=_now_ms(),
                                      pending=transactional_id in self._pending, transactional_id=transactional_id)
        if decision.error is not None:
            raise decision.error
        if decision.metadata is None:
            return current
        await self._write(partition, [decision.metadata])
        return decision.metadata

    async def end_transaction(self, transactional_id: str, *, producer_id: int, producer_epoch: int,
                              commit: bool) -> TransactionMetadata | None:
        """EndTxn from the producer (Kafka's ``TransactionCoordinator.endTransaction``): the decision to
        commit (``commit``) or abort its open transaction, durable once this returns; the decided
        transaction is then handed to ``on_decided``.

        Returns:
            The written PrepareCommit / PrepareAbort metadata, or None for the retry of a transaction
            already completed with this outcome (nothing written).

        Raises:
            InvalidProducerIdMappingError, InvalidProducerEpochError (fenced), InvalidTxnStateError (the
            other outcome is decided, or no transaction is open), ConcurrentTransactionsError (retriable);
            NotCoordinatorError, CoordinatorLoadInProgressError (retriable); the append's errors.
        """
        partition, current = await self._current(transactional_id)
        decision = txn.end_transaction(current, producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                       now_ms=_now_ms(), pending=transactional_id in self._pending,
                                       transactional_id=transactional_id)
        if decision.error is not None:
            raise decision.error
        if decision.metadata is not None:
            await self._write(partition, [decision.metadata])
        return decision.metadata

    async def complete(self, transactional_id: str) -> TransactionMetadata:
        """The decided transaction is carried out (every marker written): PrepareCommit -> CompleteCommit,
        PrepareAbort -> CompleteAbort (Kafka's ``TransactionMetadata.prepareComplete``, written by
        ``TransactionMarkerChannelManager`` once the markers are acknowledged).

        Returns:
            The written CompleteCommit / CompleteAbort metadata.

        Raises:
            InvalidTxnStateError: the id has no decided transaction.
            ConcurrentTransactionsError (retriable): a change of the id is being written.
            NotCoordinatorError, CoordinatorLoadInProgressError (retriable); the append's errors.
        """
        partition, current = await self._current(transactional_id)
        if current is None:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r} is unknown: there is no decided "
                                       "transaction to complete")
        if transactional_id in self._pending:
            raise ConcurrentTransactionsError(f"transactional id {transactional_id!r}: a state change is being "
                                              "written; retry")
        completed = txn.complete(current, now_ms=_now_ms())
        await self._write(partition, [completed])
        return completed

    async def wait_for_change(self, transactional_id: str, *, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a write of the id's metadata here; True when one came."""
        changed = self._changed.setdefault(transactional_id, asyncio.Event())
        try:
            await asyncio.wait_for(changed.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    async def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's current metadata (Kafka's DescribeTransactions), None when its coordinator knows none.
        Raises NotCoordinatorError, CoordinatorLoadInProgressError (retriable)."""
        return (await self._current(transactional_id))[1]

    async def list_transactions(self) -> list[TransactionMetadata]:
        """The current metadata of every transactional id this broker coordinates (loaded partitions), by
        transactional id (Kafka's ListTransactions answered by one broker)."""
        return sorted((m for _, state in self.partitions.loaded() for m in state.values()),
                      key=lambda m: m.transactional_id)

    def decided(self) -> list[TransactionMetadata]:
        """The loaded ids in PrepareCommit / PrepareAbort (what ``on_decided`` has to carry out), by id."""
        return sorted((m for _, state in self.partitions.loaded() for m in state.values() if m.state in _PREPARED),
                      key=lambda m: m.transactional_id)

    async def abort_timed_out(self) -> list[TransactionMetadata]:
        """Abort the transactions open longer than their timeout (Kafka's ``abortTimedOutTransactions``):
        PrepareAbort under epoch + 1, one append per partition; each is then handed to ``on_decided``.
        Returns the written metadata. Raises the append's errors (the next run tries again)."""
        written: list[TransactionMetadata] = []
        for partition, state in list(self.partitions.loaded()):
            aborts = txn.expired(list(state.values()), now_ms=_now_ms(), pending=self._pending)
            if aborts:
                log.info("aborting %d timed-out transaction(s) of %s-%d: %s", len(aborts), TRANSACTION_STATE_TOPIC,
                         partition, ", ".join(m.transactional_id for m in aborts))
                await self._write(partition, aborts)
                written.extend(aborts)
        return written

    async def expire_transactional_ids(self) -> list[str]:
        """Forget the transactional ids idle for ``transactional.id.expiration.ms``: a tombstone each, one
        append per partition (Kafka's ``removeExpiredTransactionalIds``). Returns them."""
        removed: list[str] = []
        for partition, state in list(self.partitions.loaded()):
            ids = txn.expired_transactional_ids(
                list(state.values()), now_ms=_now_ms(),
                transactional_id_expiration_ms=self.settings.transactional_id_expiration_ms, pending=self._pending)
            if ids:
                log.info("%d transactional id(s) of %s-%d expired: %s", len(ids), TRANSACTION_STATE_TOPIC, partition,
                         ", ".join(ids))
                await self._write(partition, tombstones=ids)
                removed += ids
        return removed
