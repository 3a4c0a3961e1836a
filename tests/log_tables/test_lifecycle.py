"""The log's lifecycle: retention by time and size (whole files, metadata-only removes), the log start
offset (reads below it refused, kept across restarts, followed from a leader, start over), VACUUM after
``lake.vacuum.retention.ms`` and a bounded Delta log."""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.cleaner import CLEANED_FILE_TARGET_BYTES
from lakelog.log_tables.file_merges import MERGE_TARGET_BYTES, choose_run, merge_if_needed, merge_target_bytes
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.log_tables.flusher import LakeFlusher
from lakelog.log_tables.lifecycle import retention_start_offset, table_properties
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.reader import data_loss, log_start_offset
from tests.harness import wait_for_async

HOUR_MS = 3_600_000
NOW_MS = 1_800_000_000_000


def open_log(path: Path, **configs) -> PartitionLog:
    config = TopicConfig.parse({k.replace("_", "."): str(v) for k, v in configs.items()})
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=config)


def records(n: int, *, timestamp_ms: int, start: int = 0, size: int = 10) -> pa.Table:
    return pa.table({"value": [b"%0*d" % (size, i) for i in range(start, start + n)],
                     "timestamp": pa.array([timestamp_ms] * n, pa.int64())})


def parquet_files(log: PartitionLog) -> set[str]:
    return {p.name for p in Path(log.table_uri).glob("*.parquet")}


def fill(log: PartitionLog, batches: int, *, per_batch: int = 10, first_ts_ms: int, step_ms: int = HOUR_MS) -> None:
    """``batches`` appends (one Delta file each with lake.commit.interval.ms=0), an hour apart."""
    for i in range(batches):
        log.append(records(per_batch, timestamp_ms=first_ts_ms + i * step_ms, start=i * per_batch))
    log.advance_high_watermark(log.log_end_offset)


def file(lo: int, hi: int, *, ts_ms: int | None, size: int = 100) -> DataFile:
    return DataFile(path=f"f{lo}", min_offset=lo, max_offset=hi, max_timestamp_us=None if ts_ms is None else ts_ms * 1000,
                    num_records=hi - lo + 1, size_bytes=size)


# -- the decision ---------------------------------------------------------------------------------

def test_retention_by_time_removes_the_expired_prefix_only():
    files = [file(0, 9, ts_ms=1000), file(10, 19, ts_ms=5000), file(20, 29, ts_ms=2000), file(30, 39, ts_ms=9000)]
    decide = lambda **kw: retention_start_offset(files, log_start_offset=0, upper_offset=40, retention_bytes=-1,
                                                 tail_bytes=0, **kw)
    assert decide(retention_ms=4000, now_ms=6000) == 10        # file 2 expired too, but after a kept one
    assert decide(retention_ms=500, now_ms=6000) == 30
    assert decide(retention_ms=-1, now_ms=10 ** 12) == 0      # no time limit
    assert decide(retention_ms=0, now_ms=10 ** 12) == 40      # everything below the upper offset


def test_retention_by_size_keeps_at_least_retention_bytes():
    files = [file(i * 10, i * 10 + 9, ts_ms=NOW_MS, size=100) for i in range(5)]
    decide = lambda **kw: retention_start_offset(files, log_start_offset=0, upper_offset=50, retention_ms=-1,
                                                 now_ms=NOW_MS, **kw)
    assert decide(retention_bytes=250, tail_bytes=0) == 20     # 500 -> 300: one more would leave 200 < 250
    assert decide(retention_bytes=300, tail_bytes=0) == 20
    assert decide(retention_bytes=300, tail_bytes=100) == 30   # the tail counts in the log's size
    assert decide(retention_bytes=10_000, tail_bytes=0) == 0


