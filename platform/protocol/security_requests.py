"""Requests about ACLs (``/v3/clusters/{c}/acls``, Confluent's shapes) and users' SCRAM credentials
(``/lakelog/v1/users``); mixed into :class:`~lakelog.protocol.http_client.LakelogClient`.

An ACL travels as Confluent's ``AclData`` without ``kind``/``metadata``: ``{"resource_type": "TOPIC",
"resource_name", "pattern_type": "LITERAL", "principal": "User:alice", "host": "*", "operation": "READ",
"permission": "ALLOW"}``. Filters take the same keys; a key left out (or ``ANY``) matches anything,
``pattern_type="MATCH"`` every ACL that applies to ``resource_name``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence
from urllib.parse import quote

import httpx

__all__ = ["ACL_FIELDS", "SecurityRequests"]

#: The fields of an ACL, in Confluent's order.
ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


class SecurityRequests:
    """ACL and user requests; the class mixing this in provides ``_request`` and ``cluster_id``."""

    cluster_id: str

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def create_acls(self, acls: Sequence[Mapping[str, str]]) -> None:
        """Store ACLs, all or none (``POST /v3/clusters/{c}/acls:batch``); ``pattern_type`` defaults to
        LITERAL, ``host`` to ``*``, ``permission`` to ALLOW.

        Raises:
            lakelog.security.errors.InvalidAclError: an invalid ACL (400 / 40021); nothing stored.
        """
        self._request("POST", f"/v3/clusters/{self.cluster_id}/acls:batch", json={"data": [dict(a) for a in acls]})

    def list_acls(self, **acl_filter: str) -> list[dict]:
        """The ACLs that pass the filter (``GET /v3/clusters/{c}/acls``), without ``kind``/``metadata``/``cluster_id``."""
        params = {k: v for k, v in acl_filter.items() if v is not None}
        data = self._request("GET", f"/v3/clusters/{self.cluster_id}/acls", params=params).json()["data"]
        return [{k: a[k] for k in ACL_FIELDS} for a in data]

    def delete_acls(self, *, resource_type: str = "ANY", **acl_filter: str) -> list[dict]:
        """Remove the ACLs that pass the filter (``DELETE /v3/clusters/{c}/acls``); answers the removed ones."""
        params = {"resource_type": resource_type, **{k: v for k, v in acl_filter.items() if v is not None}}
        data = self._request("DELETE", f"/v3/clusters/{self.cluster_id}/acls", params=params).json()["data"]
        return [{k: a[k] for k in ACL_FIELDS} for a in data]

    def upsert_user(self, name: str, password: str, *, iterations: int = 4096) -> None:
        """Set ``name``'s password: a new SCRAM-SHA-512 credential (``PUT /lakelog/v1/users/{name}``).

        Raises:
            lakelog.security.errors.InvalidCredentialError: empty password, iterations outside 4096-16384.
        """
        self._request("PUT", f"/lakelog/v1/users/{quote(name, safe='')}",
                      json={"password": password, "iterations": iterations})

    def list_users(self) -> list[str]:
        """The users that have a credential (``GET /lakelog/v1/users``)."""
        return self._request("GET", "/lakelog/v1/users").json()["users"]

    def delete_user(self, name: str) -> None:
        """Remove ``name``'s credential (``DELETE /lakelog/v1/users/{name}``).

        Raises:
            lakelog.security.errors.UnknownUserError: no such user (404 / 40412).
        """
        self._request("DELETE", f"/lakelog/v1/users/{quote(name, safe='')}")
