"""What a route checks before it runs: Kafka's authorization of the matching API, as FastAPI dependencies.

Every check goes through the broker's one :class:`~lakelog.security.authorizer.Authorizer`
(``authorizer.enabled``; disabled, everything is allowed) with the request's principal (the app-wide
:func:`~lakelog.ingest_api.deps.authenticate` dependency) and the client's address. A route states what it
needs in its decorator, where the resource is a path parameter::

    @router.post("/topics/{topic}", dependencies=[topic_permission(Operation.WRITE)])

and, where the resources come in the body or the answer is a list, asks :data:`PermissionsDep`
(:class:`RequestPermissions`): ``require`` one resource, ``filter`` a list to what the principal may see.

What each API needs is the request layer's (:mod:`lakelog.requests.authorization`, as Kafka's
``KafkaApis`` checks it), and every operation checks it itself for the request's
:class:`~lakelog.requests.context.RequestContext` (:data:`~lakelog.ingest_api.deps.ContextDep`); this module
runs the same checks earlier, as route dependencies, before a route reads the body, so that the HTTP
answers keep their order (403 before a body's 400, 404 or 415).

Checking before the handler runs means a principal that may not Describe a topic gets the same 403 for a
topic that exists and for one that does not: no answer tells it which topics exist. A denial raises
:class:`~lakelog.security.errors.AuthorizationError` (403 / 40301, naming the operation and the resource)
and is logged by the authorizer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.params import Depends as DependsParam

from lakelog.ingest_api.deps import PrincipalDep, client_host, context_of
from lakelog.protocol.producer_headers import TRANSACTIONAL_ID_HEADER
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import CLUSTER_NAME, Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["PermissionsDep", "ProduceContextDep", "TopicReadContextDep", "RequestPermissions", "cluster_permission", "group_permission", "produce_context",
           "require_cluster_action", "require_cluster_alter", "require_cluster_alter_configs", "require_cluster_describe",
           "require_cluster_describe_configs", "topic_permission", "transactional_id_permission"]


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
            RequestPermissions(authorizer=authorizer, principal=principal, host=client_host(request)).require(
                operation, resource_type, name_of(request))

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


def produce_context(request: Request, principal: str) -> RequestContext:
    """A produce request's :class:`~lakelog.requests.context.RequestContext` (:func:`context_of`), after
    Write on the path's ``topic`` and, for a transactional request (``X-Lakelog-Transactional-Id``), Write
    on its transactional id (Kafka's ``handleProduceRequest``): what :data:`ProduceContextDep` solves, for
    a route that folds it into a dependency of its own.

    Raises:
        lakelog.security.errors.AuthorizationError: 403 / 40301.
    """
    context = context_of(request, principal)
    authorizer: Authorizer = request.app.state.broker.authorizer
    if authorizer.enabled:
        RequestPermissions(authorizer=authorizer, principal=principal, host=context.host).require_produce(
            request.path_params["topic"], transactional_id=request.headers.get(TRANSACTIONAL_ID_HEADER))
    return context


async def _produce_context(request: Request, principal: PrincipalDep) -> RequestContext:
    return produce_context(request, principal)


async def _topic_read_context(request: Request, principal: PrincipalDep) -> RequestContext:
    context = context_of(request, principal)
    authorizer: Authorizer = request.app.state.broker.authorizer
    if authorizer.enabled:
        RequestPermissions(authorizer=authorizer, principal=principal, host=context.host).require(
            Operation.READ, ResourceType.TOPIC, request.path_params["topic"])
    return context


#: A produce route's :class:`~lakelog.requests.context.RequestContext`, after Write on the path's ``topic``
#: and, for a transactional request (``X-Lakelog-Transactional-Id``), Write on its transactional id
#: (Kafka's ``handleProduceRequest``): one dependency for both, the hot path solves one node, not two.
#:
#: Raises (from the dependency): lakelog.security.errors.AuthorizationError: 403 / 40301.
ProduceContextDep = Annotated[RequestContext, Depends(_produce_context)]

#: A fetch route's :class:`~lakelog.requests.context.RequestContext`, after ``Read`` on the path's topic
#: (:func:`topic_permission`), in one dependency.
#:
#: Raises (from the dependency): lakelog.security.errors.AuthorizationError: 403 / 40301.
TopicReadContextDep = Annotated[RequestContext, Depends(_topic_read_context)]
