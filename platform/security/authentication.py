"""Who a request is: its principal, from its HTTP credentials (``authentication.methods``).

``authentication.methods`` is ``none`` or a comma-separated list of ``basic``, ``oauthbearer`` and ``mtls`` (as
Kafka's ``sasl.enabled.mechanisms``); the scheme of a request's ``Authorization`` header picks the method, and
with ``mtls`` a request without one is its TLS client certificate's principal:

- ``none`` (the default): every request is ``User:ANONYMOUS``, as a Kafka PLAINTEXT listener's clients.
- ``basic``: HTTP Basic (RFC 7617) checked against the user's SCRAM-SHA-512 credential in ZooKeeper
  (:mod:`~lakelog.security.user_credentials`; Kafka's SASL/SCRAM users): the principal is ``User:{name}``.
  Use it behind TLS only: the password crosses the wire in every request.
- ``oauthbearer``: ``Authorization: Bearer <JWT>`` (RFC 6750) checked against a JWKS, issuer, audience and
  expiry (:mod:`~lakelog.security.oauth`; Kafka's SASL/OAUTHBEARER, KIP-768): ``User:{sub}``. Brokers
  still authenticate to each other with HTTP Basic as ``inter.broker.username``: with ``oauthbearer``
  alone, Basic is accepted for that one user only (``inter_broker_user``).
- ``mtls``: the client's TLS certificate (the broker's ``ssl.client.auth=requested`` or ``required``): the
  principal is ``User:{subject}``, the subject's RFC 2253 distinguished name mapped by
  ``ssl.principal.mapping.rules`` (Kafka's SSL principal; :mod:`~lakelog.security.tls_principal`). With
  ``required`` a client without a valid certificate fails the TLS handshake; with ``requested`` its
  requests answer 401. The brokers' certificates must map to ``inter.broker.username`` (their principal,
  a super user; a broker whose own certificate does not refuses to start).

The Kafka listener's SASL mechanisms (``sasl.enabled.mechanisms``, :mod:`lakelog.kafka.sasl`) use the
same users and keys: PLAIN checks a password as HTTP Basic does (:meth:`Authenticator.password_principal`),
SCRAM-SHA-256/512 read the user's credential of that mechanism (:meth:`Authenticator.scram_credential`),
OAUTHBEARER checks a token as a Bearer header (:meth:`Authenticator.token_principal`).

Checking a password derives the SCRAM key again (PBKDF2, 4096 iterations: milliseconds, on purpose);
a successful check is remembered, keyed by a SHA-256 of the credential and the password sent, for
``cache_ttl_s`` seconds, so a client's next requests cost one hash. A changed or deleted credential
changes or drops the key at once (the credentials are followed with a kazoo ``TreeCache``). A verified
token is remembered until its expiry (at most ``cache_ttl_s``).

A failure raises :class:`~lakelog.security.errors.AuthenticationError` (401 / 40101, with
``WWW-Authenticate: Basic realm="lakelog"`` and/or ``Bearer realm="lakelog"``, the latter with
``error="invalid_token"`` when a token was refused) and is logged with the user name (or the token's
unverified principal claim), the client's address and the route, never with the password or the token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import time
from typing import Literal
from urllib.parse import unquote

from kazoo.client import KazooClient

from lakelog.security.errors import AuthenticationError, SecurityError
from lakelog.security.followed_tree import FollowedTree
from lakelog.security.oauth import InvalidTokenError, JwtValidator, bearer_token
from lakelog.security.scram import MECHANISM, ScramCredential, verify_password
from lakelog.security.tls_principal import SslPrincipalMapper
from lakelog.security.user_credentials import USERS_PATH, UserCredentials, credential_of, has_credential, znode_config

log = logging.getLogger(__name__)

__all__ = ["ANONYMOUS", "AuthenticationMethod", "Authenticator", "MTLS_CHALLENGE", "REALM", "basic_credentials",
           "parse_methods"]

#: The principal of an unauthenticated request (Kafka's ``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS = "User:ANONYMOUS"
#: The realm named in ``WWW-Authenticate``.
REALM = "lakelog"
#: ``authentication.methods`` values.
AuthenticationMethod = Literal["none", "basic", "oauthbearer", "mtls"]
METHODS = ("none", "basic", "oauthbearer", "mtls")
#: ``WWW-Authenticate`` of an mtls failure (no HTTP scheme carries a TLS client certificate; the header is
#: required on a 401 and names what is missing).
MTLS_CHALLENGE = f'ClientCertificate realm="{REALM}"'


def parse_methods(methods: str) -> frozenset[str]:
    """``"basic,oauthbearer"`` -> ``{"basic", "oauthbearer"}`` (spaces and case ignored; also ``mtls``).

    Raises:
        SecurityError: an unknown method, none at all, or ``none`` with another one.
    """
    names = frozenset(m.strip().lower() for m in methods.split(",") if m.strip())
    unknown = sorted(names - set(METHODS))
    if unknown or not names or ("none" in names and len(names) > 1):
        raise SecurityError(f"authentication.methods {methods!r}: expected none, or a comma-separated list of "
                            "basic, oauthbearer and mtls (e.g. basic,oauthbearer)")
    return names


def basic_credentials(authorization: str | None, *,
                      methods: frozenset[str] = frozenset({"basic"})) -> tuple[str, str] | None:
    """``(user, password)`` of an ``Authorization: Basic <base64(user:password)>`` header; None when the
    header is absent or of another scheme. ``methods``: those the failure's challenges name.

    Raises:
        AuthenticationError: a Basic header that is not base64 of ``user:password`` (UTF-8).
    """
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise _failure("the Basic credentials are not base64 of user:password", methods=methods) from None
    if not sep or not user:
        raise _failure("the Basic credentials are not base64 of user:password", methods=methods)
    return user, password


_BASIC_CHALLENGE = f'Basic realm="{REALM}", charset="UTF-8"'
_HOW = {"basic": "HTTP Basic credentials of a lakelog user (lakelog users add NAME --password-stdin)",
        "oauthbearer": "a JWT of the identity provider as Authorization: Bearer <token>",
        "mtls": "a TLS client certificate signed by the broker's CA (ssl.certfile and ssl.keyfile)"}


def _failure(reason: str, *, methods: frozenset[str] = frozenset({"basic"}),
             token_error: bool = False) -> AuthenticationError:
    """A 401 naming what to send, with a ``WWW-Authenticate`` challenge per method; a refused token gets
    RFC 6750's ``error="invalid_token"`` and ``error_description`` (quotes and backslashes dropped)."""
    how = " or ".join(_HOW[m] for m in sorted(methods) if m in _HOW)
    err = AuthenticationError(f"Authentication failed: {reason}. Send {how}.")
    challenges = [_BASIC_CHALLENGE] if "basic" in methods else []
    if "oauthbearer" in methods:
        bearer = f'Bearer realm="{REALM}"'
        if token_error:
            description = "".join(c for c in reason if c not in '"\\' and 0x20 <= ord(c) < 0x7F)
            bearer += f', error="invalid_token", error_description="{description}"'
        challenges.append(bearer)
    if "mtls" in methods:
        challenges.append(MTLS_CHALLENGE)
    err.response_headers = {"WWW-Authenticate": ", ".join(challenges)}
    return err


