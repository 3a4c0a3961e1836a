"""A follower replicates a range its leader compacted: offsets kept, gaps included (Kafka's
``appendAsFollower`` of compacted batches), on real Delta tables in temporary directories.

The leader's answer says which offset range it covers (``records.with_fetched_range``: Arrow schema
metadata, carried by the IPC stream as Kafka's batch header carries ``baseOffset`` / ``lastOffset``);
offsets of the range without a row are gaps. A follower with a segment tail (``lake.commit.interval.ms``
> 0) and one without (``= 0``) both take it: reads cross the gaps, the flush to Delta and a reopen
(recovery) give the same offsets and log end offset as the leader's.
"""

from __future__ import annotations

import asyncio
import random

import pyarrow as pa
import pytest

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import NonContiguousOffsetsError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.records import fetched_range, has_gaps, with_fetched_range
from lakelog.protocol.arrow_ipc import arrow_ipc, read_arrow_ipc
from lakelog.replication.follower import ReplicaFetcher
from lakelog.replication.leader_client import ReplicaFetchResult
from tests.harness import compact_range, table_offsets

SYNC_LAKE = TopicConfig.parse({"lake.commit.interval.ms": "0"})
#: a segment tail; the tests flush it themselves
TIERED = TopicConfig.parse({"lake.commit.interval.ms": "3600000"})
FOLLOWER_CONFIGS = {"tiered": TIERED, "untiered": SYNC_LAKE}
NOW_MS = 1_700_000_000_000


def records(start: int, n: int) -> pa.Table:
    """Records ``start..start+n-1`` on five keys in a fixed random order (the latest per key is scattered)."""
    return pa.table({
        "key": pa.array([b"k%d" % random.Random(i).randrange(5) for i in range(start, start + n)]),
        "value": pa.array([b"v%d" % i for i in range(start, start + n)]),
        "timestamp": pa.array([NOW_MS + 1000 * i for i in range(start, start + n)], pa.int64()),
    })


def open_log(path, name: str, config: TopicConfig = SYNC_LAKE, cache: int = 1 << 20) -> PartitionLog:
    return PartitionLog.open(topic="t", partition=0, table_uri=path / name, config=config, tail_cache_max_bytes=cache)


@pytest.fixture
def compacted_leader(tmp_path):
    """A leader of offsets 0..59 (epoch 0 below 30, epoch 2 from 30), six files of ten, whose cleaner kept
    the latest record per key of [10, 39] and only 50 and 52 of [50, 59]: gaps inside the table and at its
    end (tombstones dropped). Returns ``(leader, its offsets)``."""
    leader = open_log(tmp_path, "leader")
    for i in range(6):
        leader.append(records(10 * i, 10), leader_epoch=0 if i < 3 else 2, now_ms=NOW_MS)
    leader.close()
    kept = compact_range(leader.table_uri, 10, 39)
    compact_range(leader.table_uri, 50, 59, keep=[50, 52])
    offsets = list(range(10)) + kept + list(range(40, 50)) + [50, 52]
    assert table_offsets(leader.table_uri) == offsets and len(offsets) < 40
    leader = open_log(tmp_path, "leader")
    assert (leader.log_start_offset, leader.log_end_offset) == (0, 60)
    leader.advance_high_watermark(60)
    return leader, offsets


def answer(leader: PartitionLog, offset: int, max_bytes: int) -> pa.Table | None:
    """The leader's replica fetch answer from ``offset``, through an Arrow IPC stream as on the wire."""
    end = leader.log_end_offset
    rows = with_fetched_range(leader.read(offset, max_bytes=max_bytes, end_offset=end), offset, end)
    if rows.num_rows == 0 and fetched_range(rows) is None:
        return None
    return read_arrow_ipc(arrow_ipc(rows))


