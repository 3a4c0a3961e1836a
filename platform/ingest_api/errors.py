"""Errors of the HTTP gateway itself (``lakelog.ingest_api``): cluster ids, slow or too many connections,
readiness.

The classes are those of :mod:`lakelog.errors.gateway`; this is the name the gateway's modules import them by.

The request errors every route may answer (malformed body, bad base64, unsupported media types, body
too large, a record naming a missing partition) are part of the wire vocabulary and live in
:mod:`lakelog.errors.request` (re-exported by :mod:`lakelog.protocol.errors`).
"""

from __future__ import annotations

from lakelog.errors.gateway import (
    BrokerNotReadyError,
    ClusterNotFoundError,
    RequestTimeoutError,
    TooManyConnectionsError,
)

__all__ = ["BrokerNotReadyError", "ClusterNotFoundError", "RequestTimeoutError", "TooManyConnectionsError",
           "check_cluster"]


def check_cluster(broker, cluster_id: str) -> None:
    """Refuse a v3 path whose cluster id is not ``broker``'s.

    Raises:
        ClusterNotFoundError: 404 / 40409, naming this cluster's id.
    """
    if cluster_id != broker.cluster_id:
        raise ClusterNotFoundError(f"Cluster '{cluster_id}' not found; this cluster is '{broker.cluster_id}'.")


