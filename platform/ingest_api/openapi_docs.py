"""What the OpenAPI document says about answers every router shares: error statuses, their REST error
codes, and REST Proxy's ``application/vnd.kafka.v2+json`` answers.

- :data:`ERRORS`: the error answers a route may give, each with the :class:`~lakelog.ingest_api.models.
  ErrorBody` schema (``application/json``, as :mod:`~lakelog.ingest_api.error_handlers` answers them).
  A query or path parameter that fails validation is 400 / 40001; a request body that fails it is
  422 (42222 from the model, or the field's own code: 42225-42229). FastAPI's own 422
  ``HTTPValidationError`` never describes an answer of this server, so every route lists 422 itself.
- :class:`KafkaV2JSONResponse`: JSON answered as ``application/vnd.kafka.v2+json``; a router whose
  routes answer REST Proxy bodies (produce, consumer instances) uses it as ``default_response_class``
  (or ``response_class=``) so the document names that media type.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from lakelog.ingest_api import models
from lakelog.protocol.media_types import V2

#: What each error status means on this gateway (descriptions of the document's error answers).
ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "Bad request: a query or path parameter fails validation (40001: the message names it); a "
         "malformed or wrongly shaped body (40001); topic admin errors (40002 exists, 40003 bad config, "
         "40004 bad name, 40005-40007); idempotent producer headers incomplete or out of range (40009); "
         "a transaction timeout out of (0, transaction.max.timeout.ms] (40011); an empty transactional_id "
         "(40012).",
    401: "Unauthorized (40101): no credentials, or wrong ones, with authentication.methods other than none; "
         "`WWW-Authenticate` names the scheme to use.",
    403: "Forbidden (40301): the principal may not do this operation on this resource (authorizer.enabled; "
         "the message names both). A topic the principal may not Describe answers 403 whether it exists or not.",
    404: "Not found: topic (40401), partition (40402), consumer instance (40403), cluster (40409), "
         "no live leader (40404), group (40405), transactional id (40408), topic config (40440), or no such "
         "route.",
    405: "Method not allowed; the `Allow` header lists the methods of the path.",
    406: "Not acceptable: the `Accept` header asks for a format this route (40602) or consumer instance (40601) "
         "does not answer.",
    408: "Request timeout: the request's headers or body did not arrive in time "
         "(request.header.timeout.ms, request.body.timeout.ms; 40802); the connection is closed. A json "
         "consumer instance meeting a key or value that is not JSON (40801, REST Proxy's).",
    409: "Conflict: consumer instance state (40901-40905), replication state (40911-40914), idempotent "
         "producer state (40915 producer epoch fenced, 40916 sequence older than the partition remembers, "
         "40917 unknown or expired producer id; nothing written, not retriable), transaction state (40918 "
         "invalid transaction state, 40919 producer id not the transactional id's, 40920 the previous "
         "transaction is being completed, retriable), the topic kept changing during a topic change (40940, "
         "retriable).",
    413: "Body larger than socket.request.max.bytes (41301).",
    415: "Unsupported or missing Content-Type of a request body (41501).",
    421: "Misdirected: this broker does not lead the partition (42101, the leader's URL in the message).",
    422: "Unprocessable: a request body field fails validation (42222 from the body model; 42225 record "
         "too large, 42226 offset out of range, 42203 bad base64, 42204 consumer config, 42206 record "
         "partition missing, ...).",
    429: "Too many produce bytes in flight on this broker (42901, queued.max.request.bytes), or the user or "
         "client id is over its client quota (42902, lakelog quotas); retry after `Retry-After` seconds.",
    500: "Internal error (50001), answered with `Connection: close`; a partition's Delta table this broker "
         "cannot open or read (50021).",
    503: "Unavailable, retriable (`X-Lakelog-Retriable: true`): ZooKeeper unreachable (50304), not enough "
         "in-sync replicas (50310, 50311), ZooKeeper could not start (50303), too many connections (50305, `Retry-After`), no group or "
         "transaction coordinator answered in request.timeout.ms (50320 not the coordinator, 50321 loading), "
         "...",
    504: "Timeout waiting for the in-sync replicas (50401).",
}


def error_responses(*statuses: int, by_reference: bool = False) -> dict[int | str, dict[str, Any]]:
    """The document's answers for ``statuses``, each with the REST Proxy error body as ``application/json``.

    ``by_reference``: for routes whose answers are not ``application/json`` (``response_class=``
    :class:`KafkaV2JSONResponse`): FastAPI would file a ``model`` under the route's media type, so the
    body is given as a ``$ref`` (the schema is in the components through the other routes)."""
    if by_reference:
        content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        return {s: {"description": ERROR_DESCRIPTIONS[s], "content": content} for s in statuses}
    return {s: {"model": models.ErrorBody, "description": ERROR_DESCRIPTIONS[s]} for s in statuses}


def v3_read_errors(not_found: str) -> dict[int | str, dict[str, Any]]:
    """The error answers of a v3 read route (no body): 400 (a path parameter out of range), 404 whose
    description names ``not_found`` (the route's codes), 408, 500, 503 (ZooKeeper or a coordinator
    unavailable); 422 as every route lists it, in place of FastAPI's own ``HTTPValidationError``."""
    out = error_responses(400, 404, 408, 422, 500, 503)
    out[404] = {**out[404], "description": f"Not found: {not_found}, or no such route."}
    return out


def referenced(responses: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """``responses`` (as :func:`error_responses` makes them) for a route whose answers are not
    ``application/json`` (``response_class=`` :class:`KafkaV2JSONResponse`): each error body as a ``$ref``
    filed under ``application/json``, the media type of error answers."""
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    return {s: {"description": r["description"], "content": content} for s, r in responses.items()}


#: Error answers every route may give, for the OpenAPI document (400 parameters, 422 bodies, ...).
ERRORS = error_responses(400, 404, 406, 408, 413, 415, 421, 422, 500, 503, 504)

#: Error answers of routes that only read ZooKeeper (metadata that every broker answers).
ZOOKEEPER_ERRORS = error_responses(400, 408, 500, 503)


class KafkaV2JSONResponse(JSONResponse):
    """JSON with REST Proxy's ``application/vnd.kafka.v2+json`` content type."""

    media_type = V2
