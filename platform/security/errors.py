"""Errors of authentication and authorization (``lakelog.security``): the classes of
:mod:`lakelog.errors.security`, the name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors.security import (
    AuthenticationError,
    AuthorizationError,
    ClientQuotaExceededError,
    InvalidAclError,
    InvalidCredentialError,
    InvalidQuotaError,
    InvalidTokenError,
    SecurityError,
    UnknownUserError,
)

__all__ = ["AuthenticationError", "AuthorizationError", "ClientQuotaExceededError", "InvalidAclError",
           "InvalidCredentialError", "InvalidQuotaError", "InvalidTokenError", "SecurityError",
           "UnknownUserError"]
