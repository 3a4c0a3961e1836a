"""The FastAPI gateway of one broker: REST Proxy v2/v3 produce, fetch, metadata, admin, consumers.

:func:`create_app` wires the routers, one per resource:

- :mod:`~lakelog.ingest_api.topics_api`: v2 topics and partitions, ``/lakelog/v1/topics/{t}/logs``;
- :mod:`~lakelog.ingest_api.brokers_api`: v2 ``GET /brokers`` (the live broker ids);
- :mod:`~lakelog.ingest_api.records_api`: v2 produce (JSON forms, Arrow IPC) and fetch;
- :mod:`~lakelog.ingest_api.v3_api`: v3 topic admin, topic configs, single-record produce;
- :mod:`~lakelog.ingest_api.v3_cluster_api`: v3 cluster, brokers, a topic's partitions and replicas;
- :mod:`~lakelog.ingest_api.v3_groups_api`: v3 consumer groups, their consumers, lags and lag summary;
- :mod:`~lakelog.ingest_api.consumers_api`: v2 consumer instances;
- :mod:`~lakelog.ingest_api.offsets_api`: committed offsets, lag, resets;
- :mod:`~lakelog.ingest_api.producers_api`: producer ids for idempotent and transactional producers
  (InitProducerId);
- :mod:`~lakelog.ingest_api.transactions_api`: the cluster's transactional ids (list, describe);
- :mod:`~lakelog.ingest_api.v3_acls_api`: v3 ACLs (list, create, delete; kept in ZooKeeper);
- :mod:`~lakelog.ingest_api.users_api`: users' SCRAM-SHA-512 credentials (list, set, delete);
- :mod:`~lakelog.ingest_api.client_quotas_api`: client quotas (describe, alter; enforced by
  :mod:`~lakelog.ingest_api.client_quota_hooks`);
- :mod:`~lakelog.ingest_api.replica_api`: the followers' internal replica fetch;
- :mod:`~lakelog.ingest_api.coordinator_api`: the internal routes of group coordinators (offsets) and
  transaction coordinators;
- :mod:`~lakelog.ingest_api.metrics_api`: ``GET /metrics`` (Prometheus), ``GET /health``, ``GET /ready``;
- :mod:`~lakelog.ingest_api.schema_registry_api`: Confluent Schema Registry's REST API (``/subjects``,
  ``/schemas``, ``/config``, ``/mode``, ``/compatibility``) and its internal forwarded writes;
- :mod:`~lakelog.ingest_api.console_api`: the web console at ``/console`` (files only; the page uses the
  routes above).

Routes reach the broker through typed dependencies (:mod:`~lakelog.ingest_api.deps`); errors are
answered by :mod:`~lakelog.ingest_api.error_handlers` as ``{"error_code": status*100+n, "message": ...}``.
"""

from __future__ import annotations

import contextlib
from fastapi import Depends, FastAPI
from pydantic.json_schema import models_json_schema

from lakelog.ingest_api import (
    brokers_api,
    console_api,
    consumers_api,
    coordinator_api,
    delete_records_api,
    metrics_api,
    models,
    offsets_api,
    producers_api,
    records_api,
    replica_api,
    schema_registry_api,
    topics_api,
    transactions_api,
    users_api,
    client_quotas_api,
    v3_acls_api,
    v3_api,
    v3_cluster_api,
    v3_groups_api,
)
from lakelog.ingest_api.client_quota_hooks import ClientQuotaRecorder, enforce_client_quotas
from lakelog.ingest_api.deps import GatewayBroker, authenticate
from lakelog.ingest_api.error_handlers import install_error_handlers
from lakelog.ingest_api.memory_release import MemoryReleaser
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.ingest_api.request_metrics import RequestMetrics, RequestStats


def create_app(broker: GatewayBroker) -> FastAPI:
    """Build the gateway app for one broker (a :class:`lakelog.broker.Broker`, built by the caller);
    the broker starts and stops with the app (lifespan), its consumer instances with it."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await broker.start()
        try:
            yield
        finally:
            await broker.stop()

    app = FastAPI(
        title="lakelog gateway",
        version="0.1.0",
        description="Kafka-style topics whose partition logs are Delta tables. Confluent REST Proxy v2/v3 "
                    "compatible produce, fetch, metadata and topic admin, plus Arrow IPC produce and fetch.",
        lifespan=lifespan,
        # every route: who is asking (authentication.methods), then whether they are over a client quota
        dependencies=[Depends(authenticate), Depends(enforce_client_quotas)],
    )
    app.state.broker = broker
    app.state.memory_releaser = MemoryReleaser()
    install_error_handlers(app)
    for module in (topics_api, brokers_api, records_api, v3_cluster_api, v3_api, v3_groups_api, producers_api,
                   transactions_api, offsets_api, consumers_api, replica_api, coordinator_api, metrics_api,
                   v3_acls_api, users_api, client_quotas_api, delete_records_api, schema_registry_api):
        # 401 / 403 on every route but the probes (authentication, then the route's permissions)
        app.include_router(module.router, responses={} if module is metrics_api else error_responses(401, 403))
    app.include_router(schema_registry_api.internal_router, responses=error_responses(401, 403))
    app.include_router(console_api.router)
    app.mount("/console/assets", console_api.console_assets(), name="console-assets")
    if broker.settings.metrics_enabled:  # per-route request counts and latency for GET /metrics
        app.state.request_stats = RequestStats()
        app.add_middleware(RequestMetrics, stats=app.state.request_stats)
    # what each request used, once answered (client quotas; nothing while no quota is set)
    app.add_middleware(ClientQuotaRecorder, manager_of=lambda: getattr(broker, "client_quotas", None))
    _document_raw_body_models(app)
    return app


def _document_raw_body_models(app: FastAPI) -> None:
    """Add the models of raw-body routes (produce bodies, fetched records) to the OpenAPI components."""
    default_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            doc = default_openapi()
            _, defs = models_json_schema(
                [(m, "validation") for m in (models.BinaryProduceRequest, models.JsonProduceRequest,
                                             models.V3ProduceRequest, models.ConsumerRecord)],
                ref_template="#/components/schemas/{model}")
            doc.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
