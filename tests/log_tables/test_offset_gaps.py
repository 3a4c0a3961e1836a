"""Reads of a partition log whose offsets have gaps, as compaction and retention leave them.

Compaction (``cleanup.policy=compact``) replaces the files of an offset range by the latest record per
key, with a replaceWhere overwrite on that range (``table_writes.commit_rewrite``): offsets never change,
so gaps appear inside the table. Retention removes whole files from the start of the table (a Delta
``delete("offset < X")``) and the log start offset moves up. As in Kafka: a fetch from an offset inside
a gap returns the next records; paging with a byte limit crosses gaps and always makes progress; a
fetch below the log start offset is out of range (42226) naming it; only offsets below the table's first
offset (or past a truncated end) are data loss, never a gap.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.reader import DataLossError, data_loss, offset_for_timestamp, read_offset_range
from lakelog.log_tables.table_writes import commit_truncation
from lakelog.log_tables.tail_cache import CacheView
from tests.harness import compact_range, table_offsets

#: every append is a Delta commit (no segment tail)
SYNC_LAKE = TopicConfig.parse({"lake.commit.interval.ms": "0"})
#: a segment tail in front of the table; the tests flush it themselves
TIERED = TopicConfig.parse({"lake.commit.interval.ms": "3600000"})

NOW_MS = 1_700_000_000_000  # the timestamp of record i is NOW_MS + 1000 * i


def key_of(i: int) -> bytes:
    """A few keys in a fixed random order, so the latest record per key is scattered over a range."""
    return b"k%d" % random.Random(i).randrange(5)


def records(start: int, n: int) -> pa.Table:
    return pa.table({
        "key": pa.array([key_of(i) for i in range(start, start + n)]),
        "value": pa.array([b"v%d" % i for i in range(start, start + n)]),
        "timestamp": pa.array([NOW_MS + 1000 * i for i in range(start, start + n)], pa.int64()),
    })


def open_log(path, *, cache: int = 0, config: TopicConfig = SYNC_LAKE) -> PartitionLog:
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=config,
                             tail_cache_max_bytes=cache)


def fill(log: PartitionLog, sizes: list[int]) -> None:
    """One append (one Delta file without a tail) per size; the HW follows."""
    for n in sizes:
        log.append(records(log.log_end_offset, n), now_ms=NOW_MS)
    log.advance_high_watermark(log.log_end_offset)






def fail(loss):
    raise AssertionError(f"reported as data loss: {loss.describe()}")


def spark_offsets(uri, start: int, end: int, **kwargs) -> list[int]:
    kwargs.setdefault("on_data_loss", fail)
    return [o for b in read_offset_range(uri, start, end, end_is_committed=True, batch_rows=5, **kwargs)
            for o in b["offset"].to_pylist()]


def pages(log: PartitionLog, start: int, max_bytes: int) -> list[list[int]]:
    """Fetch from ``start`` to the HW, each from one past the last offset returned (at most 1000 fetches)."""
    out, offset = [], start
    for _ in range(1000):
        if offset >= log.high_watermark:
            return out
        page = log.read(offset, max_bytes=max_bytes)["offset"].to_pylist()
        if not page:
            return out
        out.append(page)
        offset = page[-1] + 1
    raise AssertionError(f"paging did not end: {out[-5:]}")


@pytest.fixture
def gapped(tmp_path):
    """offsets 0..59 in six files of ten; [10, 39] compacted to the latest record per key; re-opened."""
    log = open_log(tmp_path)
    fill(log, [10] * 6)
    log.close()
    kept = compact_range(log.table_uri, 10, 39)
    assert 3 <= len(kept) <= 5 and kept[-1] == 39  # the latest record of a range is always kept
    remaining = list(range(10)) + kept + list(range(40, 60))
    assert table_offsets(log.table_uri) == remaining
    return log.table_uri, remaining


# -- fetch ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cache", [0, 1 << 20], ids=["files", "cache"])
def test_a_fetch_from_inside_a_gap_returns_the_next_records(tmp_path, gapped, cache):
    uri, remaining = gapped
    log = open_log(tmp_path, cache=cache)  # recovery over the gapped table
    assert (log.log_start_offset, log.lake_end_offset, log.log_end_offset, log.high_watermark) == (0, 60, 60, 60)
    fill(log, [7, 3])  # appends continue after the compacted offsets (and fill the cache)
    remaining = remaining + list(range(60, 70))
    for start in range(0, 71):
        expected = [o for o in remaining if o >= start]
        got = log.read(start, max_bytes=1 << 30)
        assert got["offset"].to_pylist() == expected, start
        assert got["value"].to_pylist() == [b"v%d" % o for o in expected]
        # Spark's reader of the table returns the same rows and reports no data loss
        assert spark_offsets(uri, start, 70) == expected
        for end in (start + 1, start + 5, 45):
            assert log.read(start, end_offset=end, max_bytes=1 << 30)["offset"].to_pylist() == \
                [o for o in expected if o < end], (start, end)


@pytest.mark.parametrize("max_bytes", [1, 200, 1000])
def test_paging_with_a_byte_limit_crosses_every_gap(tmp_path, gapped, max_bytes):
    uri, remaining = gapped
    log = open_log(tmp_path)
    for start in (0, 10, 11, 25, 39):
        got = pages(log, start, max_bytes)
        assert [o for page in got for o in page] == [o for o in remaining if o >= start]
        assert all(page for page in got)  # every fetch makes progress
        if max_bytes == 1:
            assert all(len(page) == 1 for page in got)  # at least one record, as KIP-74


def test_a_gap_at_the_end_of_the_table_leads_into_the_segment_tail(tmp_path):
    log = open_log(tmp_path, config=TIERED, cache=1 << 20)
    fill(log, [10, 10, 10])
    while log.flush_to_lake():
        pass
    assert log.lake_end_offset == 30
    log.close()
    compact_range(log.table_uri, 10, 29, keep=[12, 15])  # e.g. tombstones removed: offsets 16..29 are gone
    log = open_log(tmp_path, config=TIERED)
    assert (log.log_start_offset, log.lake_end_offset, log.log_end_offset) == (0, 30, 30)
    fill(log, [5, 5])  # offsets 30..39 in the segment tail
    log.close()
    for cache in (0, 1 << 20):  # read from the segment files, then from the cache recovery fills
        log = open_log(tmp_path, config=TIERED, cache=cache)
        assert (log.log_start_offset, log.lake_end_offset, log.log_end_offset) == (0, 30, 40)
        log.advance_high_watermark(log.log_end_offset)
        for start in (13, 16, 20, 29):
            assert log.read(start, max_bytes=1 << 30)["offset"].to_pylist() == \
                ([15] if start <= 15 else []) + list(range(30, 40)), (cache, start)
        assert log.read(16, max_bytes=1)["offset"].to_pylist() == [30]
        assert [o for p in pages(log, 0, 1) for o in p] == list(range(10)) + [12, 15] + list(range(30, 40))
        # the tail's timestamps are searched past the gap
        assert log.offset_for_timestamp(NOW_MS + 1000 * 20) == 30
        log.close()


def test_a_gap_at_the_end_of_the_table_leads_into_the_tail_cache(tmp_path):
    log = open_log(tmp_path)
    fill(log, [10, 10])
    log.close()
    compact_range(log.table_uri, 10, 19, keep=[11, 13])
    log = open_log(tmp_path, cache=1 << 20)
    assert (log.log_start_offset, log.log_end_offset) == (0, 20)
    listings = []
    load_index = log._writer.load_index
    log._writer.load_index = lambda: listings.append(1) or load_index()
    # nothing after the gap yet: an empty answer, no error (the next fetch waits for records)
    assert log.read(14, max_bytes=1 << 30).num_rows == 0
    assert log.read(19, max_bytes=1).num_rows == 0
    assert listings == []  # the index lists every commit: the gap is real, no fetch re-lists the table
    fill(log, [4])  # 20..23, in the table and the cache
    assert log.read(14, max_bytes=1 << 30)["offset"].to_pylist() == [20, 21, 22, 23]
    assert log.read(14, max_bytes=1)["offset"].to_pylist() == [20]
    assert spark_offsets(log.table_uri, 14, 24) == [20, 21, 22, 23]


def test_the_tail_cache_reads_batches_with_gaps():
    def chunk(offsets):
        return pa.table({"offset": pa.array(offsets, pa.int64()), "value": pa.array([b"x" * 10] * len(offsets))})

    view = CacheView((0, 10, 20), (chunk([0, 2, 5]), chunk([10, 11, 15]), chunk([20, 21, 22])))

    def read(offset, upper, budget=1 << 20):
        out = []
        nxt, _ = view.read(offset, upper, budget, out)
        return [o for t in out for o in t["offset"].to_pylist()], nxt

    assert read(0, 100) == ([0, 2, 5, 10, 11, 15, 20, 21, 22], 23)
    assert read(1, 100)[0] == [2, 5, 10, 11, 15, 20, 21, 22]
    assert read(6, 100)[0] == [10, 11, 15, 20, 21, 22]  # from a gap between batches
    assert read(3, 12) == ([5, 10, 11], 12)
    assert read(16, 21) == ([20], 21)
    assert read(12, 15) == ([], 12)
    assert read(3, 100, budget=1) == ([5], 6)  # at least one record, then the budget ends the read
    # dense batches (every appended one) are read by position, as before
    dense = CacheView((0, 4), (chunk([0, 1, 2, 3]), chunk([4, 5, 6])))
    out = []
    dense.read(2, 6, 1 << 20, out)
    assert [o for t in out for o in t["offset"].to_pylist()] == [2, 3, 4, 5]


# -- retention ------------------------------------------------------------------------------------------

def test_a_fetch_below_the_log_start_offset_names_it(tmp_path):
    log = open_log(tmp_path)
    fill(log, [10] * 5)
    log.close()
    kept = compact_range(log.table_uri, 30, 39)
    DeltaTable(log.table_uri).delete("offset < 20")  # retention at a file boundary
    remaining = list(range(20, 30)) + kept + list(range(40, 50))
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (20, 50, 50)
    for start in (0, 5, 19):
        with pytest.raises(OffsetOutOfRangeError) as e:
            log.read(start)
        assert (e.value.offset, e.value.log_start_offset, e.value.high_watermark) == (start, 20, 50)
        assert e.value.error_code == 42226 and "20 (log start offset)" in str(e.value)
    assert [o for p in pages(log, 20, 100) for o in p] == remaining
    # Spark's reader: the offsets below the first one are lost, the gaps are not
    loss = data_loss(log.table_uri, 5, 50)
    assert (loss.start, loss.end, loss.log_start_offset, loss.at_head) == (5, 20, 20, True)
    assert data_loss(log.table_uri, 20, 50) is None and data_loss(log.table_uri, 31, 35) is None
    seen = []
    assert spark_offsets(log.table_uri, 5, 50, on_data_loss=seen.append) == remaining
    assert seen == [loss]
    with pytest.raises(DataLossError, match="offsets 5 to 19"):
        spark_offsets(log.table_uri, 5, 50, on_data_loss=None)


def test_retention_of_every_file_leaves_the_offsets(tmp_path):
    log = open_log(tmp_path)
    fill(log, [10, 10])
    log.close()
    compact_range(log.table_uri, 0, 19, keep=[4, 17])
    DeltaTable(log.table_uri).delete("offset < 20")
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)
    assert log.read(20).num_rows == 0
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(17)
    assert e.value.log_start_offset == 20


# -- the Delta table under a reader ---------------------------------------------------------------------

def test_a_vacuum_of_compacted_files_under_a_reader_is_no_data_loss(tmp_path):
    log = open_log(tmp_path)
    fill(log, [10] * 6)
    before = DeltaTable(log.table_uri)  # a reader's snapshot: lists the files compaction replaces
    kept = compact_range(log.table_uri, 10, 39)
    DeltaTable(log.table_uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    remaining = list(range(10)) + kept + list(range(40, 60))
    # the broker's file index lists the vanished files too: both move to the newest snapshot
    assert log.read(0, max_bytes=1 << 30)["offset"].to_pylist() == remaining
    assert spark_offsets(before, 0, 60) == remaining
    assert spark_offsets(DeltaTable(log.table_uri, version=before.version()), 5, 60) == remaining[5:]


def test_a_compacted_end_of_the_table_is_no_truncation_but_a_truncation_is(tmp_path):
    log = open_log(tmp_path)
    fill(log, [10, 10, 10])
    log.close()
    compact_range(log.table_uri, 20, 29, keep=[21, 24])  # the table's files now end at 24
    assert spark_offsets(log.table_uri, 0, 30) == list(range(20)) + [21, 24]
    assert spark_offsets(log.table_uri, 25, 30) == []
    assert data_loss(log.table_uri, 0, 30) is None
    commit_truncation(DeltaTable(log.table_uri), 22)  # the log ends at 22 now
    seen = []
    assert spark_offsets(log.table_uri, 0, 30, on_data_loss=seen.append) == list(range(20)) + [21]
    assert [(x.start, x.end, x.at_head) for x in seen] == [(22, 30, False)]


# -- offsets by timestamp ---------------------------------------------------------------------------------

def test_offset_for_timestamp_across_gaps(tmp_path, gapped):
    uri, remaining = gapped
    log = open_log(tmp_path)
    for i in range(60):
        expected = next(o for o in remaining if o >= i)  # timestamps grow with offsets
        assert offset_for_timestamp(uri, NOW_MS + 1000 * i) == expected, i
        assert offset_for_timestamp(uri, NOW_MS + 1000 * i - 1, start=min(i, 59)) == expected
        assert log.offset_for_timestamp(NOW_MS + 1000 * i) == expected
    assert log.offset_for_timestamp(NOW_MS + 1000 * 60) == 60  # none that recent: the HW
