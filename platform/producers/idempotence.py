"""Idempotent appends on a partition leader, and the upkeep of every replica's producer state.

Steps of :meth:`ProducerStates.append` (mirrored by comments in the code), for a produce request that
carries a producer id, epoch and sequence (:mod:`lakelog.protocol.producer_headers`):

1. the same request still being appended (a retry that overtook its original, or came to the same
   leader while the original waits in the group commit): wait for the original's offsets, or its error;
2. the request already appended (:meth:`ProducerStateManager.check
   <lakelog.producers.producer_state.ProducerStateManager.check>`): its original offsets, nothing
   written; a fenced epoch, a sequence too old or an expired producer is refused;
3. a producer id the partition has never seen: refused unless the cluster handed it out;
4. a transactional request (``X-Lakelog-Transactional-Id``): the partition joins the producer's open
   transaction at the transaction coordinator first (Kafka's AddPartitionsToTxn, here implicit; which
   fences an older epoch and begins the transaction if none is open), once per transaction;
5. append it with its producer columns (the group commit folds the batch into the state before it
   answers, so a retry arriving after this point finds it in step 2); a transactional request's records
   carry the transactional attribute, so the partition's last stable offset holds at its first one. Right
   before its records go into the log the group commit runs the state's admission check
   (:meth:`ProducerStateManager.admission_check
   <lakelog.producers.producer_state.ProducerStateManager.admission_check>`): a producer fenced, or a
   transaction ended by its marker, while the request waited there writes nothing.

The caller then waits for ``acks`` as for any append (until the high watermark passes the original's
records): a retry answered from step 1 or 2 is acknowledged only once the original is.

Upkeep (:meth:`ProducerStates.run`): every ``producer.snapshot.interval.ms`` each replica's state is
snapshotted beside its log, every ``producer.id.expiration.check.interval.ms`` expired producers are
forgotten; :meth:`ProducerStates.close` snapshots at a clean shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from lakelog.producers.errors import InvalidTxnStateError, UnknownProducerIdError
from lakelog.producers.producer_state import SNAPSHOT_DIR, OpenTransaction, ProducerStateManager, ReadableLog
from lakelog.protocol.producer_headers import ProducerBatch

log = logging.getLogger(__name__)


class ProducerStates:
    """The producer state of every replica on a broker: creation and loading, idempotent appends, upkeep.

    Args:
        producer_id_expiration_ms: ``producer.id.expiration.ms``. Default: 86400000.
        expiration_check_interval_ms: ``producer.id.expiration.check.interval.ms``. Default: 600000.
        snapshot_interval_ms: ``producer.snapshot.interval.ms``. Default: 60000.
        is_allocated: blocking ``producer_id -> bool``: did the cluster hand the id out
            (:meth:`lakelog.coordinators.producer_id_manager.ProducerIdManager.is_allocated`)?
            Default: None (every id is taken as handed out).
    """

    def __init__(self, *, producer_id_expiration_ms: int = 86_400_000, expiration_check_interval_ms: int = 600_000,
                 snapshot_interval_ms: int = 60_000, is_allocated: Callable[[int], bool] | None = None) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.expiration_check_interval_s = expiration_check_interval_ms / 1000.0
        self.snapshot_interval_s = snapshot_interval_ms / 1000.0
        self.is_allocated = is_allocated
        #: adds a partition to a transactional request's transaction at its coordinator, ``(producer, topic,
        #: partition)`` (the broker sets it: :meth:`TransactionCoordinator.add_partition
        #: <lakelog.coordinators.transaction_coordinator.TransactionCoordinator.add_partition>`); None refuses them
        self.add_partition: Callable[[ProducerBatch, str, int], Awaitable[None]] | None = None
        self._task: asyncio.Task | None = None
        #: the upkeep round's snapshot writes while a worker thread does them
        self._writing: asyncio.Future | None = None

    # -- replicas -------------------------------------------------------------------------------

    def open(self, plog: ReadableLog) -> ProducerStateManager:
        """A replica's producer state, loaded from its snapshot and log (blocking: call in a worker
        thread). A table on an object store keeps no snapshots."""
        snapshots = None if plog.local_dir is None else plog.local_dir / SNAPSHOT_DIR
        state = ProducerStateManager(topic=plog.topic, partition=plog.partition, snapshot_dir=snapshots,
                                     producer_id_expiration_ms=self.producer_id_expiration_ms)
        started = time.perf_counter()
        read = state.load(plog)
        if state.entries or read:
            log.info("%s-%d: producer state of %d producers loaded (snapshot at %d, %d records read) in %.0f ms",
                     plog.topic, plog.partition, len(state.entries), state.snapshot_offset, read,
                     (time.perf_counter() - started) * 1000)
        return state

    # -- idempotent appends ---------------------------------------------------------------------

    async def append(self, state: ProducerStateManager, producer: ProducerBatch, count: int, *,
                     append: Callable[[Callable[[], None]], Awaitable[int]]) -> tuple[int, int]:
        """Append an idempotent request's share once (steps in the module docstring).

        Args:
            state: the leader's producer state of the partition.
            producer: the request's producer id, epoch and sequence.
            count: records of the share.
            append: appends the share with its producer columns, running the check it is given right
                before the records go into the log (``GroupCommitter.append(..., check=)``); returns its
                base offset.

        Returns:
            ``(base_offset, count)`` of the original append (this one's when it is new).

        Raises:
            InvalidProducerEpochError, OutOfOrderSequenceError, UnknownProducerIdError (nothing written);
            for a transactional request the coordinator's errors (InvalidProducerEpochError: fenced,
            InvalidProducerIdMappingError, ConcurrentTransactionsError: retriable; nothing written);
            the original append's error for a retry that waited for it; ``append``'s errors.
        """
        in_flight, key = state.in_flight, (producer.producer_id, producer.producer_epoch, producer.sequence)
        id_checked = self.is_allocated is None
        while True:
            # 1. the same request being appended: its outcome
            original = in_flight.get(key)
            if original is not None:
                return await asyncio.shield(original)
            # 2. appended already: its offsets (or refused: fenced, too old, expired)
            found = state.check(producer, now_ms=int(time.time() * 1000))
            if found is not None:
                return found.base_offset, found.count
            # 3. a producer id new to the partition: one the cluster handed out (then 1 and 2 again: the
            #    request may have been sent again meanwhile)
            if id_checked or producer.producer_id in state.entries:
                break
            if not await asyncio.to_thread(self.is_allocated, producer.producer_id):
                raise UnknownProducerIdError(
                    f"Producer id {producer.producer_id} was never handed out by this cluster. Get one from "
                    "POST /v3/clusters/{cluster_id}/producers; nothing was written.")
            id_checked = True
        # 4. a transactional request: the partition joins the producer's transaction at its coordinator
        #    (Kafka's AddPartitionsToTxn, implicit), once per transaction
        if producer.transactional_id is not None:
            await self._join_transaction(state, producer)
        # 5. append with the producer columns, checked again right before; the group commit updates the
        #    state before answering
        check = state.admission_check(producer)
        future = asyncio.get_running_loop().create_future()
        in_flight[key] = future
        try:
            base = await append(check)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: a retry that never came is not an error
            raise
        else:
            future.set_result((base, count))
            return base, count
        finally:
            del in_flight[key]

    async def _join_transaction(self, state: ProducerStateManager, producer: ProducerBatch) -> None:
        """Step 4: the partition joins the producer's transaction at its coordinator, once per transaction.
        The :class:`~lakelog.producers.producer_state.OpenTransaction` goes in place before the coordinator
        is asked: a marker written meanwhile removes it, and the request's admission check then refuses it
        (Kafka's ``VerificationGuard``). Concurrent requests of the transaction wait for the first one's
        answer; when that failed (the entry is gone) each asks again and gets its own answer."""
        if self.add_partition is None:
            raise InvalidTxnStateError("This broker has no transaction coordinator; nothing was written.")
        while True:
            transaction = state.in_transaction.get(producer.producer_id)
            if transaction is None or transaction.producer_epoch != producer.producer_epoch:
                break
            if transaction.added.done():
                return
            await asyncio.wait([transaction.added])
        transaction = OpenTransaction(producer.producer_epoch, asyncio.get_running_loop().create_future())
        state.in_transaction[producer.producer_id] = transaction
        try:
            await self.add_partition(producer, state.topic, state.partition)
        except BaseException:
            if state.in_transaction.get(producer.producer_id) is transaction:
                del state.in_transaction[producer.producer_id]
            raise
        finally:
            transaction.added.set_result(None)

    # -- upkeep ---------------------------------------------------------------------------------

    def start(self, states: Callable[[], Iterable[ProducerStateManager]]) -> None:
        """Start the upkeep task over the states ``states()`` returns (inside the event loop)."""
        self._task = asyncio.get_running_loop().create_task(self.run(states), name="producer-states")

    async def run(self, states: Callable[[], Iterable[ProducerStateManager]]) -> None:
        """Snapshot every state each ``snapshot_interval_ms``; remove expired producers each
        ``expiration_check_interval_ms``. Runs until cancelled; a failure is logged and retried."""
        next_expiry = time.monotonic() + self.expiration_check_interval_s
        while True:
            await asyncio.sleep(self.snapshot_interval_s)
            expire = time.monotonic() >= next_expiry
            if expire:
                next_expiry = time.monotonic() + self.expiration_check_interval_s
            changed = _changed_snapshots(states(), expire_at_ms=int(time.time() * 1000) if expire else None)
            if changed:  # one worker hop for the round, not one per partition (thousands after a wide produce)
                self._writing = asyncio.ensure_future(asyncio.to_thread(_write_snapshots, changed))
                await asyncio.shield(self._writing)  # cancelled, the writes still finish: close() waits for them

    async def close(self, states: Iterable[ProducerStateManager]) -> None:
        """Stop the upkeep and snapshot every state (a clean shutdown: the next start reads no log)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        if self._writing is not None:  # a round's writes still in a worker: not two writers of one snapshot
            await asyncio.wait([self._writing])
            self._writing = None
        changed = _changed_snapshots(states, expire_at_ms=None)
        if changed:
            await asyncio.to_thread(_write_snapshots, changed)


def _changed_snapshots(states: Iterable[ProducerStateManager], *,
                       expire_at_ms: int | None) -> list[tuple[ProducerStateManager, dict]]:
    """``(state, snapshot body)`` of each state whose log moved since its last snapshot, after removing its
    expired producers when ``expire_at_ms`` (wall-clock ms) is given. In the event loop, where the states
    change; a state that fails is logged and left out."""
    changed = []
    for state in list(states):
        try:
            if expire_at_ms is not None:
                state.remove_expired(now_ms=expire_at_ms)
            body = state.snapshot()
            if body is not None:
                changed.append((state, body))
        except Exception:
            log.exception("producer state upkeep of %s-%d failed", state.topic, state.partition)
    return changed


def _write_snapshots(changed: list[tuple[ProducerStateManager, dict]]) -> None:
    """Write one upkeep round's snapshots (``(state, body)`` pairs from :meth:`ProducerStateManager.snapshot`)
    in a worker thread; a failed write is logged and the others go on. Blocking (file I/O)."""
    for state, body in changed:
        try:
            state.write_snapshot(body)
        except Exception:
            log.exception("producer state snapshot of %s-%d failed", state.topic, state.partition)
