"""Removed files leave the disk when their ``lake.vacuum.retention.ms`` ends, not at the next maintenance
round (the flusher's VACUUM timer, Kafka's ``file.delete.delay.ms``), and maintenance runs at a fixed rate
from the rounds' starts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyarrow as pa

from lakelog.clock import MockTime
from lakelog.config import TopicConfig
from lakelog.log_tables.flusher import LakeFlusher
from lakelog.log_tables.log_scheduler import LogScheduler
from lakelog.log_tables.partition_log import PartitionLog
from tests.harness import CONDITION_WAIT_S, wait_for_async

HOUR_MS = 3_600_000


async def drained(scheduler: LogScheduler) -> None:
    """Wait (in real time: worker threads) until no job runs and none is due on the scheduler's clock."""
    deadline = time.monotonic() + CONDITION_WAIT_S
    while scheduler.running or (scheduler.next_due() or float("inf")) <= scheduler.clock.monotonic():
        assert time.monotonic() < deadline, "the scheduler's due jobs did not run"
        await asyncio.sleep(0.01)


def open_log(path: Path, **configs) -> PartitionLog:
    config = TopicConfig.parse({k.replace("_", "."): str(v) for k, v in configs.items()})
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=config)


def fill(log: PartitionLog, files: int, *, timestamp_ms: int) -> None:
    """``files`` Delta files of 10 records (lake.commit.interval.ms=0: one file per append)."""
    for i in range(files):
        log.append(pa.table({"value": [b"v%d" % n for n in range(10 * i, 10 * i + 10)],
                             "timestamp": pa.array([timestamp_ms] * 10, pa.int64())}))
    log.advance_high_watermark(log.log_end_offset)


def parquet_files(log: PartitionLog) -> set[str]:
    return {p.name for p in Path(log.table_uri).glob("*.parquet")}


def test_a_removal_is_vacuumed_once_its_grace_ended_and_not_before(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0, retention_ms=HOUR_MS, lake_vacuum_retention_ms=800)
    log.lifecycle.sync_table_properties()
    fill(log, 4, timestamp_ms=int(time.time() * 1000) - 3 * HOUR_MS)
    fill(log, 1, timestamp_ms=int(time.time() * 1000))
    assert log.lifecycle.vacuum_due_at() is None
    before = time.time()
    assert log.lifecycle.apply_retention(now_ms=int(time.time() * 1000)) == 4
    due = log.lifecycle.vacuum_due_at()
    assert due is not None and before + 0.8 <= due <= time.time() + 0.9
    assert log.lifecycle.vacuum_if_due(now=due - 0.01) == 0          # not due: no VACUUM at all
    assert log.lifecycle.vacuum() == 0 and len(parquet_files(log)) == 5   # inside the grace
    assert log.lifecycle.vacuum_due_at() == due                      # still recorded
    time.sleep(max(0.0, due - time.time()))
    assert log.lifecycle.vacuum_if_due() == 4 and len(parquet_files(log)) == 1
    assert log.lifecycle.vacuum_due_at() is None
    log.close()


def test_a_merge_records_its_inputs_for_vacuum(tmp_path):
    from lakelog.log_tables.file_merges import merge_if_needed

    log = open_log(tmp_path, lake_commit_interval_ms=0, lake_vacuum_retention_ms=0)
    log.lifecycle.sync_table_properties()
    fill(log, 6, timestamp_ms=int(time.time() * 1000))
    asyncio.run(merge_if_needed(log, segment_files_max=4))
    assert log.lifecycle.vacuum_due_at() is not None
    time.sleep(0.02)
    assert log.lifecycle.vacuum_if_due() >= 2 and log.lifecycle.vacuum_due_at() is None
    log.close()


