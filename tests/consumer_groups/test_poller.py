"""The records path of consumer instances (lakelog.consumer_groups.poller) against real brokers and
ZooKeeper: Arrow results per partition, positions, out-of-range resets, reads of partitions led by
another broker through the leader client, and a leader that does not answer."""

from __future__ import annotations

import asyncio
import uuid

import pyarrow as pa

from lakelog.broker import Broker
from lakelog.client import LakelogClient
from lakelog.config import BrokerSettings
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.consumer_groups.poller import PollResult, record_bytes
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.log_tables.schema import FETCH_COLUMNS
from lakelog.requests import ProduceRequest, RequestContext
from lakelog.security.authentication import ANONYMOUS
from lakelog.runtime.zookeeper_server import free_port

#: an anonymous client's requests (authorizer.enabled is false here)
CLIENT = RequestContext(principal=ANONYMOUS)


def records(n: int, prefix: str) -> pa.Table:
    return pa.Table.from_pydict({"key": [None] * n, "value": [f"{prefix}-{i}".encode() for i in range(n)],
                                 "headers": [None] * n, "timestamp": [None] * n}, schema=PRODUCE_SCHEMA)


def by_partition(result: PollResult) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for part in result.partitions:
        assert part.records.column_names == FETCH_COLUMNS
        out.setdefault(part.partition, []).extend(part.records["offset"].to_pylist())
    return out


async def drain(manager: ConsumerManager, inst, expected: int) -> dict[int, list[int]]:
    """Poll until ``expected`` records arrived (at most 50 polls)."""
    got: dict[int, list[int]] = {}
    for _ in range(50):
        for p, offsets in by_partition(await manager.records(inst, timeout_ms=200)).items():
            got.setdefault(p, []).extend(offsets)
        if sum(len(v) for v in got.values()) >= expected:
            break
    return got


def start_broker(broker_id: int, zk_connect: str, log_dirs) -> Broker:
    return Broker(BrokerSettings(broker_id=broker_id, port=free_port(), log_dirs=log_dirs,
                                 zookeeper_connect=zk_connect))


def test_record_bytes_counts_keys_and_values():
    table = pa.table({"key": pa.array([b"ab", None], pa.binary()), "value": pa.array([b"xyz", None], pa.binary())})
    assert record_bytes(table) == 5
    assert record_bytes(table.slice(1)) == 0


def test_local_reads_positions_and_out_of_range_reset(zk_connect, tmp_path, topic_name):
    async def main() -> None:
        broker = start_broker(0, zk_connect, tmp_path / "logs")
        await broker.start()
        manager = ConsumerManager(broker, instance_timeout_ms=60_000)
        await manager.start()
        try:
            await broker.create_topic(topic_name, partitions=2)
            await broker.requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records(3, "a")),
                                          context=CLIENT)
            await broker.requests.produce(ProduceRequest(topic=topic_name, partition=1, records=records(2, "b")),
                                          context=CLIENT)
            inst = await manager.create("g-" + uuid.uuid4().hex[:8], name="c", auto_offset_reset="earliest",
                                        auto_commit=False)
            await manager.assign(inst, [(topic_name, 0), (topic_name, 1)])

            result = await manager.records(inst, timeout_ms=5000)
            assert result.generation is None  # manual assignment: no group generation
            assert by_partition(result) == {0: [0, 1, 2], 1: [0, 1]} and result.record_count == 5
            assert inst.positions == {(topic_name, 0): 3, (topic_name, 1): 2}
            values = [v for p in result.partitions for v in p.records["value"].to_pylist()]
            assert sorted(values) == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1"]

            empty = await manager.records(inst, timeout_ms=100)
            assert empty.partitions == [] and empty.record_count == 0

            # a position past the high watermark is reset by auto.offset.reset (earliest)
            await manager.seek(inst, {(topic_name, 0): 100})
            await manager.records(inst, timeout_ms=0)
            assert inst.positions[(topic_name, 0)] == 0
            assert (await drain(manager, inst, 3)) == {0: [0, 1, 2]}

            # a records request waiting for data wakes up when it arrives
            waiting = asyncio.ensure_future(manager.records(inst, timeout_ms=30_000))
            await asyncio.sleep(0.2)
            await broker.requests.produce(ProduceRequest(topic=topic_name, partition=1, records=records(1, "late")),
                                          context=CLIENT)
            assert by_partition(await waiting) == {1: [2]}
        finally:
            await manager.stop()
            await broker.stop()
    asyncio.run(main())


def test_reads_partitions_led_by_another_broker(broker_factory, zk_connect, tmp_path, topic_name):
    remote_broker = broker_factory(0)  # a broker process: its gateway answers the leader client

    async def main() -> None:
        broker = start_broker(1, zk_connect, tmp_path / "logs-1")
        await broker.start()
        manager = ConsumerManager(broker, instance_timeout_ms=60_000)
        await manager.start()
        try:
            meta = await broker.create_topic(topic_name, partitions=4, replication_factor=1)
            leaders = {p: replicas[0] for p, replicas in meta.replicas.items()}
            local = sorted(p for p, b in leaders.items() if b == 1)
            remote = sorted(p for p, b in leaders.items() if b == 0)
            assert local and remote, leaders
            with LakelogClient(remote_broker.url) as client:
                for p in remote:
                    await asyncio.to_thread(client.produce_binary, topic_name, [(None, b"r")] * 3, partition=p)
            for p in local:
                await broker.requests.produce(ProduceRequest(topic=topic_name, partition=p, records=records(2, "l")),
                                              context=CLIENT)
            inst = await manager.create("g-" + uuid.uuid4().hex[:8], name="c", auto_offset_reset="earliest",
                                        auto_commit=False)
            await manager.assign(inst, [(topic_name, p) for p in range(4)])
            got = await drain(manager, inst, 3 * len(remote) + 2 * len(local))
            assert got == {**{p: [0, 1, 2] for p in remote}, **{p: [0, 1] for p in local}}

            # the leader's OffsetOutOfRangeError comes back as that class: auto.offset.reset applies
            r = remote[0]
            await manager.seek(inst, {(topic_name, r): 1000})
            await manager.records(inst, timeout_ms=0)
            assert inst.positions[(topic_name, r)] == 0
            assert (await drain(manager, inst, 3)) == {r: [0, 1, 2]}

            # a leader that does not answer (crashed; its ZooKeeper session still lives): the poll
            # skips its partitions and answers the others
            await asyncio.to_thread(remote_broker.kill)
            await manager.seek(inst, {(topic_name, r): 0})
            await broker.requests.produce(ProduceRequest(topic=topic_name, partition=local[0],
                                                         records=records(1, "after")), context=CLIENT)
            result = await manager.records(inst, timeout_ms=0)
            assert by_partition(result) == {local[0]: [2]}
            assert inst.positions[(topic_name, r)] == 0
        finally:
            await manager.stop()
            await broker.stop()
    asyncio.run(main())
