"""Errors of authentication and authorization (:mod:`lakelog.security`), re-exported by
``lakelog.security.errors``."""

from __future__ import annotations

from lakelog.errors.base import LakelogError

__all__ = ["AuthenticationError", "AuthorizationError", "ClientQuotaExceededError", "InvalidAclError",
           "InvalidCredentialError", "InvalidQuotaError", "InvalidTokenError", "SecurityError",
           "UnknownUserError"]


class SecurityError(LakelogError):
    """An authentication or authorization check failed."""


class AuthenticationError(SecurityError):
    """The request carries no valid credentials. Kafka: SASL_AUTHENTICATION_FAILED (58). 401 / 40101.

    Not retriable with the same credentials; the message never contains the secret that was sent.
    """

    http_status = 401
    error_code = 40101


class AuthorizationError(SecurityError):
    """The principal may not do this operation on this resource. Kafka: TOPIC_AUTHORIZATION_FAILED (29),
    GROUP_AUTHORIZATION_FAILED (30), CLUSTER_AUTHORIZATION_FAILED (31),
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53). 403 / 40301, naming the operation and the resource."""

    http_status = 403
    error_code = 40301


class InvalidAclError(SecurityError):
    """An ACL that cannot be stored or matched: an unknown resource type, operation, permission or pattern
    type, an operation the resource type does not have, or an empty name. Kafka: INVALID_REQUEST. 400 / 40021."""

    http_status = 400
    error_code = 40021


class InvalidCredentialError(SecurityError):
    """A user name or password that cannot be stored: empty, or iterations outside Kafka's range. 400 / 40022."""

    http_status = 400
    error_code = 40022


class UnknownUserError(SecurityError):
    """No SCRAM credential for that user name. Kafka: RESOURCE_NOT_FOUND (91). 404 / 40412."""

    http_status = 404
    error_code = 40412


class InvalidQuotaError(SecurityError):
    """A client quota that cannot be stored: an unknown quota name, a value that is not a positive number,
    or an entity without a user nor a client id. Kafka: INVALID_REQUEST. 400 / 40023."""

    http_status = 400
    error_code = 40023


class ClientQuotaExceededError(SecurityError):
    """The request's user or client id is over its client quota (``producer_byte_rate``,
    ``consumer_byte_rate`` or ``request_percentage``) on this broker: nothing was done; retry after the
    ``Retry-After`` seconds (Kafka throttles such a client for the same time). Retriable. 429 / 42902."""

    http_status = 429
    error_code = 42902
    retriable = True
    retry_after_s = 1

    def __init__(self, message: str | None = None, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        #: whole seconds to wait (the throttle time rounded up), also sent as ``Retry-After``
        self.retry_after_s = retry_after_s
        self.response_headers = {"Retry-After": str(retry_after_s)}


class InvalidTokenError(AuthenticationError):
    """A bearer token that is not accepted; ``reason`` says why (never contains the token).

    Raised by :class:`lakelog.security.oauth.JwtValidator`; the authenticator answers it with an
    :class:`AuthenticationError` of its own (401 / 40101 with a ``WWW-Authenticate`` challenge), so it
    never reaches a client as it is. An :class:`AuthenticationError` itself, so one that did would answer
    401 / 40101 too.
    """

    def __init__(self, reason: str, *, who: str = "-") -> None:
        super().__init__(reason)
        self.reason = reason
        #: the token's unverified principal claim, for the log line ("-" when unreadable)
        self.who = who
