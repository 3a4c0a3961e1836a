"""Timestamp bounds (Spark's pushed-down ``timestamp`` filters) prune the Delta files and Parquet row groups a
read opens, by their ``timestamp`` statistics, and filter the rows exactly; files are counted as they are opened.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from lakelog.config import TopicConfig
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.offset_scan import scan_offsets
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.reader import read_offset_range
from lakelog.log_tables.schema import LOG_SCHEMA

T0 = 1_700_000_000_000  # ms


def us(ms: int) -> int:
    return ms * 1000


class CountingFs:
    """A filesystem that counts the files opened (what read_file_range calls)."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        self.fs, self.opened = fs, []

    def open_input_file(self, path: str):
        self.opened.append(path)
        return self.fs.open_input_file(path)


def counting(snapshot: FileSnapshot) -> tuple[FileSnapshot, CountingFs]:
    fs = CountingFs(snapshot.fs)
    return dataclasses.replace(snapshot, fs=fs), fs


def test_timestamp_bounds_open_only_the_files_and_row_groups_whose_statistics_allow_them(tmp_path):
    log = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", tail_cache_max_bytes=0,
                            config=TopicConfig(lake_commit_interval_ms=0))  # one Delta file per append
    # 10 files of 5 records; file k has CreateTimes T0 + 10 s * k + 0..4 s, except that file 7 also holds
    # one record stamped like file 2 (timestamps are not monotonic in offsets)
    times = []
    for k in range(10):
        ts = [T0 + 10_000 * k + 1000 * i for i in range(5)]
        if k == 7:
            ts[3] = T0 + 20_500
        times += ts
        log.append(pa.table({"value": pa.array([b"v"] * 5), "timestamp": pa.array(ts, pa.int64())}))
    snapshot, fs = counting(FileSnapshot.newest(log.table_uri))
    assert len(snapshot.files) == 10 and all(f.min_timestamp_us is not None for f in snapshot.files)

    def scan(low_ms, high_ms, start=0, end=50):
        fs.opened.clear()
        bounds = (None if low_ms is None else us(low_ms), None if high_ms is None else us(high_ms))
        tables = list(scan_offsets(snapshot, start, end, ["offset", "timestamp"], timestamps=bounds,
                                   end_is_committed=True, on_data_loss=pytest.fail))
        return [o for t in tables for o in t["offset"].to_pylist()], len(fs.opened)

    def want(low_ms, high_ms, start=0, end=50):
        return [o for o in range(start, end) if (low_ms is None or times[o] >= low_ms)
                and (high_ms is None or times[o] <= high_ms)]

    # file 7's statistics span T0 + 20.5 s to T0 + 74 s: it is opened for any bounds meeting those
    for low, high, files in [(T0 + 20_000, T0 + 21_000, 2),  # file 2 and file 7 (its stray record)
                             (T0 + 30_000, T0 + 34_000, 2), (T0 + 80_000, T0 + 84_000, 1), (T0 + 93_500, None, 1),
                             (None, T0 + 4_000, 1), (T0 + 5_500, T0 + 5_600, 0), (T0 + 10**9, None, 0),
                             (None, None, 10)]:
        offsets, opened = scan(low, high)
        assert offsets == want(low, high) and opened == files, (low, high)
    assert scan(T0 + 20_000, T0 + 21_000, start=12, end=37) == (want(T0 + 20_000, T0 + 21_000, 12, 37), 2)
    # read_offset_range filters the same way (Spark's tasks read through it)
    got = pa.Table.from_batches(list(read_offset_range(log.table_uri, 0, 50, columns=["offset"],
                                                       timestamps=(us(T0 + 20_000), us(T0 + 21_000)))))
    assert got.column_names == ["offset"] and got["offset"].to_pylist() == want(T0 + 20_000, T0 + 21_000)

    # row groups: one file of 4 row groups, offsets ascending, timestamps by group
    root = tmp_path / "rg"
    root.mkdir()
    n = 40
    table = pa.table({"offset": pa.array(range(n), pa.int64()),
                      "timestamp": pa.array([us(T0 + 1000 * (i // 10)) for i in range(n)], LOG_SCHEMA.field("timestamp").type)})
    pq.write_table(table, root / "f.parquet", row_group_size=10)
    reads = []

    class Pf(pq.ParquetFile):
        def read_row_groups(self, row_groups, **kw):
            reads.extend(row_groups)
            return super().read_row_groups(row_groups, **kw)

    f = DataFile("f.parquet", 0, n - 1, None, n, 1)
    snap = FileSnapshot(str(root), (f,), pafs.LocalFileSystem(), str(root))
    original = pq.ParquetFile
    pq.ParquetFile = Pf
    try:
        out = list(scan_offsets(snap, 0, n, ["offset", "timestamp"], timestamps=(us(T0 + 2000), us(T0 + 2000))))
    finally:
        pq.ParquetFile = original
    assert reads == [2] and [o for t in out for o in t["offset"].to_pylist()] == list(range(20, 30))
