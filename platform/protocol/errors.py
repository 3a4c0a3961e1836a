"""Rebuilding a server's error on the client side: one parser of REST error bodies for every caller.

The gateway answers an error with REST Proxy's body ``{"error_code": 40401, "message": "..."}`` (plus
``leader_id``/``leader_url`` for a 421) and the header ``X-Lakelog-Retriable``.
:func:`error_from_response` turns such an answer back into the :class:`~lakelog.errors.LakelogError`
subclass that was raised on the server, so callers catch ``UnknownTopicError`` or ``NotLeaderError`` on
either side of the wire. The rebuilt error is also a :class:`RemoteError` (it came over HTTP).
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import ERROR_CLASSES, RETRIABLE_HEADER, LakelogError


# -- the request errors every gateway route may answer ----------------------------------------

class RequestError(LakelogError):
    """The request is malformed (base class: each subclass has its own status and code)."""


class MalformedBodyError(RequestError):
    """The body is not valid JSON or not shaped as the endpoint expects. 400 / 40001."""

    http_status = 400
    error_code = 40001


class InvalidEncodingError(RequestError):
    """A key, value or header is not valid base64 (binary format). REST Proxy's JSON conversion error: 422 / 42203."""

    http_status = 422
    error_code = 42203


class InvalidPartitionInRecordError(RequestError):
    """A record names a partition the topic does not have. 422 / 42206."""

    http_status = 422
    error_code = 42206


class UnsupportedMediaTypeError(RequestError):
    """The Content-Type is not one the endpoint accepts. 415 / 41501."""

    http_status = 415
    error_code = 41501


class NotAcceptableError(RequestError):
    """No response form matches the Accept header. 406 / 40602."""

    http_status = 406
    error_code = 40602


class RequestTooLargeError(RequestError):
    """The body is larger than ``socket.request.max.bytes``. 413 / 41301."""

    http_status = 413
    error_code = 41301


class FieldOutOfRangeError(RequestError):
    """A produce field is outside the range Kafka gives it: a partition that is not an int32 >= 0 (or a
    JSON boolean), an offset that is not an int64 >= 0. Nothing was written. 422 / 42220."""

    http_status = 422
    error_code = 42220


class ProduceQueueFullError(RequestError):
    """The bytes of produce requests in flight on this broker are at ``queued.max.request.bytes``; the
    request was not read. Retriable after the ``Retry-After`` seconds. 429 / 42901."""

    http_status = 429
    error_code = 42901
    retriable = True
    retry_after_s = 1


# -- errors rebuilt from an answer ---------------------------------------------------------------

class RemoteError(LakelogError):
    """An error answered by a gateway (or any HTTP server) with no lakelog class for its code.

    Attributes:
        http_status: the answer's status; error_code: the body's ``error_code`` (the status when the body
            is not REST Proxy's); retriable: the ``X-Lakelog-Retriable`` header, else guessed from the
            status (421, 503, 504 are retriable).
    """

    def __init__(self, status: int, error_code: int, message: str, *, retriable: bool | None = None) -> None:
        super().__init__(f"{message} (HTTP {status}, error_code {error_code})")
        self.http_status = status
        self.error_code = error_code
        self.retriable = retriable if retriable is not None else status in (421, 503, 504)


_REMOTE_CLASSES: dict[type[LakelogError], type[LakelogError]] = {}


def _remote_class(cls: type[LakelogError]) -> type[LakelogError]:
    """``cls`` mixed with :class:`RemoteError` (made once per class)."""
    remote = _REMOTE_CLASSES.get(cls)
    if remote is None:
        remote = type(cls.__name__, (cls, RemoteError), {"__module__": cls.__module__, "__doc__": cls.__doc__})
        _REMOTE_CLASSES[cls] = remote
    return remote


def error_from_response(resp: Any) -> LakelogError:
    """The error an HTTP answer with status >= 400 carries.

    Args:
        resp: an ``httpx.Response`` (anything with ``status_code``, ``headers``, ``json()``, ``text``).

    Returns:
        An instance of the registered class of the body's ``error_code`` (see
        :data:`lakelog.errors.ERROR_CLASSES`; the class's module must have been imported), which is also a
        :class:`RemoteError` carrying the answer's status and retriability; a plain :class:`RemoteError`
        when the code is unknown or the body is not REST Proxy's.
    """
    status = int(resp.status_code)
    body: dict = {}
    try:
        parsed = resp.json()
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    try:
        code = int(body.get("error_code", status))
    except (TypeError, ValueError):
        code = status
    message = body.get("message")
    if not isinstance(message, str):
        message = getattr(resp, "text", "")[:2000] or f"HTTP {status}"
    flag = resp.headers.get(RETRIABLE_HEADER)
    retriable = None if flag is None else flag == "true"
    cls = ERROR_CLASSES.get(code)
    if cls is None or issubclass(cls, RemoteError):
        return RemoteError(status, code, message, retriable=retriable)
    err = _remote_class(cls).from_body(f"{message} (HTTP {status}, error_code {code})", body)
    err.http_status = status
    err.error_code = code
    if retriable is not None:
        err.retriable = retriable
    return err
