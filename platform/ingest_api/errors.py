"""Errors of the HTTP gateway (``lakelog.ingest_api``): bad requests, as REST Proxy answers them."""

from __future__ import annotations

from lakelog.errors import RETRIABLE_HEADER, LakelogError


class RequestError(LakelogError):
    """The request is malformed."""

    http_status = 400
    error_code = 40001


class MalformedBodyError(RequestError):
    """The body is not valid JSON or not shaped as the endpoint expects. 400 / 40001."""

    http_status = 400
    error_code = 40001


class InvalidEncodingError(RequestError):
    """A key, value or header is not valid base64 (binary format). REST Proxy's JSON conversion error: 422 / 42203."""

    http_status = 422
    error_code = 42203


class InvalidPartitionInRecordError(RequestError):
    """A record names a partition the topic does not have. REST Proxy: 422 / 42202."""

    http_status = 422
    error_code = 42202


class UnsupportedMediaTypeError(RequestError):
    """The Content-Type is not one the endpoint accepts. 415 / 41501."""

    http_status = 415
    error_code = 41501


class NotAcceptableError(RequestError):
    """No response form matches the Accept header. 406 / 40601."""

    http_status = 406
    error_code = 40601


class RequestTooLargeError(RequestError):
    """The body is larger than ``socket.request.max.bytes``. 413 / 41301."""

    http_status = 413
    error_code = 41301


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
