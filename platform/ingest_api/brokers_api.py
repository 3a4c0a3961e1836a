"""REST Proxy v2 ``GET /brokers``: the ids of the live brokers (Confluent's v2 ``BrokersResource``).

Any broker answers for the whole cluster, from the live registrations under
``/lakelog/brokers/ids`` in ZooKeeper.
"""

from __future__ import annotations

from fastapi import APIRouter

from lakelog.ingest_api import models
from lakelog.ingest_api.deps import BrokerDep
from lakelog.ingest_api.openapi_docs import ZOOKEEPER_ERRORS, KafkaV2JSONResponse, referenced
from lakelog.ingest_api.v2_media import V2_ANSWERS, accepts

router = APIRouter()


@router.get("/brokers", response_model=models.BrokerList, tags=["v2 brokers"],
            responses=referenced(ZOOKEEPER_ERRORS), response_class=KafkaV2JSONResponse, dependencies=[accepts(*V2_ANSWERS)],
            summary="Ids of the live brokers (REST Proxy v2)")
async def list_brokers(broker: BrokerDep) -> models.BrokerList:
    return models.BrokerList(brokers=sorted(await broker.requests.metadata.brokers()))
