"""SCRAM-SHA-256 and SCRAM-SHA-512 credentials (RFC 5802, RFC 7677), as Kafka stores them for its SASL/SCRAM
users: one credential per mechanism, each with its own salt.

A password is never stored: a credential keeps a random salt, the iteration count and the two keys
SCRAM derives from the salted password with the mechanism's hash H (SHA-256 or SHA-512; Kafka's
``ScramFormatter``):

- ``SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)``;
- ``StoredKey = H(HMAC-H(SaltedPassword, "Client Key"))``;
- ``ServerKey = HMAC-H(SaltedPassword, "Server Key")``.

These are exactly what a SCRAM server needs (the Kafka listener's SASL/SCRAM exchange,
:mod:`lakelog.kafka.sasl`, hands them to ``scramp``).

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

__all__ = ["DEFAULT_ITERATIONS", "MECHANISM", "MECHANISMS", "MIN_ITERATIONS", "ScramCredential", "verify_password"]

#: The SASL mechanism of the credential HTTP Basic checks passwords against (every user has one).
MECHANISM = "SCRAM-SHA-512"
#: The SCRAM mechanisms a user gets a credential for (Kafka's ``ScramMechanism``), with their hash.
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's minimum (and default) iteration count for both mechanisms.
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
#: Kafka's maximum iteration count (``ScramMechanism.maxIterations``).
MAX_ITERATIONS = 16384


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _salted_password(password: str, salt: bytes, iterations: int, hash_name: str) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def _keys(salted: bytes, hash_name: str) -> tuple[bytes, bytes]:
    digest = getattr(hashlib, hash_name)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    return digest(client_key).digest(), hmac.new(salted, b"Server Key", digest).digest()


@dataclass(frozen=True)
class ScramCredential:
    """One user's SCRAM credential of one mechanism: salt, stored key, server key (bytes), iterations and
    ``mechanism`` (``SCRAM-SHA-512``, the default, or ``SCRAM-SHA-256``)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    mechanism: str = MECHANISM

    @classmethod
    def from_password(cls, password: str, *, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None, mechanism: str = MECHANISM) -> "ScramCredential":
        """A new ``mechanism`` credential for ``password`` with a random 32-byte salt (or ``salt``).

        Raises:
            InvalidCredentialError: an empty password, iterations outside 4096-16384 (Kafka's range), or a
                mechanism not in :data:`MECHANISMS`.
        """
        if not password:
            raise InvalidCredentialError("The password must not be empty")
        if mechanism not in MECHANISMS:
            raise InvalidCredentialError(f"Unknown SCRAM mechanism {mechanism!r}: expected one of {', '.join(MECHANISMS)}")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise InvalidCredentialError(f"iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS} for {mechanism}, "
                                         f"got {iterations}")
        salt = os.urandom(32) if salt is None else salt
        stored_key, server_key = _keys(_salted_password(password, salt, iterations, MECHANISMS[mechanism]),
                                       MECHANISMS[mechanism])
        return cls(salt, stored_key, server_key, iterations, mechanism)

    def to_text(self) -> str:
        """Kafka's form: ``salt=...,stored_key=...,server_key=...,iterations=N`` (base64 values)."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},server_key={_b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str, *, mechanism: str = MECHANISM) -> "ScramCredential":
        """The inverse of :meth:`to_text` (the text does not name its mechanism: Kafka keys it by it).

        Raises:
            InvalidCredentialError: a missing field or a value that is not base64 / an integer.
        """
        try:
            fields = dict(item.split("=", 1) for item in text.split(","))
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]), mechanism)
        except (KeyError, ValueError) as e:
            raise InvalidCredentialError(f"Not a {mechanism} credential: {e}") from None


def verify_password(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (constant-time comparison of the stored key)."""
    hash_name = MECHANISMS[credential.mechanism]
    stored_key, _ = _keys(_salted_password(password, credential.salt, credential.iterations, hash_name), hash_name)
    return hmac.compare_digest(stored_key, credential.stored_key)
