"""Consumer instances over partition logs with offset gaps (compaction) and a moved log start offset
(retention), against a real in-process broker and ZooKeeper.

The gaps are made as the log cleaner makes them: with the broker stopped, a replaceWhere rewrite of an
offset range keeping the latest record per key (``table_writes.commit_rewrite``, offsets unchanged), or
a Delta ``delete("offset < X")`` at a file boundary; the broker re-opens (recovers) the log on start.
As in Kafka: a position inside a gap reads the next records, positions move to the last offset returned
+ 1, lag is the high watermark minus the committed offset, and a committed offset or position below the
log start offset is reset by ``auto.offset.reset``.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.consumer_groups import offsets_admin
from lakelog.consumer_groups.manager import ConsumerManager
from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.log_tables.schema import table_dir_name
from lakelog.requests import ProduceRequest, RequestContext
from lakelog.security.authentication import ANONYMOUS
from lakelog.runtime.zookeeper_server import free_port
from tests.harness import compact_range, table_offsets

#: records are in the Delta table as soon as they are acknowledged
CONFIGS = {"lake.commit.interval.ms": "0"}

#: an anonymous client's requests (authorizer.enabled is false here)
CLIENT = RequestContext(principal=ANONYMOUS)


def records(start: int, n: int) -> pa.Table:
    """Records start..start+n-1: a few keys in a fixed random order, value b"v{i}"."""
    return pa.Table.from_pydict({
        "key": [b"k%d" % random.Random(i).randrange(5) for i in range(start, start + n)],
        "value": [b"v%d" % i for i in range(start, start + n)],
        "headers": [None] * n, "timestamp": [None] * n}, schema=PRODUCE_SCHEMA)






class Cluster:
    """One in-process broker (re-startable on the same log dirs) and its consumer manager."""

    def __init__(self, zk_connect: str, log_dirs: Path) -> None:
        self.zk_connect, self.log_dirs = zk_connect, log_dirs
        self.broker: Broker | None = None
        self.manager: ConsumerManager | None = None

    async def start(self) -> None:
        self.broker = Broker(BrokerSettings(broker_id=0, port=free_port(), log_dirs=self.log_dirs,
                                            zookeeper_connect=self.zk_connect))
        await self.broker.start()
        self.manager = ConsumerManager(self.broker, instance_timeout_ms=60_000)
        await self.manager.start()

    async def stop(self) -> None:
        await self.manager.stop()
        await self.broker.stop()

    async def restart(self, change_tables) -> None:
        """Stop, ``change_tables()`` (the broker is not writing), start: the logs are recovered."""
        await self.stop()
        change_tables()
        await self.start()

    def table(self, topic: str) -> str:
        return str(self.log_dirs / table_dir_name(topic, 0))

    async def consumer(self, topic: str, *, group: str | None = None, reset: str = "earliest"):
        inst = await self.manager.create(group or "g-" + uuid.uuid4().hex[:8], name="c" + uuid.uuid4().hex[:6],
                                         auto_offset_reset=reset, auto_commit=False)
        await self.manager.assign(inst, [(topic, 0)])
        return inst

    async def drain(self, inst, *, max_bytes: int = 64 << 20, polls: int = 200) -> list[int]:
        """Offsets read until a poll returns nothing."""
        got: list[int] = []
        for _ in range(polls):
            result = await self.manager.records(inst, timeout_ms=100, max_bytes=max_bytes)
            if not result.record_count:
                return got
            for part in result.partitions:
                got.extend(part.records["offset"].to_pylist())
        raise AssertionError(f"still reading after {polls} polls: {got[-5:]}")


def run(zk_connect: str, log_dirs: Path, scenario) -> None:
    async def main() -> None:
        cluster = Cluster(zk_connect, log_dirs)
        await cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.stop()
    asyncio.run(main())


def test_a_consumer_reads_across_compaction_gaps_and_commits_past_them(zk_connect, tmp_path, topic_name):
    async def scenario(c: Cluster) -> None:
        t = topic_name
        await c.broker.create_topic(t, partitions=1, configs=CONFIGS)
        for start in range(0, 60, 10):
            await c.broker.requests.produce(ProduceRequest(topic=t, partition=0, records=records(start, 10)),
                                            context=CLIENT)
        kept: list[int] = []
        await c.restart(lambda: kept.extend(compact_range(c.table(t), 10, 39)))
        remaining = list(range(10)) + kept + list(range(40, 60))
        assert table_offsets(c.table(t)) == remaining and len(kept) < 10

        inst = await c.consumer(t, group=f"g-{uuid.uuid4().hex[:8]}")
        got = await c.drain(inst)
        assert got == remaining
        assert inst.positions[(t, 0)] == 60
        # small polls (a few records each) cross the gaps too
        await c.manager.seek(inst, {(t, 0): 0})
        assert await c.drain(inst, max_bytes=20) == remaining
        # a position inside a gap reads the next record after it
        for position in (10, 11, kept[0], kept[0] + 1):
            await c.manager.seek(inst, {(t, 0): position})
            result = await c.manager.records(inst, timeout_ms=1000, max_bytes=1)
            first = next(o for o in remaining if o >= position)
            assert result.partitions[0].records["offset"][0].as_py() == first
            assert inst.positions[(t, 0)] == result.partitions[0].records["offset"][-1].as_py() + 1
        # committed offsets and lag: the next offset to read, the HW minus it
        await c.manager.seek(inst, {(t, 0): 12})
        await c.manager.commit(inst, None)
        lag = await offsets_admin.group_lag(c.broker, inst.group)
        assert [(p.committed_offset, p.high_watermark, p.lag) for p in lag.partitions] == [(12, 60, 48)]
        # a new member of the group starts at the committed offset inside the gap: the next records
        other = await c.consumer(t, group=inst.group)
        assert inst.positions[(t, 0)] == 12 and other.positions[(t, 0)] == 12
        assert await c.drain(other) == [o for o in remaining if o >= 12]
        await c.manager.commit(other, None)
        lag = await offsets_admin.group_lag(c.broker, inst.group)
        assert [(p.committed_offset, p.lag) for p in lag.partitions] == [(60, 0)]

    run(zk_connect, tmp_path / "logs", scenario)


def test_a_gap_up_to_the_high_watermark_moves_the_position_to_it(zk_connect, tmp_path, topic_name):
    async def scenario(c: Cluster) -> None:
        t = topic_name
        await c.broker.create_topic(t, partitions=1, configs=CONFIGS)
        await c.broker.requests.produce(ProduceRequest(topic=t, partition=0, records=records(0, 10)), context=CLIENT)
        await c.broker.requests.produce(ProduceRequest(topic=t, partition=0, records=records(10, 10)), context=CLIENT)
        # the newest records are gone (e.g. tombstones the cleaner removed): offsets 14..19 are a gap
        await c.restart(lambda: compact_range(c.table(t), 10, 19, keep=[11, 13]))
        assert (await c.broker.partition_offsets(t, 0))[2] == 20

        inst = await c.consumer(t)
        fetches = 0
        real_fetch = c.broker.fetch

        async def counting_fetch(*args, **kwargs):
            nonlocal fetches
            fetches += 1
            return await real_fetch(*args, **kwargs)

        c.broker.fetch = counting_fetch
        try:
            result = await c.manager.records(inst, timeout_ms=100)
            assert [o for p in result.partitions for o in p.records["offset"].to_pylist()] == list(range(10)) + [11, 13]
            # the rest of the log up to the HW holds no record: the position moves past the gap
            fetches = 0
            empty = await c.manager.records(inst, timeout_ms=500)
            assert empty.record_count == 0 and inst.positions[(t, 0)] == 20
            assert fetches <= 3, fetches  # the poll waited for records, it did not spin on the gap
        finally:
            c.broker.fetch = real_fetch
        await c.manager.commit(inst, None)
        lag = await offsets_admin.group_lag(c.broker, inst.group)
        assert [(p.committed_offset, p.lag) for p in lag.partitions] == [(20, 0)]
        # a waiting poll wakes up for the next record
        waiting = asyncio.ensure_future(c.manager.records(inst, timeout_ms=30_000))
        await asyncio.sleep(0.2)
        await c.broker.requests.produce(ProduceRequest(topic=t, partition=0, records=records(20, 2)), context=CLIENT)
        assert [o for p in (await waiting).partitions for o in p.records["offset"].to_pylist()] == [20, 21]

    run(zk_connect, tmp_path / "logs", scenario)


def test_offsets_below_the_log_start_offset_are_reset_by_auto_offset_reset(zk_connect, tmp_path, topic_name):
    async def scenario(c: Cluster) -> None:
        t = topic_name
        group = f"g-{uuid.uuid4().hex[:8]}"
        await c.broker.create_topic(t, partitions=1, configs=CONFIGS)
        for start in range(0, 50, 10):
            await c.broker.requests.produce(ProduceRequest(topic=t, partition=0, records=records(start, 10)),
                                            context=CLIENT)
        await offsets_admin.commit_offsets(c.broker, group, [PartitionOffset(t, 0, 15)])
        kept: list[int] = []

        def retention_and_compaction() -> None:
            kept.extend(compact_range(c.table(t), 30, 39))
            DeltaTable(c.table(t)).delete("offset < 20")  # retention at a file boundary

        await c.restart(retention_and_compaction)
        remaining = list(range(20, 30)) + kept + list(range(40, 50))
        assert (await c.broker.partition_offsets(t, 0)) == (20, 50, 50)
        # lag counts from the committed offset (as kafka-consumer-groups does)
        lag = await offsets_admin.group_lag(c.broker, group)
        assert [(p.committed_offset, p.lag) for p in lag.partitions] == [(15, 35)]

        # the committed offset is below the log start offset: auto.offset.reset decides
        earliest = await c.consumer(t, group=group, reset="earliest")
        assert earliest.positions[(t, 0)] == 20
        assert await c.drain(earliest) == remaining
        await c.manager.delete(group, earliest.name)
        latest = await c.consumer(t, group=group, reset="latest")
        assert latest.positions[(t, 0)] == 50
        # a position that falls below the log start offset while reading is reset the same way
        await c.manager.seek(latest, {(t, 0): 5})
        assert (await c.manager.records(latest, timeout_ms=100)).record_count == 0
        assert latest.positions[(t, 0)] == 50
        await c.manager.delete(group, latest.name)
        again = await c.consumer(t, group=group, reset="earliest")
        await c.manager.seek(again, {(t, 0): 5})
        assert await c.drain(again) == remaining

    run(zk_connect, tmp_path / "logs", scenario)
