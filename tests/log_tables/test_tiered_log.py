"""The two-tier partition log: appends to the segment tail, the flush below the high watermark to Delta,
recovery of both tiers, truncation across segments, reads from every tier."""

from __future__ import annotations

import asyncio
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.fetch import read_log
from lakelog.log_tables.flusher import LakeFlusher
from lakelog.log_tables.partition_log import LAKE_END_OFFSET_KEY, PartitionLog
from lakelog.log_tables.reader import read_offset_range
from lakelog.log_tables.segments import SEGMENT_DIR


def open_log(path, *, cache: int = 32 << 20, replicated: bool = False, **configs) -> PartitionLog:
    config = TopicConfig.parse({k.replace("_", "."): str(v) for k, v in configs.items()})
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=config, tail_cache_max_bytes=cache,
                             initial_high_watermark=0 if replicated else None)


def append(log: PartitionLog, records: pa.Table, **kw):
    """Append and move the high watermark, as the replica manager does for a single-replica log."""
    info = log.append(records, **kw)
    log.advance_high_watermark(log.log_end_offset)
    return info


def values(n: int, start: int = 0) -> pa.Table:
    return pa.table({"value": [b"v%d" % i for i in range(start, start + n)]})


def read_all(log: PartitionLog, start: int = 0) -> list[int]:
    out, offset = [], start
    while offset < log.high_watermark:
        rows = log.read(offset, max_bytes=1 << 20)
        out += rows["offset"].to_pylist()
        offset = out[-1] + 1
    return out


def delta_offsets(log: PartitionLog) -> list[int]:
    return sorted(DeltaTable(log.table_uri).to_pyarrow_table(columns=["offset"])["offset"].to_pylist())


def test_appends_go_to_the_tail_and_the_flush_commits_them_in_one_file(tmp_path):
    log = open_log(tmp_path)
    version = log.version
    for i in range(20):
        info = append(log, values(5, 5 * i))
        assert info.version is None and info.base_offset == 5 * i
    assert log.version == version and log.lake_end_offset == 0 and log.log_end_offset == 100
    assert log.unflushed_bytes > 0 and read_all(log) == list(range(100))
    assert log.flush_to_lake() == 100
    assert log.lake_end_offset == 100 and log.version == version + 1 and log.unflushed_bytes == 0
    table = DeltaTable(log.table_uri)
    assert len(table.file_uris()) == 1 and delta_offsets(log) == list(range(100))
    assert table.history(1)[0][LAKE_END_OFFSET_KEY] == "100"
    assert log.flush_to_lake() == 0


def test_only_records_below_the_high_watermark_are_flushed(tmp_path):
    log = open_log(tmp_path, replicated=True)
    log.append(values(10))
    assert log.high_watermark == 0 and log.flush_to_lake() == 0
    log.advance_high_watermark(4)
    assert log.flush_to_lake() == 4 and log.lake_end_offset == 4 and delta_offsets(log) == [0, 1, 2, 3]
    log.advance_high_watermark(10)
    assert log.flush_to_lake(max_bytes=1) == 1  # at least one record per commit, at most about max_bytes
    assert log.flush_to_lake() == 5 and delta_offsets(log) == list(range(10))


@pytest.mark.parametrize("cache", [0, 32 << 20], ids=["segments", "cache"])
def test_reads_span_delta_segments_and_cache(tmp_path, cache):
    log = open_log(tmp_path, cache=cache, segment_bytes=400)
    for i in range(30):
        append(log, values(3, 3 * i))
        if i in (9, 19):
            log.flush_to_lake()
    assert log.lake_end_offset == 60 and log.log_end_offset == 90
    assert read_all(log) == list(range(90))
    for start in (0, 59, 60, 61, 89):
        rows = log.read(start, max_bytes=1)  # at least one record, from whichever tier holds it
        assert rows["offset"].to_pylist() == [start]
    assert log.read(55, max_bytes=1 << 20, end_offset=65)["offset"].to_pylist() == list(range(55, 65))


