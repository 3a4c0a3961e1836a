"""lakelog.consumer_groups.offsets_admin against a real in-process broker and ZooKeeper: commits (fenced,
idempotent, partition checks), lag, and resets to earliest, latest, an offset and a timestamp."""

from __future__ import annotations

import asyncio
import time
import uuid

import pyarrow as pa
import pytest

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.consumer_groups import offsets_admin
from lakelog.consumer_groups.broker_api import ConsumerBroker, OffsetsAdminBroker
from lakelog.consumer_groups.errors import (
    GroupNotEmptyError,
    IllegalGenerationError,
    InvalidCommitError,
    UnknownGroupError,
)
from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.replication.errors import UnknownTopicError
from lakelog.replication.metadata import CONSUMERS_PATH
from lakelog.requests import ProduceRequest, RequestContext
from lakelog.security.authentication import ANONYMOUS
from lakelog.runtime.zookeeper_server import free_port

#: an anonymous client's requests (authorizer.enabled is false here)
CLIENT = RequestContext(principal=ANONYMOUS)


def records(n: int, value: bytes = b"v") -> pa.Table:
    """A produce batch of ``n`` records without keys (broker timestamps)."""
    return pa.Table.from_pydict({"key": [None] * n, "value": [value] * n, "headers": [None] * n,
                                 "timestamp": [None] * n}, schema=PRODUCE_SCHEMA)


def run_with_broker(zk_connect: str, log_dirs, scenario) -> None:
    """Start a broker in this process, run ``await scenario(broker)``, stop the broker."""
    async def main() -> None:
        broker = Broker(BrokerSettings(broker_id=0, port=free_port(), log_dirs=log_dirs,
                                       zookeeper_connect=zk_connect))
        await broker.start()
        try:
            await scenario(broker)
        finally:
            await broker.stop()
    asyncio.run(main())


def test_the_broker_provides_the_protocols(zk_connect, tmp_path):
    async def scenario(broker: Broker) -> None:
        assert isinstance(broker, ConsumerBroker)
        assert isinstance(broker, OffsetsAdminBroker)
    run_with_broker(zk_connect, tmp_path / "logs", scenario)


def test_commit_lag_and_reset(zk_connect, tmp_path, topic_name):
    async def scenario(broker: Broker) -> None:
        group = f"g-{uuid.uuid4().hex[:8]}"
        await broker.create_topic(topic_name, partitions=2)
        await broker.requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records(5, b"early")),
                                      context=CLIENT)
        await asyncio.sleep(0.05)
        middle_ms = int(time.time() * 1000)
        await asyncio.sleep(0.05)
        await broker.requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records(5, b"late")),
                                      context=CLIENT)
        await broker.requests.produce(ProduceRequest(topic=topic_name, partition=1, records=records(4)), context=CLIENT)

        # nothing committed yet
        with pytest.raises(UnknownGroupError):
            await offsets_admin.group_lag(broker, group)
        with pytest.raises(UnknownGroupError):
            await offsets_admin.reset_offsets(broker, group, to="earliest")

        # commit and lag: partition 1 has no commit, its lag counts from the log start offset
        assert await offsets_admin.commit_offsets(broker, group, [PartitionOffset(topic_name, 0, 6, "m")])
        lag = await offsets_admin.group_lag(broker, group)
        assert [(p.partition, p.committed_offset, p.log_end_offset, p.high_watermark, p.lag)
                for p in lag.partitions] == [(0, 6, 10, 10, 4), (1, None, 4, 4, 4)]
        assert lag.total_lag == 8 and lag.group == group

        # a transaction replay writes nothing
        one = [PartitionOffset(topic_name, 0, 7)]
        assert await offsets_admin.commit_offsets(broker, group, one, app_id="q", version=3)
        assert not await offsets_admin.commit_offsets(broker, group, [PartitionOffset(topic_name, 0, 9)],
                                                      app_id="q", version=3)
        assert (await broker.coordinator.committed(group))[0].offset == 7

        # a commit from an older generation is fenced
        generation = broker.metadata.bump_group_generation(group)
        broker.metadata.bump_group_generation(group)
        with pytest.raises(IllegalGenerationError):
            await offsets_admin.commit_offsets(broker, group, one, generation=generation)

        # partitions that do not exist
        with pytest.raises(InvalidCommitError):
            await offsets_admin.commit_offsets(broker, group, [PartitionOffset(topic_name, 2, 1)])
        with pytest.raises(UnknownTopicError):
            await offsets_admin.commit_offsets(broker, group, [PartitionOffset("missing-" + topic_name, 0, 1)])

        # resets: every partition of the committed topics, clamped offsets, time lookup
        async def reset(**kw) -> list[tuple[int, int]]:
            return [(o.partition, o.offset) for o in await offsets_admin.reset_offsets(broker, group, **kw)]

        assert await reset(to="latest") == [(0, 10), (1, 4)]
        assert await reset(to="earliest") == [(0, 0), (1, 0)]
        assert await reset(to="offset", value=6) == [(0, 6), (1, 4)]
        # partition 1's records all came after middle_ms: its first one
        assert await reset(to="timestamp", value=middle_ms, topics=[topic_name]) == [(0, 5), (1, 0)]
        assert {(c.partition, c.offset) for c in (await broker.coordinator.committed(group))} == {(0, 5), (1, 0)}
        assert await reset(to="timestamp", value=int(time.time() * 1000) + 60_000) == [(0, 10), (1, 4)]
        with pytest.raises(InvalidCommitError):
            await offsets_admin.reset_offsets(broker, group, to="offset")

        # a group with an active member cannot be reset
        await asyncio.to_thread(broker.zk.create, f"{CONSUMERS_PATH}/{group}/members/m-1", ephemeral=True,
                                makepath=True)
        with pytest.raises(GroupNotEmptyError, match="m-1"):
            await offsets_admin.reset_offsets(broker, group, to="earliest")
    run_with_broker(zk_connect, tmp_path / "logs", scenario)
