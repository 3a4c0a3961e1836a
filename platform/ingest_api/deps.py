"""Typed FastAPI dependencies: how a route reaches the broker's pieces (``Depends``), never
``request.app.state`` directly.

The app keeps the broker (anything with the :class:`GatewayBroker` surface; :class:`lakelog.broker.Broker`
in a broker process) on ``app.state.broker``; routes declare what they need as annotated parameters, e.g.
``broker: BrokerDep`` (whose ``requests`` are the request layer's operations) or ``context: ContextDep``.

Every dependency is a coroutine (``async def``), even one that only reads an attribute: FastAPI runs a
plain ``def`` dependency in its thread pool: a hop to a worker thread and back on every request that
declares it (about 0.1 ms of a request's answer on 2 cores).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Protocol, runtime_checkable

from fastapi import Depends, Request

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.ingest_api.request_metrics import RequestStats
from lakelog.coordinators.transaction_coordinator import TransactionCoordinator
from lakelog.coordinators.transaction_log import TransactionStateManager
from lakelog.replication.controller import Controller
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.protocol.client_id import CLIENT_ID_HEADER
from lakelog.requests import RequestHandler
from lakelog.requests.context import RequestContext
from lakelog.security.authentication import ANONYMOUS, Authenticator
from lakelog.security.authorizer import Authorizer


@runtime_checkable
class GatewayBroker(Protocol):
    """What the gateway's routes use of a broker (``lakelog.broker.Broker`` provides it)."""

    settings: BrokerSettings
    cluster_id: str
    replica_manager: ReplicaManager
    #: the operations of every request kind (:mod:`lakelog.requests`): what the routes call
    requests: RequestHandler
    coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    transaction_state_manager: TransactionStateManager
    controller: Controller
    #: True while the broker's registration znode is written by its current ZooKeeper session
    registered: bool
    #: who each request is (``authentication.methods``)
    authenticator: Authenticator
    #: whether they may (``authorizer.enabled``)
    authorizer: Authorizer

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def topics(self) -> dict[str, TopicMetadata]: ...
    async def topic_fresh(self, name: str) -> TopicMetadata: ...
    async def refresh_topics(self) -> None: ...
    def check_partition(self, meta: TopicMetadata, partition: int) -> None: ...
    async def partition_offsets(self, topic: str, partition: int) -> tuple[int, int, int]: ...
    async def offset_for_timestamp(self, topic: str, partition: int, *, timestamp_ms: int) -> int: ...


async def get_broker(request: Request) -> GatewayBroker:
    """The broker serving this app."""
    return request.app.state.broker


async def get_coordinator(request: Request) -> GroupCoordinator:
    """The broker's group coordinator (committed offsets, wherever a group's coordinator is)."""
    return request.app.state.broker.coordinator


BrokerDep = Annotated[GatewayBroker, Depends(get_broker)]
CoordinatorDep = Annotated[GroupCoordinator, Depends(get_coordinator)]


async def get_transaction_coordinator(request: Request) -> TransactionCoordinator:
    """The broker's transaction coordinator (transactional ids, wherever their coordinator is;
    ``Broker.transaction_coordinator``)."""
    return request.app.state.broker.transaction_coordinator


#: The broker's :class:`~lakelog.coordinators.transaction_coordinator.TransactionCoordinator`.
TransactionCoordinatorDep = Annotated[TransactionCoordinator, Depends(get_transaction_coordinator)]


async def get_request_stats(request: Request) -> RequestStats | None:
    """The app's per-route request metrics; None when ``metrics.enabled`` is false."""
    return getattr(request.app.state, "request_stats", None)


#: The gateway's :class:`~lakelog.ingest_api.request_metrics.RequestStats` (None: metrics off).
RequestStatsDep = Annotated[RequestStats | None, Depends(get_request_stats)]


#: Routes answered without credentials: liveness and readiness probes (Kubernetes sends none).
UNAUTHENTICATED_PATHS = frozenset({"/health", "/ready"})


async def authenticate(request: Request) -> str:
    """The request's principal (``User:name``; ``User:ANONYMOUS`` with ``authentication.methods=none``),
    kept on ``request.state.principal``; every route runs it (the app's dependency), except
    :data:`UNAUTHENTICATED_PATHS` (and what FastAPI serves outside routes: ``/openapi.json``, ``/docs``, the
    console's static files). A check that is not remembered runs in a thread (PBKDF2 milliseconds, a JWKS fetch).

    Raises:
        lakelog.security.errors.AuthenticationError: 401 / 40101 with ``WWW-Authenticate``.
    """
    authenticator = request.app.state.broker.authenticator
    if request.url.path in UNAUTHENTICATED_PATHS:
        principal = ANONYMOUS
    else:
        header = request.headers.get("authorization")
        # mtls: the TLS client certificate's subject (ASGI TLS extension; lakelog.ingest_api.http_guard)
        cert_name = (request.scope.get("extensions") or {}).get("tls", {}).get("client_cert_name")
        principal = authenticator.cached_principal(header, client_cert_name=cert_name)
        if principal is None:  # a password check (PBKDF2, milliseconds): off the event loop
            principal = await asyncio.to_thread(authenticator.authenticate, header,
                                                client_host=client_host(request),
                                                route=f"{request.method} {request.url.path}",
                                                client_cert_name=cert_name)
    request.state.principal = principal
    return principal


def client_host(request: Request) -> str:
    """The client's IP address (``-`` when the server does not know it): what ACL hosts match and logs name."""
    client = request.scope.get("client")  # (host, port); not request.client, which builds an Address
    return client[0] if client else "-"


#: The request's principal (:func:`authenticate`).
PrincipalDep = Annotated[str, Depends(authenticate)]

#: The listener name of requests that come in by the HTTP gateway (:attr:`RequestContext.listener
#: <lakelog.requests.context.RequestContext.listener>`).
HTTP_LISTENER = "http"


def context_of(request: Request, principal: str) -> RequestContext:
    """The request's caller for the request layer's operations: ``principal``, address, ``client.id``
    (``X-Lakelog-Client-Id``) and listener."""
    return RequestContext(principal=principal, host=client_host(request),
                          client_id=request.headers.get(CLIENT_ID_HEADER, ""), listener=HTTP_LISTENER)


async def get_context(request: Request, principal: PrincipalDep) -> RequestContext:
    """The request's caller (:func:`context_of`), as a route dependency."""
    return context_of(request, principal)


#: The request's :class:`~lakelog.requests.context.RequestContext` (:func:`get_context`): what every
#: operation of the request layer takes.
ContextDep = Annotated[RequestContext, Depends(get_context)]
