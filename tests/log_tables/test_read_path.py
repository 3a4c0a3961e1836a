"""One read path: the broker's fetch (PartitionLog.read) and Spark's reader (reader.read_offset_range) read
the data files through the same code (offset_scan.scan_offsets) and return the same rows.

Also what the broker's fetch gained from it: row-group pruning inside large files, files vanishing
under its file index (VACUUM after another engine's commit), offsets gone from the table.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, WriterProperties, write_deltalake

from lakelog.config import TopicConfig
from lakelog.log_tables import offset_scan
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.reader import read_offset_range
from lakelog.log_tables.schema import HEADERS_TYPE, LOG_SCHEMA, TIMESTAMP_TYPE

#: these tests are about the Delta table itself: every append is a Delta commit (no segment tail)
SYNC_LAKE = TopicConfig.parse({"lake.commit.interval.ms": "0"})

NOW_MS = 1_700_000_000_000


def log_rows(offsets: list[int]) -> pa.Table:
    """Log-schema rows for ``offsets`` in the order given (one file when written by write_deltalake)."""
    n = len(offsets)
    return pa.Table.from_arrays([
        pa.array(offsets, pa.int64()), pa.array([NOW_MS * 1000] * n, pa.int64()).cast(TIMESTAMP_TYPE),
        pa.array([b"k%d" % o for o in offsets]), pa.array([b"v%d" % o for o in offsets]), pa.nulls(n, HEADERS_TYPE),
        pa.array([0] * n, pa.int32()), pa.nulls(n, pa.int64()), pa.nulls(n, pa.int16()), pa.nulls(n, pa.int32()),
    ], schema=LOG_SCHEMA)


def open_log(path, *, cache: int = 0) -> PartitionLog:
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=SYNC_LAKE,
                             tail_cache_max_bytes=cache)


def records(start: int, n: int) -> pa.Table:
    return pa.table({
        "key": pa.array([b"k%d" % i for i in range(start, start + n)]),
        "value": pa.array([None if i % 7 == 0 else b"v%d" % i * (i % 5 + 1) for i in range(start, start + n)]),
        "headers": pa.array([[{"key": "i", "value": b"%d" % i}] if i % 3 else None for i in range(start, start + n)],
                            HEADERS_TYPE),
        "timestamp": pa.array([NOW_MS + i for i in range(start, start + n)], pa.int64()),
    })


def fill(log: PartitionLog, sizes: list[int], *, epoch: int = 0) -> None:
    for n in sizes:
        log.append(records(log.log_end_offset, n), leader_epoch=epoch, now_ms=NOW_MS)
    log.advance_high_watermark(log.log_end_offset)


def spark_rows(uri: str, start: int, end: int, columns=None) -> pa.Table:
    batches = list(read_offset_range(uri, start, end, columns=columns, batch_rows=17))
    schema = LOG_SCHEMA if columns is None else pa.schema([LOG_SCHEMA.field(c) for c in columns])
    return pa.Table.from_batches(batches, schema=schema)


def broker_rows(log: PartitionLog, start: int, end: int, columns=None) -> pa.Table:
    return log.read(start, end_offset=end, max_bytes=1 << 30, columns=columns)


def test_spark_reader_and_broker_fetch_return_identical_rows(tmp_path):
    # several commits, a compaction of the oldest ones, more commits under a new leader epoch
    log = open_log(tmp_path, cache=4096)  # a small tail cache: ranges cross from files into memory
    fill(log, [7, 1, 12, 3, 9, 9, 1, 20, 5, 6])
    merged = log.lifecycle.merge_head(keep_newest=3)
    assert merged >= 2
    fill(log, [4, 11, 2], epoch=2)
    leo = log.log_end_offset
    files = FileSnapshot.newest(log.table_uri).files
    assert len(files) == 13 - merged + 1 and files[0].min_offset == 0  # the merged file first

    cold = open_log(tmp_path)  # reopened, no cache: everything from the files
    for start in [0, 1, 6, 30, 61, 62, 63, 70, leo - 3, leo - 1]:
        for end in [start + 1, start + 9, start + 40, leo]:
            end = min(end, leo)
            expected = spark_rows(log.table_uri, start, end)
            assert expected["offset"].to_pylist() == list(range(start, end))
            assert broker_rows(log, start, end).equals(expected), (start, end)
            assert broker_rows(cold, start, end).equals(expected), (start, end)
    columns = ["value", "offset", "headers"]
    assert broker_rows(cold, 5, 80, columns).equals(spark_rows(log.table_uri, 5, 80, columns))
    # and the whole log agrees with what delta-rs itself reads
    assert broker_rows(cold, 0, leo).equals(DeltaTable(log.table_uri).to_pyarrow_table().sort_by("offset"))


def test_rows_stored_out_of_order_come_back_sorted_from_both_paths(tmp_path):
    # delta-rs may store a commit's rows in another order than given; here a file written shuffled,
    # in small row groups that each span most of the file, then one written backwards.
    uri = str(tmp_path / "t-0")
    DeltaTable.create(uri, LOG_SCHEMA, configuration={"delta.dataSkippingNumIndexedCols": "9"})
    shuffled = list(range(300))
    random.Random(3).shuffle(shuffled)
    write_deltalake(uri, log_rows(shuffled), mode="append",
                    writer_properties=WriterProperties(max_row_group_size=50, write_batch_size=50))
    write_deltalake(uri, log_rows(list(range(399, 299, -1))), mode="append")
    log = PartitionLog.open(topic="t", partition=0, table_uri=uri, config=SYNC_LAKE, tail_cache_max_bytes=0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 400)
    for start, end in [(0, 400), (17, 333), (299, 301), (350, 400)]:
        got = broker_rows(log, start, end)
        assert got["offset"].to_pylist() == list(range(start, end))
        assert got.equals(spark_rows(uri, start, end))
    # paging with a byte limit never skips or repeats a record
    pages, offset = [], 0
    while offset < 400:
        page = log.read(offset, max_bytes=700)
        pages.append(page)
        offset = page["offset"][-1].as_py() + 1
    assert pa.concat_tables(pages)["offset"].to_pylist() == list(range(400))


def test_a_small_fetch_decodes_only_the_row_groups_it_needs(tmp_path, monkeypatch):
    # one large file of ten row groups (a compacted file): a fetch of a few records reads one group
    uri = str(tmp_path / "t-0")
    DeltaTable.create(uri, LOG_SCHEMA, configuration={"delta.dataSkippingNumIndexedCols": "9"})
    write_deltalake(uri, log_rows(list(range(1000))), mode="append",
                    writer_properties=WriterProperties(max_row_group_size=100, write_batch_size=100))
    log = PartitionLog.open(topic="t", partition=0, table_uri=uri, config=SYNC_LAKE, tail_cache_max_bytes=0)
    read_groups: list[int] = []
    real = offset_scan.pq.ParquetFile.read_row_groups

    def spy(self, groups, *args, **kwargs):
        read_groups.extend(groups)
        return real(self, groups, *args, **kwargs)

    monkeypatch.setattr(offset_scan.pq.ParquetFile, "read_row_groups", spy)
    page = log.read(450, max_bytes=1)
    assert page["offset"].to_pylist() == [450]
    assert read_groups == [4]
    read_groups.clear()
    assert log.read(450, end_offset=520, max_bytes=1 << 30)["offset"].to_pylist() == list(range(450, 520))
    assert read_groups == [4, 5]


def test_the_fetch_survives_a_vacuum_of_files_its_index_lists(tmp_path, caplog):
    log = open_log(tmp_path)
    fill(log, [10] * 6)
    # another engine rewrites the table (OPTIMIZE under the partition's lease) and VACUUM deletes the
    # old files; the broker's file index still lists them
    DeltaTable(log.table_uri).optimize.compact()
    DeltaTable(log.table_uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with caplog.at_level("INFO", logger="lakelog.log_tables.offset_scan"):
        got = log.read(5, max_bytes=1 << 30)
    assert got["offset"].to_pylist() == list(range(5, 60))
    assert got.equals(spark_rows(log.table_uri, 5, 60))
    assert "vanished" in caplog.text


def test_a_fetch_of_offsets_gone_from_the_table_is_out_of_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, [10] * 5)
    # retention by another engine, then VACUUM: the broker's index and log start offset are stale
    DeltaTable(log.table_uri).delete("offset < 25")
    DeltaTable(log.table_uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(3)
    assert (e.value.offset, e.value.log_start_offset, e.value.high_watermark) == (3, 25, 50)
    assert log.read(30, max_bytes=1 << 30)["offset"].to_pylist() == list(range(30, 50))


def test_a_file_snapshot_finds_the_files_of_a_range():
    def f(lo, hi):
        return DataFile(f"{lo}.parquet", lo, hi, None, None if lo is None else hi - lo + 1, 10)

    disjoint = FileSnapshot("t", (f(0, 9), f(10, 19), f(25, 29), f(30, 49)), None, "")
    names = lambda files: [x.path for x in files]  # noqa: E731
    assert names(disjoint.overlapping(12, 26)) == ["10.parquet", "25.parquet"]
    assert names(disjoint.overlapping(20, 25)) == []  # a gap (compacted topic)
    assert names(disjoint.overlapping(0, 1000)) == [x.path for x in disjoint.files]
    assert (disjoint.first_offset, disjoint.end_offset) == (0, 50)
    overlapping = FileSnapshot("t", (f(0, 30), f(10, 19), f(25, 29)), None, "")
    assert names(overlapping.overlapping(20, 21)) == ["0.parquet"]
    assert names(overlapping.overlapping(26, 27)) == ["0.parquet", "25.parquet"]
    assert offset_scan.groups_of_files(overlapping.files) == [list(overlapping.files)]