def test_retention_never_passes_the_upper_offset_or_a_file_without_statistics():
    files = [file(0, 9, ts_ms=1), file(10, 19, ts_ms=1), file(20, 29, ts_ms=1)]
    assert retention_start_offset(files, log_start_offset=0, upper_offset=15, retention_ms=0, retention_bytes=-1,
                                  tail_bytes=0, now_ms=NOW_MS) == 10
    files = [file(0, 9, ts_ms=1), file(10, 19, ts_ms=None), file(20, 29, ts_ms=1)]
    assert retention_start_offset(files, log_start_offset=0, upper_offset=30, retention_ms=0, retention_bytes=-1,
                                  tail_bytes=0, now_ms=NOW_MS) == 10
    assert retention_start_offset(files, log_start_offset=25, upper_offset=30, retention_ms=0, retention_bytes=-1,
                                  tail_bytes=0, now_ms=NOW_MS) == 25  # never moves back


# -- retention on a log ---------------------------------------------------------------------------

def test_retention_by_time_removes_whole_files_without_rewriting_any(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0, retention_ms=10 * HOUR_MS)
    fill(log, 24, first_ts_ms=NOW_MS - 24 * HOUR_MS)             # batch i is 24-i hours old
    on_disk = parquet_files(log)
    removed = log.lifecycle.apply_retention(now_ms=NOW_MS)
    # batches 0..13 are older than 10 h (batch 14 is exactly 10 h old: kept)
    assert removed == 14 and log.log_start_offset == 140
    assert parquet_files(log) == on_disk                        # nothing written, nothing deleted yet
    commit = DeltaTable(log.table_uri).history(1)[0]
    assert commit["operation"] == "DELETE" and commit["lakelog.log_start_offset"] == "140"
    assert commit["operationMetrics"]["num_added_files"] == 0
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(139)
    assert e.value.error_code == 42226 and "140" in str(e.value)
    assert log.read(140)["offset"].to_pylist()[0] == 140
    assert log.lifecycle.apply_retention(now_ms=NOW_MS) == 0    # idempotent
    log.close()
    reopened = open_log(tmp_path, lake_commit_interval_ms=0)
    assert reopened.log_start_offset == 140 and reopened.log_end_offset == 240


def test_retention_by_size_keeps_about_retention_bytes(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0)
    fill(log, 20, per_batch=100, first_ts_ms=NOW_MS)
    total = sum(a["size_bytes"] for a in pa.table(DeltaTable(log.table_uri).get_add_actions(flatten=True)).to_pylist())
    budget = total // 4
    log.update_config(TopicConfig.parse({"lake.commit.interval.ms": "0", "retention.bytes": str(budget)}))
    assert log.lifecycle.apply_retention(now_ms=NOW_MS) > 0
    left = sum(a["size_bytes"] for a in pa.table(DeltaTable(log.table_uri).get_add_actions(flatten=True)).to_pylist())
    assert budget <= left < budget + total // 20 + 1           # within one file of the limit
    assert log.log_start_offset % 100 == 0 and log.log_start_offset > 0


def test_the_log_start_offset_may_lie_inside_a_file_and_an_emptied_log_keeps_its_offsets(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0)
    fill(log, 3, first_ts_ms=NOW_MS)
    assert log.lifecycle.advance_log_start_offset(15, reason="delete-records") == 1   # file 0-9 goes
    assert log.log_start_offset == 15 and len(parquet_files(log)) == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(14)
    assert log.read(15)["offset"].to_pylist()[:2] == [15, 16]
    assert log.lifecycle.advance_log_start_offset(99, reason="delete-records") == 2     # capped at the HW
    assert log.log_start_offset == 30 == log.log_end_offset
    log.close()
    reopened = open_log(tmp_path, lake_commit_interval_ms=0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (30, 30)
    reopened.append(records(2, timestamp_ms=NOW_MS))
    assert reopened.log_end_offset == 32


def test_retention_on_a_tiered_log_removes_only_what_is_in_delta(tmp_path):
    log = open_log(tmp_path, retention_ms=0)
    fill(log, 5, first_ts_ms=NOW_MS - HOUR_MS, step_ms=0)
    assert log.flush_to_lake() == 50
    log.append(records(10, timestamp_ms=NOW_MS - HOUR_MS, start=50))    # in the tail only
    log.advance_high_watermark(log.log_end_offset)
    log.lifecycle.apply_retention(now_ms=NOW_MS)
    assert log.log_start_offset == 50 and log.lake_end_offset == 50
    assert log.read(50)["offset"].to_pylist() == list(range(50, 60))


def test_a_log_started_over_at_an_offset_recovers_there(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3, first_ts_ms=NOW_MS)
    log.flush_to_lake(max_bytes=1)
    log.lifecycle.reset_to(500)
    assert (log.log_start_offset, log.lake_end_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500, 500)
    assert log.read(500).num_rows == 0
    info = log.append(records(3, timestamp_ms=NOW_MS))
    assert info.base_offset == 500
    log.close()
    reopened = open_log(tmp_path)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 503)


