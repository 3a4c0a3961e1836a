"""PartitionLog: one partition replica as a real Delta table in tmp_path (no ZooKeeper, no broker).

Covers offset assignment, reads by offset range from the tail cache and from the Parquet files,
recovery on reopen, out-of-range errors, timestamps, compression and agreement with delta-rs readers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from lakelog.config import TopicConfig
from lakelog.errors import LakelogError
from lakelog.log_tables.errors import LogClosedError, LogStorageError, OffsetOutOfRangeError
from lakelog.log_tables.partition_log import LOG_END_OFFSET_KEY, PartitionLog
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.log_tables.schema import HEADERS_TYPE, LOG_SCHEMA

NOW_MS = 1_700_000_000_000


def open_log(path: Path, *, configs: dict | None = None, cache: int = 32 * 1024 * 1024,
             topic: str = "orders", partition: int = 0) -> PartitionLog:
    return PartitionLog.open(topic=topic, partition=partition, table_uri=path / f"{topic}-{partition}",
                             config=TopicConfig.parse({"lake.commit.interval.ms": "0", **(configs or {})}),
                             tail_cache_max_bytes=cache)


def batch(start: int, n: int, *, value_size: int = 8, headers: bool = False, timestamps=None) -> pa.Table:
    """n records whose key is b"k{i}" and value encodes i (so every record is recognisable)."""
    keys = [f"k{i}".encode() for i in range(start, start + n)]
    values = [f"v{i}:".encode().ljust(value_size, b"x") for i in range(start, start + n)]
    cols = {"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())}
    if headers:
        cols["headers"] = pa.array([[{"key": "id", "value": str(i).encode()}] for i in range(start, start + n)],
                                   HEADERS_TYPE)
    if timestamps is not None:
        cols["timestamp"] = pa.array(timestamps, pa.int64())
    return pa.table(cols)


def fill(log: PartitionLog, sizes: list[int], **kwargs) -> int:
    """Append batches of the given sizes (records numbered from the LEO); advance the HW; return the LEO."""
    for n in sizes:
        start = log.log_end_offset
        info = log.append(batch(start, n, **kwargs), now_ms=NOW_MS)
        assert (info.base_offset, info.last_offset, info.count) == (start, start + n - 1, n)
    log.advance_high_watermark(log.log_end_offset)
    return log.log_end_offset


def assert_records(table: pa.Table, start: int, end: int) -> None:
    """``table`` holds exactly the records ``start <= offset < end`` of :func:`batch`, in order."""
    offsets = table["offset"].to_pylist()
    assert offsets == list(range(start, end)), (offsets[:5], start, end)
    assert table["key"].to_pylist() == [f"k{i}".encode() for i in range(start, end)]
    for i, v in zip(range(start, end), table["value"].to_pylist()):
        assert v.startswith(f"v{i}:".encode())


def data_files(log: PartitionLog) -> dict[str, tuple[int, int]]:
    """Absolute path of each data file -> (min offset, max offset), from the file itself."""
    out = {}
    for uri in DeltaTable(log.table_uri).file_uris():
        path = uri.removeprefix("file://")
        offsets = pq.read_table(path, columns=["offset"])["offset"]
        out[path] = (pa.compute.min(offsets).as_py(), pa.compute.max(offsets).as_py())
    return out


# -- offsets ------------------------------------------------------------------------------------

def test_new_log_is_empty_and_offsets_are_dense_across_appends(tmp_path):
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert log.read(0).num_rows == 0
    assert log.read(0).schema == LOG_SCHEMA

    expected_base = 0
    for n in [1, 5, 2, 17, 1, 100]:
        info = log.append(batch(expected_base, n))
        assert info.base_offset == expected_base
        assert info.last_offset == expected_base + n - 1
        assert info.count == n
        expected_base += n
        assert log.log_end_offset == expected_base
    assert info.version == log.version == 6  # version 0 creates the table, then one commit per append

    log.advance_high_watermark(log.log_end_offset)
    assert_records(log.read(0, max_bytes=1 << 30), 0, expected_base)
    table = DeltaTable(log.table_uri).to_pyarrow_table().sort_by("offset")
    assert table["offset"].to_pylist() == list(range(expected_base))


def test_append_refuses_empty_batches_and_closed_logs(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(ValueError):
        log.append(PRODUCE_SCHEMA.empty_table())
    fill(log, [3])
    log.close()
    with pytest.raises(LogClosedError) as e:
        log.append(batch(3, 1))
    assert e.value.retriable and e.value.http_status == 503
    assert log.log_end_offset == 3
    assert_records(log.read(0), 0, 3)  # reads still work after close


def test_high_watermark_bounds_reads_and_never_moves_back(tmp_path):
    log = open_log(tmp_path)
    fill(log, [5])
    log.append(batch(5, 5))  # appended, not yet committed by the ISR
    assert (log.log_end_offset, log.high_watermark) == (10, 5)
    assert_records(log.read(0), 0, 5)  # consumers see offsets < HW only
    assert log.read(5).num_rows == 0  # fetching at the HW is not an error
    assert_records(log.read(0, end_offset=10), 0, 10)  # replica fetches read up to the LEO
    assert_records(log.read(7, end_offset=9), 7, 9)

    assert log.advance_high_watermark(100)  # capped at the LEO
    assert log.high_watermark == 10
    assert not log.advance_high_watermark(3)
    assert log.high_watermark == 10

    moved = []
    log.add_high_watermark_listener(lambda lg: moved.append(lg.high_watermark))
    log.append(batch(10, 2))
    log.advance_high_watermark(12)
    assert moved == [12]


# -- reads --------------------------------------------------------------------------------------

def test_reads_from_the_tail_cache_never_touch_disk(tmp_path):
    log = open_log(tmp_path)
    leo = fill(log, [10] * 8, headers=True)
    # Remove every data file: the newest records must still be served from memory.
    for path in data_files(log):
        os.remove(path)
    for start in range(0, leo + 1, 7):
        for end in (start, start + 1, start + 13, leo):
            if end < start or end > leo:
                continue
            assert_records(log.read(start, end_offset=end), start, end)
    got = log.read(33, columns=["offset", "headers"])
    assert got.column_names == ["offset", "headers"]
    assert got["headers"].to_pylist()[0] == [{"key": "id", "value": b"33"}]


@pytest.mark.parametrize("cache", [0, 1], ids=["no-cache", "one-batch-cache"])
def test_reads_from_disk_across_many_files(tmp_path, cache):
    # cache=0: every read hits the Parquet files; cache=1 byte keeps only the newest batch in memory,
    # so ranges cross from files into the cache.
    log = open_log(tmp_path, cache=cache)
    sizes = [7, 1, 12, 3, 9, 9, 1, 20, 5, 6]
    leo = fill(log, sizes)
    assert len(data_files(log)) == len(sizes)
    for start in [0, 1, 6, 7, 8, 20, 22, 23, 40, 50, leo - 6, leo - 1, leo]:
        for end in [start, start + 1, start + 2, start + 15, start + 40, leo]:
            if end > leo or end < start:
                continue
            assert_records(log.read(start, end_offset=end, max_bytes=1 << 30), start, end)
        assert_records(log.read(start, max_bytes=1 << 30), start, leo)


def test_range_reads_open_only_the_files_that_hold_the_range(tmp_path):
    log = open_log(tmp_path, cache=0)
    leo = fill(log, [10] * 10)  # files hold 0-9, 10-19, ..., 90-99
    log.close()
    log = open_log(tmp_path, cache=0)
    assert log.log_end_offset == leo
    files = data_files(log)
    assert sorted(files.values()) == [(lo, lo + 9) for lo in range(0, 100, 10)]
    # Delete every file that does not overlap offsets 25..46: a read that opened one would fail.
    for path, (lo, hi) in files.items():
        if hi < 25 or lo > 46:
            os.remove(path)
    # Exactly the three files holding 20-29, 30-39 and 40-49 are left on disk.
    assert sorted(r for path, r in files.items() if os.path.exists(path)) == [(20, 29), (30, 39), (40, 49)]
    assert_records(log.read(25, end_offset=47), 25, 47)
    assert_records(log.read(20, end_offset=30), 20, 30)
    one = log.read(25, max_bytes=1)  # at least one record, and only the first file needed
    assert_records(one, 25, 26)


@pytest.mark.parametrize("cache", [0, 32 * 1024 * 1024], ids=["disk", "cache"])
def test_max_bytes_inside_a_batch_stops_inside_that_batch(tmp_path, cache):
    # Two batches of 10 records; a limit of about half a batch returns the first few records of the
    # first batch, contiguous from the start offset, and nothing of the second batch.
    log = open_log(tmp_path, cache=cache)
    fill(log, [10, 10], value_size=100)
    half_batch = log.read(0, end_offset=10).nbytes // 2
    page = log.read(0, max_bytes=half_batch)
    assert 1 <= page.num_rows < 10
    assert_records(page, 0, page.num_rows)
    page = log.read(3, max_bytes=half_batch)
    assert 1 <= page.num_rows <= 7
    assert_records(page, 3, 3 + page.num_rows)


@pytest.mark.parametrize("cache", [0, 2048, 32 * 1024 * 1024], ids=["disk", "mixed", "cache"])
def test_max_bytes_pages_through_the_log_one_or_more_records_at_a_time(tmp_path, cache):
    log = open_log(tmp_path, cache=cache)
    leo = fill(log, [4, 4, 30, 2, 10], value_size=200)
    one_record = log.read(0, max_bytes=1 << 30).nbytes / leo

    # max_bytes below one record still returns one record (KIP-74), so a consumer always progresses.
    for start in range(leo):
        t = log.read(start, max_bytes=1)
        assert t.num_rows == 1 and t["offset"][0].as_py() == start

    for max_bytes in (1, 300, 1000, 5000):
        pages, start = [], 0
        while start < leo:
            page = log.read(start, max_bytes=max_bytes)
            assert page.num_rows >= 1
            assert page["offset"][0].as_py() == start
            # a soft limit: never more than one record beyond it
            assert page.nbytes <= max(max_bytes, 0) + 2 * one_record, (max_bytes, page.num_rows, page.nbytes)
            pages.append(page)
            start += page.num_rows
        assert_records(pa.concat_tables(pages), 0, leo)
        if max_bytes >= 1000:
            assert len(pages) < leo  # the limit groups several records per page


# -- recovery -----------------------------------------------------------------------------------

def test_reopen_recovers_offsets_and_continues_without_gap(tmp_path):
    log = open_log(tmp_path)
    leo = fill(log, [3, 4, 5])
    log.close()

    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, leo, leo)
    assert_records(log.read(0), 0, leo)  # from disk: the cache starts empty
    info = log.append(batch(leo, 6))
    assert info.base_offset == leo == 12
    log.advance_high_watermark(log.log_end_offset)
    assert_records(log.read(0), 0, 18)

    # reopen without a clean close (a crash: nothing is flushed by close())
    log2 = open_log(tmp_path)
    assert log2.log_end_offset == 18
    assert log2.append(batch(18, 1)).base_offset == 18
    log2.advance_high_watermark(19)
    assert_records(log2.read(0), 0, 19)


def test_reopen_after_a_retention_delete_keeps_log_start_and_end(tmp_path):
    log = open_log(tmp_path)
    fill(log, [5, 5, 5])
    log.close()
    # What a retention job does: drop the oldest files in one Delta commit, recording the LEO.
    DeltaTable(log.table_uri).delete("offset < 5", commit_properties=CommitProperties(
        custom_metadata={LOG_END_OFFSET_KEY: "15"}))
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (5, 15)
    assert_records(log.read(5), 5, 15)

    # Everything deleted: the offsets are kept, the next record gets offset 15.
    log.close()
    DeltaTable(log.table_uri).delete(commit_properties=CommitProperties(custom_metadata={LOG_END_OFFSET_KEY: "15"}))
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (15, 15, 15)
    assert log.append(batch(15, 2)).base_offset == 15


def test_an_emptied_log_keeps_its_offsets_after_vacuum(tmp_path):
    # Retention empties the log (recording the LEO in its commit), then a maintenance VACUUM commits
    # (delta-rs and delta-spark log "VACUUM START"/"VACUUM END" commits without lakelog's key). Offsets
    # must never be reused: the next record still gets offset 9, not 0.
    log = open_log(tmp_path)
    fill(log, [3, 3, 3])
    log.close()
    table = DeltaTable(log.table_uri)
    table.delete(commit_properties=CommitProperties(custom_metadata={LOG_END_OFFSET_KEY: "9"}))
    table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert table.history(1)[0]["operation"].startswith("VACUUM")

    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (9, 9, 9)
    assert log.append(batch(9, 1)).base_offset == 9


def test_out_of_range_offsets_answer_42202_with_the_valid_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, [5, 5, 5])
    log.close()
    DeltaTable(log.table_uri).delete("offset < 5", commit_properties=CommitProperties(
        custom_metadata={LOG_END_OFFSET_KEY: "15"}))
    log = open_log(tmp_path)

    for bad in (0, 4, 16, 1000):
        with pytest.raises(OffsetOutOfRangeError) as e:
            log.read(bad)
        err = e.value
        assert isinstance(err, LakelogError)
        assert err.error_code == 42226 and err.http_status == 422
        assert not err.retriable
        assert (err.offset, err.log_start_offset, err.high_watermark) == (bad, 5, 15)
        assert err.to_body()["error_code"] == 42226
        assert f"Offset {bad}" in err.message and "5" in err.message and "15" in err.message
        assert "orders-0" in err.message
    assert log.read(15).num_rows == 0  # at the HW: empty, not an error
    assert_records(log.read(5), 5, 15)


# -- timestamps ---------------------------------------------------------------------------------

def _ms(table: pa.Table) -> list[int]:
    return [int(ts.timestamp() * 1000) for ts in table["timestamp"].to_pylist()]


def test_create_time_keeps_producer_timestamps_and_fills_missing_ones(tmp_path):
    log = open_log(tmp_path)  # message.timestamp.type=CreateTime (the default)
    info = log.append(batch(0, 3, timestamps=[1_600_000_000_123, None, 1_500_000_000_000]), now_ms=NOW_MS)
    assert info.log_append_time_ms == NOW_MS
    log.append(batch(3, 1), now_ms=NOW_MS + 5)  # no timestamp column at all
    log.advance_high_watermark(4)
    t = log.read(0)
    assert t.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert _ms(t) == [1_600_000_000_123, NOW_MS, 1_500_000_000_000, NOW_MS + 5]


def test_log_append_time_overrides_producer_timestamps(tmp_path):
    log = open_log(tmp_path, configs={"message.timestamp.type": "LogAppendTime"})
    info = log.append(batch(0, 3, timestamps=[1_600_000_000_123, None, 1]), now_ms=NOW_MS)
    assert info.log_append_time_ms == NOW_MS
    log.advance_high_watermark(3)
    assert _ms(log.read(0)) == [NOW_MS] * 3
    # and on disk too
    assert _ms(DeltaTable(log.table_uri).to_pyarrow_table()) == [NOW_MS] * 3


def test_timestamps_as_arrow_timestamps_are_accepted(tmp_path):
    log = open_log(tmp_path)
    ts = pa.array([1_600_000_000_123_000, 1_600_000_000_456_000], pa.timestamp("us", tz="UTC"))
    log.append(pa.table({"value": pa.array([b"a", b"b"]), "timestamp": ts}))
    log.advance_high_watermark(2)
    assert _ms(log.read(0)) == [1_600_000_000_123, 1_600_000_000_456]


# -- storage format -----------------------------------------------------------------------------

@pytest.mark.parametrize("compression, codec", [("zstd", "ZSTD"), ("producer", "SNAPPY"), ("gzip", "GZIP"),
                                                ("uncompressed", "UNCOMPRESSED")])
def test_compression_type_sets_the_parquet_codec(tmp_path, compression, codec):
    log = open_log(tmp_path, configs={"compression.type": compression})
    fill(log, [50, 50], value_size=500)
    files = data_files(log)
    assert len(files) == 2
    for path in files:
        meta = pq.ParquetFile(path).metadata
        for rg in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                assert meta.row_group(rg).column(c).compression == codec, (path, c)


def test_delta_rs_reader_sees_exactly_what_the_log_wrote(tmp_path):
    log = open_log(tmp_path)
    records = pa.table({
        "key": pa.array([b"a", None, b"", bytes(range(256)), "ключ".encode()], pa.binary()),
        "value": pa.array([b"1", b"2", None, b"", bytes(range(255, -1, -1))], pa.binary()),
        "headers": pa.array([[{"key": "h", "value": b"x"}, {"key": "n", "value": None}], None, [], [], None],
                            HEADERS_TYPE),
        "timestamp": pa.array([1, None, 3, 4, 5], pa.int64()),
    })
    log.append(records, leader_epoch=7, now_ms=NOW_MS)
    log.append(batch(5, 3), leader_epoch=8, now_ms=NOW_MS)
    log.advance_high_watermark(log.log_end_offset)

    from_log = log.read(0)
    from_delta = DeltaTable(log.table_uri).to_pyarrow_table().sort_by("offset")
    assert from_delta.schema.equals(LOG_SCHEMA), from_delta.schema
    assert from_delta.equals(from_log.combine_chunks())
    # and a reopened log (reading the files, not the cache) agrees
    reread = open_log(tmp_path).read(0)
    assert reread.combine_chunks().equals(from_delta)

    assert from_delta["key"].to_pylist()[:5] == records["key"].to_pylist()
    assert from_delta["value"].to_pylist()[:5] == records["value"].to_pylist()
    assert from_delta["headers"].to_pylist()[0] == [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]
    assert from_delta["leader_epoch"].to_pylist() == [7] * 5 + [8] * 3
    assert from_delta["producer_id"].null_count == 8
    assert _ms(from_delta)[:3] == [1, NOW_MS, 3]


def test_an_unreadable_table_is_a_log_storage_error(tmp_path):
    """delta-rs' and pyarrow's errors do not leak from PartitionLog.open: a table whose Delta log is torn, or
    a Delta table of another schema, is a LogStorageError (500 / 50021) naming the partition."""
    open_log(tmp_path).close()
    first_commit = tmp_path / "orders-0" / "_delta_log" / "00000000000000000000.json"
    first_commit.write_text('{"commitInfo": {"torn"\n')
    with pytest.raises(LogStorageError, match=r"orders-0 .* cannot be opened or read: DeltaError") as e:
        open_log(tmp_path)
    assert (e.value.http_status, e.value.error_code, e.value.retriable) == (500, 50021, False)
    assert type(e.value.__cause__).__name__ == "DeltaError"

    write_deltalake(str(tmp_path / "other-0"), pa.table({"x": [1]}))
    with pytest.raises(LogStorageError, match="other-0 .* cannot be opened or read: ArrowInvalid"):
        open_log(tmp_path, topic="other")
