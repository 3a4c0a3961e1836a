"""SCRAM-SHA-512 credentials (RFC 5802, RFC 7677), as Kafka stores them for its SASL/SCRAM users.

A password is never stored: a credential keeps a random salt, the iteration count and the two keys
SCRAM derives from the salted password (Kafka's ``ScramFormatter``):

- ``SaltedPassword = PBKDF2-HMAC-SHA-512(password, salt, iterations)``;
- ``StoredKey = SHA-512(HMAC(SaltedPassword, "Client Key"))``;
- ``ServerKey = HMAC(SaltedPassword, "Server Key")``.

Its text form is Kafka's (``kafka-configs --describe --entity-type users``):
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=4096``.

:func:`verify_password` checks a password presented in clear (HTTP Basic over TLS) against a credential
by deriving ``StoredKey`` again and comparing in constant time. PBKDF2 at 4096 iterations costs a few ms,
on purpose; callers cache successful checks (:mod:`~lakelog.security.authentication`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from lakelog.security.errors import InvalidCredentialError

__all__ = ["DEFAULT_ITERATIONS", "MECHANISM", "MIN_ITERATIONS", "ScramCredential", "verify_password"]

#: The SASL mechanism name these credentials are for.
MECHANISM = "SCRAM-SHA-512"
#: Kafka's minimum (and default) iteration count for SCRAM-SHA-512.
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
#: Kafka's maximum iteration count (``ScramMechanism.maxIterations``).
MAX_ITERATIONS = 16384


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)


def _keys(salted: bytes) -> tuple[bytes, bytes]:
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    return hashlib.sha512(client_key).digest(), hmac.new(salted, b"Server Key", hashlib.sha512).digest()


@dataclass(frozen=True)
class ScramCredential:
    """One user's SCRAM-SHA-512 credential: salt, stored key, server key (bytes) and iterations."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(cls, password: str, *, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> "ScramCredential":
        """A new credential for ``password`` with a random 32-byte salt (or ``salt``).

        Raises:
            InvalidCredentialError: an empty password, or iterations outside 4096-16384 (Kafka's range).
        """
        if not password:
            raise InvalidCredentialError("The password must not be empty")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise InvalidCredentialError(f"iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS} for {MECHANISM}, "
                                         f"got {iterations}")
        salt = os.urandom(32) if salt is None else salt
        stored_key, server_key = _keys(_salted_password(password, salt, iterations))
        return cls(salt, stored_key, server_key, iterations)

    def to_text(self) -> str:
        """Kafka's form: ``salt=...,stored_key=...,server_key=...,iterations=N`` (base64 values)."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},server_key={_b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        """The inverse of :meth:`to_text`.

        Raises:
            InvalidCredentialError: a missing field or a value that is not base64 / an integer.
        """
        try:
            fields = dict(item.split("=", 1) for item in text.split(","))
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as e:
            raise InvalidCredentialError(f"Not a {MECHANISM} credential: {e}") from None


def verify_password(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (constant-time comparison of the stored key)."""
    stored_key, _ = _keys(_salted_password(password, credential.salt, credential.iterations))
    return hmac.compare_digest(stored_key, credential.stored_key)