# -- file sizes under retention.bytes -------------------------------------------------------------------

def noise(n: int, *, keys: range | None = None, value_bytes: int = 100, seed: int = 0) -> pa.Table:
    """``n`` records of random (incompressible) values, so file sizes follow the records' bytes."""
    rng = random.Random(seed)
    columns = {"value": [rng.randbytes(value_bytes) for _ in range(n)],
               "timestamp": pa.array([NOW_MS] * n, pa.int64())}
    if keys is not None:
        columns["key"] = [b"k%d" % k for k in keys]
    return pa.table(columns)


def live_sizes(log: PartitionLog) -> list[int]:
    """Bytes of the table's live data files, in offset order."""
    return [f.size_bytes for f in FileSnapshot.of_table(DeltaTable(log.table_uri)).files]


def test_merge_target_is_a_fraction_of_retention_bytes_and_at_most_segment_bytes():
    parse = TopicConfig.parse
    assert merge_target_bytes(parse({})) == MERGE_TARGET_BYTES
    assert merge_target_bytes(parse({"retention.bytes": str(50 << 20)})) == (50 << 20) // 8
    assert merge_target_bytes(parse({"segment.bytes": str(1 << 20)})) == 1 << 20
    assert merge_target_bytes(parse({"retention.bytes": "4"})) == 1
    # retention.bytes counts only where cleanup.policy deletes
    assert merge_target_bytes(parse({"cleanup.policy": "compact", "retention.bytes": "800"})) == MERGE_TARGET_BYTES
    assert merge_target_bytes(parse({"cleanup.policy": "compact"}), default=CLEANED_FILE_TARGET_BYTES) \
        == CLEANED_FILE_TARGET_BYTES
    assert merge_target_bytes(parse({"cleanup.policy": "compact,delete", "retention.bytes": "800"}),
                              default=CLEANED_FILE_TARGET_BYTES) == 100


def test_a_merge_never_builds_a_file_larger_than_its_target():
    files = [file(i * 10, i * 10 + 9, ts_ms=NOW_MS, size=400) for i in range(5)]
    run = choose_run(files, keep_newest=0, max_file_bytes=1000)
    assert [f.min_offset for f in run] == [0, 10]                # 800 bytes: a third file would make 1,200
    assert choose_run(files, keep_newest=0, max_file_bytes=1000, max_run_bytes=500) == []


