"""The HTTP client of the gateway: :class:`LakelogClient` and :class:`HttpConsumer`.

Defined in :mod:`lakelog.protocol.http_client` (so the Spark source, a lower layer, uses the same
client). An error answer is rebuilt as the class the server raised (``UnknownTopicError``,
``NotLeaderError``, ``IllegalGenerationError``, ``OutOfOrderSequenceError``, ...: every class of
:mod:`lakelog.errors`). :class:`LakelogClient` is an idempotent producer by default
(``enable_idempotence=False`` turns it off).
"""

from __future__ import annotations

from lakelog.protocol.client_auth import BearerToken  # noqa: F401  (re-exported: auth=BearerToken(jwt))
from lakelog.protocol.http_client import (  # noqa: F401  (re-exported)
    GatewayError,
    HttpConsumer,
    LakelogClient,
    arrow_body,
    parse_bootstrap,
)

__all__ = ["BearerToken", "GatewayError", "HttpConsumer", "LakelogClient", "arrow_body", "parse_bootstrap"]