def replicate(leader: PartitionLog, follower: PartitionLog, *, max_bytes: int) -> list[tuple[int, int, int]]:
    """Fetch and append until the follower's LEO is the leader's; ``(base, next, rows)`` of each answer."""
    seen = []
    for _ in range(500):
        if follower.log_end_offset == leader.log_end_offset:
            return seen
        got = answer(leader, follower.log_end_offset, max_bytes)
        assert got is not None
        seen.append((*fetched_range(got), got.num_rows))
        follower.append_replicated(got)
        assert follower.log_end_offset == fetched_range(got)[1]  # the follower's LEO: the range's end
    raise AssertionError(f"no end: {seen[-5:]}")


def flush_all(log: PartitionLog) -> None:
    log.advance_high_watermark(log.log_end_offset)
    while log.tiered and log.flush_to_lake():
        pass


@pytest.mark.parametrize("max_bytes", [1, 300, 1 << 30], ids=["one-record", "small", "all"])
@pytest.mark.parametrize("config", FOLLOWER_CONFIGS.values(), ids=FOLLOWER_CONFIGS.keys())
def test_a_follower_replicates_a_compacted_range_reads_flushes_and_recovers_it(tmp_path, compacted_leader, config,
                                                                                 max_bytes):
    leader, offsets = compacted_leader
    follower = open_log(tmp_path, "follower", config)
    seen = replicate(leader, follower, max_bytes=max_bytes)
    assert seen[-1] == (53, 60, 0)  # the trailing gap: an answer without rows moves the LEO to the end
    assert follower.log_end_offset == 60
    # reads cross the gaps, from every offset (inside a gap: the next records), before and after the flush
    for flushed in (False, True):
        for start in range(61):
            got = follower.read(start, end_offset=60, max_bytes=1 << 30)
            assert got["offset"].to_pylist() == [o for o in offsets if o >= start], (flushed, start)
            assert got.equals(leader.read(start, end_offset=60, max_bytes=1 << 30))
        flush_all(follower)
    assert table_offsets(follower.table_uri) == offsets
    assert follower.lake_end_offset == 60
    assert [follower.end_offset_for_epoch(e) for e in (0, 1, 2)] == [leader.end_offset_for_epoch(e) for e in (0, 1, 2)]
    follower.close()
    # recovery: the same offsets, log end offset, log start offset and leader epochs
    again = open_log(tmp_path, "follower", config)
    assert (again.log_start_offset, again.lake_end_offset, again.log_end_offset) == (0, 60, 60)
    assert again._state.epochs.entries == leader._state.epochs.entries
    assert again.read(0, end_offset=60, max_bytes=1 << 30)["offset"].to_pylist() == offsets
    # and replication goes on after it, dense again
    leader.append(records(60, 5), leader_epoch=3, now_ms=NOW_MS)
    replicate(leader, again, max_bytes=max_bytes)
    assert again.read(0, end_offset=65, max_bytes=1 << 30)["offset"].to_pylist() == offsets + list(range(60, 65))
    assert again.end_offset_for_epoch(2) == (2, 60)


@pytest.mark.parametrize("config", FOLLOWER_CONFIGS.values(), ids=FOLLOWER_CONFIGS.keys())
def test_a_range_with_gaps_after_a_dense_tail_and_before_a_crash(tmp_path, compacted_leader, config):
    leader, offsets = compacted_leader
    follower = open_log(tmp_path, "follower", config)
    dense = answer(leader, 0, max_bytes=1 << 30).slice(0, 10)  # offsets 0..9: dense, to the segment tail
    follower.append_replicated(dense.replace_schema_metadata(None))
    assert (follower.lake_end_offset, follower.log_end_offset) == (0 if follower.tiered else 10, 10)
    got = answer(leader, 10, max_bytes=1 << 30)
    assert got["offset"].to_pylist() == offsets[10:] and fetched_range(got) == (10, 53)
    assert has_gaps(got["offset"].to_numpy(), fetched_range(got))
    follower.append_replicated(got)
    # the tail went to the table first (the follower's HW is still 0: everything before a gap is committed
    # on the leader); the range up to its dense last run (offsets 50, 52: the run is [52]) is one Delta commit
    # and that run is in the tail
    assert follower.log_end_offset == 53
    assert follower.high_watermark == 0
    assert table_offsets(follower.table_uri) == (offsets[:-1] if follower.tiered else offsets)
    assert follower.lake_end_offset == (52 if follower.tiered else 53)
    follower.append_replicated(answer(leader, 53, max_bytes=1 << 30))  # no rows: the trailing gap
    assert (follower.lake_end_offset, follower.log_end_offset) == (60, 60)
    # a crash (no close): the table and the tail give the same log
    again = open_log(tmp_path, "follower", config)
    assert (again.lake_end_offset, again.log_end_offset) == (60, 60)
    assert again.read(0, end_offset=60, max_bytes=1 << 30)["offset"].to_pylist() == offsets
    assert again._state.epochs.entries == leader._state.epochs.entries