def test_merged_files_stay_small_enough_for_retention_bytes_to_remove(tmp_path):
    """The flusher's merges of a log with retention.bytes build files of at most an eighth of it, so
    retention keeps the log between retention.bytes and retention.bytes plus one file (Kafka's
    deleteRetentionSizeBreachedSegments). A merge into one large file (64 MiB before) could not be
    removed until the log held that file plus retention.bytes."""
    budget = 400_000
    log = open_log(tmp_path, lake_commit_interval_ms=0, retention_bytes=budget)
    for i in range(60):                                           # 60 files of about 14 KB
        log.append(noise(100, seed=i))
    log.advance_high_watermark(log.log_end_offset)
    target = merge_target_bytes(log.config)
    assert target == budget // 8
    for _ in range(100):
        if not log.lifecycle.needs_merge(max_files=8, max_file_bytes=target):
            break
        asyncio.run(merge_if_needed(log, segment_files_max=8))
    sizes = live_sizes(log)
    assert len(sizes) < 30 and max(sizes) <= target            # merged, but none above the target
    assert log.lifecycle.apply_retention(now_ms=NOW_MS) > 0
    sizes = live_sizes(log)
    assert sum(sizes) - sizes[0] < budget <= sum(sizes) <= budget + target
    assert log.read(log.log_start_offset)["offset"][0].as_py() == log.log_start_offset


def test_a_cleaning_of_a_compact_delete_topic_writes_files_retention_bytes_can_remove(tmp_path):
    log = open_log(tmp_path, cleanup_policy="compact,delete", lake_commit_interval_ms=0, retention_ms=-1,
                   retention_bytes=4_000_000)
    for v in range(4):                                            # each version overwrites half the keys before
        log.append(noise(8000, keys=range(v * 4000, v * 4000 + 8000), seed=v))
    log.advance_high_watermark(log.log_end_offset)
    result = log.lifecycle.clean(now_ms=NOW_MS + HOUR_MS, force=True)
    assert result is not None and result.records_after == 20_000
    target = merge_target_bytes(log.config, default=CLEANED_FILE_TARGET_BYTES)
    assert target == 500_000
    cleaned, newest = live_sizes(log)[:-1], live_sizes(log)[-1]   # the newest file loses nothing: kept
    # 12,000 kept records, about 1.3 MB: in several files (before: one); delta-rs splits its output after
    # whole write batches (1,024 rows, about 110 KB here), so a file may pass the target by that much
    assert len(cleaned) >= 3 and max(cleaned) <= target * 5 // 4 and newest > target


# -- VACUUM and the Delta log -----------------------------------------------------------------------

def test_removed_files_leave_the_disk_after_the_vacuum_retention_and_not_before(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0, retention_ms=HOUR_MS, lake_vacuum_retention_ms=1500)
    fill(log, 6, first_ts_ms=NOW_MS - 6 * HOUR_MS)
    (Path(log.table_uri) / "_lakelog_topic_id").write_text("id")
    result = log.lifecycle.run(now_ms=NOW_MS)
    props = DeltaTable(log.table_uri).metadata().configuration
    assert {k: props[k] for k in table_properties(log.config)} == table_properties(log.config)
    assert props["delta.deletedFileRetentionDuration"] == "interval 1500 milliseconds"
    assert result.files_removed == 5 and result.files_vacuumed == 0
    assert len(parquet_files(log)) == 6                       # inside the window: time travel still reads them
    old = DeltaTable(log.table_uri, version=6).to_pyarrow_table(columns=["offset"])
    assert old.num_rows == 60
    time.sleep(1.6)
    result = log.lifecycle.run(now_ms=NOW_MS)
    assert result.files_vacuumed == 5 and len(parquet_files(log)) == 1
    assert log.read(50)["offset"].to_pylist() == list(range(50, 60))
    assert (Path(log.table_uri) / "_lakelog_topic_id").exists()   # names with "_" are never vacuumed
    log.close()
    assert open_log(tmp_path, lake_commit_interval_ms=0).log_start_offset == 50


def test_merged_files_are_vacuumed_too(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0, lake_vacuum_retention_ms=0)
    fill(log, 10, first_ts_ms=NOW_MS)
    assert log.lifecycle.merge_head(keep_newest=1) == 9
    assert len(parquet_files(log)) == 11
    log.lifecycle.run(now_ms=NOW_MS)
    assert len(parquet_files(log)) == 2
    assert log.read(0, max_bytes=1 << 20)["offset"].to_pylist() == list(range(100))


