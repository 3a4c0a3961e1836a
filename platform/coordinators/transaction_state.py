"""The transaction coordinator's state machine: what a transactional id's metadata becomes on each request.

A copy of Kafka's transaction coordinator (KIP-98): ``kafka.coordinator.transaction.TransactionMetadata``
(the states, their valid previous states, the ``prepare*`` transitions) and the decisions of
``TransactionCoordinator`` (``handleInitProducerId``, ``handleAddPartitionsToTransaction``,
``endTransaction``, ``abortTimedOutTransactions``) and ``TransactionStateManager``
(``timedOutTransactions``, transactional id expiration). Everything here is pure: no I/O, no clock, no
locks. Each decision takes the current :class:`TransactionMetadata` of one transactional id (None when the
coordinator knows none) and answers a small result: the new metadata to write, or an error.

The caller keeps Kafka's order (its pending state and ``TxnTransitMetadata``): it writes the new metadata
to ``__transaction_state`` first (:mod:`lakelog.coordinators.transaction_records`), and only once the write
is acknowledged makes it the current metadata; while a write is in flight it passes ``pending=True``, so
another request for the same id is answered :class:`~lakelog.producers.errors.ConcurrentTransactionsError`.
A failed write leaves the current metadata as it was, so a retry decides again from it (Kafka needs a
``hasFailedEpochFence`` flag for that because it bumps the epoch in memory before writing; here nothing
is changed before the write).

The life of one transaction::

    Empty / CompleteCommit / CompleteAbort --add_partitions--> Ongoing --end_transaction--> PrepareCommit
        (or PrepareAbort) --markers written, complete()--> CompleteCommit (or CompleteAbort)

``init_producer_id`` bumps the epoch (fencing the previous instance of the producer); with a transaction
still open it first aborts that transaction under a bumped epoch (Kafka's PrepareEpochFence, which is
never written to the log: the written state is PrepareAbort). ``expired`` aborts transactions open longer
than their timeout the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from lakelog.producers.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerError,
)

#: Kafka's ``RecordBatch.NO_PRODUCER_ID`` / ``NO_PRODUCER_EPOCH`` / an unset timestamp.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
#: Java's ``Short.MAX_VALUE``: the largest producer epoch. Kafka hands clients epochs up to
#: ``MAX_PRODUCER_EPOCH - 1`` and keeps the last one for fencing (``TransactionMetadata.isEpochExhausted``).
MAX_PRODUCER_EPOCH = 32767
#: ``transaction.max.timeout.ms`` default (Kafka's ``TransactionStateManager.DefaultTransactionsMaxTimeoutMs``).
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000
#: ``transactional.id.expiration.ms`` default: 7 days (``DefaultTransactionalIdExpirationMs``).
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000

TopicPartition = tuple[str, int]


class TransactionState(StrEnum):
    """The state of a transactional id, with Kafka's names (``kafka.coordinator.transaction.TransactionState``).

    - ``Empty``: no transaction open (after InitProducerId);
    - ``Ongoing``: a transaction is open (partitions were added);
    - ``PrepareCommit`` / ``PrepareAbort``: the outcome is decided and durable; markers are being written;
    - ``CompleteCommit`` / ``CompleteAbort``: the markers are written; the transaction is over;
    - ``Dead``: the transactional id expired and is being removed (written as a tombstone);
    - ``PrepareEpochFence``: Kafka's in-memory step of fencing an open transaction; never written.
    """

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


_S = TransactionState

#: New state -> the states it may be entered from (Kafka's ``TransactionMetadata.validPreviousStates``).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

_PREPARED = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})
_IDLE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_NEVER_CURRENT = frozenset({_S.DEAD, _S.PREPARE_EPOCH_FENCE})


def is_valid_transition(old: TransactionState, new: TransactionState) -> bool:
    """True when ``new`` may follow ``old`` (Kafka's ``TransactionMetadata.isValidTransition``)."""
    return old in VALID_PREVIOUS_STATES[new]


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """True when no more epochs may be handed out under this producer id: ``epoch >= Short.MAX_VALUE - 1``
    (Kafka's ``TransactionMetadata.isEpochExhausted``; the last epoch is kept for fencing)."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True)
class TransactionMetadata:
    """What the coordinator knows of one transactional id (Kafka's ``TransactionMetadata`` and, being
    immutable, its ``TxnTransitMetadata``): the value of its record in ``__transaction_state``.

    Attributes:
        transactional_id: the producer's ``transactional.id`` (non-empty).
        producer_id: the producer id the transactional id holds (>= 0).
        producer_epoch: its current epoch (0..32767); requests with another epoch are fenced.
        transaction_timeout_ms: the producer's ``transaction.timeout.ms``; an open transaction older than
            it is aborted.
        state: a :class:`TransactionState`.
        partitions: the ``(topic, partition)`` pairs of the open or deciding transaction (empty otherwise).
        txn_start_timestamp_ms: when the transaction began (its first partition added), ms since the
            epoch; -1 before the first one.
        txn_last_update_timestamp_ms: the time of the last change, ms since the epoch (drives the
            expiration of idle transactional ids).
        last_producer_epoch: Kafka's ``lastProducerEpoch`` (the epoch before the last bump, for KIP-360's
            retried InitProducerId); -1 when unknown, which is always the case without KIP-360.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    txn_start_timestamp_ms: int = NO_TIMESTAMP
    txn_last_update_timestamp_ms: int = NO_TIMESTAMP
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", TransactionState(self.state))
        object.__setattr__(self, "partitions", frozenset((str(t), int(p)) for t, p in self.partitions))
        if not self.transactional_id:
            raise ValueError("a transactional id must not be empty")
        if self.producer_id < 0:
            raise ValueError(f"illegal producer id {self.producer_id}")
        if not 0 <= self.producer_epoch <= MAX_PRODUCER_EPOCH:
            raise ValueError(f"illegal producer epoch {self.producer_epoch}")

    @property
    def has_pending_transaction(self) -> bool:
        """True while a transaction is open or being decided (Ongoing, PrepareCommit, PrepareAbort)."""
        return self.state in (_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT)


