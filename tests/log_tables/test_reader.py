"""lakelog.log_tables.reader: offset-range reads straight from a partition's Delta files (no broker, no Spark).

Tables are written the way the broker writes them (PartitionLog.append: one delta-rs commit per batch),
plus hand-made files for the awkward cases: rows out of order within a file, several row groups, no
statistics, files removed by retention, compaction and VACUUM, a truncated tail.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, WriterProperties, write_deltalake

from lakelog.config import TopicConfig
from lakelog.log_tables import data_files as data_files_module
from lakelog.log_tables import offset_scan
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.reader import (DataLossError, data_files, data_loss, log_start_offset,
                                       offset_for_timestamp, read_offset_range)
from lakelog.log_tables.schema import HEADERS_TYPE, LOG_SCHEMA, TIMESTAMP_TYPE
from lakelog.log_tables.table_writes import commit_truncation

#: these tests are about the Delta table itself: every append is a Delta commit (no segment tail)
SYNC_LAKE = TopicConfig.parse({"lake.commit.interval.ms": "0"})

NOW_MS = 1_700_000_000_000


def make_log(tmp_path, sizes: list[int], *, timestamps=None) -> PartitionLog:
    """A partition table with one data file per entry of ``sizes``; record i has key k{i}, value v{i}."""
    log = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=SYNC_LAKE,
                            tail_cache_max_bytes=0)
    for n in sizes:
        base = log.log_end_offset
        cols = {"key": pa.array([b"k%d" % i for i in range(base, base + n)]),
                "value": pa.array([b"v%d" % i for i in range(base, base + n)]),
                "headers": pa.array([[{"key": "i", "value": b"%d" % i}] if i % 2 else [] for i in range(base, base + n)],
                                    HEADERS_TYPE)}
        if timestamps is not None:
            cols["timestamp"] = pa.array(timestamps[base:base + n], pa.int64())
        log.append(pa.table(cols), now_ms=NOW_MS)
    log.advance_high_watermark(log.log_end_offset)
    return log


def collect(batches) -> pa.Table:
    batches = list(batches)
    return pa.Table.from_batches(batches) if batches else None


def offsets_of(batches) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]


def log_rows(offsets: list[int], *, timestamps_ms=None) -> pa.Table:
    """Log-schema rows for ``offsets`` (in the order given), written as one file by write_deltalake."""
    n = len(offsets)
    ts = timestamps_ms if timestamps_ms is not None else [NOW_MS] * n
    return pa.Table.from_arrays([
        pa.array(offsets, pa.int64()),
        pc.multiply(pa.array(ts, pa.int64()), 1000).cast(TIMESTAMP_TYPE),
        pa.array([b"k%d" % o for o in offsets]),
        pa.array([b"v%d" % o for o in offsets]),
        pa.nulls(n, HEADERS_TYPE),
        pa.array([0] * n, pa.int32()),
        pa.nulls(n, pa.int64()), pa.nulls(n, pa.int16()), pa.nulls(n, pa.int32()),
    ], schema=LOG_SCHEMA)


def spy_files(monkeypatch) -> list[str]:
    """Record the data files the read path (read_offset_range and PartitionLog.read alike) opens."""
    opened: list[str] = []
    real = offset_scan.read_file_range

    def spy(snapshot, f, *args, **kwargs):
        opened.append(snapshot.path(f))
        return real(snapshot, f, *args, **kwargs)

    monkeypatch.setattr(offset_scan, "read_file_range", spy)
    return opened


# -- ranges, order, columns ---------------------------------------------------------------------

def test_reads_exactly_the_range_in_offset_order_from_the_files_that_hold_it(tmp_path, monkeypatch):
    log = make_log(tmp_path, [10] * 10)  # files hold 0-9, 10-19, ..., 90-99
    opened = spy_files(monkeypatch)
    table = collect(read_offset_range(log.table_uri, 25, 47))
    assert table.schema == LOG_SCHEMA
    assert table["offset"].to_pylist() == list(range(25, 47))
    assert table["key"].to_pylist() == [b"k%d" % i for i in range(25, 47)]
    assert table["headers"].to_pylist()[:2] == [[{"key": "i", "value": b"25"}], []]
    assert len(opened) == 3  # 20-29, 30-39, 40-49 only

    opened.clear()
    assert offsets_of(read_offset_range(log.table_uri, 0, 100)) == list(range(100))
    assert len(opened) == 10
    assert offsets_of(read_offset_range(log.table_uri, 99, 1000)) == [99]  # end beyond the log: what is there
    assert list(read_offset_range(log.table_uri, 40, 40)) == []
    assert list(read_offset_range(log.table_uri, 100, 200)) == []


def test_columns_are_returned_in_the_order_asked_and_batches_are_bounded(tmp_path):
    log = make_log(tmp_path, [30, 30])
    batches = list(read_offset_range(log.table_uri, 5, 55, columns=["value", "offset"], batch_rows=7))
    assert all(b.schema.names == ["value", "offset"] for b in batches)
    assert max(b.num_rows for b in batches) == 7
    assert offsets_of(batches) == list(range(5, 55))
    only_values = collect(read_offset_range(log.table_uri, 0, 3, columns=["value"]))
    assert only_values.schema.names == ["value"] and only_values["value"].to_pylist() == [b"v0", b"v1", b"v2"]
    with pytest.raises(ValueError, match="unknown column"):
        list(read_offset_range(log.table_uri, 0, 3, columns=["nope"]))
    with pytest.raises(ValueError):
        list(read_offset_range(log.table_uri, 0, 3, batch_rows=0))


def test_rows_stored_out_of_order_come_back_sorted(tmp_path):
    uri = str(tmp_path / "t-0")
    DeltaTable.create(uri, LOG_SCHEMA)
    shuffled = list(range(0, 500))
    random.Random(7).shuffle(shuffled)
    # small row groups so the reader must merge several of them, each spanning most of the range
    write_deltalake(uri, log_rows(shuffled), mode="append",
                    writer_properties=WriterProperties(max_row_group_size=64, write_batch_size=64))
    write_deltalake(uri, log_rows(list(range(999, 499, -1))), mode="append")
    assert offsets_of(read_offset_range(uri, 0, 1000, batch_rows=100)) == list(range(1000))
    assert offsets_of(read_offset_range(uri, 123, 777)) == list(range(123, 777))


def test_sorted_row_groups_are_pruned_by_their_statistics(tmp_path, monkeypatch):
    uri = str(tmp_path / "t-0")
    DeltaTable.create(uri, LOG_SCHEMA)
    write_deltalake(uri, log_rows(list(range(1000))), mode="append",
                    writer_properties=WriterProperties(max_row_group_size=100, write_batch_size=100))
    read_groups = []
    real = offset_scan.pq.ParquetFile.read_row_groups

    def spy(self, groups, *args, **kwargs):
        read_groups.extend(groups)
        return real(self, groups, *args, **kwargs)

    monkeypatch.setattr(offset_scan.pq.ParquetFile, "read_row_groups", spy)
    assert offsets_of(read_offset_range(uri, 450, 520)) == list(range(450, 520))
    assert len(read_groups) == 2  # 400-499 and 500-599 of ten groups


def test_files_without_statistics_are_read_and_ordered(tmp_path):
    uri = str(tmp_path / "t-0")
    DeltaTable.create(uri, LOG_SCHEMA, configuration={"delta.dataSkippingNumIndexedCols": "0"})
    write_deltalake(uri, log_rows([5, 3, 4]), mode="append")
    write_deltalake(uri, log_rows([0, 2, 1]), mode="append")
    assert all(f.min_offset is None for f in data_files(DeltaTable(uri)))
    assert offsets_of(read_offset_range(uri, 1, 5)) == [1, 2, 3, 4]
    assert log_start_offset(uri) == 0


# -- compaction, VACUUM, pinned versions ----------------------------------------------------------

def test_compacted_runs_read_like_the_files_they_replaced(tmp_path, monkeypatch):
    log = make_log(tmp_path, [10] * 12)
    assert log.lifecycle.merge_head(keep_newest=3) == 9  # offsets 0-89 now in one file
    files = data_files(DeltaTable(log.table_uri))
    assert [(f.min_offset, f.max_offset) for f in files][:2] == [(0, 89), (90, 99)]
    opened = spy_files(monkeypatch)
    assert offsets_of(read_offset_range(log.table_uri, 85, 95)) == list(range(85, 95))
    assert len(opened) == 2
    assert offsets_of(read_offset_range(log.table_uri, 0, 120)) == list(range(120))


def test_a_pinned_version_reads_consistently_and_survives_vacuum(tmp_path, caplog):
    log = make_log(tmp_path, [10] * 6)
    before = DeltaTable(log.table_uri)  # snapshot listing six small files
    log.lifecycle.merge_head(keep_newest=1)
    # the old snapshot still reads its own files (compaction does not delete them) ...
    assert offsets_of(read_offset_range(before, 0, 60)) == list(range(60))
    assert offsets_of(read_offset_range(log.table_uri, 0, 60, version=before.version())) == list(range(60))
    # ... and after a VACUUM deleted them it moves on to the newest snapshot, missing nothing
    DeltaTable(log.table_uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with caplog.at_level("INFO", logger="lakelog.log_tables.offset_scan"):
        assert offsets_of(read_offset_range(before, 0, 60, batch_rows=8)) == list(range(60))
    assert "vanished" in caplog.text


# -- retention: data loss ---------------------------------------------------------------------------

def test_offsets_removed_by_retention_are_reported_as_data_loss(tmp_path):
    log = make_log(tmp_path, [10] * 5)
    DeltaTable(log.table_uri).delete("offset < 25")  # retention (the broker is not writing)
    assert log_start_offset(log.table_uri) == 25
    loss = data_loss(log.table_uri, 10, 40)
    assert (loss.start, loss.end, loss.count, loss.log_start_offset, loss.at_head) == (10, 25, 15, 25, True)
    assert "offsets 10 to 24 (15 records) are no longer in the log" in loss.describe()
    assert data_loss(log.table_uri, 10, 20).end == 20  # the whole range is gone
    assert data_loss(log.table_uri, 25, 50) is None
    assert data_loss(log.table_uri, 30, 30) is None

    with pytest.raises(DataLossError, match="offsets 10 to 24") as e:
        list(read_offset_range(log.table_uri, 10, 40))
    assert e.value.loss == loss and not e.value.retriable

    seen = []
    assert offsets_of(read_offset_range(log.table_uri, 10, 40, on_data_loss=seen.append)) == list(range(25, 40))
    assert seen == [loss]
    assert list(read_offset_range(log.table_uri, 0, 20, on_data_loss=seen.append)) == []

    def stop(loss):
        raise RuntimeError(f"stop at {loss.start}")

    with pytest.raises(RuntimeError, match="stop at 0"):
        list(read_offset_range(log.table_uri, 0, 30, on_data_loss=stop))


def test_an_emptied_table_loses_the_whole_range_and_a_truncated_tail_is_reported(tmp_path):
    log = make_log(tmp_path, [10, 10])
    # the log was truncated below what a reader planned (its commit records the new end: a table whose
    # files end early only because compaction removed its last records is not truncated)
    commit_truncation(DeltaTable(log.table_uri), 15)
    seen = []
    assert offsets_of(read_offset_range(log.table_uri, 5, 20, on_data_loss=seen.append)) == list(range(5, 15))
    assert seen == []  # without end_is_committed the end of a range is just where reading stops
    assert offsets_of(read_offset_range(log.table_uri, 5, 20, on_data_loss=seen.append,
                                        end_is_committed=True)) == list(range(5, 15))
    assert [(x.start, x.end, x.at_head) for x in seen] == [(15, 20, False)]
    assert "missing at the end of the log" in seen[0].describe()

    DeltaTable(log.table_uri).delete()
    assert log_start_offset(log.table_uri) is None
    loss = data_loss(log.table_uri, 3, 9)
    assert (loss.start, loss.end, loss.log_start_offset) == (3, 9, None)


# -- timestamps ---------------------------------------------------------------------------------------

def test_offset_for_timestamp_finds_the_first_record_at_or_after_a_time(tmp_path):
    # CreateTime: not monotonic. offsets 0..29 in three files.
    ts = [NOW_MS + i * 10 for i in range(30)]
    ts[12] = NOW_MS + 1000  # an early-offset record with a late timestamp
    log = make_log(tmp_path, [10, 10, 10], timestamps=ts)
    assert offset_for_timestamp(log.table_uri, NOW_MS) == 0
    assert offset_for_timestamp(log.table_uri, NOW_MS + 55) == 6
    assert offset_for_timestamp(log.table_uri, NOW_MS + 150) == 12  # 12 has ts +1000, before 15 (+150)
    assert offset_for_timestamp(log.table_uri, NOW_MS + 150, start=13) == 15
    assert offset_for_timestamp(log.table_uri, NOW_MS + 1000) == 12
    assert offset_for_timestamp(log.table_uri, NOW_MS + 1001) is None
    assert offset_for_timestamp(log.table_uri, NOW_MS + 250) == 12
    assert offset_for_timestamp(log.table_uri, NOW_MS + 250, end=12) is None
    assert offset_for_timestamp(log.table_uri, NOW_MS + 250, start=13, end=25) is None
    assert offset_for_timestamp(log.table_uri, NOW_MS + 250, start=13, end=26) == 25


def test_object_store_tables_are_read_through_delta_rs_storage(tmp_path, monkeypatch):
    """Non-local URIs use delta-rs' storage handler (same storage options as the Delta log); here
    forced on a local table, which that handler serves too."""
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    log = make_log(tmp_path, [10, 10])
    used = []

    def via_delta_rs(dt, storage_options=None):
        used.append(dt.table_uri)
        return pafs.PyFileSystem(DeltaStorageHandler(dt.table_uri, storage_options)), ""

    monkeypatch.setattr(data_files_module, "filesystem", via_delta_rs)
    assert offsets_of(read_offset_range(log.table_uri, 5, 15)) == list(range(5, 15))
    assert offset_for_timestamp(log.table_uri, NOW_MS) == 0
    assert used
