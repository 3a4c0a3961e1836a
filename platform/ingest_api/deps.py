"""Typed FastAPI dependencies: how a route reaches the broker's pieces (``Depends``), never
``request.app.state`` directly.

The app keeps the broker (:class:`GatewayBroker`) on ``app.state.broker`` and the consumer manager on
``app.state.consumers``; routes declare what they need as annotated parameters, e.g.
``broker: BrokerDep`` or ``consumers: ConsumerManagerDep``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.consumer_groups.offset_store import OffsetStore


def get_broker(request: Request) -> Any:
    """The broker serving this app (see :class:`lakelog.ingest_api.app.GatewayBroker`)."""
    return request.app.state.broker


def get_consumer_manager(request: Request) -> ConsumerManager:
    """The broker's consumer-instance manager (set by the app's lifespan)."""
    return request.app.state.consumers


def get_offset_store(request: Request) -> OffsetStore:
    """The broker's ``__consumer_offsets`` store."""
    return request.app.state.broker.offset_store


BrokerDep = Annotated[Any, Depends(get_broker)]
#: The broker as group offset administration sees it (:mod:`lakelog.consumer_groups.offsets_admin`).
OffsetsAdminBrokerDep = Annotated[OffsetsAdminBroker, Depends(get_broker)]
ConsumerManagerDep = Annotated[ConsumerManager, Depends(get_consumer_manager)]
OffsetStoreDep = Annotated[OffsetStore, Depends(get_offset_store)]