def _transit(current: TransactionMetadata, state: TransactionState, **changes) -> TransactionMetadata:
    """``current`` moved to ``state`` with ``changes`` (Kafka's ``prepareTransitionTo``).

    Raises:
        ValueError: ``state`` may not follow ``current.state`` (Kafka's IllegalStateException).
    """
    if not is_valid_transition(current.state, state):
        raise ValueError(f"transactional id {current.transactional_id!r}: {current.state} may not become {state}")
    return replace(current, state=state, **changes)


def _check_current(current: TransactionMetadata) -> None:
    if current.state in _NEVER_CURRENT:  # Kafka: fatal IllegalStateException
        raise ValueError(f"transactional id {current.transactional_id!r} is in state {current.state}, "
                         "which is never a current state")


@dataclass(frozen=True)
class Decision:
    """The answer of a decision: ``metadata`` to write to ``__transaction_state`` (then make current), or
    ``error`` to answer (nothing to write), or neither (nothing changes; answer success)."""

    metadata: TransactionMetadata | None = None
    error: ProducerError | None = None

    @property
    def ok(self) -> bool:
        """True when there is no error to answer."""
        return self.error is None


@dataclass(frozen=True)
class InitProducerIdDecision(Decision):
    """The answer of :func:`init_producer_id`.

    Attributes:
        aborts_open_transaction: True when ``metadata`` aborts the transactional id's open transaction
            under a bumped epoch (state PrepareAbort) instead of initializing the producer: write it, write
            the abort markers, :func:`complete` it, and answer :class:`ConcurrentTransactionsError` so that
            the producer retries (its retry bumps the epoch once more, as in Kafka).
    """

    aborts_open_transaction: bool = False

    @property
    def producer_id(self) -> int:
        """The producer id to answer once ``metadata`` is written (-1 without one)."""
        return NO_PRODUCER_ID if self.metadata is None or self.aborts_open_transaction else self.metadata.producer_id

    @property
    def producer_epoch(self) -> int:
        """The producer epoch to answer once ``metadata`` is written (-1 without one)."""
        return (NO_PRODUCER_EPOCH if self.metadata is None or self.aborts_open_transaction
                else self.metadata.producer_epoch)


@dataclass(frozen=True)
class AddPartitionsDecision(Decision):
    """The answer of :func:`add_partitions`; neither metadata nor error: the partitions are already in the
    open transaction (Kafka answers NONE without writing)."""


@dataclass(frozen=True)
class EndTransactionDecision(Decision):
    """The answer of :func:`end_transaction`. With ``metadata`` (PrepareCommit or PrepareAbort): write it,
    answer success once written, then write the markers and :func:`complete`. With neither: a retry of a
    transaction already completed with this outcome; answer success."""