def test_the_delta_log_stays_bounded(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0, lake_vacuum_retention_ms=0)
    log.lifecycle.run(now_ms=NOW_MS)                          # table properties: logs expire at once
    for i in range(230):
        log.append(records(1, timestamp_ms=NOW_MS, start=i))
    names = os.listdir(Path(log.table_uri) / "_delta_log")
    commits = [n for n in names if n.endswith(".json")]
    assert any(n.endswith(".checkpoint.parquet") for n in names)
    assert len(commits) < 110, len(commits)                    # one checkpoint interval, not 230
    # merged files whose tombstones a later checkpoint dropped still leave the disk
    assert log.lifecycle.merge_head(keep_newest=1) > 100
    for i in range(230, 340):
        log.append(records(1, timestamp_ms=NOW_MS, start=i))
    log.lifecycle.run(now_ms=NOW_MS)
    live = pa.table(DeltaTable(log.table_uri).get_add_actions(flatten=True)).num_rows
    assert len(parquet_files(log)) == live
    log.close()
    assert open_log(tmp_path, lake_commit_interval_ms=0).log_end_offset == 340


def test_the_flusher_runs_the_maintenance_round(tmp_path):
    async def run():
        log = open_log(tmp_path, lake_commit_interval_ms=100, retention_ms=HOUR_MS, lake_vacuum_retention_ms=0)
        old = int(time.time() * 1000) - 3 * HOUR_MS
        for i in range(3):
            log.append(records(10, timestamp_ms=old, start=10 * i))
            log.advance_high_watermark(log.log_end_offset)
            log.flush_to_lake()
        log.append(records(10, timestamp_ms=int(time.time() * 1000), start=30))
        log.advance_high_watermark(log.log_end_offset)
        flusher = LakeFlusher(log, maintenance_interval_ms=100)
        await wait_for_async(lambda: log.log_start_offset >= 30 and len(parquet_files(log)) <= 1,
                             what="retention and VACUUM in the flusher's maintenance round")
        await flusher.close()
        return log

    log = asyncio.run(run())
    assert log.log_start_offset == 30 and len(parquet_files(log)) == 1
    assert log.read(30)["offset"].to_pylist() == list(range(30, 40))


# -- the log cleaner in the maintenance round ---------------------------------------------------------

def keyed(keys: list[int], *, version: int, timestamp_ms: int, tombstone: bool = False) -> pa.Table:
    return pa.table({"key": [b"k%d" % k for k in keys],
                     "value": pa.array([None if tombstone else b"v%d-%d" % (k, version) for k in keys], pa.binary()),
                     "timestamp": pa.array([timestamp_ms] * len(keys), pa.int64())})


def test_a_compacted_topic_keeps_the_latest_record_per_key_and_reads_skip_the_gaps(tmp_path):
    log = open_log(tmp_path, cleanup_policy="compact", lake_vacuum_retention_ms=0)
    ts = int(time.time() * 1000)
    for version in range(4):                       # 4 versions of 50 keys, one file each
        log.append(keyed(list(range(50)), version=version, timestamp_ms=ts))
        log.advance_high_watermark(log.log_end_offset)
        log.flush_to_lake()
    log.append(keyed([7], version=9, timestamp_ms=ts, tombstone=True))   # a tombstone for k7
    log.advance_high_watermark(log.log_end_offset)
    log.flush_to_lake()
    result = log.lifecycle.run()
    assert result.cleaned is not None and result.cleaned.records_after == 50
    rows = log.read(0, max_bytes=1 << 20)
    offsets = rows["offset"].to_pylist()
    assert offsets == [o for o in range(150, 201) if o != 157]                     # gaps, offsets kept
    assert rows["key"][-1].as_py() == b"k7" and rows["value"][-1].as_py() is None   # k7's tombstone kept
    assert {r["key"]: r["value"] for r in rows.to_pylist()}[b"k3"] == b"v3-3"
    assert log.read(10, max_bytes=1 << 20)["offset"].to_pylist()[0] == 150       # inside a gap: the next one
    assert len(parquet_files(log)) <= 3                                            # vacuumed at once
    assert log.lifecycle.run().cleaned is None                                    # clean: nothing to do
    log.close()
    reopened = open_log(tmp_path, cleanup_policy="compact")
    # the cleaner emptied the head: a gap, not retention; the log still starts at 0
    assert reopened.log_start_offset == 0 and reopened.log_end_offset == 201
    assert reopened.read(0, max_bytes=1 << 20)["offset"].to_pylist()[0] == 150
    assert log_start_offset(reopened.table_uri) == 0 and data_loss(reopened.table_uri, 0, 201) is None


