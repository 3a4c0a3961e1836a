"""JWT bearer tokens (``authentication.methods=oauthbearer``): a request's principal from ``Authorization:
Bearer <JWT>`` (RFC 6750), as Kafka's OAUTHBEARER validation of KIP-768 (``OAuthBearerValidatorCallbackHandler``).

A token is accepted when, checked with PyJWT:

- its ``alg`` is asymmetric (:data:`ASYMMETRIC_ALGORITHMS`: RS*, PS*, ES*, EdDSA): ``none`` and HS* are
  refused, so a public key can never serve as an HMAC secret (algorithm confusion);
- its ``kid`` names a key of the JWKS (``oauth.jwks.url``) whose algorithm is the token's (the key's
  ``alg``, or PyJWT's default for its type: RS256 for RSA, ES256/384/512 by curve, EdDSA for OKP);
- its signature verifies with that key;
- it has ``exp``, not passed; ``nbf`` and ``iat``, when present, not in the future (all with
  ``oauth.clock.skew.s`` seconds of leeway);
- ``iss`` is ``oauth.expected.issuer`` and ``aud`` holds one of ``oauth.expected.audience`` (when set);
- the principal claim (``oauth.principal.claim``, default ``sub``) is a non-empty string: the principal is
  ``User:{claim}``.

The JWKS comes from an ``http(s)://`` URL through PyJWT's ``PyJWKClient`` (the set is cached for
``jwks_refresh_s``; a token with an unknown ``kid`` forces one new fetch, at most every ``jwks_cooldown_s``:
a rotated key is picked up without a restart, and unknown kids cannot make the broker hammer the
identity provider), or from a file (a path or ``file://`` URL, read again when its modification time
changes) through ``PyJWKSet``.

A verified token is remembered, keyed by its SHA-256, until its ``exp`` but at most ``cache_ttl_s``
seconds (so a key removed from the JWKS stops working within that time), and :meth:`JwtValidator.cached_principal`
answers a client's next requests with one dict look-up. Fetching a JWKS URL blocks: callers on an event
loop run :meth:`JwtValidator.principal` in a thread.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import jwt
from jwt import PyJWK, PyJWKClient, PyJWKSet

from lakelog.config import BrokerSettings
from lakelog.security.errors import InvalidTokenError, SecurityError

__all__ = ["ASYMMETRIC_ALGORITHMS", "InvalidTokenError", "JwtValidator", "bearer_token", "jwt_validator"]

#: The only ``alg`` values accepted: signatures checked with a public key.
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive); None when the
    header is absent or of another scheme."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


class _FileJwks:
    """A JWKS file, read again when its modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime_ns: int | None = None
        self._keys: dict[str, PyJWK] = {}
        self._lock = threading.Lock()

    def key(self, kid: str) -> PyJWK | None:
        with self._lock:
            try:
                mtime_ns = self.path.stat().st_mtime_ns
            except OSError as e:
                raise SecurityError(f"cannot read the JWKS file {self.path} (oauth.jwks.url): {e.strerror}") from e
            if mtime_ns != self._mtime_ns:
                try:
                    jwks = PyJWKSet.from_json(self.path.read_text())
                except (OSError, ValueError, jwt.PyJWTError) as e:
                    raise SecurityError(f"cannot read the JWKS file {self.path} (oauth.jwks.url): {e}") from e
                self._keys = {k.key_id: k for k in jwks.keys if k.key_id and k.public_key_use in ("sig", None)}
                self._mtime_ns = mtime_ns
            return self._keys.get(kid)


#: Hosts a JWKS may be fetched from over plain HTTP (nothing on the network between).
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