def _fence_and_abort(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """PrepareAbort of ``current``'s open transaction under ``epoch + 1`` (Kafka's
    ``prepareFenceProducerEpoch`` to PrepareEpochFence, then ``endTransaction(ABORT, isFromClient=false)``
    which writes PrepareAbort with the bumped epoch and ``lastProducerEpoch = -1``)."""
    if current.producer_epoch >= MAX_PRODUCER_EPOCH:
        raise ValueError(f"transactional id {current.transactional_id!r}: cannot fence producer epoch "
                         f"{current.producer_epoch}, it would overflow")
    fence = _transit(current, _S.PREPARE_EPOCH_FENCE, producer_epoch=current.producer_epoch + 1,
                     last_producer_epoch=NO_PRODUCER_EPOCH)
    return _transit(fence, _S.PREPARE_ABORT, txn_last_update_timestamp_ms=now_ms)


def init_producer_id(current: TransactionMetadata | None, *, transactional_id: str, transaction_timeout_ms: int,
                     now_ms: int, new_producer_id: Callable[[], int] | int,
                     transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
                     pending: bool = False) -> InitProducerIdDecision:
    """InitProducerId of a transactional producer (Kafka's ``TransactionCoordinator.handleInitProducerId``
    and ``prepareInitProducerIdTransit``, without KIP-360's expected producer id and epoch).

    - an unknown transactional id gets a new producer id (``new_producer_id``), epoch 0, state Empty;
    - Empty, CompleteCommit, CompleteAbort: epoch + 1 (fencing the previous instance), state Empty, no
      partitions, the new timeout; when the epoch is exhausted (>= 32766) a new producer id with epoch 0;
    - Ongoing: the open transaction is aborted under epoch + 1 first
      (:attr:`InitProducerIdDecision.aborts_open_transaction`);
    - PrepareCommit, PrepareAbort, or ``pending`` (a write in flight): ConcurrentTransactionsError.

    Args:
        current: the transactional id's metadata, or None when the coordinator has none.
        transactional_id: the producer's transactional id (non-empty).
        transaction_timeout_ms: the producer's transaction timeout, in ``(0, transaction_max_timeout_ms]``.
        now_ms: the coordinator's clock, ms since the epoch.
        new_producer_id: a fresh producer id, or a function that allocates one (called only when needed).
        transaction_max_timeout_ms: the broker's ``transaction.max.timeout.ms``.
        pending: True while a write of this transactional id's metadata is in flight.

    Returns:
        An :class:`InitProducerIdDecision`; its error is InvalidTransactionTimeoutError or
        ConcurrentTransactionsError.

    Raises:
        ValueError: an empty transactional id (Kafka: INVALID_REQUEST), ``current`` of another id, or
            ``current`` in Dead or PrepareEpochFence (never a current state).
    """
    if not transactional_id:
        raise ValueError("a transactional id must not be empty")
    if not 0 < transaction_timeout_ms <= transaction_max_timeout_ms:
        return InitProducerIdDecision(error=InvalidTransactionTimeoutError(
            f"transaction timeout {transaction_timeout_ms} ms is not in (0, {transaction_max_timeout_ms}] "
            "(transaction.max.timeout.ms)"))

    def allocate() -> int:
        return new_producer_id() if callable(new_producer_id) else int(new_producer_id)

    if current is None:
        return InitProducerIdDecision(metadata=TransactionMetadata(
            transactional_id, allocate(), 0, transaction_timeout_ms, _S.EMPTY,
            txn_last_update_timestamp_ms=now_ms))
    if current.transactional_id != transactional_id:
        raise ValueError(f"metadata of {current.transactional_id!r} given for {transactional_id!r}")
    _check_current(current)
    if pending or current.state in _PREPARED:
        return InitProducerIdDecision(error=ConcurrentTransactionsError(
            f"transactional id {transactional_id!r}: its previous transaction is being completed; retry"))
    if current.state == _S.ONGOING:
        return InitProducerIdDecision(metadata=_fence_and_abort(current, now_ms), aborts_open_transaction=True)
    reset = dict(partitions=frozenset(), transaction_timeout_ms=transaction_timeout_ms,
                 txn_start_timestamp_ms=NO_TIMESTAMP, txn_last_update_timestamp_ms=now_ms,
                 last_producer_epoch=NO_PRODUCER_EPOCH)
    if is_epoch_exhausted(current.producer_epoch):  # Kafka's prepareProducerIdRotation
        return InitProducerIdDecision(metadata=_transit(current, _S.EMPTY, producer_id=allocate(), producer_epoch=0,
                                                        **reset))
    return InitProducerIdDecision(metadata=_transit(current, _S.EMPTY, producer_epoch=current.producer_epoch + 1,
                                                    **reset))


def _check_producer(current: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                    transactional_id: str | None) -> ProducerError | None:
    """Kafka's checks, in its order: no metadata or another producer id -> INVALID_PRODUCER_ID_MAPPING;
    another epoch -> PRODUCER_FENCED (INVALID_PRODUCER_EPOCH)."""
    name = transactional_id if current is None else current.transactional_id
    if current is None or current.producer_id != producer_id:
        return InvalidProducerIdMappingError(
            f"producer id {producer_id} is not the one transactional id {name!r} holds")
    if current.producer_epoch != producer_epoch:
        return InvalidProducerEpochError(
            f"transactional id {name!r}: producer epoch {producer_epoch} is fenced by epoch {current.producer_epoch}")
    return None


def add_partitions(current: TransactionMetadata | None, *, producer_id: int, producer_epoch: int,
                   partitions: Iterable[TopicPartition], now_ms: int, pending: bool = False,
                   transactional_id: str | None = None) -> AddPartitionsDecision:
    """AddPartitionsToTxn: the partitions join the producer's transaction, which begins if none is open
    (Kafka's ``handleAddPartitionsToTransaction`` and ``TransactionMetadata.prepareAddPartitions``).

    - no metadata or another producer id: InvalidProducerIdMappingError;
    - another epoch (older: a newer instance fenced this one): InvalidProducerEpochError;
    - ``pending``, PrepareCommit, PrepareAbort: ConcurrentTransactionsError (retriable);
    - Ongoing with every partition already in it: nothing to write (Kafka's shortcut);
    - Empty, CompleteCommit, CompleteAbort, Ongoing: Ongoing with the union of the partitions; the start
      timestamp is ``now_ms`` when the transaction begins here, else kept.

    Args:
        partitions: ``(topic, partition)`` pairs.
        now_ms: the coordinator's clock, ms since the epoch.
        transactional_id: only named in the error message when ``current`` is None.

    Raises:
        ValueError: ``current`` in Dead or PrepareEpochFence (never a current state).
    """
    added = frozenset((str(t), int(p)) for t, p in partitions)
    error = _check_producer(current, producer_id, producer_epoch, transactional_id)
    if error is not None:
        return AddPartitionsDecision(error=error)
    _check_current(current)
    if pending or current.state in _PREPARED:
        return AddPartitionsDecision(error=ConcurrentTransactionsError(
            f"transactional id {current.transactional_id!r}: its previous transaction is being completed; retry"))
    if current.state == _S.ONGOING and added <= current.partitions:
        return AddPartitionsDecision()
    start_ms = now_ms if current.state in _IDLE else current.txn_start_timestamp_ms
    return AddPartitionsDecision(metadata=_transit(current, _S.ONGOING, partitions=current.partitions | added,
                                                   txn_start_timestamp_ms=start_ms,
                                                   txn_last_update_timestamp_ms=now_ms))


def end_transaction(current: TransactionMetadata | None, *, producer_id: int, producer_epoch: int, commit: bool,
                    now_ms: int, pending: bool = False, transactional_id: str | None = None) -> EndTransactionDecision:
    """EndTxn from the producer: commit or abort its open transaction (Kafka's
    ``TransactionCoordinator.endTransaction`` with ``isFromClient = true``).

    - no metadata or another producer id: InvalidProducerIdMappingError;
    - another epoch: InvalidProducerEpochError (the producer was fenced);
    - ``pending``: ConcurrentTransactionsError (retriable);
    - Ongoing: PrepareCommit (``commit``) or PrepareAbort, the partitions kept, to be written;
    - CompleteCommit + commit, CompleteAbort + abort: a retry of a finished transaction; nothing to write,
      success;
    - PrepareCommit + commit, PrepareAbort + abort: a retry while the markers are being written;
      ConcurrentTransactionsError (retriable), as Kafka: the retry succeeds once the transaction completes;
    - the other outcome of a decided transaction, or Empty (no partition was ever added):
      InvalidTxnStateError.

    Args:
        commit: True to commit, False to abort.
        now_ms: the coordinator's clock, ms since the epoch.
        transactional_id: only named in the error message when ``current`` is None.

    Raises:
        ValueError: ``current`` in Dead or PrepareEpochFence (never a current state).
    """
    error = _check_producer(current, producer_id, producer_epoch, transactional_id)
    if error is not None:
        return EndTransactionDecision(error=error)
    _check_current(current)
    name, state, outcome = current.transactional_id, current.state, "commit" if commit else "abort"
    if pending:
        return EndTransactionDecision(error=ConcurrentTransactionsError(
            f"transactional id {name!r}: a state change is being written; retry"))
    if state == _S.ONGOING:
        return EndTransactionDecision(metadata=_transit(
            current, _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, txn_last_update_timestamp_ms=now_ms))
    if state == (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
        return EndTransactionDecision()
    if state == (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
        return EndTransactionDecision(error=ConcurrentTransactionsError(
            f"transactional id {name!r}: the {outcome} is being completed; retry"))
    return EndTransactionDecision(error=InvalidTxnStateError(
        f"transactional id {name!r} is in state {state}: it cannot {outcome}"))


def complete(current: TransactionMetadata, *, now_ms: int) -> TransactionMetadata:
    """The metadata once every marker of a decided transaction is written: PrepareCommit -> CompleteCommit,
    PrepareAbort -> CompleteAbort, no partitions, the start timestamp kept (Kafka's
    ``TransactionMetadata.prepareComplete``).

    Raises:
        InvalidTxnStateError: ``current`` is not PrepareCommit or PrepareAbort (Kafka answers
            INVALID_TXN_STATE when the state changed while the markers were written).
    """
    if current.state not in _PREPARED:
        raise InvalidTxnStateError(f"transactional id {current.transactional_id!r} is in state {current.state}: "
                                   "there is no decided transaction to complete")
    state = _S.COMPLETE_COMMIT if current.state == _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
    return _transit(current, state, partitions=frozenset(), txn_last_update_timestamp_ms=now_ms)


def expired(metadatas: Iterable[TransactionMetadata], *, now_ms: int,
            pending: Iterable[str] = ()) -> list[TransactionMetadata]:
    """The aborts of the transactions open longer than their timeout: for each Ongoing metadata with
    ``txn_start_timestamp_ms + transaction_timeout_ms < now_ms`` (Kafka's
    ``TransactionStateManager.timedOutTransactions``), its PrepareAbort under ``epoch + 1`` (Kafka's
    ``abortTimedOutTransactions``: ``prepareFenceProducerEpoch``, then an abort not from the client), so
    the producer that let it time out is fenced. Write each, then the abort markers, then :func:`complete`.

    Args:
        metadatas: the coordinator's current metadata (any states; only Ongoing ones can time out).
        now_ms: the coordinator's clock, ms since the epoch.
        pending: transactional ids with a write in flight (skipped, as Kafka).

    Returns:
        The PrepareAbort metadata to write, in the order of ``metadatas``.
    """
    skip = set(pending)
    return [_fence_and_abort(m, now_ms) for m in metadatas
            if m.state == _S.ONGOING and m.transactional_id not in skip
            and m.txn_start_timestamp_ms + m.transaction_timeout_ms < now_ms]


def expired_transactional_ids(metadatas: Iterable[TransactionMetadata], *, now_ms: int,
                              transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
                              pending: Iterable[str] = ()) -> list[str]:
    """The transactional ids to forget: idle (Empty, CompleteCommit, CompleteAbort) and not updated for
    ``transactional.id.expiration.ms`` (``txn_last_update_timestamp_ms <= now_ms - expiration``; Kafka's
    ``TransactionStateManager.enableTransactionalIdExpiration``, state Dead). The caller writes a
    tombstone for each (:func:`lakelog.coordinators.transaction_records.tombstone_of`), then drops it.

    Returns:
        The transactional ids, in the order of ``metadatas``.
    """
    skip = set(pending)
    return [m.transactional_id for m in metadatas
            if m.state in _IDLE and m.transactional_id not in skip
            and m.txn_last_update_timestamp_ms <= now_ms - transactional_id_expiration_ms]
