"""The log cleaner (cleanup.policy=compact) on real Delta tables: the latest record per key stays, at its
offset; tombstones go only after delete.retention.ms and one cleaning; min/max.compaction.lag.ms and
min.cleanable.dirty.ratio decide what and when."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables import cleaner
from lakelog.log_tables.cleaner import (
    CLEANED_OFFSET_KEY, check_keys_for_compaction, clean, cleanable_end_offset, cleaned_offset, dirty_ratio,
    kept_rows, needs_cleaning)
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.errors import RecordWithoutKeyError
from lakelog.log_tables.schema import LOG_SCHEMA
from lakelog.log_tables.table_writes import commit_append, commit_truncation, open_log_table

T0 = 1_700_000_000_000  # ms: the records' timestamps start here
HOUR = 3_600_000
DAY = 24 * HOUR
COMPACT = TopicConfig.parse({"cleanup.policy": "compact"})


def _rows(offsets, keys, values, ts_ms) -> pa.Table:
    n = len(offsets)
    ts = np.broadcast_to(np.asarray(ts_ms, dtype=np.int64), (n,)) * 1000
    return pa.table({
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "headers": pa.array([[{"key": "h", "value": b"%d" % o}] for o in offsets], LOG_SCHEMA.field("headers").type),
        "leader_epoch": pa.array(np.zeros(n, np.int32)),
        "producer_id": pa.nulls(n, pa.int64()),
        "producer_epoch": pa.nulls(n, pa.int16()),
        "sequence": pa.nulls(n, pa.int32()),
    }, schema=LOG_SCHEMA)


class Table:
    """A partition table written as the broker writes it, one data file per append."""

    def __init__(self, path):
        self.uri, self.dt = open_log_table(path, topic="t", partition=0)
        self.end = 0

    def append(self, keys, values=None, *, ts_ms=T0) -> None:
        offsets = list(range(self.end, self.end + len(keys)))
        values = [b"v%d" % o for o in offsets] if values is None else values
        self.end += len(keys)
        commit_append(self.dt, _rows(offsets, keys, values, ts_ms), compression_type="producer",
                      lake_end_offset=self.end)

    def snapshot(self) -> FileSnapshot:
        return FileSnapshot.of_table(self.dt)

    def clean(self, *, now_ms, config=COMPACT, cleaned=None, force=False):
        cleaned = cleaned_offset(self.dt) if cleaned is None else cleaned
        return clean(self.dt, self.snapshot(), config=config, cleaned_offset=cleaned, lake_end_offset=self.end,
                     now_ms=now_ms, name="t-0", force=force)

    def rows(self) -> pa.Table:
        t = DeltaTable(self.uri).to_pyarrow_table()
        return t.take(pc.sort_indices(t["offset"]))

    def records(self) -> list[tuple[int, bytes | None, bytes | None]]:
        t = self.rows()
        return list(zip(t["offset"].to_pylist(), t["key"].to_pylist(), t["value"].to_pylist()))


def _files_in_offset_order(tbl: Table) -> None:
    snap = tbl.snapshot()
    for f in snap.files:
        offsets = pq.read_table(snap.path(f), filesystem=snap.fs, columns=["offset"])["offset"].to_numpy()
        assert np.all(np.diff(offsets) > 0), f.path


def test_keeps_exactly_the_latest_record_per_key_at_its_offset(tmp_path):
    tbl = Table(tmp_path / "t-0")
    tbl.append([b"a", b"b", b"a", b"c"])
    tbl.append([b"b", b"a", b"d"])
    tbl.append([b"c", b"e"])

    result = tbl.clean(now_ms=T0 + HOUR)

    assert tbl.records() == [(4, b"b", b"v4"), (5, b"a", b"v5"), (6, b"d", b"v6"),
                             (7, b"c", b"v7"), (8, b"e", b"v8")]
    assert (result.first, result.last, result.records_before, result.records_after) == (0, 8, 9, 5)
    assert result.new_cleaned_offset == 9 == cleaned_offset(tbl.dt)
    # headers, timestamps and the other columns of kept records are unchanged
    rows = tbl.rows()
    assert rows["headers"].to_pylist()[0] == [{"key": "h", "value": b"4"}]
    assert rows["timestamp"].cast(pa.int64()).to_pylist() == [T0 * 1000] * 5
    history = tbl.dt.history(1)[0]
    assert history["lakelog.operation"] == "clean"
    assert history["lakelog.lake_end_offset"] == "9" and history[CLEANED_OFFSET_KEY] == "9"
    _files_in_offset_order(tbl)


def test_dense_many_keys_matches_a_plain_python_reference(tmp_path):
    rng = random.Random(7)
    tbl = Table(tmp_path / "t-0")
    expected: dict[bytes, tuple[int, bytes | None]] = {}
    offset = 0
    for _ in range(10):  # 50,000 records over 1,000 keys, in 10 files, with some tombstones
        keys = [b"key-%d" % rng.randrange(1000) for _ in range(5000)]
        values = [None if rng.random() < 0.05 else b"value-%d" % (offset + i) for i in range(5000)]
        for i, (k, v) in enumerate(zip(keys, values)):
            expected[k] = (offset + i, v)
        tbl.append(keys, values)
        offset += 5000
    before = {o: (k, v) for o, k, v in tbl.records()}

    result = tbl.clean(now_ms=T0 + HOUR)

    reference = sorted((o, k, v) for k, (o, v) in expected.items())
    assert tbl.records() == reference
    assert all(before[o] == (k, v) for o, k, v in reference)  # offsets unchanged
    assert result.records_before == 50_000 and result.records_after == len(expected) == 1000
    assert result.tombstones_dropped == 0  # first cleaning: nothing is below the cleaned offset yet
    offsets = tbl.rows()["offset"].to_numpy()
    assert np.all(np.diff(offsets) > 0) and np.any(np.diff(offsets) > 1)  # gaps
    _files_in_offset_order(tbl)


def test_tombstone_stays_until_below_the_cleaned_offset_and_older_than_delete_retention(tmp_path):
    config = TopicConfig.parse({"cleanup.policy": "compact", "delete.retention.ms": str(DAY)})
    tbl = Table(tmp_path / "t-0")
    tbl.append([b"a", b"b"], ts_ms=T0 - 10 * DAY)
    tbl.append([b"a"], [None], ts_ms=T0)  # the tombstone of a, offset 2

    # first cleaning, even long after delete.retention.ms: the tombstone is not below the cleaned offset
    tbl.clean(now_ms=T0 + 5 * DAY, config=config)
    assert tbl.records() == [(1, b"b", b"v1"), (2, b"a", None)]
    assert cleaned_offset(tbl.dt) == 3

    # second cleaning, before delete.retention.ms has passed: kept
    tbl.append([b"b"], ts_ms=T0)
    result = tbl.clean(now_ms=T0 + DAY - 1, config=config)
    assert tbl.records() == [(2, b"a", None), (3, b"b", b"v3")]
    assert result.tombstones_dropped == 0

    # a later cleaning: below the cleaned offset and older than delete.retention.ms: dropped
    tbl.append([b"c"], ts_ms=T0 + DAY)
    result = tbl.clean(now_ms=T0 + DAY + 1, config=config)
    assert tbl.records() == [(3, b"b", b"v3"), (4, b"c", b"v4")]
    assert result.tombstones_dropped == 1


def test_kept_rows_tombstone_rules():
    rows = _rows([0, 1, 2, 3, 4, 5], [b"a", b"a", b"b", b"c", b"c", None], [b"x", None, None, b"y", None, None],
                 [T0, T0, T0 + DAY, T0, T0, T0])
    # tombstones of a (offset 1) and c (offset 4) are old; b's (offset 2) is recent; 5 has no key
    kept = kept_rows(rows, now_ms=T0 + DAY + 1, delete_retention_ms=DAY, cleaned_offset=3)
    assert kept["offset"].to_pylist() == [2, 4, 5]  # 1 dropped (old, below 3); 2 recent; 4 not below 3
    kept = kept_rows(rows, now_ms=T0 + DAY + 1, delete_retention_ms=DAY, cleaned_offset=0)
    assert kept["offset"].to_pylist() == [1, 2, 4, 5]
    kept = kept_rows(rows, now_ms=T0 + 3 * DAY, delete_retention_ms=DAY, cleaned_offset=10)
    assert kept["offset"].to_pylist() == [5]  # the keyless record stays in any case


def test_records_without_a_key_are_kept(tmp_path):
    tbl = Table(tmp_path / "t-0")
    tbl.append([None, b"a", None, b"a", None])
    tbl.clean(now_ms=T0 + HOUR)
    assert [o for o, _, _ in tbl.records()] == [0, 2, 3, 4]


def test_check_keys_for_compaction():
    check_keys_for_compaction(pa.table({"key": pa.array([b"a", b"b"])}), topic="t", partition=1)
    with pytest.raises(RecordWithoutKeyError) as err:
        check_keys_for_compaction(pa.table({"key": pa.array([b"a", None, None])}), topic="t", partition=1)
    assert err.value.http_status == 422 and err.value.error_code == 42223 and not err.value.retriable
    assert err.value.count == 2 and "key" in err.value.message and "t" in err.value.message


def test_min_compaction_lag_leaves_newer_files_untouched(tmp_path):
    config = TopicConfig.parse({"cleanup.policy": "compact", "min.compaction.lag.ms": str(HOUR)})
    tbl = Table(tmp_path / "t-0")
    tbl.append([b"a", b"a"], ts_ms=T0)
    tbl.append([b"a", b"b"], ts_ms=T0 + 10)
    tbl.append([b"a", b"b", b"b"], ts_ms=T0 + HOUR)  # newer than now - lag below
    newest = tbl.snapshot().files[-1]
    now = T0 + HOUR + 10  # now - lag = T0 + 10: the second file's newest record is exactly that old

    assert cleanable_end_offset(tbl.snapshot().files, lake_end_offset=tbl.end, now_ms=now,
                                min_compaction_lag_ms=HOUR) == 4
    result = tbl.clean(now_ms=now, config=config)

    assert (result.first, result.last, result.new_cleaned_offset) == (0, 3, 4)
    assert tbl.records() == [(2, b"a", b"v2"), (3, b"b", b"v3"), (4, b"a", b"v4"), (5, b"b", b"v5"),
                             (6, b"b", b"v6")]
    assert tbl.snapshot().files[-1] == newest  # the same data file, not rewritten
    # the lake end offset caps the range too
    assert cleanable_end_offset(tbl.snapshot().files, lake_end_offset=5, now_ms=now + DAY,
                                min_compaction_lag_ms=HOUR) == 4


def _file(lo: int, hi: int, size: int, ts_ms: int = T0) -> DataFile:
    return DataFile(path=f"f{lo}", min_offset=lo, max_offset=hi, max_timestamp_us=ts_ms * 1000,
                    num_records=hi - lo + 1, size_bytes=size)


def test_dirty_ratio_and_when_cleaning_is_needed():
    files = [_file(0, 99, 600), _file(100, 149, 300), _file(150, 199, 100, ts_ms=T0 + DAY)]
    # cleaned up to 100; the last file is too new for a 1-hour lag: range [0, 150), dirty 300 of 900
    end = cleanable_end_offset(files, lake_end_offset=200, now_ms=T0 + HOUR, min_compaction_lag_ms=HOUR)
    assert end == 150
    assert dirty_ratio(files, cleaned_offset=100, cleanable_end=end) == pytest.approx(1 / 3)
    assert dirty_ratio(files, cleaned_offset=0, cleanable_end=end) == 1.0
    assert dirty_ratio(files, cleaned_offset=150, cleanable_end=end) == 0.0
    assert dirty_ratio([], cleaned_offset=0, cleanable_end=0) == 0.0

    def needs(cleaned, now_ms=T0 + HOUR, **configs) -> bool:
        config = TopicConfig.parse({"cleanup.policy": "compact", "min.compaction.lag.ms": str(HOUR), **configs})
        return needs_cleaning(files, config=config, cleaned_offset=cleaned, lake_end_offset=200, now_ms=now_ms)

    assert not needs(100)  # 1/3 is not above the default 0.5
    assert needs(100, **{"min.cleanable.dirty.ratio": "0.3"})
    assert needs(0)
    assert not needs(150, **{"min.cleanable.dirty.ratio": "0"})  # nothing dirty in the cleanable range
    # max.compaction.lag.ms: the dirty file's records are all older than 30 minutes -> forced
    assert needs(100, **{"max.compaction.lag.ms": str(HOUR // 2)})
    assert not needs(100, now_ms=T0 + HOUR // 4, **{"max.compaction.lag.ms": str(HOUR // 2)})
    # not a compacted topic
    assert not needs_cleaning(files, config=TopicConfig.parse({}), cleaned_offset=0, lake_end_offset=200,
                              now_ms=T0 + HOUR)


def test_dirty_ratio_on_a_real_table_after_a_cleaning(tmp_path):
    tbl = Table(tmp_path / "t-0")
    for i in range(4):
        tbl.append([b"k%d" % j for j in range(200)], ts_ms=T0)
    config = COMPACT
    assert needs_cleaning(tbl.snapshot().files, config=config, cleaned_offset=0, lake_end_offset=tbl.end,
                          now_ms=T0 + HOUR)
    tbl.clean(now_ms=T0 + HOUR)
    cleaned = cleaned_offset(tbl.dt)
    tbl.append([b"k1"])  # one small dirty file
    files = tbl.snapshot().files
    assert not needs_cleaning(files, config=config, cleaned_offset=cleaned, lake_end_offset=tbl.end,
                              now_ms=T0 + HOUR)
    forced = TopicConfig.parse({"cleanup.policy": "compact", "max.compaction.lag.ms": str(HOUR)})
    assert needs_cleaning(files, config=forced, cleaned_offset=cleaned, lake_end_offset=tbl.end,
                          now_ms=T0 + 2 * HOUR)
    assert not needs_cleaning(files, config=forced, cleaned_offset=cleaned, lake_end_offset=tbl.end,
                              now_ms=T0 + HOUR // 2)


def test_cleaning_twice_changes_nothing_and_the_cleaned_offset_is_read_back(tmp_path):
    tbl = Table(tmp_path / "t-0")
    assert cleaned_offset(tbl.dt) == 0
    tbl.append([b"a", b"b", b"a"])
    tbl.append([b"b", b"c"])
    first = tbl.clean(now_ms=T0 + HOUR)
    records, version = tbl.records(), tbl.dt.version()
    assert cleaned_offset(DeltaTable(tbl.uri)) == first.new_cleaned_offset == 5

    assert tbl.clean(now_ms=T0 + HOUR) is None  # nothing dirty: no commit
    assert tbl.dt.version() == version
    again = tbl.clean(now_ms=T0 + HOUR, force=True)  # forced: same rows, nothing replaced
    assert again.files_replaced == 0 and again.records_before == again.records_after == 3
    assert tbl.records() == records
    assert cleaned_offset(tbl.dt) == 5

    # later appends (commits without the key) do not hide it
    tbl.append([b"d"])
    tbl.append([b"e"])
    assert cleaned_offset(DeltaTable(tbl.uri)) == 5


def test_a_cleaning_that_drops_nothing_only_records_the_cleaned_offset(tmp_path):
    tbl = Table(tmp_path / "t-0")
    tbl.append([b"a", b"b"])
    tbl.append([b"c", b"d"])
    files = tbl.snapshot().files
    result = tbl.clean(now_ms=T0 + HOUR)
    assert result.files_replaced == 0 and result.records_after == 4 and result.new_cleaned_offset == 4
    assert tbl.snapshot().files == files
    assert cleaned_offset(tbl.dt) == 4


def test_only_the_files_that_lose_records_are_rewritten(tmp_path):
    tbl = Table(tmp_path / "t-0")
    tbl.append([b"x", b"y"])  # never repeated: stays as it is
    tbl.append([b"a", b"b"])  # loses both
    tbl.append([b"a", b"c"])  # loses c
    tbl.append([b"c", b"b"])  # loses nothing: stays as it is
    tbl.append([b"z"])
    before = tbl.snapshot().files
    result = tbl.clean(now_ms=T0 + HOUR)
    after = tbl.snapshot().files
    assert result.files_replaced == 2 and (result.first, result.last) == (0, 8)
    assert after[0] == before[0] and after[-2:] == before[-2:] and len(after) == 4
    assert [o for o, _, _ in tbl.records()] == [0, 1, 4, 6, 7, 8]


def test_a_truncation_after_a_cleaning_lowers_the_cleaned_offset(tmp_path):
    tbl = Table(tmp_path / "t-0")
    tbl.append([b"a", b"a", b"b", b"c"])
    tbl.clean(now_ms=T0 + HOUR)
    assert cleaned_offset(tbl.dt) == 4
    commit_truncation(tbl.dt, 3)
    assert cleaned_offset(tbl.dt) == 3


def test_nothing_to_clean_on_an_empty_table_or_without_offset_statistics(tmp_path):
    tbl = Table(tmp_path / "t-0")
    assert tbl.clean(now_ms=T0) is None
    version = tbl.dt.version()
    snap = tbl.snapshot()
    no_stats = DataFile(path="x", min_offset=None, max_offset=None, max_timestamp_us=None, num_records=None,
                        size_bytes=10)
    odd = FileSnapshot(snap.uri, (no_stats,), snap.fs, snap.root)
    assert clean(tbl.dt, odd, config=COMPACT, cleaned_offset=0, lake_end_offset=5, now_ms=T0, name="t-0") is None
    assert not needs_cleaning([no_stats], config=COMPACT, cleaned_offset=0, lake_end_offset=5, now_ms=T0)
    assert DeltaTable(tbl.dt.table_uri).version() == version  # nothing was committed


def test_repeated_cleanings_over_many_row_groups_match_the_reference(tmp_path, monkeypatch):
    monkeypatch.setattr(cleaner, "MERGED_ROW_GROUP_ROWS", 16)  # cleaned files get many row groups
    config = TopicConfig.parse({"cleanup.policy": "compact", "delete.retention.ms": str(DAY)})
    rng = random.Random(3)
    tbl = Table(tmp_path / "t-0")
    latest: dict[bytes, tuple[int, bytes | None, int]] = {}
    now = T0
    for round_ in range(4):
        for _ in range(3):
            keys = [b"k%d" % rng.randrange(300) for _ in range(400)]
            values = [None if rng.random() < 0.1 else b"r%d" % round_ for _ in keys]
            for i, (k, v) in enumerate(zip(keys, values)):
                latest[k] = (tbl.end + i, v, now)
            tbl.append(keys, values, ts_ms=now)
        previous = cleaned_offset(tbl.dt)
        now += DAY // 2
        tbl.clean(now_ms=now, config=config)
        # the reference: latest per key, minus tombstones below the previous cleaned offset and older
        # than delete.retention.ms
        expected = sorted((o, k, v) for k, (o, v, ts) in latest.items()
                          if not (v is None and o < previous and ts < now - DAY))
        assert tbl.records() == expected, round_
        _files_in_offset_order(tbl)
        snap = tbl.snapshot()  # the patched row group size reached the cleaner's files
        assert max(pq.ParquetFile(snap.path(f)).metadata.num_row_groups for f in snap.files) > 1
