"""Operations routes: Prometheus metrics, liveness and readiness.

- ``GET /metrics``: the Prometheus text format (prometheus-client's exposition): the broker's replication
  gauges and counters and the log histograms (:mod:`lakelog.replication.broker_metrics`), the ZooKeeper
  connection's state (:mod:`lakelog.replication.zookeeper_session`), consumer group
  lag of the groups this broker coordinates (:mod:`lakelog.consumer_groups.lag_metrics`), the transactional
  ids it coordinates by state (:mod:`lakelog.coordinators.transaction_metrics`), and per-route request counts
  and latency (:class:`RequestStats`), requests refused for client quotas by quota type.
  Everything but the request metrics and the per-topic counters is read at scrape time.
- ``GET /health``: 200 ``{"status": "ok"}`` while the process serves HTTP (a liveness probe).
- ``GET /ready``: 200 ``{"status": "ready"}`` once the broker is registered in and connected to ZooKeeper, has
  opened every partition assigned to it and is in the ISR of every partition it follows
  (:func:`~lakelog.replication.readiness.readiness_problems`); else 503 / 50306 (retriable) listing why.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from pydantic import BaseModel, Field

from lakelog.consumer_groups.lag_metrics import group_lag_metrics
from lakelog.ingest_api.deps import BrokerDep, RequestStatsDep
from lakelog.ingest_api.permissions import require_cluster_describe
from lakelog.ingest_api.errors import BrokerNotReadyError
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.coordinators.transaction_metrics import transaction_metrics
from lakelog.replication.broker_metrics import replication_metrics
from lakelog.replication.readiness import readiness_problems

router = APIRouter(tags=["operations"])

class _Families:
    """A collector over families gathered before the scrape renders them."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self.families)


@router.get("/metrics", response_class=Response, dependencies=[require_cluster_describe],
            summary="Prometheus metrics of this broker",
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "The Prometheus text format."}})
async def metrics(broker: BrokerDep, request_stats: RequestStatsDep) -> Response:
    """Every metric of this broker in the Prometheus text format. Scrape every broker: each
    exports its own partitions, the groups and transactional ids it coordinates, and its requests. They name
    every topic, group and transactional id: with ACLs checked, the scraper needs Describe on the cluster
    (a principal of its own: ``lakelog acls add --allow-principal User:prometheus --operation Describe --cluster``)."""
    controller = broker.controller
    families = await replication_metrics(broker.replica_manager, controller_active=controller.active,
                                         offline_partitions=controller.offline_partitions)
    families += await group_lag_metrics(broker)
    families += await transaction_metrics(broker.transaction_state_manager)
    families += list(broker.zookeeper_session.metric_families())
    if request_stats is not None:
        families += list(request_stats.collect())
    client_quotas = getattr(broker, "client_quotas", None)
    if client_quotas is not None:  # requests refused for client quotas (lakelog.security.quotas)
        families += client_quotas.metric_families()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


class Health(BaseModel):
    """The broker's state for a probe."""

    status: str = Field(description="`ok` (health) or `ready` (readiness).")
    broker_id: int


@router.get("/health", response_model=Health, summary="Liveness: the broker process serves HTTP")
async def health(broker: BrokerDep) -> Health:
    """200 while the process answers HTTP; for a liveness probe (restart the process when it fails)."""
    return Health(status="ok", broker_id=broker.settings.broker_id)


@router.get("/ready", response_model=Health, responses=error_responses(503),
            summary="Readiness: registered, every assigned partition opened, every followed partition caught up")
async def ready(broker: BrokerDep) -> Health:
    """200 once the broker is registered in and connected to ZooKeeper, has opened every partition assigned to it and is in the
    ISR of every partition it follows; for a load balancer or an orchestrator (send traffic, roll the next
    broker). 503 / 50306 (retriable) with the reasons otherwise."""
    rm = broker.replica_manager
    problems = readiness_problems(broker_id=broker.settings.broker_id, registered=broker.registered,
                                  session_lost=rm.session_lost, topics=broker.topics(), local=rm.partitions(),
                                  zookeeper_connected=broker.zookeeper_session.connected)
    if problems:
        raise BrokerNotReadyError(f"Broker {broker.settings.broker_id} is not ready: " + "; ".join(problems) + ".")
    return Health(status="ready", broker_id=broker.settings.broker_id)