def test_a_flush_deletes_its_segments_at_once_and_a_reader_of_the_older_view_reads_again_from_delta(tmp_path):
    """The flush deletes the segments it committed as soon as the new lake end offset is published; a read
    that took its view before (and finds a file gone) starts again on a fresh view, from Delta."""
    log = open_log(tmp_path, cache=0, segment_bytes=200)
    for i in range(10):
        append(log, values(3, 3 * i))
    segment_dir = tmp_path / "t-0" / SEGMENT_DIR
    assert len(list(segment_dir.iterdir())) > 2
    views = [log._state.view()]  # taken before the flush: lake end offset 0, every record in segments
    assert log.flush_to_lake() == 30
    # every segment but the last (no later one shows yet where it ends) was wholly below: deleted
    assert [p.name for p in segment_dir.iterdir()] == ["00000000000000000027.log"]

    taken = []

    def take_view():
        taken.append(1)
        return views.pop() if views else log._state.view()

    rows = read_log(take_view, 0, max_bytes=1 << 20, end_offset=None, columns=None,
                    reload_index=log._writer.load_index, topic="t", partition=0)
    assert rows["offset"].to_pylist() == list(range(30))
    assert len(taken) == 2  # the older view missed a segment file: one more read, on a fresh view
    append(log, values(3, 30))  # the active segment rolled at the flush: a new file
    assert log.flush_to_lake() == 3
    assert [p.name for p in segment_dir.iterdir()] == ["00000000000000000030.log"]
    assert read_all(log) == list(range(33))


def test_recovery_finds_the_lake_end_offset_the_tail_and_the_epochs(tmp_path):
    log = open_log(tmp_path, cache=0)
    append(log, values(10), leader_epoch=1)
    log.flush_to_lake()
    append(log, values(5), leader_epoch=2)
    append(log, values(5), leader_epoch=4)
    # no close: as after kill -9
    again = open_log(tmp_path, cache=0)
    assert (again.log_start_offset, again.lake_end_offset, again.log_end_offset) == (0, 10, 20)
    assert again.end_offset_for_epoch(1) == (1, 10) and again.end_offset_for_epoch(3) == (2, 15)
    assert again.latest_epoch == 4
    assert read_all(again) == list(range(20))
    assert again.read(12, max_bytes=1 << 20)["value"].to_pylist()[0] == b"v2"


def test_a_torn_write_at_the_end_of_the_tail_is_dropped_on_open(tmp_path):
    log = open_log(tmp_path)
    append(log, values(3))
    append(log, values(4))
    segment = next((tmp_path / "t-0" / SEGMENT_DIR).iterdir())
    with open(segment, "ab") as f:
        f.write(b"LKL1\x00\x10")  # a crash in the middle of the next frame's header
    again = open_log(tmp_path)
    assert again.log_end_offset == 7 and read_all(again) == list(range(7))
    assert append(again, values(1)).base_offset == 7  # no gap, no duplicate
    assert read_all(open_log(tmp_path)) == list(range(8))


def test_truncation_across_segments_and_below_the_lake_end(tmp_path):
    log = open_log(tmp_path, segment_bytes=300, replicated=True)
    for i in range(10):
        log.append(values(2, 2 * i), leader_epoch=0)
    log.advance_high_watermark(6)
    log.flush_to_lake()
    assert log.lake_end_offset == 6
    assert log.truncate_to(13)  # inside a frame, across segments
    assert log.log_end_offset == 13 and log.read(0, max_bytes=1 << 20, end_offset=13)["offset"].to_pylist() == list(range(13))
    again = open_log(tmp_path, replicated=True)
    assert again.log_end_offset == 13 and again.lake_end_offset == 6
    assert again.append(values(1)).base_offset == 13
    # an unclean truncation cuts the Delta table too
    assert again.truncate_to(4)
    assert again.lake_end_offset == 4 and again.log_end_offset == 4 and delta_offsets(again) == [0, 1, 2, 3]
    assert open_log(tmp_path).log_end_offset == 4


