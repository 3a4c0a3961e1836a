"""Errors of idempotent producers (``lakelog.producers``).

Each copies a Kafka error of the idempotent producer (KIP-98); none is retriable: sending the same
request again gets the same answer.
"""

from __future__ import annotations

from lakelog.errors import LakelogError


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
