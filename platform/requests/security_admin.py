"""Security administration: ACLs (Kafka's DescribeAcls, CreateAcls, DeleteAcls), users' SCRAM
credentials (Describe- and AlterUserScramCredentials) and client quotas (DescribeClientQuotas,
AlterClientQuotas), each kept in ZooKeeper as Kafka kept them.

Every operation needs a permission on the cluster (Describe / Alter, DescribeConfigs / AlterConfigs for
quotas), checked first for its caller's :class:`~lakelog.requests.context.RequestContext` (a front door may
check it early too, before it reads the body).
ZooKeeper is written in a worker thread (kazoo blocks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acl_store import AclStore
from lakelog.security.acls import AclBinding, AclFilter, Operation, ResourceType
from lakelog.security.authorizer import Authorizer
from lakelog.security.errors import InvalidCredentialError, InvalidQuotaError
from lakelog.security.quotas import QuotaEntity, QuotaStore
from lakelog.security.user_credentials import UserCredentials

__all__ = ["AclAdmin", "ClientQuotaAdmin", "ClientQuotaAlteration", "UserAdmin"]


class _ClusterAdmin:
    """An administration needing a permission on the cluster."""

    def __init__(self, *, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    def _require(self, operation: Operation, context: RequestContext) -> None:
        """Raises AuthorizationError (403 / 40301): the principal may not do ``operation`` on the cluster."""
        RequestPermissions.of(self.authorizer, context).require(operation, ResourceType.CLUSTER)


class AclAdmin(_ClusterAdmin):
    """The cluster's ACLs: Describe on the cluster to list them, Alter to change them.

    Args:
        store: the ACLs in ZooKeeper (the authorizer follows the same znodes).
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, store: AclStore, authorizer: Authorizer) -> None:
        super().__init__(authorizer=authorizer)
        self.store = store

    async def describe_acls(self, acl_filter: AclFilter, *, context: RequestContext) -> list[AclBinding]:
        """The ACLs that pass ``acl_filter`` (DescribeAcls)."""
        self._require(Operation.DESCRIBE, context)
        return await asyncio.to_thread(self.store.list, acl_filter)

    async def create_acls(self, acls: Sequence[AclBinding], *, context: RequestContext) -> None:
        """Store ``acls`` (CreateAcls); every one is checked before any is stored, and storing one that
        exists changes nothing. Raises AuthorizationError, InvalidAclError."""
        self._require(Operation.ALTER, context)
        await asyncio.to_thread(self.store.add, list(acls))

    async def delete_acls(self, acl_filter: AclFilter, *, context: RequestContext) -> list[AclBinding]:
        """Remove the ACLs that pass ``acl_filter`` and answer them (DeleteAcls)."""
        self._require(Operation.ALTER, context)
        return await asyncio.to_thread(self.store.remove, acl_filter)


class UserAdmin(_ClusterAdmin):
    """Users' SCRAM-SHA-512 credentials: Describe on the cluster to list them, Alter to change them.

    Args:
        credentials: the credentials in ZooKeeper. inter_broker_username: the brokers' own user
            (``inter.broker.username``), whose password is their ``inter.broker.password``: never changed here.
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, credentials: UserCredentials, inter_broker_username: str, authorizer: Authorizer) -> None:
        super().__init__(authorizer=authorizer)
        self.credentials = credentials
        self.inter_broker_username = inter_broker_username

    async def list_users(self, *, context: RequestContext) -> list[str]:
        """Every user with a credential, sorted. Raises AuthorizationError."""
        self._require(Operation.DESCRIBE, context)
        return await asyncio.to_thread(self.credentials.names)

    async def upsert_user(self, name: str, *, password: str, context: RequestContext, iterations: int = 4096) -> None:
        """Create the user or replace their credential (PBKDF2 with ``iterations``, 4096 to 16384).

        Raises:
            AuthorizationError: no Alter on the cluster (403 / 40301).
            InvalidCredentialError: the brokers' own user (400).
        """
        self._require(Operation.ALTER, context)
        self._check_not_the_brokers(name)
        await asyncio.to_thread(self.credentials.upsert, name, password, iterations=iterations)

    async def delete_user(self, name: str, *, context: RequestContext) -> None:
        """Remove the user's credential.

        Raises:
            AuthorizationError: no Alter on the cluster (403 / 40301).
            InvalidCredentialError: the brokers' own user; UnknownUserError: no such user (404 / 40412).
        """
        self._require(Operation.ALTER, context)
        self._check_not_the_brokers(name)
        await asyncio.to_thread(self.credentials.delete, name)

    def _check_not_the_brokers(self, name: str) -> None:
        if name == self.inter_broker_username:
            raise InvalidCredentialError(
                f"User {name!r} is the brokers' own (inter.broker.username): change its password through "
                "inter.broker.password in every broker's settings, not here.")


@dataclass(frozen=True, kw_only=True)
class ClientQuotaAlteration:
    """Kafka's ``ClientQuotaAlteration``: quotas to set (a value > 0; None is refused) and keys to remove
    on one entity."""

    entity: QuotaEntity
    set: Mapping[str, float | None] = field(default_factory=dict)
    remove: Sequence[str] = ()


class ClientQuotaAdmin(_ClusterAdmin):
    """Client quotas by user and client id: DescribeConfigs on the cluster to read them, AlterConfigs to
    change them.

    Args:
        store: the quotas in ZooKeeper (every broker's quota manager follows the same znodes).
        authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, store: QuotaStore, authorizer: Authorizer) -> None:
        super().__init__(authorizer=authorizer)
        self.store = store

    async def describe_client_quotas(self, *, context: RequestContext, user: str | None = None,
                                     client_id: str | None = None,
                                     strict: bool = False) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The entities with quotas that match the filter (DescribeClientQuotas); see
        :meth:`QuotaStore.describe <lakelog.security.quotas.store.QuotaStore.describe>`. Raises
        AuthorizationError."""
        self._require(Operation.DESCRIBE_CONFIGS, context)
        return await asyncio.to_thread(self.store.describe, user=user, client_id=client_id, strict=strict)

    async def alter_client_quotas(self, alterations: Sequence[ClientQuotaAlteration], *, context: RequestContext,
                                  validate_only: bool = False) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """Set and remove quotas (AlterClientQuotas): every alteration is checked before any is written;
        answers each entity's quotas after its change (as they would be, with ``validate_only``).

        Raises:
            AuthorizationError: no AlterConfigs on the cluster (403 / 40301).
            InvalidQuotaError: a quota to set without a value, an unknown key or a value out of range
            (nothing written).
        """
        self._require(Operation.ALTER_CONFIGS, context)
        for alteration in alterations:
            if any(v is None for v in alteration.set.values()):
                raise InvalidQuotaError("A quota op without remove needs a value (> 0)")

        def apply() -> list[tuple[QuotaEntity, dict[str, float]]]:
            for a in alterations:  # check all first: nothing written on a bad entry
                self.store.alter(a.entity, set=a.set, remove=a.remove, validate_only=True)
            return [(a.entity, self.store.alter(a.entity, set=a.set, remove=a.remove, validate_only=validate_only))
                    for a in alterations]

        return await asyncio.to_thread(apply)
