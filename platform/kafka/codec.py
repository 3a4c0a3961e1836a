"""Kafka request and response messages: the listener's only use of kafka-python's ``kafka.protocol``.

kafka-python 3.x builds one class per API from Kafka's own JSON message specs (every version, flexible
versions and tagged fields included) and decodes and encodes both directions. Request frames arrive
without their 4-byte size prefix; responses leave with it. Header versions follow Kafka's rules (request
header v2 for flexible versions, v1 else; ApiVersions responses always with header v0), which the classes
apply themselves.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import struct
from dataclasses import dataclass
from typing import Any

import kafka.protocol as _kp
from kafka.protocol.api_message import ApiMessage

__all__ = ["RequestFrame", "decode_request", "encode_response", "peek_header", "response_class",
           "unsupported_api_versions"]

_HEADER = struct.Struct(">hhi")


def _message_classes() -> tuple[dict[int, type], dict[int, type]]:
    """api key -> request class, api key -> response class, found by walking ``kafka.protocol`` (it keeps
    no registry; its ``old`` package holds the hand-written classes it replaced)."""
    requests: dict[int, type] = {}
    responses: dict[int, type] = {}
    for module in pkgutil.walk_packages(_kp.__path__, "kafka.protocol."):
        if ".old" in module.name or "generate" in module.name:
            continue
        try:
            loaded = importlib.import_module(module.name)
        except ImportError:
            continue
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if (issubclass(cls, ApiMessage) and cls is not ApiMessage and getattr(cls, "_json", None)
                    and cls._class_version is None):
                (requests if cls.type == "request" else responses)[cls.API_KEY] = cls
    return requests, responses


_REQUESTS, _RESPONSES = _message_classes()


@dataclass(frozen=True)
class RequestFrame:
    """A decoded request: its header fields and body (a kafka-python message object, fields by snake_case
    name: ``request.topic_data``)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` of a request frame (no size prefix), read before choosing a
    decoder. Raises struct.error for a frame under 8 bytes."""
    return _HEADER.unpack_from(frame)


def decode_request(frame: bytes) -> RequestFrame:
    """Decode a request frame (no size prefix) whose API and version :func:`peek_header` found known.

    Raises:
        KeyError: no message class for the API key. Exception (IndexError, ValueError, struct.error, ...):
            a malformed frame (kafka-python raises plain exceptions); the caller closes the connection.
    """
    api_key, version, correlation_id = peek_header(frame)
    body = _REQUESTS[api_key].decode(frame, version=version, header=True)
    return RequestFrame(api_key, version, correlation_id, body.header.client_id or "", body)


def response_class(api_key: int) -> type:
    """The response message class of ``api_key`` (nested structs as attributes:
    ``MetadataResponse.MetadataResponseBroker``)."""
    return _RESPONSES[api_key]


def encode_response(response: Any, *, correlation_id: int) -> bytes:
    """A response message object (built with ``version=``) as a size-prefixed frame with its header."""
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def unsupported_api_versions(*, correlation_id: int, max_version: int) -> bytes:
    """Kafka's answer to an ApiVersions request of a version above ``max_version``: v0 body and header,
    UNSUPPORTED_VERSION (35) and the ApiVersions entry alone, so the client retries with a version it and
    the broker share (KIP-511, ``ApiVersionsRequest.getErrorResponse``)."""
    cls = _RESPONSES[18]
    response = cls(version=0, error_code=35, api_keys=[
        cls.ApiVersion(version=0, api_key=18, min_version=0, max_version=max_version)])
    return encode_response(response, correlation_id=correlation_id)
