"""The media types a REST Proxy v2 route serves and takes, as route dependencies.

Confluent's v2 resources declare them with JAX-RS ``@Produces`` / ``@Consumes`` (kafka-rest
``resources/v2/*.java``, ``Versions.java``), and Jersey answers 406 to an ``Accept`` none of them matches
and 415 to a ``Content-Type`` none of them matches. lakelog does the same, before the route runs:

- :func:`accepts`: the ``Accept`` header must allow one of the route's answer types (``*/*``,
  ``application/*``, an absent header or one of the types); else 406 / 40602;
- :func:`content_types`: a request that carries a body must name one of the route's request types;
  else 415 / 41501 (a body without ``Content-Type`` too: FastAPI would parse it as JSON anyway).
"""

from __future__ import annotations

from fastapi import Depends, Request, params

from lakelog.protocol.errors import NotAcceptableError, UnsupportedMediaTypeError
from lakelog.protocol.media_types import AVRO_V2, BINARY_V2, JSON, JSON_V2, JSONSCHEMA_V2, PROTOBUF_V2, V2, media_type

#: What v2 metadata and produce routes answer: ``application/vnd.kafka.v2+json`` (Confluent's
#: ``Versions.KAFKA_V2_JSON``), also served to a client that asks for plain JSON (Confluent's
#: ``PREFERRED_RESPONSE_TYPES``).
V2_ANSWERS = (V2, JSON)
#: What the consumer routes answer (Confluent's ``ConsumersResource`` ``@Produces``: the embedded formats
#: and the v2 type).
CONSUMER_ANSWERS = (V2, JSON, BINARY_V2, JSON_V2, AVRO_V2, JSONSCHEMA_V2, PROTOBUF_V2)
#: What the consumer routes take (Confluent's ``ConsumersResource`` ``@Consumes``; lakelog also takes
#: ``application/json``, which its clients send).
CONSUMER_BODIES = (V2, JSON, BINARY_V2, JSON_V2)

_WILDCARDS = ("*/*", "application/*")


def _acceptable(accept: str | None, types: tuple[str, ...]) -> bool:
    if accept is None or accept in types or accept in _WILDCARDS:  # what clients send, without a parse
        return True
    if not accept.strip():
        return True
    for entry in accept.split(","):
        mt = media_type(entry)
        params_ = [p.strip().replace(" ", "") for p in entry.split(";")[1:]]
        if "q=0" in params_ or "q=0.0" in params_:
            continue  # explicitly refused
        if mt in _WILDCARDS or mt in types:
            return True
    return False


def require_acceptable(request: Request, types: tuple[str, ...]) -> None:
    """Refuse ``request`` when its ``Accept`` header allows none of ``types`` (module doc): what
    :func:`accepts` checks, for a route that folds the check into a dependency of its own (the produce
    routes: one dependency on the hot path, not two).

    Raises:
        NotAcceptableError: 406 / 40602, naming the types the route answers.
    """
    accept = request.headers.get("accept")
    if not _acceptable(accept, types):
        raise NotAcceptableError(f"This route answers {', '.join(types)}; the Accept header {accept!r} allows "
                                 f"none of them.")


def accepts(*types: str) -> params.Depends:
    """A dependency refusing a request whose ``Accept`` allows none of ``types``: 406 / 40602
    (:func:`require_acceptable`)."""

    async def check(request: Request) -> None:
        require_acceptable(request, types)

    return Depends(check)


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in request.headers


def content_types(*types: str) -> params.Depends:
    """A dependency refusing a request with a body whose ``Content-Type`` is none of ``types`` (or absent):
    415 / 41501. A request without a body passes (the route says whether it needs one)."""

    async def check(request: Request) -> None:
        if not _has_body(request):
            return
        given = request.headers.get("content-type")
        if media_type(given) not in types:
            raise UnsupportedMediaTypeError(
                f"Content-Type {given!r} is not supported here; send the body as one of: {', '.join(types)}."
                if given else f"The request has a body but no Content-Type; send it as one of: {', '.join(types)}.")

    return Depends(check)