class JwtValidator:
    """Checks JWT bearer tokens against a JWKS, issuer, audience and expiry (module doc).

    Args:
        jwks_url: ``oauth.jwks.url`` (Kafka's ``sasl.oauthbearer.jwks.endpoint.url``): an ``http(s)://`` URL,
            a ``file://`` URL or a file path of a JWKS (RFC 7517 ``{"keys": [...]}``).
        expected_issuer: ``oauth.expected.issuer`` (``sasl.oauthbearer.expected.issuer``): the ``iss`` every
            token must have. None: not checked. Default: None.
        expected_audience: ``oauth.expected.audience`` (``sasl.oauthbearer.expected.audience``): ``aud`` must
            hold one of these. None or empty: not checked. Default: None.
        clock_skew_s: ``oauth.clock.skew.s`` (``sasl.oauthbearer.clock.skew.seconds``): leeway of the
            ``exp``/``nbf``/``iat`` checks, seconds. Default: 30.
        principal_claim: ``oauth.principal.claim`` (``sasl.oauthbearer.sub.claim.name``): the claim naming the
            principal. Default: ``sub``.
        jwks_refresh_s: how long a JWKS fetched from a URL is used before it is fetched again
            (``sasl.oauthbearer.jwks.endpoint.refresh.ms`` / 1000). Default: 3600.
        jwks_cooldown_s: the least time between two fetches forced by unknown ``kid``s. Default: 30.
        jwks_timeout_s: timeout of one JWKS fetch. Default: 10.
        cache_ttl_s: the longest a verified token is remembered (never past its ``exp``). Default: 300.
        max_cached: at most this many remembered tokens (the oldest go first). Default: 10000.

    Raises:
        SecurityError: an empty ``jwks_url`` or a URL scheme other than http, https or file.
    """

    def __init__(self, *, jwks_url: str, expected_issuer: str | None = None,
                 expected_audience: list[str] | None = None, clock_skew_s: float = 30.0,
                 principal_claim: str = "sub", jwks_refresh_s: float = 3600.0, jwks_cooldown_s: float = 30.0,
                 jwks_timeout_s: float = 10.0, cache_ttl_s: float = 300.0, max_cached: int = 10_000) -> None:
        if not jwks_url:
            raise SecurityError("authentication.methods=oauthbearer needs oauth.jwks.url (a JWKS URL or file)")
        self.jwks_url = jwks_url
        self.expected_issuer = expected_issuer or None
        self.expected_audience = [a for a in expected_audience or [] if a] or None
        self.clock_skew_s = clock_skew_s
        self.principal_claim = principal_claim
        self.cache_ttl_s = cache_ttl_s
        self.max_cached = max_cached
        self._verified: dict[bytes, tuple[str, float]] = {}  # sha256(token) -> (principal, until: epoch s)
        scheme = urlparse(jwks_url).scheme.lower()
        self._client: PyJWKClient | None = None
        self._file: _FileJwks | None = None
        if scheme == "http" and (urlparse(jwks_url).hostname or "") not in _LOOPBACK:
            # whoever can change the answer on the way could sign any principal's tokens
            raise SecurityError(f"oauth.jwks.url {jwks_url!r}: fetch the JWKS over https:// (plain http:// only "
                                "from this host: localhost, 127.0.0.1, ::1)")
        if scheme in ("http", "https"):
            self._client = PyJWKClient(jwks_url, lifespan=jwks_refresh_s, cooldown_duration=jwks_cooldown_s,
                                       timeout=jwks_timeout_s)
        elif scheme == "file":
            self._file = _FileJwks(Path(unquote(urlparse(jwks_url).path)))
        elif scheme == "" or len(scheme) == 1:  # a path (a Windows drive letter parses as a scheme)
            self._file = _FileJwks(Path(jwks_url))
        else:
            raise SecurityError(f"oauth.jwks.url {jwks_url!r}: expected an http(s):// or file:// URL or a file path")

    @property
    def fetched(self) -> bool:
        """True for a JWKS URL (fetched over HTTP), False for a file."""
        return self._client is not None

    def load(self) -> None:
        """Read the JWKS now (at a broker's start: a misconfigured URL or file shows at once).

        Raises:
            SecurityError: the JWKS could not be read or fetched.
        """
        try:
            if self._client is not None:
                self._client.get_signing_keys()
            elif self._file is not None:
                self._file.key("")
        except jwt.PyJWTError as e:
            raise SecurityError(f"cannot fetch the JWKS at {self.jwks_url} (oauth.jwks.url): {e}") from e

    def cached_principal(self, token: str) -> str | None:
        """The principal of a token verified before and not expired since; None otherwise. Never raises."""
        entry = self._verified.get(hashlib.sha256(token.encode()).digest())
        if entry is None or entry[1] <= time.time():
            return None
        return entry[0]

    def principal(self, token: str) -> str:
        """``User:{claim}`` of a valid token (checks of the module doc); may fetch the JWKS (blocking).

        Raises:
            InvalidTokenError: the token is malformed, unsigned, signed with an unknown key or a refused
                algorithm, expired, not yet valid, or has another issuer or audience.
            SecurityError: the JWKS could not be fetched or read (the broker's problem, not the client's;
                answered as an authentication failure too).
        """
        digest = hashlib.sha256(token.encode()).digest()
        cached = self.cached_principal(token)
        if cached is not None:
            return cached
        claims = self._verify(token)
        principal = f"User:{claims[self.principal_claim]}"
        until = min(float(claims["exp"]), time.time() + self.cache_ttl_s)
        if len(self._verified) >= self.max_cached:
            try:  # the oldest goes (another thread may change the dict meanwhile: then one more stays)
                self._verified.pop(next(iter(self._verified)), None)
            except (RuntimeError, StopIteration):
                pass
        self._verified[digest] = (principal, until)
        return principal

    def _unverified_who(self, token: str) -> str:
        try:
            who = jwt.decode(token, options={"verify_signature": False}).get(self.principal_claim)
        except jwt.PyJWTError:
            return "-"
        return repr(who)[:80] if who is not None else "-"

    def _verify(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidTokenError("the bearer token is not a JWT") from None
        who = self._unverified_who(token)
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise InvalidTokenError(f"algorithm {alg!r} is not accepted (only {', '.join(ASYMMETRIC_ALGORITHMS)})",
                                    who=who)
        if not isinstance(kid, str) or not kid:
            raise InvalidTokenError("the token names no key (kid header)", who=who)
        key = self._key(kid, who=who)
        if key.algorithm_name != alg:
            raise InvalidTokenError(f"the token's algorithm {alg} is not that of key {kid!r} ({key.algorithm_name})",
                                    who=who)
        required = ["exp"] + (["iss"] if self.expected_issuer else []) + (["aud"] if self.expected_audience else [])
        try:
            claims = jwt.decode(token, key=key, algorithms=[alg], audience=self.expected_audience,
                                issuer=self.expected_issuer, leeway=self.clock_skew_s,
                                options={"require": required, "verify_aud": self.expected_audience is not None})
        except jwt.ExpiredSignatureError:
            raise InvalidTokenError("the token has expired", who=who) from None
        except jwt.ImmatureSignatureError:
            raise InvalidTokenError("the token is not valid yet (nbf or iat in the future)", who=who) from None
        except jwt.InvalidAudienceError:
            raise InvalidTokenError("the token is not for this audience (aud)", who=who) from None
        except jwt.InvalidIssuerError:
            raise InvalidTokenError("the token is from another issuer (iss)", who=who) from None
        except jwt.MissingRequiredClaimError as e:
            raise InvalidTokenError(f"the token has no {e.claim} claim", who=who) from None
        except jwt.InvalidSignatureError:
            raise InvalidTokenError(f"the signature does not verify with key {kid!r}", who=who) from None
        except jwt.PyJWTError as e:
            raise InvalidTokenError(f"the token is invalid: {e}", who=who) from None
        subject = claims.get(self.principal_claim)
        if not isinstance(subject, str) or not subject:
            raise InvalidTokenError(f"the token has no principal claim {self.principal_claim!r} (a string)", who=who)
        return claims

    def _key(self, kid: str, *, who: str) -> PyJWK:
        if self._file is not None:
            key = self._file.key(kid)
        else:
            assert self._client is not None
            try:
                key = self._client.get_signing_key(kid)
            except jwt.PyJWKClientConnectionError as e:
                raise SecurityError(f"cannot fetch the JWKS at {self.jwks_url} (oauth.jwks.url): {e}") from e
            except jwt.PyJWTError:
                key = None
        if key is None:
            raise InvalidTokenError(f"no key {kid!r} in the JWKS", who=who)
        return key


def jwt_validator(settings: BrokerSettings, *, sasl_oauthbearer: bool = False) -> JwtValidator | None:
    """The broker's :class:`JwtValidator` from its ``oauth.*`` settings; None unless ``authentication.methods``
    has ``oauthbearer`` or ``sasl_oauthbearer`` (a SASL Kafka listener serves OAUTHBEARER): one validator,
    one JWKS, for both doors.

    Raises:
        SecurityError: no or an unusable ``oauth.jwks.url``.
    """
    if "oauthbearer" not in settings.authentication_method_set and not sasl_oauthbearer:
        return None
    if not settings.oauth_jwks_url:
        raise SecurityError("sasl.enabled.mechanisms=OAUTHBEARER on a SASL listener needs oauth.jwks.url: the JWKS "
                            "URL or file whose keys sign the tokens")
    audience = [a.strip() for a in (settings.oauth_expected_audience or "").split(",") if a.strip()]
    return JwtValidator(jwks_url=settings.oauth_jwks_url or "", expected_issuer=settings.oauth_expected_issuer,
                        expected_audience=audience or None, clock_skew_s=settings.oauth_clock_skew_s,
                        principal_claim=settings.oauth_principal_claim,
                        jwks_refresh_s=settings.oauth_jwks_refresh_ms / 1000)
