"""Client credentials: what :class:`~lakelog.client.LakelogClient` sends in ``Authorization``.

- ``(user, password)``: HTTP Basic (brokers with ``authentication.methods`` holding ``basic``);
- a :class:`BearerToken` (or a ``str``, taken as a token): ``Authorization: Bearer <token>`` (RFC 6750;
  ``oauthbearer``), e.g. a JWT of the identity provider;
- any ``httpx.Auth`` (e.g. one that refreshes its token), used as is.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Union

import httpx

__all__ = ["BearerToken", "ClientAuth", "http_auth"]


class BearerToken(httpx.Auth):
    """``Authorization: Bearer <token>`` on every request (RFC 6750). The token stays out of ``repr``, so a
    logged client or Spark option never shows it; picklable (Spark executors receive it).

    Args:
        token: the access token (a JWT), without the ``Bearer`` prefix.

    Raises:
        ValueError: an empty token, or one with white space (not a bearer token: RFC 6750's b64token).
    """

    def __init__(self, token: str) -> None:
        token = token.strip()
        if not token or any(c.isspace() for c in token):
            raise ValueError("a bearer token must be one non-empty word (e.g. a JWT: xxxxx.yyyyy.zzzzz)")
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request

    def __repr__(self) -> str:
        return "BearerToken(***)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BearerToken) and other.token == self.token

    def __hash__(self) -> int:
        return hash(("BearerToken", self.token))


#: What ``auth=`` takes: ``(user, password)``, a token (``str`` or :class:`BearerToken`), an ``httpx.Auth``, None.
ClientAuth = Union[tuple[str, str], str, httpx.Auth, None]


def http_auth(auth: ClientAuth) -> httpx.Auth | None:
    """The ``httpx.Auth`` of a client's ``auth=``: a pair -> ``httpx.BasicAuth``, a ``str`` ->
    :class:`BearerToken`, an ``httpx.Auth`` as is, None -> None.

    Raises:
        ValueError: anything else (e.g. a 3-tuple), or an empty token.
    """
    if auth is None or isinstance(auth, httpx.Auth):
        return auth
    if isinstance(auth, str):
        return BearerToken(auth)
    if isinstance(auth, (tuple, list)) and len(auth) == 2:
        return httpx.BasicAuth(*auth)
    raise ValueError("auth: expected (user, password), a bearer token (str or BearerToken) or an httpx.Auth")