def test_a_crash_right_after_an_unclean_truncations_commit_brings_nothing_back(tmp_path, monkeypatch):
    """The truncation's Delta commit is the last step: a crash right after it (here: the commit call
    raises once it is done) leaves no tail frame above the point for the restart to read back."""
    from lakelog.log_tables import log_writer

    log = open_log(tmp_path, replicated=True)
    log.append(values(5), leader_epoch=0)
    log.append(values(5, 5), leader_epoch=0)
    log.advance_high_watermark(7)
    log.flush_to_lake()                                  # the frame of 5..9 is half in the table
    log.advance_high_watermark(10)
    assert (log.lake_end_offset, log.log_end_offset) == (7, 10)
    truncate = log_writer.commit_truncation

    def then_crash(table, offset):
        truncate(table, offset)
        raise KeyboardInterrupt("the broker dies right after the commit")
    monkeypatch.setattr(log_writer, "commit_truncation", then_crash)
    with pytest.raises(KeyboardInterrupt):
        log.truncate_to(3)
    again = open_log(tmp_path, replicated=True)
    assert (again.lake_end_offset, again.log_end_offset) == (3, 3)
    assert delta_offsets(again) == [0, 1, 2]


def test_a_failed_unclean_truncation_leaves_the_high_watermark_at_most_the_log_end(tmp_path, monkeypatch):
    from lakelog.log_tables import log_writer
    from lakelog.log_tables.errors import CommitFailedError

    log = open_log(tmp_path, replicated=True)
    log.append(values(10), leader_epoch=0)
    log.advance_high_watermark(6)
    log.flush_to_lake()
    log.advance_high_watermark(10)

    def fails(table, offset):
        raise OSError("the object store is unreachable")
    monkeypatch.setattr(log_writer, "commit_truncation", fails)
    with pytest.raises(CommitFailedError):
        log.truncate_to(3)
    # the tail went first (all of it above the point); the table was not cut: the log ends at its end
    assert (log.lake_end_offset, log.log_end_offset, log.high_watermark) == (6, 6, 6)


def test_offset_for_timestamp_looks_in_the_tail_too(tmp_path):
    log = open_log(tmp_path)
    for i, ts in enumerate((1_000, 2_000, 3_000, 4_000)):
        append(log, pa.table({"value": [b"x"], "timestamp": pa.array([ts], pa.int64())}))
        if i == 1:
            log.flush_to_lake()
    assert log.lake_end_offset == 2
    assert [log.offset_for_timestamp(t) for t in (500, 2_000, 2_500, 4_000, 9_000)] == [0, 1, 2, 3, 4]


def test_delta_rs_readers_see_the_flushed_table_up_to_the_lake_end_offset(tmp_path):
    log = open_log(tmp_path)
    append(log, values(50))
    log.flush_to_lake()
    append(log, values(20))
    rows = pa.Table.from_batches(list(read_offset_range(log.table_uri, 0, log.lake_end_offset)))
    assert rows["offset"].to_pylist() == list(range(50))
    assert rows["value"].to_pylist() == [b"v%d" % i for i in range(50)]


def test_switching_lake_commit_interval_to_zero_commits_the_tail(tmp_path):
    log = open_log(tmp_path)
    append(log, values(7))
    sync = open_log(tmp_path, lake_commit_interval_ms=0)
    assert not sync.tiered and sync.lake_end_offset == sync.log_end_offset == 7
    assert delta_offsets(sync) == list(range(7)) and not list((tmp_path / "t-0" / SEGMENT_DIR).iterdir())
    assert append(sync, values(1)).version is not None and delta_offsets(sync) == list(range(8))


def test_tail_segments_roll_at_the_flush_commit_size_so_each_commit_deletes_what_it_covered(tmp_path):
    """With ``lake.commit.bytes`` below ``segment.bytes`` the tail's segments roll at the commit size: a
    flush round of several commits deletes segments commit by commit, not all after its last commit."""
    frame_bytes = len(values(10, 0).to_batches()[0].serialize()) + 64
    log = open_log(tmp_path, lake_commit_bytes=3 * frame_bytes)
    for i in range(12):
        append(log, values(10, 10 * i))
    segment_dir = tmp_path / "t-0" / SEGMENT_DIR
    before = len(list(segment_dir.iterdir()))
    assert before >= 4  # segment.bytes is 1 GiB: without the commit size, one file
    remaining = []
    while log.flush_to_lake(max_bytes=3 * frame_bytes):
        remaining.append(len(list(segment_dir.iterdir())))
    assert len(remaining) >= 3 and remaining == sorted(remaining, reverse=True) and remaining[0] < before
    assert log.lake_end_offset == 120 and delta_offsets(log) == list(range(120)) and read_all(log) == list(range(120))


