"""The request errors every gateway route may answer (malformed body, bad base64, unsupported media types,
body too large, a record naming a missing partition, invalid idempotent producer headers): part of the wire
vocabulary, re-exported by ``lakelog.protocol.errors`` (and ``lakelog.protocol.producer_headers``)."""

from __future__ import annotations

from lakelog.errors.base import LakelogError

__all__ = ["FieldOutOfRangeError", "InvalidBodyFieldError", "InvalidEncodingError",
           "InvalidPartitionInRecordError", "InvalidProducerHeadersError", "MalformedBodyError", "NotAcceptableError",
           "ProduceQueueFullError", "RequestError", "RequestTooLargeError", "UnsupportedMediaTypeError"]


class RequestError(LakelogError):
    """The request is malformed (base class: each subclass has its own status and code)."""


class MalformedBodyError(RequestError):
    """The body is not valid JSON or not shaped as the endpoint expects. 400 / 40001."""

    http_status = 400
    error_code = 40001


class InvalidBodyFieldError(RequestError):
    """A field of a request body fails the endpoint's model (FastAPI's ``RequestValidationError`` on the
    body: a missing field, a wrong type, a value outside its range); a parameter that fails is a
    :class:`MalformedBodyError` (400 / 40001). 422 / 42222."""

    http_status = 422
    error_code = 42222


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


class InvalidProducerHeadersError(RequestError):
    """The idempotent producer headers are incomplete, not integers or out of range, or come with
    ``acks=0`` (Kafka's producer refuses ``enable.idempotence`` without acknowledgements). 400 / 40009."""

    http_status = 400
    error_code = 40009
