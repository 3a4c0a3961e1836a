"""Errors of the HTTP gateway (``lakelog.ingest_api``): bad requests, as REST Proxy answers them."""

from __future__ import annotations

from lakelog.errors import RETRIABLE_HEADER, LakelogError
from lakelog.protocol.errors import (  # noqa: F401  (the gateway raises them; defined with the wire vocabulary)
    InvalidEncodingError,
    InvalidPartitionInRecordError,
    MalformedBodyError,
    NotAcceptableError,
    RequestError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)


class ForwardedProduceError(LakelogError):
    """The partition's leader refused a share of a topic-level produce this broker forwarded to it.

    Carries the leader's status, error code, message and retriability (its ``X-Lakelog-Retriable``
    header) as they were.
    """

    def __init__(self, status: int, error_code: int, message: str, *, retriable: bool) -> None:
        super().__init__(f"The partition leader answered {status}: {message}")
        self.http_status = status
        self.error_code = error_code
        self.retriable = retriable

    @classmethod
    def from_response(cls, resp) -> "ForwardedProduceError":
        """From the leader's ``httpx.Response`` (status >= 400)."""
        try:
            body = resp.json()
            code, message = int(body.get("error_code", resp.status_code * 100)), body.get("message", resp.text)
        except (ValueError, AttributeError, TypeError):
            code, message = resp.status_code * 100 + 1, resp.text
        return cls(resp.status_code, code, message, retriable=resp.headers.get(RETRIABLE_HEADER) == "true")