class _Dummy:
    """A credential no password matches, made on first use: unknown users cost a check like known ones."""

    _credential: ScramCredential | None = None

    def credential(self) -> ScramCredential:
        if self._credential is None:
            self._credential = ScramCredential.from_password(base64.b64encode(os.urandom(24)).decode())
        return self._credential


_DUMMY = _Dummy()


class Authenticator:
    """Turns a request's ``Authorization`` header (or TLS client certificate) into its principal.

    Args:
        method: ``authentication.methods``: ``none``, or a comma-separated list of ``basic``, ``oauthbearer``
            and ``mtls`` (:func:`parse_methods`). Default: ``none``.
        zk: a started kazoo client of the cluster; required for HTTP Basic (the users' credentials).
        oauth: the JWT checks; required with ``oauthbearer``. Default: None.
        inter_broker_user: ``inter.broker.username``, the brokers' user (a super user): with ``oauthbearer``
            but not ``basic``, the one user whose HTTP Basic credentials are still accepted (brokers
            authenticate to each other so); a token, or a certificate while brokers send HTTP Basic, that
            names it is refused (an identity provider's or CA's user of that name is not a broker).
            Default: None.
        cache_ttl_s: how long a successful password check is remembered. Default: 300.
        max_cached: at most this many remembered checks (the oldest go first). Default: 10000.
        principal_mapper: ``ssl.principal.mapping.rules`` of ``mtls`` and of the Kafka listener's SSL clients.
            Default: ``DEFAULT`` (the whole subject).
        sasl_mechanisms: the Kafka listener's SASL mechanisms (``sasl.enabled.mechanisms`` when a listener is
            SASL_PLAINTEXT or SASL_SSL): with PLAIN or SCRAM-* the users' credentials are followed whatever
            ``method`` is, with OAUTHBEARER ``oauth`` checks tokens. Default: none.

    Raises:
        SecurityError: an unknown method, HTTP Basic (or SASL PLAIN/SCRAM) without ``zk``, ``oauthbearer``
            (or SASL OAUTHBEARER) without ``oauth``.
    """

    def __init__(self, *, method: str = "none", zk: KazooClient | None = None, oauth: JwtValidator | None = None,
                 inter_broker_user: str | None = None, cache_ttl_s: float = 300.0, max_cached: int = 10_000,
                 users_root: str = USERS_PATH, principal_mapper: SslPrincipalMapper | None = None,
                 sasl_mechanisms: frozenset[str] = frozenset()) -> None:
        self.methods = parse_methods(method)
        self.method = ",".join(sorted(self.methods))
        #: None: every user's Basic credentials are checked; a name: only that user's (oauthbearer alone)
        self.basic_only_user = None if "basic" in self.methods else inter_broker_user
        self.basic = "basic" in self.methods or (inter_broker_user is not None and "oauthbearer" in self.methods)
        if self.basic and zk is None:
            raise SecurityError("authentication.methods with HTTP Basic needs ZooKeeper (the users' credentials)")
        if "oauthbearer" in self.methods and oauth is None:
            raise SecurityError("authentication.methods=oauthbearer needs the JWT checks (oauth.jwks.url)")
        self.oauth = oauth if "oauthbearer" in self.methods else None
        if "OAUTHBEARER" in sasl_mechanisms and oauth is None:
            raise SecurityError("sasl.enabled.mechanisms=OAUTHBEARER needs the JWT checks (oauth.jwks.url)")
        #: the JWT checks of both doors (HTTP Bearer, SASL OAUTHBEARER); None when neither takes tokens
        self.token_validator = oauth if self.oauth is not None or "OAUTHBEARER" in sasl_mechanisms else None
        #: the users' credentials are followed: HTTP Basic, or SASL PLAIN / SCRAM on the Kafka listener
        self.follow_credentials = self.basic or bool(set(sasl_mechanisms) - {"OAUTHBEARER"})
        if self.follow_credentials and zk is None:
            raise SecurityError("SASL PLAIN and SCRAM need ZooKeeper (the users' credentials)")
        self.mtls = "mtls" in self.methods
        #: the brokers' principal: only their own way of authenticating (Basic, or certificates with mtls alone) gives it
        self.broker_principal = None if inter_broker_user is None else f"User:{inter_broker_user}"
        self._brokers_send_basic = bool(self.methods & {"basic", "oauthbearer"})
        self.principal_mapper = principal_mapper or SslPrincipalMapper()
        self.zk = zk
        self.users_root = users_root
        self.cache_ttl_s = cache_ttl_s
        self.max_cached = max_cached
        self._credentials: dict[str, ScramCredential] = {}
        self._other_credentials: dict[tuple[str, str], ScramCredential] = {}  # (user, SCRAM-SHA-256) -> credential
        self._verified: dict[bytes, float] = {}  # sha256(credential, password) -> expiry (monotonic s)
        self._tree = None if zk is None else FollowedTree(zk, users_root, self._on_node, what="users' credentials")

    def start(self, *, timeout_s: float = 30.0) -> "Authenticator":
        """Load the users' credentials and follow their changes (HTTP Basic); read the JWKS (``oauthbearer``:
        an unreadable file stops the start, an unreachable URL is logged and fetched again on use).

        Raises:
            SecurityError: the credentials were not loaded within ``timeout_s``, or the JWKS file is unreadable.
        """
        if self.follow_credentials and self._tree is not None:
            self._tree.start(timeout_s=timeout_s)
        if self.token_validator is not None:
            try:
                self.token_validator.load()
            except SecurityError as e:
                if not self.token_validator.fetched:
                    raise
                log.error("%s; bearer tokens are refused until it answers", e)
        return self

    def close(self) -> None:
        """Stop following ZooKeeper."""
        if self._tree is not None:
            self._tree.close()

    def ensure_user(self, name: str, password: str) -> None:
        """Create ``name`` with ``password`` unless the user exists (the inter-broker user at a broker's start).

        Raises:
            SecurityError: the user exists with another password: this broker could not authenticate to the
                others (every inter-broker call would answer 401), so it must not start.
        """
        if self.zk is None:
            return
        users = UserCredentials(self.zk, root=self.users_root)
        if name not in users.names():
            users.upsert(name, password)
        elif not verify_password(users.get(name), password):
            raise SecurityError(f"inter.broker.password does not match the stored credential of user {name!r}: give "
                                "every broker the same inter.broker.password (or delete the user to let a broker "
                                "create it again)")

    def _on_node(self, path: str, data: bytes | None) -> None:
        if path.count("/") != self.users_root.count("/") + 1:
            return
        segment = path.rsplit("/", 1)[1]
        if segment == "<default>":  # the default user's client quotas (a user named <default> is %3Cdefault%3E)
            return
        name = unquote(segment)
        self._other_credentials.pop((name, "SCRAM-SHA-256"), None)
        if data is None or not has_credential(data):  # gone, or client quotas only
            self._credentials.pop(name, None)
            return
        try:
            self._credentials[name] = credential_of(data)
            if "SCRAM-SHA-256" in znode_config(data):
                self._other_credentials[(name, "SCRAM-SHA-256")] = credential_of(data, mechanism="SCRAM-SHA-256")
        except SecurityError as e:
            log.error("ignoring the unreadable credential of user %s: %s", name, e)
            self._credentials.pop(name, None)

    def authenticate(self, authorization: str | None, *, client_host: str = "-", route: str = "-",
                     client_cert_name: str | None = None) -> str:
        """The principal of a request with this ``Authorization`` header (``User:name``), or with ``mtls`` and
        no such header of its TLS client certificate's subject ``client_cert_name``; may block (a password
        derivation, a JWKS fetch).

        Raises:
            AuthenticationError: no credentials of an enabled method, an unknown user or a wrong password, a
                refused token, or (``mtls``) no client certificate or an unmapped subject.
        """
        if "none" in self.methods:
            return ANONYMOUS
        token = bearer_token(authorization) if self.oauth is not None else None
        try:
            if token is not None:
                return self._bearer(token, client_host=client_host, route=route)
            given = basic_credentials(authorization, methods=self.methods) if self.basic else None
            if given is None and self.mtls:
                return self._certificate_principal(client_cert_name)
            if given is None:
                raise _failure("no credentials", methods=self.methods)
            user, password = given
            if self.basic_only_user is not None and user != self.basic_only_user:
                raise _failure(f"HTTP Basic is for the brokers only, not {user!r}", methods=self.methods)
            credential = self._credentials.get(user)
            if credential is None:
                verify_password(_DUMMY.credential(), password)  # as long as a known user's check: no user probing
                raise _failure(f"unknown user or wrong password for {user!r}", methods=self.methods)
            if not self._check(credential, user, password):
                raise _failure(f"unknown user or wrong password for {user!r}", methods=self.methods)
        except AuthenticationError as e:
            log.warning("authentication failed from %s on %s: %s", client_host, route, e.message.split(". ")[0])
            raise
        return f"User:{user}"

    def _certificate_principal(self, client_cert_name: str | None) -> str:
        """``mtls``: ``User:{name}`` of a TLS client certificate's subject (``CN=alice,OU=eng`` ->
        ``User:CN=alice,OU=eng`` under ``DEFAULT``), as ``ssl.principal.mapping.rules`` map it.

        Raises:
            AuthenticationError: no client certificate, or no mapping rule matches its subject.
        """
        if not client_cert_name:
            raise _failure("no credentials and no client certificate", methods=self.methods)
        try:
            principal = f"User:{self.principal_mapper.name(client_cert_name)}"
        except SecurityError as e:
            raise _failure(e.message, methods=self.methods) from None
        if self._brokers_send_basic and principal == self.broker_principal:
            raise _failure(f"the certificate {client_cert_name!r} maps to the brokers' user, who authenticate with "
                           "HTTP Basic here", methods=self.methods)
        return principal

    def _bearer(self, token: str, *, client_host: str, route: str) -> str:
        assert self.oauth is not None
        try:
            principal = self.oauth.principal(token)
        except InvalidTokenError as e:
            log.warning("authentication failed from %s on %s: bearer token of %s (unverified): %s", client_host,
                        route, e.who, e.reason)
            raise _failure(e.reason, methods=self.methods, token_error=True) from None
        except SecurityError as e:  # the JWKS could not be fetched: the client may retry later
            log.error("authentication failed from %s on %s: %s", client_host, route, e)
            raise _failure("the identity provider's keys (JWKS) cannot be read now; retry later",
                           methods=self.methods) from None
        if principal == self.broker_principal:  # brokers never send tokens (logged by authenticate)
            raise _failure("a token may not name the brokers' user", methods=self.methods, token_error=True)
        return principal

    def cached_principal(self, authorization: str | None, *, client_cert_name: str | None = None) -> str | None:
        """The principal when it needs no check now (``none``, Basic credentials checked within ``cache_ttl_s``,
        a token verified before and not expired, a mapped ``mtls`` certificate); None when :meth:`authenticate`
        has to check (PBKDF2 or a JWKS fetch: callers on an event loop run that in a thread) or to fail.
        Never raises."""
        if "none" in self.methods:
            return ANONYMOUS
        token = bearer_token(authorization) if self.oauth is not None else None
        if token is not None:
            principal = self.oauth.cached_principal(token)
            return None if principal == self.broker_principal else principal
        try:
            given = basic_credentials(authorization) if self.basic else None
        except AuthenticationError:
            return None
        if given is None and self.mtls and client_cert_name:
            try:
                principal = f"User:{self.principal_mapper.name(client_cert_name)}"
            except SecurityError:
                return None
            return None if self._brokers_send_basic and principal == self.broker_principal else principal
        if given is None or (self.basic_only_user is not None and given[0] != self.basic_only_user):
            return None
        credential = self._credentials.get(given[0])
        if credential is None or not self._remembered(credential, *given):
            return None
        return f"User:{given[0]}"

    # -- the Kafka listener's SASL mechanisms -------------------------------------------------------

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """``user``'s credential of ``mechanism`` (``SCRAM-SHA-256`` or ``SCRAM-SHA-512``) as last read from
        ZooKeeper; None for an unknown user or a user without one of that mechanism. Never blocks."""
        if mechanism == MECHANISM:
            return self._credentials.get(user)
        return self._other_credentials.get((user, mechanism))

    def password_principal(self, user: str, password: str, *, client_host: str = "-", route: str = "-") -> str:
        """``User:{user}`` when ``password`` is ``user``'s (SASL PLAIN: the check of HTTP Basic, remembered
        the same way); may block (a password derivation).

        Raises:
            AuthenticationError: an unknown user or a wrong password (logged without the password).
        """
        credential = self._credentials.get(user)
        if credential is None:
            verify_password(_DUMMY.credential(), password)  # as long as a known user's check: no user probing
        if credential is None or not self._check(credential, user, password):
            log.warning("authentication failed from %s on %s: unknown user or wrong password for %r", client_host,
                        route, user)
            raise AuthenticationError(f"Authentication failed: unknown user or wrong password for {user!r}")
        return f"User:{user}"

    def token_principal(self, token: str, *, client_host: str = "-", route: str = "-") -> str:
        """``User:{claim}`` of a valid JWT (SASL OAUTHBEARER: the checks of an HTTP Bearer token); may block
        (a JWKS fetch).

        Raises:
            AuthenticationError: no JWT checks configured, a refused token (logged with its unverified
                principal, never the token), or a JWKS that cannot be read now.
        """
        if self.token_validator is None:
            raise AuthenticationError("Authentication failed: bearer tokens are not accepted (no oauth.jwks.url)")
        try:
            principal = self.token_validator.principal(token)
        except InvalidTokenError as e:
            log.warning("authentication failed from %s on %s: bearer token of %s (unverified): %s", client_host,
                        route, e.who, e.reason)
            raise AuthenticationError(f"Authentication failed: {e.reason}") from None
        except SecurityError as e:
            log.error("authentication failed from %s on %s: %s", client_host, route, e)
            raise AuthenticationError("Authentication failed: the identity provider's keys (JWKS) cannot be read "
                                      "now; retry later") from None
        if principal == self.broker_principal:
            raise AuthenticationError("Authentication failed: a token may not name the brokers' user")
        return principal

    @staticmethod
    def _key(credential: ScramCredential, user: str, password: str) -> bytes:
        return hashlib.sha256(b"\0".join((credential.salt, credential.stored_key, user.encode(),
                                           password.encode()))).digest()

    def _remembered(self, credential: ScramCredential, user: str, password: str) -> bool:
        return self._verified.get(self._key(credential, user, password), 0.0) > time.monotonic()

    def _check(self, credential: ScramCredential, user: str, password: str) -> bool:
        key = self._key(credential, user, password)
        now = time.monotonic()
        if self._verified.get(key, 0.0) > now:  # remembered
            return True
        if not verify_password(credential, password):
            return False
        if len(self._verified) >= self.max_cached:
            self._verified.pop(next(iter(self._verified)))
        self._verified[key] = now + self.cache_ttl_s
        return True
