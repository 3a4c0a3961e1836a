"""The leader/follower state of one partition, without ZooKeeper: HW, ISR decisions, acks waits.

A real partition log (a Delta table in a tmp dir) stands under each :class:`Partition`; the clock is
passed in, so the lag decisions are exact.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import FencedLeaderEpochError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.replication.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownPartitionError,
)
from lakelog.replication.metadata import PartitionState
from lakelog.replication.partition import Partition, ReplicaRole

LAG_MS = 10_000


def records(n: int) -> pa.Table:
    return pa.table({"key": pa.array([None] * n, pa.binary()),
                     "value": pa.array([f"v{i}".encode() for i in range(n)], pa.binary())})


def leader_partition(tmp_path, *, isr=(1, 2, 3), min_isr: int = 1, epoch: int = 1, at_ms: float = 0.0) -> Partition:
    """Broker 1 leads a partition replicated on 1, 2, 3 (ISR ``isr``)."""
    config = TopicConfig.parse({"min.insync.replicas": str(min_isr)})
    plog = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=config,
                             initial_high_watermark=0)
    part = Partition("t", 0, "id", 1, plog, replicas=[1, 2, 3])
    part.state = PartitionState(leader=1, leader_epoch=epoch, isr=list(isr))
    part.make_leader(part.state, at_ms=at_ms)
    return part


def append(part: Partition, n: int) -> None:
    part.log.append(records(n), leader_epoch=part.leader_epoch)


def test_high_watermark_is_the_smallest_log_end_offset_of_the_isr(tmp_path):
    part = leader_partition(tmp_path)
    append(part, 10)
    assert not part.maybe_advance_high_watermark()  # followers' LEOs unknown (-1): HW stays
    assert part.log.high_watermark == 0
    part.record_follower_fetch(2, 4, at_ms=1)
    assert part.log.high_watermark == 0  # follower 3 still unknown
    part.record_follower_fetch(3, 7, at_ms=1)
    assert part.log.high_watermark == 4
    part.record_follower_fetch(2, 10, at_ms=2)
    assert part.log.high_watermark == 7
    part.record_follower_fetch(3, 10, at_ms=2)
    assert part.log.high_watermark == 10


def test_high_watermark_never_moves_back(tmp_path):
    part = leader_partition(tmp_path, isr=(1, 2))
    append(part, 5)
    part.record_follower_fetch(2, 5, at_ms=1)
    assert part.log.high_watermark == 5
    part.record_follower_fetch(2, 3, at_ms=2)  # an old fetch arriving late
    assert part.log.high_watermark == 5


def test_a_smaller_isr_lets_the_high_watermark_move(tmp_path):
    part = leader_partition(tmp_path)
    append(part, 6)
    part.record_follower_fetch(2, 6, at_ms=1)
    assert part.log.high_watermark == 0  # follower 3 holds it back
    written = PartitionState(leader=1, leader_epoch=1, isr=[1, 2], version=1)
    part.isr_written(written, added=set(), at_ms=2)
    assert part.isr == [1, 2] and part.log.high_watermark == 6


def test_a_follower_behind_for_the_lag_time_leaves_the_isr(tmp_path):
    part = leader_partition(tmp_path, at_ms=0)
    append(part, 5)
    part.record_follower_fetch(2, 5, at_ms=1_000)  # caught up at 1 s
    part.record_follower_fetch(3, 2, at_ms=1_000)  # behind since it became follower (0 s)
    assert part.lagging_followers(at_ms=LAG_MS, replica_lag_time_max_ms=LAG_MS) == set()
    assert part.lagging_followers(at_ms=LAG_MS + 1, replica_lag_time_max_ms=LAG_MS) == {3}
    assert part.lagging_followers(at_ms=LAG_MS + 1_001, replica_lag_time_max_ms=LAG_MS) == {2, 3}
    assert part.proposed_isr(add=set(), remove={3}) == [1, 2]


def test_a_follower_that_reached_the_leaders_previous_end_counts_as_caught_up(tmp_path):
    # Kafka's updateFollowerFetchState: fetching at the LEO the leader had at the previous fetch means
    # the follower was caught up at that previous fetch, even if the leader appended since.
    part = leader_partition(tmp_path, at_ms=0)
    append(part, 5)
    part.record_follower_fetch(2, 0, at_ms=5_000)  # leader LEO 5 at this fetch
    append(part, 5)  # leader LEO now 10
    part.record_follower_fetch(2, 5, at_ms=9_000)  # reached 5: caught up as of 5 s
    assert part.progress[2].last_caught_up_ms == 5_000
    assert 2 not in part.lagging_followers(at_ms=5_000 + LAG_MS, replica_lag_time_max_ms=LAG_MS)
    assert 2 in part.lagging_followers(at_ms=5_001 + LAG_MS, replica_lag_time_max_ms=LAG_MS)


def test_an_out_of_sync_follower_rejoins_once_it_reaches_the_high_watermark_and_the_epoch_start(tmp_path):
    part = leader_partition(tmp_path, isr=(1, 2))
    append(part, 8)
    part.record_follower_fetch(2, 8, at_ms=1)
    assert part.log.high_watermark == 8
    assert part.record_follower_fetch(3, 5, at_ms=2) is False  # below the HW
    assert part.record_follower_fetch(3, 8, at_ms=3) is True
    assert part.proposed_isr(add={3}, remove=set()) == [1, 2, 3]
    part.isr_written(PartitionState(leader=1, leader_epoch=1, isr=[1, 2, 3], version=1), added={3}, at_ms=4)
    assert part.progress[3].last_caught_up_ms >= 4
    assert part.record_follower_fetch(3, 8, at_ms=5) is False  # already in


def test_a_follower_below_this_epochs_start_does_not_rejoin(tmp_path):
    part = leader_partition(tmp_path, isr=(1, 2))
    append(part, 4)
    part.record_follower_fetch(2, 2, at_ms=1)
    assert part.log.high_watermark == 2
    part.make_leader(PartitionState(leader=1, leader_epoch=2, isr=[1, 2]), at_ms=2)  # epoch 2 starts at 4
    assert part.epoch_start_offset == 4
    assert part.record_follower_fetch(3, 3, at_ms=3) is False  # past the HW, not past the epoch start
    assert part.record_follower_fetch(3, 4, at_ms=4) is True


def test_isr_proposals_keep_replica_order_and_the_leader(tmp_path):
    part = leader_partition(tmp_path, isr=(1, 3))
    assert part.proposed_isr(add={2}, remove=set()) == [1, 2, 3]
    assert part.proposed_isr(add=set(), remove={1}) is None  # the leader stays in: nothing changes
    assert part.proposed_isr(add=set(), remove={3}) == [1]
    assert part.proposed_isr(add=set(), remove=set()) is None  # unchanged
    part.make_follower(PartitionState(leader=2, leader_epoch=2, isr=[2, 3]))
    part.state = PartitionState(leader=2, leader_epoch=2, isr=[2, 3])
    assert part.proposed_isr(add={1}, remove=set()) is None  # not the leader: nothing to write


def test_follower_requests_are_checked_against_the_leader_epoch(tmp_path):
    part = leader_partition(tmp_path, epoch=5)
    part.check_replica_request(2, 5, partitions_count=1)
    with pytest.raises(FencedLeaderEpochError):
        part.check_replica_request(2, 4, partitions_count=1)
    with pytest.raises(UnknownLeaderEpochError):
        part.check_replica_request(2, 6, partitions_count=1)
    with pytest.raises(UnknownPartitionError):
        part.check_replica_request(7, 5, partitions_count=1)
    with pytest.raises(UnknownPartitionError):
        part.check_replica_request(1, 5, partitions_count=1)  # the leader itself is no follower


def test_acks_all_is_refused_before_writing_below_min_insync_replicas(tmp_path):
    part = leader_partition(tmp_path, isr=(1,), min_isr=2)
    with pytest.raises(NotEnoughReplicasError, match="min.insync.replicas=2"):
        part.check_min_insync_replicas("all")
    part.check_min_insync_replicas("1")  # acks=1 does not care
    assert part.log.log_end_offset == 0


def test_acks_all_returns_once_the_high_watermark_passes_the_batch(tmp_path):
    async def scenario():
        part = leader_partition(tmp_path, isr=(1, 2))
        append(part, 3)
        waiter = asyncio.ensure_future(part.wait_for_commit(1, 3, request_timeout_ms=5_000))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        part.record_follower_fetch(2, 3, at_ms=1)
        await asyncio.wait_for(waiter, 2)

    asyncio.run(scenario())


def test_acks_all_times_out_or_reports_a_shrunk_isr(tmp_path):
    async def scenario():
        part = leader_partition(tmp_path, isr=(1, 2), min_isr=2)
        append(part, 3)
        with pytest.raises(RequestTimedOutError, match="request.timeout.ms=100"):
            await part.wait_for_commit(1, 3, request_timeout_ms=100)
        # the follower leaves the ISR: the HW moves, but fewer than min.insync.replicas have the batch
        part.isr_written(PartitionState(leader=1, leader_epoch=1, isr=[1], version=1), added=set(), at_ms=1)
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            await part.wait_for_commit(1, 3, request_timeout_ms=100)

    asyncio.run(scenario())


def test_acks_all_fails_when_leadership_is_lost_while_waiting(tmp_path):
    async def scenario():
        part = leader_partition(tmp_path, isr=(1, 2))
        append(part, 3)
        waiter = asyncio.ensure_future(part.wait_for_commit(1, 3, request_timeout_ms=5_000))
        await asyncio.sleep(0.05)
        part.make_follower(PartitionState(leader=2, leader_epoch=2, isr=[2]))
        part.notify_all()
        with pytest.raises(NotLeaderError, match="may or may not be in the log"):
            await asyncio.wait_for(waiter, 2)
        with pytest.raises(NotLeaderError):
            part.append_epoch()
        assert part.role is ReplicaRole.FOLLOWER

    asyncio.run(scenario())
