"""Merging a partition table's oldest small files keeps every offset, in order, exactly once."""

from __future__ import annotations

import asyncio

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.group_commit import GroupCommitter
from lakelog.log_tables.partition_log import PartitionLog

#: these tests are about the Delta table itself: every append is a Delta commit (no segment tail)
SYNC_LAKE = TopicConfig.parse({"lake.commit.interval.ms": "0"})


def _append(log: PartitionLog, n: int, tag: int) -> None:
    info = log.append(pa.table({"key": pa.array([b"k%d" % tag] * n), "value": pa.array([b"v%d" % i for i in range(n)])}))
    log.advance_high_watermark(info.last_offset + 1)


def _read_all(log: PartitionLog) -> pa.Table:
    parts, offset = [], log.log_start_offset
    while offset < log.high_watermark:
        t = log.read(offset, max_bytes=1 << 30)
        parts.append(t)
        offset = t["offset"][-1].as_py() + 1
    return pa.concat_tables(parts)


def test_merge_head_merges_old_files_and_keeps_every_offset(tmp_path):
    log = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=SYNC_LAKE,
                            tail_cache_max_bytes=0)
    for i in range(40):
        _append(log, 50, i)
    before = _read_all(log)
    assert len(log._state.files.files) + log._state.commits_since_index == 40
    assert log.lifecycle.needs_merge(max_files=30)

    merged = log.lifecycle.merge_head(keep_newest=5)

    assert merged == 35
    dt = DeltaTable(str(tmp_path / "t-0"))
    assert len(dt.file_uris()) == 6  # one merged file + the 5 newest
    after = _read_all(log)
    assert after.equals(before)
    assert np.array_equal(after["offset"].to_numpy(), np.arange(2000))
    # another engine sees the same records once each
    table = dt.to_pyarrow_table(columns=["offset"])
    assert pc.count_distinct(table["offset"]).as_py() == table.num_rows == 2000
    # reopening recovers the offsets; appends continue without a gap
    log.close()
    reopened = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=SYNC_LAKE)
    assert reopened.log_end_offset == 2000
    _append(reopened, 10, 99)
    assert reopened.log_end_offset == 2010


def test_merge_head_leaves_large_files_and_needs_two_small_ones(tmp_path):
    log = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=SYNC_LAKE)
    for i in range(3):
        _append(log, 10, i)
    assert log.lifecycle.merge_head(keep_newest=2) == 0  # only one file older than the newest two
    assert log.lifecycle.merge_head(keep_newest=0, max_file_bytes=1) == 0  # every file counts as large


def test_group_committer_merges_files_when_the_table_grows(tmp_path):
    log = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=SYNC_LAKE)

    async def run() -> None:
        committer = GroupCommitter(log, linger_ms=0, segment_files_max=8,
                                   on_append=lambda info: log.advance_high_watermark(info.last_offset + 1))
        for i in range(30):
            await committer.append(_batch(i))
        await committer.close()

    asyncio.run(run())
    assert len(DeltaTable(str(tmp_path / "t-0")).file_uris()) <= 9
    assert np.array_equal(_read_all(log)["offset"].to_numpy(), np.arange(150))


def _batch(i: int) -> pa.Table:
    from lakelog.log_tables.records import normalize_produce_batch

    return normalize_produce_batch(pa.table({"value": pa.array([b"x%d" % i] * 5)}))
