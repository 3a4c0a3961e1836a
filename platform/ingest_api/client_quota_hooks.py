"""Where the gateway enforces client quotas (:mod:`lakelog.security.quotas`): an app-level dependency that
refuses a request of an entity over its quota before the route runs, and an ASGI middleware that records
what each request used once it is answered.

Routes are classified by the path template FastAPI matched (never by editing the routers):

- produce (``producer_byte_rate``, the request body's bytes): ``POST /topics/{topic}``,
  ``/topics/{topic}/partitions/{partition}``, ``/topics/{topic}/partitions/{partition}/records``,
  ``/v3/clusters/{cluster_id}/topics/{topic}/records``;
- fetch (``consumer_byte_rate``, the answer's bytes): ``GET /topics/{topic}/partitions/{partition}/records``,
  ``/consumers/{group}/instances/{instance}/records``;
- every request also counts its time against ``request_percentage``: from the middleware's start to the
  end of its answer. Kafka counts a request handler thread's time only; an asynchronous gateway has no such
  thread, so waits count too (a long-poll fetch's ``max_wait_ms``): give consumers that long-poll a
  ``request_percentage`` above their waits, or rely on ``consumer_byte_rate``;
- never throttled: the brokers' internal replica and coordinator routes (Kafka exempts inter-broker
  replication), ``/health``, ``/ready``, ``/metrics``, and requests of the brokers' principal.

The entity is the request's principal (``request.state.principal``, set by
:func:`~lakelog.ingest_api.deps.authenticate`, which this dependency runs first) and its client id
(:data:`~lakelog.protocol.client_id.CLIENT_ID_HEADER`). While no quota is set anywhere both hooks do
nothing but one attribute test; otherwise a few dict lookups per request and per body chunk, never work
per record (about 12 us of quota bookkeeping a request, lost in the noise of a produce's milliseconds). With ``authentication.methods=none`` requests a broker forwards to a partition's leader count
on the leader as ``User:ANONYMOUS`` without a client id.
"""

from __future__ import annotations

import time

from fastapi import Request

from lakelog.ingest_api.deps import PrincipalDep
from lakelog.protocol.client_id import CLIENT_ID_HEADER
from lakelog.replication.leader_client import COORDINATOR_PREFIX, REPLICA_PREFIX
from lakelog.security.quotas import FETCH, PRODUCE, REQUEST, ClientQuotaManager
from lakelog.security.quotas.entities import user_name

__all__ = ["ClientQuotaRecorder", "enforce_client_quotas", "quota_types_of"]

_PRODUCE_ROUTES = frozenset({
    ("POST", "/topics/{topic}"), ("POST", "/topics/{topic}/partitions/{partition}"),
    ("POST", "/topics/{topic}/partitions/{partition}/records"),
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic}/records"),
})
_FETCH_ROUTES = frozenset({
    ("GET", "/topics/{topic}/partitions/{partition}/records"),
    ("GET", "/consumers/{group}/instances/{instance}/records"),
})
_EXEMPT_PATHS = frozenset({"/health", "/ready", "/metrics"})
#: the state key of a request the quotas measure: ``(manager, quota types, user, client id)``
_STATE_KEY = "client_quota"


def quota_types_of(method: str, template: str, *, internal_exempt: bool = True) -> tuple[str, ...]:
    """The quota types a request of this route counts against: ``()`` for exempt routes.

    Args:
        method: the HTTP method. template: the route's path template (``/topics/{topic}``).
        internal_exempt: the internal replica and coordinator routes are exempt (with
            ``authentication.methods=none``, where brokers are not told from clients by their principal);
            False: they count like the public ones (a client that got through their ClusterAction check,
            with the authorizer off, is throttled; the brokers are exempt by principal). Default: True.
    """
    if template in _EXEMPT_PATHS:
        return ()
    if template.startswith((REPLICA_PREFIX, COORDINATOR_PREFIX)):
        if internal_exempt:
            return ()
        return (FETCH, REQUEST) if method == "GET" and template.endswith("/records") else (REQUEST,)
    if (method, template) in _PRODUCE_ROUTES:
        return (PRODUCE, REQUEST)
    if (method, template) in _FETCH_ROUTES:
        return (FETCH, REQUEST)
    return (REQUEST,)


def _manager(request: Request) -> ClientQuotaManager | None:
    manager = getattr(request.app.state.broker, "client_quotas", None)
    return manager if manager is not None and manager.active else None


async def enforce_client_quotas(request: Request, principal: PrincipalDep) -> None:
    """App-level dependency (after :func:`~lakelog.ingest_api.deps.authenticate`): refuse a request whose
    entity is over one of the quotas of its route, before the route reads or writes anything; remember
    the entity for :class:`ClientQuotaRecorder`.

    Raises:
        lakelog.security.errors.ClientQuotaExceededError: 429 / 42902 with ``Retry-After`` (retriable).
    """
    manager = _manager(request)
    if manager is None or manager.is_exempt(principal):
        return
    route = request.scope.get("route")
    types = quota_types_of(request.method, getattr(route, "path", ""),
                           internal_exempt=not request.app.state.broker.settings.authenticates)
    if not types:
        return
    user, client_id = user_name(principal), request.headers.get(CLIENT_ID_HEADER, "")
    manager.check(types, user=user, client_id=client_id)
    request.state.client_quota = (manager, types, user, client_id)


class ClientQuotaRecorder:
    """ASGI middleware: records, once a request is answered, its body bytes (produce), its answer's bytes
    (fetch) and its time (``request_percentage``) for the entity :func:`enforce_client_quotas` named.

    Args:
        app: the ASGI app. manager_of: ``() -> ClientQuotaManager | None`` (the broker's).
    """

    def __init__(self, app, *, manager_of) -> None:
        self.app = app
        self.manager_of = manager_of

    async def __call__(self, scope, receive, send) -> None:
        manager = self.manager_of() if scope["type"] == "http" else None
        if manager is None or not manager.active:
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        counts = [0, 0]  # request body bytes, answer body bytes

        async def counting_receive():
            message = await receive()
            if message["type"] == "http.request":
                counts[0] += len(message.get("body", b""))
            return message

        async def counting_send(message) -> None:
            if message["type"] == "http.response.body":
                counts[1] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            entry = (scope.get("state") or {}).get(_STATE_KEY)
            if entry is not None:
                manager, types, user, client_id = entry
                if PRODUCE in types:
                    manager.record(PRODUCE, counts[0], user=user, client_id=client_id)
                if FETCH in types:
                    manager.record(FETCH, counts[1], user=user, client_id=client_id)
                # Kafka's nanosToPercentage: the request's time as a percentage of one second
                manager.record(REQUEST, (time.perf_counter() - started) * 100.0, user=user, client_id=client_id)
