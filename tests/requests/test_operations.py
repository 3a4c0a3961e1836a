"""The request layer serves produce, fetch, list offsets and topic admin with no HTTP app: a broker built
in this process (real ZooKeeper, real Delta logs) driven only through :class:`lakelog.requests.RequestHandler`
— what a second front door (the Kafka wire protocol) calls."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pyarrow as pa
import pytest

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.protocol.errors import (
    FieldOutOfRangeError,
    InvalidPartitionInRecordError,
    InvalidProducerHeadersError,
    MalformedBodyError,
)
from lakelog.protocol.partitioner import partitions_for_keys
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.errors import UnknownPartitionError, UnknownTopicError
from lakelog.runtime.zookeeper_server import free_port
from lakelog.requests import (
    CreateTopicRequest,
    FetchRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    ProduceRequest,
    RequestHandler,
    RequestPermissions,
    ResetOffsetsRequest,
)
from lakelog.security.authentication import ANONYMOUS


def records(values: list[bytes], keys: list[bytes | None] | None = None) -> pa.Table:
    """A produce batch (broker timestamps, no headers)."""
    n = len(values)
    return pa.Table.from_pydict({"key": keys or [None] * n, "value": values, "headers": [None] * n,
                                 "timestamp": [None] * n}, schema=PRODUCE_SCHEMA)


def run_with_requests(zk_connect: str, log_dirs, scenario, *, with_permissions: bool = False) -> None:
    """Start a broker in this process (no gateway app), run ``await scenario(broker.requests)`` (with
    ``with_permissions``: ``scenario(broker.requests, permissions)``, an anonymous client's), stop it."""
    async def main() -> None:
        broker = Broker(BrokerSettings(broker_id=0, port=free_port(), log_dirs=log_dirs, zookeeper_connect=zk_connect,
                                       fetch_max_wait_ms=50, offsets_topic_num_partitions=1))
        await broker.start()
        try:
            if with_permissions:
                await scenario(broker.requests, RequestPermissions(authorizer=broker.authorizer, principal=ANONYMOUS,
                                                                   host="127.0.0.1"))
            else:
                await scenario(broker.requests)
        finally:
            await broker.stop()
    asyncio.run(main())


def test_topic_create_produce_fetch_and_delete_through_the_request_layer(zk_connect, tmp_path, topic_name):
    async def scenario(requests: RequestHandler) -> None:
        meta = await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=3,
                                                              replication_factor=1,
                                                              configs={"retention.ms": "3600000"}))
        assert meta.partitions_count == 3
        described = await requests.describe_topic(topic_name)
        assert described.config.to_kafka()["retention.ms"] == "3600000"
        assert topic_name in await requests.list_topics()

        # a topic-level produce: partitioned by murmur2 of the key, offsets dense per partition
        keys = [b"k%d" % i for i in range(30)]
        result = await requests.produce(ProduceRequest(topic=topic_name, records=records([b"v"] * 30, keys)))
        expected = partitions_for_keys(pa.array(keys, pa.binary()), 3).to_numpy(zero_copy_only=False)
        assert list(result.partitions) == list(expected) and not result.errors
        for p in range(3):
            assert list(result.offsets[result.partitions == p]) == list(range(int((expected == p).sum())))

        # one Arrow batch to partition 1, then a fetch of everything there
        before = int((expected == 1).sum())
        batch = await requests.produce(ProduceRequest(topic=topic_name, partition=1, layout="batch",
                                                      records=records([b"a", b"b", b"c"])))
        assert batch.base_offset == before
        fetched = await requests.fetch(FetchRequest(topic=topic_name, partition=1, offset=before, max_wait_ms=0))
        assert fetched.records["value"].to_pylist() == [b"a", b"b", b"c"]
        assert (fetched.next_offset, fetched.high_watermark, fetched.log_start_offset) == (before + 3, before + 3, 0)
        listed = await requests.list_offsets(ListOffsetsRequest(topic=topic_name, partition=1, timestamp_ms=0))
        assert listed.offsets.high_watermark == before + 3 and listed.offset_for_timestamp == 0

        # a long poll with nothing new answers empty after max_wait_ms (None: fetch.max.wait.ms)
        empty = await requests.fetch(FetchRequest(topic=topic_name, partition=1, offset=before + 3))
        assert empty.records.num_rows == 0 and empty.next_offset == before + 3

        await requests.delete_topic(topic_name)
        with pytest.raises(UnknownTopicError):
            await requests.describe_topic(topic_name)

    run_with_requests(zk_connect, tmp_path / "logs", scenario)


