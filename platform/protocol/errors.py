"""Rebuilding a server's error on the client side: one parser of REST error bodies for every caller.

The gateway answers an error with REST Proxy's body ``{"error_code": 40401, "message": "..."}`` (plus
``leader_id``/``leader_url`` for a 421) and the header ``X-Lakelog-Retriable``.
:func:`error_from_response` turns such an answer back into the :class:`~lakelog.errors.LakelogError`
subclass that was raised on the server, so callers catch ``UnknownTopicError`` or ``NotLeaderError`` on
either side of the wire. The rebuilt error is also a :class:`RemoteError` (it came over HTTP).
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import RETRIABLE_HEADER, LakelogError, for_code
from lakelog.errors.request import (
    FieldOutOfRangeError,
    InvalidBodyFieldError,
    InvalidEncodingError,
    InvalidPartitionInRecordError,
    InvalidProducerHeadersError,
    MalformedBodyError,
    NotAcceptableError,
    ProduceQueueFullError,
    RequestError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)

#: The request errors every gateway route may answer (:mod:`lakelog.errors.request`) are re-exported here.
__all__ = ["FieldOutOfRangeError", "InvalidBodyFieldError", "InvalidEncodingError",
           "InvalidPartitionInRecordError", "InvalidProducerHeadersError", "MalformedBodyError",
           "NotAcceptableError", "ProduceQueueFullError", "RemoteError", "RequestError",
           "RequestTooLargeError", "UnsupportedMediaTypeError", "error_from_response"]


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
        An instance of the class of the body's ``error_code`` (:func:`lakelog.errors.for_code`, complete
        once :mod:`lakelog.errors` is imported, which this module does), which is also a
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
    cls = for_code(code)
    if cls is None or issubclass(cls, RemoteError):
        return RemoteError(status, code, message, retriable=retriable)
    err = _remote_class(cls).from_body(f"{message} (HTTP {status}, error_code {code})", body)
    err.http_status = status
    err.error_code = code
    if retriable is not None:
        err.retriable = retriable
    return err