def test_the_flusher_deletes_removed_files_when_their_grace_ends_without_a_maintenance_round(tmp_path):
    async def run() -> tuple[PartitionLog, float, float]:
        log = open_log(tmp_path, lake_commit_interval_ms=100, retention_ms=HOUR_MS, lake_vacuum_retention_ms=300)
        log.lifecycle.sync_table_properties()
        old = int(time.time() * 1000) - 3 * HOUR_MS
        for i in range(3):
            log.append(pa.table({"value": [b"x"] * 10, "timestamp": pa.array([old] * 10, pa.int64())}))
            log.advance_high_watermark(log.log_end_offset)
            log.flush_to_lake()
        log.append(pa.table({"value": [b"y"] * 10}))
        log.advance_high_watermark(log.log_end_offset)
        flusher = LakeFlusher(log, maintenance_interval_ms=HOUR_MS)  # no maintenance round during the test
        await wait_for_async(lambda: log.lake_end_offset == log.log_end_offset,
                             what="the flusher to commit the last batch")
        removed_at = time.time()
        assert await asyncio.to_thread(log.lifecycle.apply_retention, now_ms=int(removed_at * 1000)) == 3
        await wait_for_async(lambda: len(parquet_files(log)) <= 1, what="VACUUM once the grace ended")
        gone_at = time.time()
        await flusher.close()
        return log, removed_at, gone_at

    log, removed_at, gone_at = asyncio.run(run())
    assert len(parquet_files(log)) == 1
    # not before the grace ended; and without a maintenance round (an hour away): the flusher's timer did it
    assert gone_at - removed_at >= 0.3, gone_at - removed_at
    assert log.lifecycle.on_removal is None                           # the closed flusher stopped listening


def test_maintenance_is_due_one_interval_after_the_start_of_the_round_that_ran_it(tmp_path):
    async def run() -> list[float]:
        log = open_log(tmp_path, lake_commit_interval_ms=100)
        flusher = LakeFlusher(log, interval_ms=3_600_000, maintenance_interval_ms=1000)
        ran: list[float] = []
        log.lifecycle.run = lambda **_: ran.append(time.monotonic())  # counts the rounds, does nothing
        t0 = flusher._next_maintenance
        for at in (t0 - 0.5, t0, t0 + 0.995, t0 + 1.5, t0 + 2.0):
            await flusher.maintain_if_due(at)
        await flusher.close(flush=False)
        log.close()
        return ran

    # rounds paced 1 s apart run maintenance each time, also when a timer fires a few ms early
    # (measured from the maintenance's own start, behind a flush of varying length, every other round was skipped)
    assert len(asyncio.run(run())) == 3


def test_a_check_interval_shorter_than_the_commit_interval_is_kept(tmp_path):
    async def run() -> list[float]:
        clock = MockTime()
        log = open_log(tmp_path, lake_commit_interval_ms=100)
        log.lifecycle.clock = clock
        flusher = LakeFlusher(log, interval_ms=3_600_000, maintenance_interval_ms=250)  # one round an hour
        ran: list[float] = []
        log.lifecycle.run = lambda **_: ran.append(clock.monotonic())  # counts the rounds, does nothing
        for _ in range(9):                                            # steps of 1/8 s (exact in binary)
            clock.advance(0.125)
            await drained(flusher._scheduler)
        await flusher.close(flush=False)
        log.close()
        return ran

    # log.retention.check.interval.ms 250 with lake.commit.interval.ms an hour: maintenance every 250 ms all the
    # same (it used to run only inside the flush rounds: never here), and never faster
    assert asyncio.run(run()) == [0.25, 0.5, 0.75, 1.0]


def test_maintenance_leaves_vacuum_out_right_after_the_timers(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0, retention_ms=HOUR_MS, lake_vacuum_retention_ms=0)
    log.lifecycle.sync_table_properties()
    fill(log, 3, timestamp_ms=int(time.time() * 1000) - 3 * HOUR_MS)
    fill(log, 1, timestamp_ms=int(time.time() * 1000))
    vacuums: list[int] = []
    vacuum = log.lifecycle.vacuum
    log.lifecycle.vacuum = lambda: vacuums.append(vacuum()) or vacuums[-1]
    assert log.lifecycle.vacuum() == 0 and vacuums == [0]              # the timer's VACUUM, just now
    result = log.lifecycle.run(skip_vacuum_within_s=60)                # retention, no VACUUM
    assert result.files_removed == 3 and vacuums == [0] and len(parquet_files(log)) == 4
    time.sleep(0.02)
    assert log.lifecycle.run(skip_vacuum_within_s=0).files_vacuumed == 3 and len(parquet_files(log)) == 1
    log.close()
