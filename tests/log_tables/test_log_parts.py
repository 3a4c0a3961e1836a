"""The parts PartitionLog is composed of, alone: tail cache, leader epoch cache, choice of files to compact."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakelog.log_tables.file_merges import choose_run
from lakelog.log_tables.data_files import DataFile
from lakelog.log_tables.errors import FencedLeaderEpochError
from lakelog.log_tables.leader_epochs import LeaderEpochCache, epoch_starts
from lakelog.log_tables.tail_cache import CHUNK_OVERHEAD_BYTES, TailCache


def rows(base: int, n: int) -> pa.Table:
    return pa.table({"offset": pa.array(range(base, base + n), pa.int64()), "value": pa.array([b"x" * 100] * n)})


def test_tail_cache_keeps_the_newest_batches_within_its_budget():
    one = rows(0, 10).get_total_buffer_size() + CHUNK_OVERHEAD_BYTES  # buffers + what a chunk costs besides
    cache = TailCache(max_bytes=3 * one)
    for base in (0, 10, 20, 30):
        cache.add(base, rows(base, 10))
    view = cache.view()
    assert view.bases == (10, 20, 30) and view.first_offset == 10 and cache.nbytes == 3 * one
    cache.add(40, rows(40, 10))
    assert cache.view().bases == (20, 30, 40)
    assert view.bases == (10, 20, 30)  # a view taken earlier does not change

    out: list[pa.Table] = []
    assert view.read(15, 35, 1 << 30, out) == (35, (1 << 30) - sum(t.nbytes for t in out))
    assert pa.concat_tables(out)["offset"].to_pylist() == list(range(15, 35))
    out.clear()
    offset, budget = view.read(12, 40, 1, out)  # below one record: still one record (KIP-74)
    assert [t.num_rows for t in out] == [1] and offset == 13 and budget < 0

    huge = TailCache(max_bytes=1)
    huge.add(0, rows(0, 10))
    huge.add(10, rows(10, 10))
    assert huge.view().bases == (10,)  # the newest batch stays even when larger than the budget
    off = TailCache(max_bytes=0)
    off.add(0, rows(0, 10))
    assert off.view().first_offset is None


def test_tail_cache_merges_runs_of_small_batches_and_bounds_tiny_ones_by_their_overhead():
    cache = TailCache(max_bytes=1 << 30)
    for base in range(100):
        cache.add(base, rows(base, 1))  # one record per produce request
    view = cache.view()
    assert len(view.chunks) < 10 and view.bases[0] == 0  # merged, offsets kept
    out: list[pa.Table] = []
    view.read(0, 100, 1 << 30, out)
    assert pa.concat_tables(out)["offset"].to_pylist() == list(range(100))
    small = TailCache(max_bytes=20 * CHUNK_OVERHEAD_BYTES)
    for base in range(1000):
        small.add(base, rows(base, 1))
    assert small.nbytes <= 20 * CHUNK_OVERHEAD_BYTES + rows(0, 64).get_total_buffer_size() + CHUNK_OVERHEAD_BYTES
    kept: list[pa.Table] = []
    small.view().read(small.view().first_offset, 1000, 1 << 30, kept)
    offsets = pa.concat_tables(kept)["offset"].to_pylist()
    assert offsets[-1] == 999 and offsets == list(range(offsets[0], 1000)) and offsets[0] > 500


def test_leader_epoch_cache_answers_offsets_for_leader_epoch_and_fences():
    assert epoch_starts(np.arange(5, 11), np.array([1, 1, 3, 3, 3, 4])) == [(1, 5), (3, 7), (4, 10)]
    cache = LeaderEpochCache()
    assert cache.latest == -1
    assert cache.end_offset_for(0, log_start_offset=0, log_end_offset=0) == (-1, 0)
    for epoch, start in [(1, 0), (1, 4), (3, 7), (2, 9)]:  # an older epoch never starts again
        cache.assign(epoch, start)
    assert cache.entries == [(1, 0), (3, 7)] and cache.latest == 3 and cache.fence_epoch == 3
    assert cache.end_offset_for(1, log_start_offset=0, log_end_offset=12) == (1, 7)
    assert cache.end_offset_for(2, log_start_offset=0, log_end_offset=12) == (1, 7)
    assert cache.end_offset_for(5, log_start_offset=0, log_end_offset=12) == (3, 12)
    assert cache.end_offset_for(0, log_start_offset=2, log_end_offset=12) == (-1, 2)
    cache.check(3, topic="t", partition=0)
    cache.fence(6)
    cache.fence(4)  # never lowers
    with pytest.raises(FencedLeaderEpochError, match="leader epoch 5 refused"):
        cache.check(5, topic="t", partition=0)
    assert LeaderEpochCache([(0, 0), (2, 5)], fence_epoch=1).fence_epoch == 2


def test_compaction_takes_the_oldest_run_of_small_contiguous_files():
    def files(*spans_sizes):
        out, lo = [], 0
        for n, size in spans_sizes:
            out.append(DataFile(f"{lo}.parquet", lo, lo + n - 1, None, n, size))
            lo += n
        return out

    small = files((10, 100), (10, 100), (10, 100), (10, 100))
    assert [f.min_offset for f in choose_run(small, keep_newest=1, max_file_bytes=1000)] == [0, 10, 20]
    assert choose_run(small, keep_newest=3, max_file_bytes=1000) == []  # one file is not a run
    # a large file ends a run; the run after it is taken
    mixed = files((10, 100), (10, 900), (10, 100), (10, 100), (10, 100))
    assert [f.min_offset for f in choose_run(mixed, keep_newest=0, max_file_bytes=1000)] == [20, 30, 40]
    # an earlier merge's output is left out while it is larger than the rest of the run together
    merged = files((30, 300), (10, 100), (10, 100))
    assert [f.min_offset for f in choose_run(merged, keep_newest=0, max_file_bytes=1000)] == [30, 40]
    # a gap in offsets ends a run; files without statistics are never taken
    gap = [DataFile("a", 0, 9, None, 10, 100), DataFile("b", 20, 29, None, 10, 100),
           DataFile("c", 30, 39, None, 10, 100), DataFile("d", None, None, None, None, 100)]
    assert [f.path for f in choose_run(gap, keep_newest=0, max_file_bytes=1000)] == ["b", "c"]