def test_every_rule_of_a_produce_and_a_fetch_is_checked_before_anything_is_done(zk_connect, tmp_path, topic_name):
    async def scenario(requests: RequestHandler) -> None:
        await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=2, replication_factor=1))
        refused = [
            (ProduceRequest(topic=topic_name, records=records([b"x", b"y"]),
                            record_partitions=pa.array([0, 7], pa.int32())), InvalidPartitionInRecordError),
            (ProduceRequest(topic=topic_name, partition=0, layout="batch", records=records([b"x"]),
                            record_partitions=pa.array([1], pa.int32())), InvalidPartitionInRecordError),
            (ProduceRequest(topic=topic_name, partition=0, layout="batch", records=records([])), MalformedBodyError),
            (ProduceRequest(topic=topic_name, partition=5, records=records([b"x"])), UnknownPartitionError),
            (ProduceRequest(topic=topic_name, partition=0, acks="0", records=records([b"x"]),
                            producer=ProducerBatch(1, 0, 0)), InvalidProducerHeadersError),
            (ProduceRequest(topic="no-such-topic", records=records([b"x"])), UnknownTopicError),
        ]
        for request, error in refused:
            with pytest.raises(error):
                await requests.produce(request)
        for p in range(2):
            offsets = await requests.list_offsets(ListOffsetsRequest(topic=topic_name, partition=p))
            assert offsets.offsets.log_end_offset == 0, "a refused request wrote records"
        with pytest.raises(OffsetOutOfRangeError):
            await requests.fetch(FetchRequest(topic=topic_name, partition=0, offset=5, max_wait_ms=0))
        for bounds in ({"offset": -1}, {"max_bytes": 0}, {"max_wait_ms": 60_001}):
            with pytest.raises(FieldOutOfRangeError):
                await requests.fetch(FetchRequest(topic=topic_name, partition=0, **{"offset": 0, **bounds}))

    run_with_requests(zk_connect, tmp_path / "logs", scenario)


def test_group_offsets_commit_fetch_lag_reset_and_delete_through_the_request_layer(zk_connect, tmp_path, topic_name):
    async def scenario(requests: RequestHandler, permissions: RequestPermissions) -> None:
        await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=1, replication_factor=1))
        await requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records([b"v"] * 10)))
        group = f"g-{topic_name}"
        assert await requests.groups.commit_offsets(OffsetCommitRequest(
            group=group, offsets=[PartitionOffset(topic_name, 0, 4, "m")]), permissions=permissions)
        [committed] = await requests.groups.committed_offsets(group, permissions=permissions)
        assert (committed.topic, committed.partition, committed.offset, committed.metadata) == (topic_name, 0, 4, "m")
        assert group in await requests.groups.list_groups(permissions=permissions)
        lag = await requests.groups.group_lag(group, permissions=permissions)
        assert (lag.total_lag, lag.partitions[0].high_watermark) == (6, 10)
        reset = await requests.groups.reset_offsets(ResetOffsetsRequest(group=group, to="earliest"),
                                                    permissions=permissions)
        assert [(o.topic, o.partition, o.offset) for o in reset] == [(topic_name, 0, 0)]
        assert (await requests.groups.group_lag(group, permissions=permissions)).total_lag == 10
        deleted = await requests.groups.delete_offsets(group, topic=topic_name, permissions=permissions)
        assert deleted == [(topic_name, 0)]
        assert await requests.groups.committed_offsets(group, permissions=permissions) == []

    run_with_requests(zk_connect, tmp_path / "logs", scenario, with_permissions=True)


def test_the_broker_and_its_request_layer_load_without_the_http_gateway():
    """A second front door builds a broker and calls its operations without FastAPI in the process."""
    code = ("import sys, lakelog.broker, lakelog.requests; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'starlette') "
            "or m.startswith('lakelog.ingest_api')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
