"""``retention.bytes`` is applied as the log grows (the flusher's retention trigger), with Kafka's test for
the oldest file (the log without it still holds ``retention.bytes``), not only every
``log.retention.check.interval.ms``."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pyarrow as pa

from lakelog.config import TopicConfig
from lakelog.log_tables.flusher import LakeFlusher
from lakelog.log_tables.partition_log import PartitionLog
from tests.harness import wait_for_async

HOUR_MS = 3_600_000


def open_log(path: Path, **configs) -> PartitionLog:
    config = TopicConfig.parse({k.replace("_", "."): str(v) for k, v in configs.items()})
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=config)


def records(n: int) -> pa.Table:
    """``n`` records of 100 random bytes (Parquet cannot shrink them: file sizes follow the records)."""
    return pa.table({"value": pa.array([os.urandom(100) for _ in range(n)], pa.binary())})


def log_bytes(log: PartitionLog) -> tuple[int, int]:
    """(data files + segment tail bytes, bytes of the oldest data file) as the log counts them."""
    state = log._state
    files = state.files.files
    return sum(f.size_bytes for f in files) + state.segments.nbytes, files[0].size_bytes if files else 0


def add_file(log: PartitionLog, n: int = 100) -> None:
    """``n`` records, replicated and flushed: one more Delta file."""
    log.append(records(n))
    log.advance_high_watermark(log.log_end_offset)
    log.flush_to_lake()


def test_retention_bytes_due_is_kafkas_test_of_the_oldest_file(tmp_path):
    config = {"lake.commit.interval.ms": "3600000", "lake.vacuum.retention.ms": str(HOUR_MS)}
    log = open_log(tmp_path, lake_commit_interval_ms=3_600_000, retention_bytes=10**9)
    for _ in range(4):
        add_file(log)
    log.append(records(50))                               # a segment tail: counted in the log's size
    log.advance_high_watermark(log.log_end_offset)
    size, first = log_bytes(log)
    assert first > 10_000 and size > 4 * first
    lifecycle = log.lifecycle
    for retention_bytes, due in ((size - first, True), (size - first + 1, False), (-1, False)):
        log.update_config(TopicConfig.parse({**config, "retention.bytes": str(retention_bytes)}))
        assert lifecycle.retention_bytes_due() is due, retention_bytes
    log.update_config(TopicConfig.parse({**config, "retention.bytes": str(size - first), "cleanup.policy": "compact"}))
    assert lifecycle.retention_bytes_due() is False       # no delete policy: retention.bytes does not apply
    log.close()


def test_the_segment_tail_counts_in_the_log_size(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=3_600_000, retention_bytes=10_000)
    add_file(log)
    assert not log.lifecycle.retention_bytes_due()        # the only file is the whole log: it stays
    log.append(records(100))                              # not flushed, not even replicated yet
    assert log.lifecycle.retention_bytes_due()            # the tail alone holds retention.bytes (Kafka: the
    #                                                       active segment counts in the log's size too)
    assert log.lifecycle.apply_retention(now_ms=int(time.time() * 1000)) == 1
    assert log.log_start_offset == 100 and not log.lifecycle.retention_bytes_due()
    log.close()


def test_the_flusher_applies_retention_bytes_as_the_log_grows_without_a_maintenance_round(tmp_path):
    """Each append is followed by a wait for the flusher to have flushed it and applied retention (a
    condition, not a time budget: a slow machine only takes longer), so the size the log reaches is the
    flusher's doing alone, whatever the machine's speed."""
    retention_bytes = 200_000

    async def run() -> tuple[PartitionLog, list[int], int]:
        log = open_log(tmp_path, lake_commit_interval_ms=50, retention_bytes=retention_bytes,
                       lake_vacuum_retention_ms=HOUR_MS)
        maintenance: list[int] = []
        log.lifecycle.run = lambda **_: maintenance.append(1)   # a check interval of an hour never comes anyway
        flusher = LakeFlusher(log, maintenance_interval_ms=HOUR_MS)
        largest = 0
        for _ in range(80):                                     # about 1 MB: 5x retention.bytes
            log.append(records(120))
            log.advance_high_watermark(log.log_end_offset)
            largest = max(largest, log_bytes(log)[0])
            await wait_for_async(lambda: log.lake_end_offset == log.log_end_offset
                                 and not log.lifecycle.retention_bytes_due(),
                                 what="the flusher to flush the append and apply retention.bytes")
        await flusher.close()
        return log, maintenance, largest

    log, maintenance, largest = asyncio.run(run())
    size, first = log_bytes(log)
    assert maintenance == []
    assert log.log_start_offset > 0 and log.lake_end_offset == log.log_end_offset
    # Kafka's test holds for what is left: without its oldest file the log would be under retention.bytes
    # (it may be under retention.bytes itself: the tail it counted took fewer bytes once flushed to Parquet)
    assert size - first < retention_bytes, (size, first)
    # and it held all along: at most retention.bytes, one file above it and the append not flushed yet
    assert largest < 2 * retention_bytes, largest
    log.close()


def test_retention_commits_nothing_under_an_outside_committers_lease(tmp_path):
    """A Spark maintenance job holds the partition's committer lease: retention waits for its end, and
    then plans on the table as the job left it."""
    from lakelog.log_tables.committer_leases import LeasedTables

    log = open_log(tmp_path, lake_commit_interval_ms=3_600_000, retention_bytes=10_000)
    for _ in range(3):
        add_file(log)
    leases = LeasedTables()
    log.honour_leases(leases)
    leases.replace([("t", 0)])
    assert log.lifecycle.retention_bytes_due()
    assert log.lifecycle.apply_retention(now_ms=int(time.time() * 1000)) == 0 and log.log_start_offset == 0
    leases.replace([])
    assert log.lifecycle.apply_retention(now_ms=int(time.time() * 1000)) == 2 and log.log_start_offset == 200
    log.close()
