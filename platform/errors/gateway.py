"""Errors of the HTTP gateway itself (:mod:`lakelog.ingest_api`): cluster ids, slow or too many connections,
readiness; re-exported by ``lakelog.ingest_api.errors``."""

from __future__ import annotations

from lakelog.errors.base import LakelogError

__all__ = ["BrokerNotReadyError", "ClusterNotFoundError", "RequestTimeoutError", "TooManyConnectionsError"]


class ClusterNotFoundError(LakelogError):
    """The cluster id in a v3 path is not this cluster's. 404 / 40409 (lakelog's code; REST Proxy's 40404 is
    leader not available, kafka-rest ``Errors.java``)."""

    http_status = 404
    error_code = 40409


class RequestTimeoutError(LakelogError):
    """A request's headers or body did not arrive within ``request.header.timeout.ms`` /
    ``request.body.timeout.ms`` (a slow or stalled client); the connection is closed. 408 / 40802 (lakelog's
    code; REST Proxy's 40801 is a serialization error, kafka-rest ``KafkaRestExceptionMapper``)."""

    http_status = 408
    error_code = 40802


class TooManyConnectionsError(LakelogError):
    """The broker has ``max.connections`` open connections; retry later. 503 / 50305, retriable."""

    http_status = 503
    error_code = 50305
    retriable = True


class BrokerNotReadyError(LakelogError):
    """``GET /ready``: the broker is not ready to serve (not registered, partitions not opened yet, followers
    catching up); the message lists why. 503 / 50306, retriable."""

    http_status = 503
    error_code = 50306
    retriable = True
