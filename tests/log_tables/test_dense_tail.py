"""The tail cache holds a leader's batch without its offset, timestamp and leader-epoch columns (dense
offsets, one timestamp and epoch: :class:`~lakelog.log_tables.tail_cache.DenseBatch`); reads from it
return what reads of the same records from the segment files return, for every byte budget."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.config import TopicConfig
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.tail_cache import CHUNK_OVERHEAD_BYTES, DenseBatch

N = 70_000  # above DENSE_MIN_ROWS (65,536): the large batches are dense
NOW_MS = 1_700_000_000_000
HELD_OFF = {"lake.commit.interval.ms": "3600000", "lake.commit.bytes": str(1 << 40)}


def open_log(path: Path, *, cache: int) -> PartitionLog:
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=TopicConfig.parse(HELD_OFF),
                             tail_cache_max_bytes=cache, local_dir=path / "tail")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """The same appends to a log with a tail cache and to one without (read from its segment files)."""
    values = pa.array([b"v%d" % (i % 1000) for i in range(N)], pa.binary())
    keyed = pa.table({"key": pa.array([b"k%d" % i for i in range(N)], pa.binary()), "value": values})
    opened = []
    for cache in (64 << 20, 0):
        log = open_log(tmp_path_factory.mktemp(f"cache-{cache}"), cache=cache)
        log.append(pa.table({"value": values}), leader_epoch=3, now_ms=NOW_MS)  # dense
        log.append(keyed.slice(0, 10), leader_epoch=3, now_ms=NOW_MS + 1)  # small: kept as it is
        log.append(keyed, leader_epoch=4, now_ms=NOW_MS + 2)
        opened.append(log)
    yield opened
    for log in opened:
        log.close()


def test_the_cache_holds_a_dense_batch_without_its_offsets_timestamps_and_epochs(logs):
    cached, _ = logs
    read = cached.read(0, max_bytes=1 << 30, end_offset=cached.log_end_offset)
    assert read.num_rows == 2 * N + 10
    cache = cached._writer.state.cache
    chunks = cache.view().chunks
    assert [type(c) for c in chunks] == [DenseBatch, pa.Table, DenseBatch]
    # what the cache holds (and charges against log.tail.cache.max.bytes): 20 bytes a record less for the
    # two large batches than their rows take once built
    whole = sum((c.table() if isinstance(c, DenseBatch) else c).get_total_buffer_size() for c in chunks)
    assert cache.nbytes == whole - 2 * 20 * N + 3 * CHUNK_OVERHEAD_BYTES


@pytest.mark.parametrize("start", [0, 1, N - 1, N, N + 5, N + 10, 2 * N + 9])
@pytest.mark.parametrize("max_bytes", [1, 100, 4096, 100_000, 1 << 30])
def test_reads_from_the_cache_equal_reads_from_the_segment_files(logs, start, max_bytes):
    cached, segments = logs
    end = cached.log_end_offset
    ours = cached.read(start, max_bytes=max_bytes, end_offset=end)
    theirs = segments.read(start, max_bytes=max_bytes, end_offset=end)
    assert ours.num_rows == theirs.num_rows > 0
    assert ours.equals(theirs) and ours.nbytes == theirs.nbytes
    assert ours["offset"][0].as_py() == start