def test_a_truncation_lowers_the_cleaned_offset_so_new_tombstones_survive_one_cleaning(tmp_path):
    log = open_log(tmp_path, cleanup_policy="compact", lake_commit_interval_ms=0, delete_retention_ms=0)
    old = int(time.time() * 1000) - 60_000
    for version in range(3):                                     # offsets 0..29, one file each
        log.append(keyed(list(range(10)), version=version, timestamp_ms=old))
    log.advance_high_watermark(log.log_end_offset)
    assert log.lifecycle.clean(now_ms=old + 120_000, force=True).new_cleaned_offset == 30
    assert log.truncate_to(25)                                   # drops 25..29 (an unclean election)
    log.append(keyed([1, 2], version=7, timestamp_ms=old, tombstone=True))   # offsets 25, 26
    log.advance_high_watermark(log.log_end_offset)
    log.lifecycle.clean(now_ms=old + 120_000, force=True)
    rows = log.read(0, max_bytes=1 << 20)
    tombstones = [r["offset"] for r in rows.to_pylist() if r["value"] is None]
    assert tombstones == [25, 26]          # not yet below a cleaned offset: kept for one cleaning
    log.lifecycle.clean(now_ms=old + 120_000, force=True)
    assert [r for r in log.read(0, max_bytes=1 << 20).to_pylist() if r["value"] is None] == []


def test_a_log_start_offset_past_the_lake_end_offset_stays_across_a_restart_and_out_of_the_table(tmp_path):
    """A follower takes its leader's log start offset while its own flusher is behind (or DeleteRecords
    goes into the segment tail): the start lies past the table's records. A restart keeps it, and the
    flush leaves the records below it out of the table."""
    uri = tmp_path / "t-0"
    config = TopicConfig.parse({"lake.commit.interval.ms": "3600000"})
    log = PartitionLog.open(topic="t", partition=0, table_uri=uri, config=config, initial_high_watermark=0)
    log.append(records(10, timestamp_ms=NOW_MS))
    log.advance_high_watermark(10)
    assert log.flush_to_lake() == 10                                  # the table holds 0..9
    log.append(records(10, timestamp_ms=NOW_MS, start=10))
    log.advance_high_watermark(20)                                    # 10..19 only in the tail
    assert log.lifecycle.advance_log_start_offset(15, reason="leader") == 1
    assert (log.log_start_offset, log.lake_end_offset, log.log_end_offset) == (15, 10, 20)
    log.close()                                                       # as a crash before the next flush
    log = PartitionLog.open(topic="t", partition=0, table_uri=uri, config=config, initial_high_watermark=0)
    assert (log.log_start_offset, log.lake_end_offset, log.log_end_offset) == (15, 10, 20)
    log.advance_high_watermark(20)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(12)
    assert log.read(15)["offset"].to_pylist() == list(range(15, 20))
    assert log.flush_to_lake() == 10
    assert sorted(DeltaTable(str(uri)).to_pyarrow_table()["offset"].to_pylist()) == list(range(15, 20))
    log.close()
    log = PartitionLog.open(topic="t", partition=0, table_uri=uri, config=config)
    assert (log.log_start_offset, log.lake_end_offset, log.log_end_offset) == (15, 20, 20)
    log.close()
