"""Errors of idempotent and transactional producers (:mod:`lakelog.producers`), re-exported by
``lakelog.producers.errors`` (and the producer id errors by ``lakelog.producers.producer_ids``).

Each copies a Kafka error of the idempotent producer or of the transaction coordinator (KIP-98). Only
:class:`ConcurrentTransactionsError` is retriable; for the others, sending the same request again gets
the same answer.
"""

from __future__ import annotations

from lakelog.errors.base import InternalError, LakelogError

__all__ = ["ConcurrentTransactionsError", "InvalidProducerEpochError", "InvalidProducerIdMappingError",
           "InvalidTransactionTimeoutError", "InvalidTransactionalIdError", "InvalidTxnStateError",
           "OutOfOrderSequenceError", "ProducerError", "ProducerIdsExhaustedError",
           "TransactionalIdNotFoundError", "TransactionsNotSupportedError", "UnknownProducerIdError"]


class ProducerError(LakelogError):
    """An idempotent produce was refused."""


class InvalidProducerEpochError(ProducerError):
    """The request's producer epoch is older than the partition has seen from its producer id: a newer
    instance of the producer fenced this one. Kafka: INVALID_PRODUCER_EPOCH (47) / ProducerFencedException.
    409 / 40915; nothing was written."""

    http_status = 409
    error_code = 40915


class OutOfOrderSequenceError(ProducerError):
    """The request's sequence is older than every sequence the partition remembers of its producer (the
    last ``NUM_BATCHES_TO_RETAIN`` requests): it cannot tell whether the request was written. Kafka:
    OUT_OF_ORDER_SEQUENCE_NUMBER (45). 409 / 40916; nothing was written."""

    http_status = 409
    error_code = 40916


class UnknownProducerIdError(ProducerError):
    """The producer id was never handed out by this cluster, or its state on the partition expired
    (``producer.id.expiration.ms`` without a produce). Kafka: UNKNOWN_PRODUCER_ID (59). 409 / 40917; get
    a new producer id (``POST /v3/clusters/{cluster_id}/producers``); nothing was written."""

    http_status = 409
    error_code = 40917


class InvalidTxnStateError(ProducerError):
    """The transaction is not in a state that allows the request: a commit of a transaction being aborted
    (or the other way round), or an end of a transaction that has no partitions yet. Kafka:
    INVALID_TXN_STATE (48). 409 / 40918; nothing was written."""

    http_status = 409
    error_code = 40918


class InvalidProducerIdMappingError(ProducerError):
    """The producer id is not the one the transactional id holds, or the transactional id is unknown to its
    coordinator (no InitProducerId yet, or it expired after ``transactional.id.expiration.ms``). Kafka:
    INVALID_PRODUCER_ID_MAPPING (49). 409 / 40919; initialize the producer again
    (``POST /v3/clusters/{cluster_id}/producers`` with its ``transactional_id``)."""

    http_status = 409
    error_code = 40919


class ConcurrentTransactionsError(ProducerError):
    """The transactional id's previous transaction is still being completed (its commit or abort markers
    are being written, or a state change is being written to ``__transaction_state``). Kafka:
    CONCURRENT_TRANSACTIONS (51). 409 / 40920, retriable: send the same request again after a short
    backoff."""

    http_status = 409
    error_code = 40920
    retriable = True


class InvalidTransactionTimeoutError(ProducerError):
    """The transaction timeout is not positive or is larger than the broker's
    ``transaction.max.timeout.ms`` (default 900000, 15 minutes). Kafka: INVALID_TRANSACTION_TIMEOUT (50).
    400 / 40011."""

    http_status = 400
    error_code = 40011


class InvalidTransactionalIdError(ProducerError):
    """InitProducerId named an empty ``transactional_id``. Kafka answers INVALID_REQUEST (42) to an empty
    transactional id; leave it out (or null) for an idempotent producer. 400 / 40012."""

    http_status = 400
    error_code = 40012


class TransactionalIdNotFoundError(ProducerError):
    """The transactional id is unknown to its coordinator: no InitProducerId named it yet, or it expired
    after ``transactional.id.expiration.ms``. Kafka: TRANSACTIONAL_ID_NOT_FOUND (105), answered by
    DescribeTransactions. 404 / 40408."""

    http_status = 404
    error_code = 40408


class TransactionsNotSupportedError(LakelogError):
    """:meth:`ProducerIdManager.init_producer_id` was given a ``transactional_id``: it hands out the ids of
    idempotent producers only; a transactional producer's id and epoch come from the coordinator of its
    transactional id (:class:`~lakelog.coordinators.transaction_coordinator.TransactionCoordinator`, which
    ``POST /v3/clusters/{cluster_id}/producers`` asks). 400 / 40010; not retriable."""

    http_status = 400
    error_code = 40010


class ProducerIdsExhaustedError(InternalError):
    """The next block would pass the largest producer id (2**63 - 1). Kafka: a fatal ``KafkaException``
    ("Have exhausted all producerIds."). 500 / 50001, an :class:`~lakelog.errors.base.InternalError`; never met
    in practice."""
