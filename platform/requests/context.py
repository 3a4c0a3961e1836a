"""Who sent a request and by which door: what every operation of the request layer authorizes.

Kafka's ``RequestContext`` (clients/src/main/java/org/apache/kafka/common/requests/RequestContext.java):
the authenticated principal, the client's address, its ``client.id`` and the listener the request came
in by. A front door builds one per request after authentication (the HTTP gateway:
:func:`lakelog.ingest_api.deps.get_context`) and passes it to the operation, which checks the
principal's ACLs itself (:mod:`lakelog.requests.authorization`), so a front door that only calls
operations is authorized correctly.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RequestContext"]


@dataclass(frozen=True, kw_only=True)
class RequestContext:
    """One request's caller.

    Attributes:
        principal: ``User:name`` as authentication found it (``User:ANONYMOUS`` with
            ``authentication.methods=none``).
        host: the client's IP address (``-`` when unknown): what ACL hosts match and logs name.
        client_id: Kafka's ``client.id`` (the HTTP header ``X-Lakelog-Client-Id``; empty when not sent).
        listener: the name of the listener the request came in by (``http`` for the HTTP gateway).
    """

    principal: str
    host: str = "-"
    client_id: str = ""
    listener: str = "http"
