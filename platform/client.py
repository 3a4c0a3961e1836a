"""The HTTP client of the gateway: :class:`LakelogClient` and :class:`HttpConsumer`.

Defined in :mod:`lakelog.protocol.http_client` (so the Spark source, a lower layer, uses the same
client); importing it from here also registers every error class of the gateway, so an error answer is
rebuilt as the class the server raised (``UnknownTopicError``, ``NotLeaderError``, ``IllegalGenerationError``,
``OutOfOrderSequenceError``, ...). :class:`LakelogClient` is an idempotent producer by default
(``enable_idempotence=False`` turns it off).
"""

from __future__ import annotations

# The error classes the gateway may answer with, so error_from_response rebuilds them here.
import lakelog.consumer_groups.errors  # noqa: F401
import lakelog.log_tables.errors  # noqa: F401
import lakelog.producers.errors  # noqa: F401
import lakelog.producers.producer_ids  # noqa: F401  (TransactionsNotSupportedError)
import lakelog.replication.errors  # noqa: F401
from lakelog.protocol.client_auth import BearerToken  # noqa: F401  (re-exported: auth=BearerToken(jwt))
from lakelog.protocol.http_client import (  # noqa: F401  (re-exported)
    GatewayError,
    HttpConsumer,
    LakelogClient,
    arrow_body,
    parse_bootstrap,
)

__all__ = ["BearerToken", "GatewayError", "HttpConsumer", "LakelogClient", "arrow_body", "parse_bootstrap"]