def test_a_batch_must_say_its_gaps_and_start_at_the_log_end_offset(tmp_path, compacted_leader):
    leader, offsets = compacted_leader
    follower = open_log(tmp_path, "follower", TIERED)
    got = answer(leader, 0, max_bytes=1 << 30)
    with pytest.raises(NonContiguousOffsetsError):  # without its range a gapped batch is refused
        follower.append_replicated(got.replace_schema_metadata(None))
    with pytest.raises(NonContiguousOffsetsError):  # a range that does not start at the log end offset
        follower.append_replicated(answer(leader, 5, max_bytes=1 << 30))
    with pytest.raises(NonContiguousOffsetsError):  # rows outside the range it says it covers
        follower.append_replicated(with_fetched_range(got.slice(0, 12), 0, 60).replace_schema_metadata(
            {b"lakelog.base_offset": b"0", b"lakelog.next_offset": b"11"}))
    with pytest.raises(ValueError):
        follower.append_replicated(got.slice(0, 0).replace_schema_metadata(None))
    assert follower.log_end_offset == 0
    assert table_offsets(follower.table_uri) == []


class LeaderStub:
    """The leader's side of the replica routes, answered from a local log as the gateway would."""

    def __init__(self, leader: PartitionLog) -> None:
        self.leader = leader
        self.answers: list[tuple[int, int, int]] = []

    async def replica_fetch(self, url, topic, partition, *, replica_id, leader_epoch, offset, max_bytes, max_wait_ms,
                            log_start_offset=-1):
        # a request: the event loop runs meanwhile (a long-poll when there is nothing to fetch)
        await asyncio.sleep(0.01 if offset >= self.leader.log_end_offset else 0)
        got = answer(self.leader, offset, max_bytes)
        if got is not None:
            self.answers.append((*fetched_range(got), got.num_rows))
        return ReplicaFetchResult(got, self.leader.high_watermark, self.leader.log_end_offset,
                                  self.leader.log_start_offset)

    async def epoch_end_offset(self, url, topic, partition, *, replica_id, leader_epoch, epoch):
        return self.leader.end_offset_for_epoch(epoch)


@pytest.mark.parametrize("config", FOLLOWER_CONFIGS.values(), ids=FOLLOWER_CONFIGS.keys())
def test_the_replica_fetcher_catches_up_on_a_compacted_leader(tmp_path, compacted_leader, config):
    leader, offsets = compacted_leader
    follower = open_log(tmp_path, "follower", config)
    stub = LeaderStub(leader)

    async def run() -> None:
        async def url(_):
            return "http://leader"
        fetcher = ReplicaFetcher(follower, broker_id=1, leader_id=0, leader_epoch=2, resolve_leader_url=url,
                                 leader_client=stub, fetch_max_bytes=200, fetch_wait_max_ms=0).start()
        try:
            for _ in range(200):
                if follower.log_end_offset == 60 and follower.high_watermark == 60:
                    return
                await asyncio.sleep(0.02)
        finally:
            await fetcher.stop()

    asyncio.run(run())
    assert (follower.log_end_offset, follower.high_watermark) == (60, 60)
    assert (53, 60, 0) in stub.answers
    assert follower.read(0, max_bytes=1 << 30)["offset"].to_pylist() == offsets
