"""Columns of nulls and zeros that take no resident memory (:mod:`lakelog.log_tables.zero_columns`): the same
rows and Arrow sizes as pyarrow's, so reads and fetch byte budgets do not change, and no memory until written."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakelog.log_tables.records import normalize_produce_batch, to_log_batch
from lakelog.log_tables.schema import HEADERS_TYPE, TIMESTAMP_TYPE, with_attributes
from lakelog.log_tables.zero_columns import nulls, zeros

TYPES = [pa.int64(), pa.int32(), pa.int16(), pa.int8(), TIMESTAMP_TYPE, pa.binary(), pa.string(), HEADERS_TYPE]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("kind", TYPES, ids=str)
@pytest.mark.parametrize("n", [0, 1, 9, 100_000])
def test_nulls_are_pyarrows_nulls_row_for_row_and_byte_for_byte(kind, n):
    ours, theirs = nulls(n, kind), pa.nulls(n, kind)
    ours.validate(full=True)
    assert ours.equals(theirs) and ours.null_count == n
    assert ours.nbytes == theirs.nbytes  # a fetch's byte budget counts them alike
    for lo, length in [(0, n), (n // 3, n // 2)]:
        assert ours.slice(lo, length).nbytes == theirs.slice(lo, length).nbytes
    assert pa.concat_arrays([ours, pa.array([None], kind)]).equals(pa.nulls(n + 1, kind))


@pytest.mark.parametrize("n", [1, 100_000])
def test_nulls_refuse_a_type_they_do_not_lay_out_at_any_size(n):
    for kind in (pa.float64(), pa.large_binary(), pa.struct([("a", pa.int8())])):
        with pytest.raises(TypeError, match="no unresident nulls"):
            nulls(n, kind)


def test_nulls_and_zeros_take_no_resident_memory_even_when_read():
    n = 20_000_000  # 160 MB of int64 as pyarrow's nulls
    before = rss_mb()
    columns = [nulls(n, pa.int64()), nulls(n, pa.binary()), nulls(n, HEADERS_TYPE), zeros(n, pa.int64())]
    for column in columns:
        for buffer in column.buffers():
            if buffer is not None:
                zlib.crc32(buffer)  # every byte read, as a segment write and its CRC do
    assert rss_mb() - before < 16
    assert zeros(5, pa.int8()).to_pylist() == [0] * 5


def test_a_plain_produce_keeps_only_offsets_timestamps_epochs_and_values_resident():
    """1,000,000 records of a value each, not idempotent: the log batch's producer columns, attributes, keys,
    headers and timestamps from the request (all null) cost nothing resident: 15 bytes a record before."""
    n = 1_000_000
    values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
                                                    pa.py_buffer(np.full(n, ord("7"), np.uint8))])
    records = normalize_produce_batch(pa.table({"value": values}))
    before = rss_mb()
    batch = with_attributes(to_log_batch(records, base_offset=0, leader_epoch=3, now_ms=1_700_000_000_000))
    grown = rss_mb() - before
    dense = sum(batch[name].nbytes for name in ("offset", "timestamp", "leader_epoch"))  # 20 bytes a record
    assert grown < dense / 2**20 + 6, f"the log batch made {grown:.0f} MB resident, {dense / 2**20:.0f} MB of them dense columns"
    row = batch.slice(n - 1).to_pylist()[0]
    assert row["offset"] == n - 1 and row["value"] == b"7" and row["leader_epoch"] == 3
    assert (row["key"], row["headers"], row["producer_id"], row["producer_epoch"], row["sequence"], row["attributes"]) == (
        None, None, None, None, None, 0)
    assert int(row["timestamp"].timestamp() * 1000) == 1_700_000_000_000
