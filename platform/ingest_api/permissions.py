"""What a route checks before it runs: Kafka's authorization of the matching API, as FastAPI dependencies.

Every check goes through the broker's one :class:`~lakelog.security.authorizer.Authorizer`
(``authorizer.enabled``; disabled, everything is allowed) with the request's principal (the app-wide
:func:`~lakelog.ingest_api.deps.authenticate` dependency) and the client's address. A route states what it
needs in its decorator, where the resource is a path parameter::

    @router.post("/topics/{topic}", dependencies=[topic_permission(Operation.WRITE)])

and, where the resources come in the body or the answer is a list, asks :data:`PermissionsDep`
(:class:`RequestPermissions`): ``require`` one resource, ``filter`` a list to what the principal may see.

What each API needs, as Kafka's ``KafkaApis`` checks it:

======================================  =====================================================================
produce (v2, v3, Arrow)                 Write on the topic; with ``X-Lakelog-Transactional-Id`` also Write
                                        on the transactional id
fetch                                   Read on the topic
metadata, offsets, partitions, logs     Describe on the topic; topic lists show only describable topics
create topic                            Create on the cluster, else Create on the topic
delete topic                            Delete on the topic
add partitions                          Alter on the topic
describe / alter topic configs          DescribeConfigs / AlterConfigs on the topic
consumer instances                      Read on the group (JoinGroup), Read on each topic read; an instance
                                        answers only the principal that created it
commit / reset offsets                  Read on the group and on each topic
delete offsets                          Delete on the group, Read on each topic
group offsets, lag, members, describe   Describe on the group; topics the principal cannot Describe are left out
group lists                             only the groups the principal may Describe
InitProducerId                          Write on the transactional id; idempotent only: IdempotentWrite on the
                                        cluster, or Write on some topic (KIP-679)
transactions                            Describe (lists filtered) / Write on the transactional id; a
                                        transaction's offsets also Read on the group
======================================  =====================================================================

Checking before the handler runs means a principal that may not Describe a topic gets the same 403 for a
topic that exists and for one that does not: no answer tells it which topics exist. A denial raises
:class:`~lakelog.security.errors.AuthorizationError` (403 / 40301, naming the operation and the resource)
and is logged by the authorizer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.params import Depends as DependsParam

from lakelog.ingest_api.deps import PrincipalDep, client_host
from lakelog.protocol.producer_headers import TRANSACTIONAL_ID_HEADER
from lakelog.security.acls import CLUSTER_NAME, Operation, ResourceType
from lakelog.security.authorizer import Authorizer
from lakelog.security.errors import AuthorizationError

log = logging.getLogger(__name__)

__all__ = ["PermissionsDep", "RequestPermissions", "cluster_permission", "group_permission", "produce_permission",
           "require_cluster_action", "require_cluster_alter", "require_cluster_alter_configs", "require_cluster_describe",
           "require_cluster_describe_configs", "topic_permission", "transactional_id_permission"]


class RequestPermissions:
    """One request's principal and address before the broker's authorizer.

    Args:
        authorizer: the broker's :class:`~lakelog.security.authorizer.Authorizer`.
        principal: ``User:name`` of the request.
        host: the client's IP address (``-`` when unknown).
    """

    __slots__ = ("authorizer", "principal", "host")

    def __init__(self, *, authorizer: Authorizer, principal: str, host: str) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host

    @property
    def enabled(self) -> bool:
        """Whether the broker checks ACLs at all (``authorizer.enabled``)."""
        return self.authorizer.enabled

    def require(self, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> None:
        """Allow or raise.

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming the operation and the resource.
        """
        self.authorizer.check(principal=self.principal, host=self.host, operation=operation,
                              resource_type=resource_type, name=name)

    def require_all(self, operation: Operation, resource_type: ResourceType, names: Iterable[str]) -> None:
        """:meth:`require` on each name (sorted and once each: the first denied one is named).

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301.
        """
        if self.enabled:
            for name in sorted(set(names)):
                self.require(operation, resource_type, name)

    def allows(self, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """Whether the principal may (no log line, no error: for filtering)."""
        return not self.enabled or self.authorizer.acls.authorize(
            principal=self.principal, host=self.host, operation=operation, resource_type=resource_type, name=name)

    def filter(self, operation: Operation, resource_type: ResourceType, names: Iterable[str]) -> list[str]:
        """The names the principal may do ``operation`` on, in their order (Kafka filters lists this way:
        Metadata, ListGroups, ListTransactions, OffsetFetch)."""
        names = list(names)
        if not self.enabled:
            return names
        return [n for n in names if self.allows(operation, resource_type, n)]

    def topic_filter(self, operation: Operation) -> Callable[[list[str]], list[str]]:
        """A function keeping the topic names the principal may do ``operation`` on (:meth:`filter`)."""
        return lambda names: self.filter(operation, ResourceType.TOPIC, names)

    def require_owner(self, *, owner: str, what: str) -> None:
        """Only ``owner`` (a principal) may use ``what`` (a consumer instance: REST Proxy's instances belong to
        the principal that created them). Checked whatever ``authorizer.enabled`` says: with
        ``authentication.methods=none`` every request is the same principal.

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming ``what``.
        """
        if owner != self.principal:
            log.warning("denied %s the %s of %s from %s", self.principal, what, owner, self.host)
            raise AuthorizationError(f"{self.principal} may not use {what}: it belongs to the principal that "
                                     f"created it; create your own.")

    def require_create_topic(self, name: str) -> None:
        """CreateTopics: Create on the cluster, else Create on the topic (Kafka's ``handleCreateTopicsRequest``).

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming the topic.
        """
        if not self.allows(Operation.CREATE, ResourceType.CLUSTER):
            self.require(Operation.CREATE, ResourceType.TOPIC, name)

    def require_idempotent_write(self, topics: Iterable[str]) -> None:
        """InitProducerId without a transactional id: IdempotentWrite on the cluster, or Write on one of
        ``topics`` (the cluster's topics; KIP-679 makes Write on any topic enough).

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming IdempotentWrite on the cluster.
        """
        if self.allows(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER):
            return
        if any(self.allows(Operation.WRITE, ResourceType.TOPIC, t) for t in topics):
            return
        self.require(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)


async def get_permissions(request: Request, principal: PrincipalDep) -> RequestPermissions:
    """The request's :class:`RequestPermissions` (a coroutine: no thread hop on produce and fetch)."""
    return RequestPermissions(authorizer=request.app.state.broker.authorizer, principal=principal,
                              host=client_host(request))


#: The request's permissions (:class:`RequestPermissions`), for checks on body resources and list filtering.
PermissionsDep = Annotated[RequestPermissions, Depends(get_permissions)]


def _permission(operation: Operation, resource_type: ResourceType, name_of: Callable[[Request], str]) -> DependsParam:
    """A route dependency: ``operation`` on the resource ``name_of(request)`` names (a coroutine)."""
    async def check(request: Request, principal: PrincipalDep) -> None:
        authorizer: Authorizer = request.app.state.broker.authorizer
        if authorizer.enabled:
            authorizer.check(principal=principal, host=client_host(request), operation=operation,
                             resource_type=resource_type, name=name_of(request))

    check.__name__ = f"require_{resource_type.name.lower()}_{operation.name.lower()}"
    return Depends(check)


def _path_permission(operation: Operation, resource_type: ResourceType, *params: str) -> DependsParam:
    """:func:`_permission` on the first of the path parameters ``params`` the route has."""
    return _permission(operation, resource_type,
                       lambda request: next(request.path_params[p] for p in params if p in request.path_params))


def cluster_permission(operation: Operation) -> DependsParam:
    """A route dependency: the request's principal needs ``operation`` on the Cluster resource
    (``authorizer.enabled``; else allowed): ``ClusterAction`` for the internal replica and coordinator
    routes (Kafka's check of follower fetches, WriteTxnMarkers), ``Describe`` to list and ``Alter`` to change
    ACLs and users' credentials (Kafka's DescribeAcls / CreateAcls / DeleteAcls, Describe- and
    AlterUserScramCredentials), ``DescribeConfigs`` / ``AlterConfigs`` for client quotas.

    Raises (from the dependency):
        lakelog.security.errors.AuthorizationError: 403 / 40301 naming the operation and the resource.
    """
    return _permission(operation, ResourceType.CLUSTER, lambda request: CLUSTER_NAME)


#: Only brokers (or a principal an ACL allows ``ClusterAction`` on the cluster): the internal routes.
require_cluster_action = cluster_permission(Operation.CLUSTER_ACTION)
#: Listing ACLs and users, metrics: ``Describe`` on the cluster.
require_cluster_describe = cluster_permission(Operation.DESCRIBE)
#: Creating and deleting ACLs, setting and deleting users' credentials: ``Alter`` on the cluster.
require_cluster_alter = cluster_permission(Operation.ALTER)
#: Reading client quotas: ``DescribeConfigs`` on the cluster (Kafka's DescribeClientQuotas).
require_cluster_describe_configs = cluster_permission(Operation.DESCRIBE_CONFIGS)
#: Changing client quotas: ``AlterConfigs`` on the cluster (Kafka's AlterClientQuotas).
require_cluster_alter_configs = cluster_permission(Operation.ALTER_CONFIGS)


def topic_permission(operation: Operation) -> DependsParam:
    """A route dependency: ``operation`` on the topic of the path parameter ``topic``.

    Raises (from the dependency):
        lakelog.security.errors.AuthorizationError: 403 / 40301.
    """
    return _path_permission(operation, ResourceType.TOPIC, "topic")


def group_permission(operation: Operation) -> DependsParam:
    """A route dependency: ``operation`` on the consumer group of the path (``group`` or
    ``consumer_group_id``).

    Raises (from the dependency):
        lakelog.security.errors.AuthorizationError: 403 / 40301.
    """
    return _path_permission(operation, ResourceType.GROUP, "group", "consumer_group_id")


def transactional_id_permission(operation: Operation) -> DependsParam:
    """A route dependency: ``operation`` on the transactional id of the path (``transactional_id``).

    Raises (from the dependency):
        lakelog.security.errors.AuthorizationError: 403 / 40301.
    """
    return _path_permission(operation, ResourceType.TRANSACTIONAL_ID, "transactional_id")


async def _produce_check(request: Request, principal: PrincipalDep) -> None:
    authorizer: Authorizer = request.app.state.broker.authorizer
    if authorizer.enabled:
        host = client_host(request)
        transactional_id = request.headers.get(TRANSACTIONAL_ID_HEADER)
        if transactional_id is not None:
            authorizer.check(principal=principal, host=host, operation=Operation.WRITE,
                             resource_type=ResourceType.TRANSACTIONAL_ID, name=transactional_id)
        authorizer.check(principal=principal, host=host, operation=Operation.WRITE, resource_type=ResourceType.TOPIC,
                         name=request.path_params["topic"])


def produce_permission() -> DependsParam:
    """A produce route's dependency: Write on the path's ``topic`` and, for a transactional request
    (``X-Lakelog-Transactional-Id``), Write on its transactional id (Kafka's ``handleProduceRequest``).

    Raises (from the dependency):
        lakelog.security.errors.AuthorizationError: 403 / 40301.
    """
    return Depends(_produce_check)
