"""PartitionLog's replication operations: offset-preserving appends, truncation, leader epochs (KIP-101)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import FencedLeaderEpochError, NonContiguousOffsetsError
from lakelog.log_tables.partition_log import PartitionLog

#: these tests are about the Delta table itself: every append is a Delta commit (no segment tail)
SYNC_LAKE = TopicConfig.parse({"lake.commit.interval.ms": "0"})


def open_log(path, name="r", **kw) -> PartitionLog:
    return PartitionLog.open(topic="t", partition=0, table_uri=path / name, config=SYNC_LAKE, **kw)


def records(start: int, n: int) -> pa.Table:
    return pa.table({"key": pa.array([f"k{i}".encode() for i in range(start, start + n)], pa.binary()),
                     "value": pa.array([f"v{i}".encode() for i in range(start, start + n)], pa.binary())})


def test_follower_appends_the_leaders_rows_with_their_offsets_and_epochs(tmp_path):
    leader, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    leader.append(records(0, 5), leader_epoch=0)
    leader.append(records(5, 5), leader_epoch=3)
    rows = leader.read(0, end_offset=leader.log_end_offset)
    info = follower.append_replicated(rows.slice(0, 7))
    assert (info.base_offset, info.last_offset) == (0, 6)
    follower.append_replicated(rows.slice(7))
    assert follower.log_end_offset == 10
    assert follower.high_watermark == 0  # a follower learns the high watermark from its leader
    got = follower.read(0, end_offset=10)
    assert got.equals(rows)
    assert follower.end_offset_for_epoch(0) == (0, 5)
    assert follower.end_offset_for_epoch(2) == (0, 5)
    assert follower.end_offset_for_epoch(3) == (3, 10)
    # reopened: the epoch cache comes back from the table (one file spans two epochs)
    follower.close()
    again = open_log(tmp_path, "follower")
    assert again._state.epochs.entries == [(0, 0), (3, 5)]
    assert again.latest_epoch == 3


def test_replicated_batch_must_continue_the_log(tmp_path):
    leader, follower = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    leader.append(records(0, 10), leader_epoch=1)
    rows = leader.read(0, end_offset=10)
    with pytest.raises(NonContiguousOffsetsError):
        follower.append_replicated(rows.slice(2))
    assert follower.log_end_offset == 0


def test_truncate_removes_the_tail_durably_and_offsets_continue(tmp_path):
    log = open_log(tmp_path)
    log.append(records(0, 10), leader_epoch=0)
    log.append(records(10, 10), leader_epoch=1)
    log.advance_high_watermark(15)
    assert log.truncate_to(12)
    assert (log.log_end_offset, log.high_watermark) == (12, 12)
    assert log.read(0)["offset"].to_pylist() == list(range(12))
    assert not log.truncate_to(20)
    assert log.end_offset_for_epoch(1) == (1, 12)
    log.close()
    again = open_log(tmp_path)
    assert again.log_end_offset == 12
    assert sorted(DeltaTable(str(tmp_path / "r")).to_pyarrow_dataset().to_table()["offset"].to_pylist()) == list(range(12))
    info = again.append(records(0, 3), leader_epoch=2)
    assert info.base_offset == 12
    # truncating into the first epoch drops the second from the cache
    again.truncate_to(4)
    assert again._state.epochs.entries == [(0, 0)]
    assert again.read(0)["value"].to_pylist() == [f"v{i}".encode() for i in range(4)]


def test_a_deposed_leader_can_not_append(tmp_path):
    log = open_log(tmp_path)
    log.append(records(0, 2), leader_epoch=4)
    with pytest.raises(FencedLeaderEpochError):
        log.append(records(0, 2), leader_epoch=3)
    log.fence(6)
    with pytest.raises(FencedLeaderEpochError):
        log.append(records(0, 2), leader_epoch=5)
    assert log.append(records(0, 2), leader_epoch=6).base_offset == 2


def test_a_replicated_log_opens_with_the_high_watermark_given(tmp_path):
    log = open_log(tmp_path)
    log.append(records(0, 10))
    log.close()
    again = open_log(tmp_path, initial_high_watermark=0)
    assert (again.log_end_offset, again.high_watermark) == (10, 0)
    assert again.read(0).num_rows == 0
    assert again.read(0, end_offset=10).num_rows == 10
