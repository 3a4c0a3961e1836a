"""Requests about ACLs (``/v3/clusters/{c}/acls``, Confluent's shapes), users' SCRAM credentials
(``/lakelog/v1/users``) and client quotas (``/lakelog/v1/client-quotas``): :class:`SecurityClient`,
:attr:`LakelogClient.security <lakelog.client.LakelogClient.security>` (``kafka-acls``,
``kafka-configs --entity-type users``).

An ACL travels as Confluent's ``AclData`` without ``kind``/``metadata``: ``{"resource_type": "TOPIC",
"resource_name", "pattern_type": "LITERAL", "principal": "User:alice", "host": "*", "operation": "READ",
"permission": "ALLOW"}``. Filters take the same keys; a key left out (or ``ANY``) matches anything,
``pattern_type="MATCH"`` every ACL that applies to ``resource_name``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from lakelog.client.transport import LakelogClient

__all__ = ["ACL_FIELDS", "SecurityClient"]

#: The fields of an ACL, in Confluent's order.
ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


class SecurityClient:
    """ACL, user and client quota requests of one :class:`~lakelog.client.LakelogClient` (its transport sends
    them). Every method raises :class:`~lakelog.client.GatewayError` (the server's error class) for an error
    answer and ``ConnectionError`` when no gateway answers."""

    def __init__(self, transport: "LakelogClient") -> None:
        self.transport = transport

    def create_acls(self, acls: Sequence[Mapping[str, str]]) -> None:
        """Store ACLs, all or none (``POST /v3/clusters/{c}/acls:batch``); ``pattern_type`` defaults to
        LITERAL, ``host`` to ``*``, ``permission`` to ALLOW.

        Raises:
            lakelog.security.errors.InvalidAclError: an invalid ACL (400 / 40021); nothing stored.
        """
        self.transport.request("POST", f"/v3/clusters/{self.transport.cluster_id}/acls:batch",
                               json={"data": [dict(a) for a in acls]})

    def list_acls(self, **acl_filter: str) -> list[dict]:
        """The ACLs that pass the filter (``GET /v3/clusters/{c}/acls``), without ``kind``/``metadata``/``cluster_id``."""
        params = {k: v for k, v in acl_filter.items() if v is not None}
        path = f"/v3/clusters/{self.transport.cluster_id}/acls"
        data = self.transport.request("GET", path, params=params).json()["data"]
        return [{k: a[k] for k in ACL_FIELDS} for a in data]

    def delete_acls(self, *, resource_type: str = "ANY", **acl_filter: str) -> list[dict]:
        """Remove the ACLs that pass the filter (``DELETE /v3/clusters/{c}/acls``); answers the removed ones."""
        params = {"resource_type": resource_type, **{k: v for k, v in acl_filter.items() if v is not None}}
        path = f"/v3/clusters/{self.transport.cluster_id}/acls"
        data = self.transport.request("DELETE", path, params=params).json()["data"]
        return [{k: a[k] for k in ACL_FIELDS} for a in data]

    def upsert_user(self, name: str, password: str, *, iterations: int = 4096) -> None:
        """Set ``name``'s password: new SCRAM-SHA-256 and SCRAM-SHA-512 credentials (``PUT /lakelog/v1/users/{name}``).

        Raises:
            lakelog.security.errors.InvalidCredentialError: empty password, iterations outside 4096-16384.
        """
        self.transport.request("PUT", f"/lakelog/v1/users/{quote(name, safe='')}",
                      json={"password": password, "iterations": iterations})

    def list_users(self) -> list[str]:
        """The users that have a credential (``GET /lakelog/v1/users``)."""
        return self.transport.request("GET", "/lakelog/v1/users").json()["users"]

    def delete_user(self, name: str) -> None:
        """Remove ``name``'s credential (``DELETE /lakelog/v1/users/{name}``).

        Raises:
            lakelog.security.errors.UnknownUserError: no such user (404 / 40412).
        """
        self.transport.request("DELETE", f"/lakelog/v1/users/{quote(name, safe='')}")

    def describe_client_quotas(self, *, user: str | None = None, client_id: str | None = None,
                               strict: bool = False) -> list[dict]:
        """The entities with client quotas that match (``GET /lakelog/v1/client-quotas``; Kafka's
        DescribeClientQuotas): ``[{"entity": {"user": "alice", "client-id": None}, "values":
        {"producer_byte_rate": 1048576.0}}]``; in an entity None is the default (``<default>``). A filter left
        out matches any; ``"<default>"`` the default entity; ``strict``: entities with no other part."""
        params: dict[str, Any] = {"strict": str(strict).lower()}
        if user is not None:
            params["user"] = user
        if client_id is not None:
            params["client_id"] = client_id
        return self.transport.request("GET", "/lakelog/v1/client-quotas", params=params).json()["entries"]

    def alter_client_quotas(self, entity: Mapping[str, str | None], *, set: Mapping[str, float] | None = None,
                            remove: Sequence[str] = (), validate_only: bool = False) -> dict[str, float]:
        """Set and remove client quotas of one entity (``POST /lakelog/v1/client-quotas:alter``; Kafka's
        AlterClientQuotas, ``kafka-configs --alter --add-config producer_byte_rate=1048576 --entity-type users``).

        Args:
            entity: ``{"user": name, "client-id": name}``, one or both; None or ``"<default>"`` the default.
            set: quota -> value (> 0): ``producer_byte_rate``, ``consumer_byte_rate`` (bytes/s),
                ``request_percentage`` (percent). remove: quotas to delete.
            validate_only: check, write nothing.

        Returns:
            The entity's quotas after the change.

        Raises:
            lakelog.security.errors.InvalidQuotaError: an unknown quota, a value not > 0, a bad entity (400 / 40023).
        """
        ops = [{"key": k, "value": v} for k, v in (set or {}).items()] + [{"key": k, "remove": True} for k in remove]
        body = {"entries": [{"entity": dict(entity), "ops": ops}], "validate_only": validate_only}
        answer = self.transport.request("POST", "/lakelog/v1/client-quotas:alter", json=body).json()
        return answer["entries"][0]["values"]
