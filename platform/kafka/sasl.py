"""SASL authentication of a SASL_PLAINTEXT or SASL_SSL Kafka listener's connections (Kafka's
``SaslServerAuthenticator``; KIP-43, KIP-152, KIP-368), against lakelog's users and identity provider.

Per connection, before any other request:

1. The client may send ApiVersions (any number of times) and then **SaslHandshake** naming a mechanism of
   ``sasl.enabled.mechanisms``; an unknown one answers UNSUPPORTED_SASL_MECHANISM (33) with the enabled
   ones, and the connection closes.
2. After SaslHandshake **v1** the SASL tokens come in **SaslAuthenticate** requests (v0-2; v1+ answer
   ``session_lifetime_ms`` 0: no re-authentication is asked, as Kafka's ``connections.max.reauth.ms=0``).
   After SaslHandshake **v0** they come as raw size-prefixed tokens with no Kafka header, answered the
   same way (KIP-43's legacy framing, which old clients still use).
3. A failed exchange answers SASL_AUTHENTICATION_FAILED (58) with a message saying what failed (never the
   secret sent), is logged with the user (or the token's unverified principal) and the client's address,
   and the connection closes; with raw tokens it just closes.
4. Any other request before the exchange ended, a second SaslHandshake, or SaslAuthenticate before
   SaslHandshake: ILLEGAL_SASL_STATE (34), logged, and the connection closes (Kafka has no answer for an
   arbitrary request here: it closes too). SaslHandshake or SaslAuthenticate after authentication, or on a
   listener without SASL, answer ILLEGAL_SASL_STATE and the connection stays, as Kafka's ``KafkaApis``.

The mechanisms (the principal is ``User:{name}``, what HTTP authentication gives the same user):

- ``PLAIN`` (RFC 4616, ``authzid NUL user NUL password``): the password is checked as HTTP Basic's
  against the user's SCRAM-SHA-512 credential (:meth:`~lakelog.security.authentication.Authenticator.password_principal`);
  an authorization id other than the user is refused, as Kafka's ``PlainSaslServer``.
- ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802 / 7677, no channel binding): ``scramp``'s server against
  the user's credential of that mechanism, stored as Kafka stores it (:mod:`lakelog.security.user_credentials`).
  An unknown user runs the exchange against a throw-away credential and fails at the proof, as a wrong
  password does (no user probing).
- ``OAUTHBEARER`` (RFC 7628, ``n,,\\x01auth=Bearer <JWT>\\x01\\x01``): the JWT is checked as an HTTP Bearer
  token, with the same JWKS (:meth:`~lakelog.security.authentication.Authenticator.token_principal`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from typing import Any

from scramp import ScramException, ScramMechanism

from lakelog.errors import AuthenticationError
from lakelog.kafka.codec import RequestFrame, response_class
from lakelog.security.authentication import Authenticator
from lakelog.security.scram import MECHANISMS as SCRAM_MECHANISMS
from lakelog.security.scram import ScramCredential

__all__ = ["ILLEGAL_SASL_STATE", "SASL_AUTHENTICATE", "SASL_AUTHENTICATION_FAILED", "SASL_HANDSHAKE",
           "UNSUPPORTED_SASL_MECHANISM", "SaslSession", "illegal_state_response"]

log = logging.getLogger(__name__)

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


def illegal_state_response(request: RequestFrame, message: str) -> Any:
    """SaslHandshake's or SaslAuthenticate's answer ILLEGAL_SASL_STATE (34) of ``request``'s version."""
    cls = response_class(request.api_key)
    if request.api_key == SASL_HANDSHAKE:
        return cls(version=request.api_version, error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    return cls(version=request.api_version, error_code=ILLEGAL_SASL_STATE, error_message=message, auth_bytes=b"",
               session_lifetime_ms=0)


class _Dummies:
    """Per SCRAM mechanism, a credential no password matches (made on first use), for unknown users."""

    def __init__(self) -> None:
        self._made: dict[str, ScramCredential] = {}

    def get(self, mechanism: str) -> ScramCredential:
        if mechanism not in self._made:
            self._made[mechanism] = ScramCredential.from_password(base64.b64encode(os.urandom(24)).decode(),
                                                                  mechanism=mechanism)
        return self._made[mechanism]


_DUMMIES = _Dummies()


class _Exchange:
    """One mechanism's server side: :meth:`step` takes a client token and answers the server's (raising
    :class:`AuthenticationError`); ``principal`` is set once the exchange succeeded."""

    principal: str | None = None

    async def step(self, token: bytes) -> bytes:
        raise NotImplementedError


class _Plain(_Exchange):
    def __init__(self, authenticator: Authenticator, where: dict) -> None:
        self.authenticator = authenticator
        self.where = where

    async def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise AuthenticationError("Authentication failed: the PLAIN token must be authzid NUL user NUL password")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationError("Authentication failed: the PLAIN token is not UTF-8") from None
        if authzid and authzid != user:
            raise AuthenticationError("Authentication failed: the authorization id must be empty or the user name")
        try:
            self.principal = await asyncio.to_thread(self.authenticator.password_principal, user, password,
                                                     **self.where)
        except AuthenticationError as e:
            raise AuthenticationError(f"{e.message} (SASL PLAIN)") from None
        return b""


class _Scram(_Exchange):
    def __init__(self, mechanism: str, authenticator: Authenticator, where: dict) -> None:
        self.mechanism = mechanism
        self.authenticator = authenticator
        self.where = where
        self.user: str | None = None
        self.known = False
        self.server = ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self.user = user
        credential = self.authenticator.scram_credential(user, self.mechanism)
        self.known = credential is not None
        c = credential or _DUMMIES.get(self.mechanism)
        return c.salt, c.stored_key, c.server_key, c.iterations

    def _failed(self, reason: str) -> AuthenticationError:
        log.warning("authentication failed from %s on %s: %s for %r (%s)", self.where["client_host"],
                    self.where["route"], reason, self.user, self.mechanism)
        return AuthenticationError(f"Authentication failed during authentication due to invalid credentials with SASL "
                           f"mechanism {self.mechanism}")

    async def step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed("a token that is not UTF-8") from None
        try:
            if self.server.stage is None:
                self.server.set_client_first(message)
                return self.server.get_server_first().encode()
            self.server.set_client_final(message)
            final = self.server.get_server_final()
        except ScramException as e:
            raise self._failed(f"the SCRAM exchange failed ({e})") from None
        if not self.known:
            raise self._failed("unknown user")
        self.principal = f"User:{self.user}"
        return final.encode()


class _OAuthBearer(_Exchange):
    def __init__(self, authenticator: Authenticator, where: dict) -> None:
        self.authenticator = authenticator
        self.where = where

    async def step(self, token: bytes) -> bytes:
        # RFC 7628 section 3.1: gs2-header kvsep *(key "=" value kvsep) kvsep, kvsep = %x01
        gs2, sep, rest = token.partition(b"\x01")
        if not sep or not gs2.startswith((b"n,", b"y,")):
            raise AuthenticationError("Authentication failed: the OAUTHBEARER token must be n,,\\x01auth=Bearer <JWT>\\x01\\x01")
        pairs = dict(item.partition(b"=")[::2] for item in rest.split(b"\x01") if item)
        scheme, _, jwt = pairs.get(b"auth", b"").partition(b" ")
        if scheme.lower() != b"bearer" or not jwt.strip():
            raise AuthenticationError("Authentication failed: the OAUTHBEARER token has no auth=Bearer <JWT>")
        try:
            self.principal = await asyncio.to_thread(self.authenticator.token_principal,
                                                     jwt.strip().decode("ascii", "replace"), **self.where)
        except AuthenticationError as e:
            raise AuthenticationError(f"{e.message} (SASL OAUTHBEARER)") from None
        return b""


class SaslSession:
    """The SASL state of one connection of a SASL listener.

    Args:
        mechanisms: ``sasl.enabled.mechanisms``. authenticator: the broker's users and JWT checks.
        client_host: the client's address (logs). listener: the listener's name (logs).
    """

    def __init__(self, *, mechanisms: tuple[str, ...], authenticator: Authenticator, client_host: str,
                 listener: str) -> None:
        self.mechanisms = mechanisms
        self.authenticator = authenticator
        self.where = {"client_host": client_host, "route": f"Kafka listener {listener}"}
        self._exchange: _Exchange | None = None
        self._handshake_version: int | None = None
        #: ``User:{name}`` once authenticated; None before
        self.principal: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def expects_raw_token(self) -> bool:
        """After SaslHandshake v0 and before the exchange ended: the next frame is a raw SASL token."""
        return self._handshake_version == 0 and self._exchange is not None and not self.authenticated

    def _new_exchange(self, mechanism: str) -> _Exchange:
        if mechanism == "PLAIN":
            return _Plain(self.authenticator, self.where)
        if mechanism in SCRAM_MECHANISMS:
            return _Scram(mechanism, self.authenticator, self.where)
        return _OAuthBearer(self.authenticator, self.where)

    async def handle(self, request: RequestFrame) -> tuple[Any, bool]:
        """``(response, close after it)`` of a SaslHandshake or SaslAuthenticate request."""
        if request.api_key == SASL_HANDSHAKE:
            return self._handshake(request)
        return await self._authenticate(request)

    def _handshake(self, request: RequestFrame) -> tuple[Any, bool]:
        cls = response_class(SASL_HANDSHAKE)
        if self.authenticated:  # Kafka's KafkaApis answers so (no re-authentication): the connection stays
            return illegal_state_response(request, "already authenticated"), False
        if self._exchange is not None:
            self._log_illegal("a second SaslHandshake")
            return illegal_state_response(request, "SaslHandshake was already done"), True
        mechanism = request.body.mechanism
        if mechanism not in self.mechanisms:
            log.warning("Kafka connection from %s closed: SASL mechanism %r is not enabled (sasl.enabled.mechanisms=%s)",
                        self.where["client_host"], mechanism, ",".join(self.mechanisms))
            return cls(version=request.api_version, error_code=UNSUPPORTED_SASL_MECHANISM,
                       mechanisms=list(self.mechanisms)), True
        self._exchange = self._new_exchange(mechanism)
        self._handshake_version = request.api_version
        return cls(version=request.api_version, error_code=0, mechanisms=list(self.mechanisms)), False

    async def _authenticate(self, request: RequestFrame) -> tuple[Any, bool]:
        cls = response_class(SASL_AUTHENTICATE)
        if self.authenticated:  # as Kafka's KafkaApis: answered, the connection stays
            return illegal_state_response(request, "SaslAuthenticate after successful authentication"), False
        if self._exchange is None or self._handshake_version == 0:
            self._log_illegal("SaslAuthenticate without SaslHandshake v1")
            return illegal_state_response(request, "SaslAuthenticate needs SaslHandshake v1 first"), True
        try:
            answer = await self._exchange.step(request.body.auth_bytes or b"")
        except AuthenticationError as e:
            return cls(version=request.api_version, error_code=SASL_AUTHENTICATION_FAILED, error_message=e.message,
                       auth_bytes=b"", session_lifetime_ms=0), True
        self.principal = self._exchange.principal
        return cls(version=request.api_version, error_code=0, error_message=None, auth_bytes=answer,
                   session_lifetime_ms=0), False

    async def raw_token(self, token: bytes) -> bytes:
        """The server's token answering a raw client token (after SaslHandshake v0).

        Raises:
            AuthenticationError: the exchange failed (the caller closes the connection).
        """
        assert self._exchange is not None
        answer = await self._exchange.step(token)
        self.principal = self._exchange.principal
        return answer

    def _log_illegal(self, what: str) -> None:
        log.warning("Kafka connection from %s closed: ILLEGAL_SASL_STATE (%d): %s", self.where["client_host"],
                    ILLEGAL_SASL_STATE, what)