def test_the_flusher_commits_within_the_interval_and_on_close(tmp_path):
    async def main():
        log = open_log(tmp_path, lake_commit_interval_ms=100)
        flusher = LakeFlusher(log)
        append(log, values(5))
        started = time.monotonic()
        while log.lake_end_offset < 5:
            await asyncio.sleep(0.01)
        waited = time.monotonic() - started
        append(log, values(3))
        await flusher.close()
        return log, waited

    log, waited = asyncio.run(main())
    assert waited < 2.0, waited
    assert log.lake_end_offset == 8 and delta_offsets(log) == list(range(8))


def test_the_flusher_starts_early_once_lake_commit_bytes_wait(tmp_path):
    async def main():
        log = open_log(tmp_path, lake_commit_interval_ms=60_000, lake_commit_bytes=1000)
        flusher = LakeFlusher(log)
        log.append(pa.table({"value": [b"x" * 2000]}))
        log.advance_high_watermark(1)  # listeners run on high watermark moves
        for _ in range(500):
            if log.lake_end_offset == 1:
                break
            await asyncio.sleep(0.01)
        await flusher.close(flush=False)
        return log

    assert asyncio.run(main()).lake_end_offset == 1


def test_flush_messages_makes_appends_fsync_and_leave_the_event_loop(tmp_path, monkeypatch):
    import os

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    log = open_log(tmp_path, flush_messages=2)
    assert log.fsyncs and not log.append_is_quick(10)
    append(log, values(1))
    assert synced == []
    append(log, values(1))  # the second record since the last fsync
    assert len(synced) == 1
    default = open_log(tmp_path / "d")
    assert not default.fsyncs and default.append_is_quick(10) and not default.append_is_quick(1 << 20)


def test_a_topic_config_change_applies_to_the_open_log(tmp_path):
    log = open_log(tmp_path, segment_bytes=1 << 20)
    append(log, values(10))
    assert log.tiered and log.lake_end_offset == 0
    # lake.commit.interval.ms=0: the tail goes to Delta at once and appends are Delta commits from now on
    log.update_config(TopicConfig.parse({"lake.commit.interval.ms": "0"}))
    assert not log.tiered and log.lake_end_offset == 10 and delta_offsets(log) == list(range(10))
    assert append(log, values(5, 10)).version is not None and delta_offsets(log) == list(range(15))
    # back to a tail: appends go to segments from the log end offset on
    log.update_config(TopicConfig.parse({"lake.commit.interval.ms": "1000", "segment.bytes": "2000"}))
    assert log.tiered and log._writer.segments.segment_bytes == 2000
    for i in range(10):
        assert append(log, values(5, 15 + 5 * i)).version is None
    assert log.lake_end_offset == 15 and read_all(log) == list(range(65))
    assert len(list((tmp_path / "t-0" / SEGMENT_DIR).glob("*.log"))) > 1   # rolled by the new segment.bytes
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 65 and read_all(reopened) == list(range(65))


def test_a_flush_of_many_appends_writes_its_file_in_offset_order(tmp_path):
    """A flush of a tail of many appends writes rows in offset order within its data file (readers slice
    files by offset): delta-rs handed a table of many chunks writes them out of order, so the flush joins
    the pieces first."""
    import pyarrow.parquet as pq

    log = open_log(tmp_path)
    for i in range(60):
        append(log, values(10_000, 10_000 * i))
    assert log.flush_to_lake() == 600_000
    (uri,) = DeltaTable(log.table_uri).file_uris()
    assert pq.read_table(uri, columns=["offset"])["offset"].to_pylist() == list(range(600_000))
