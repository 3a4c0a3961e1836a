"""A partition holding a record the old writer path stored unreadably (a timestamp whose ``* 1000``
overflowed int64: microseconds that are no whole millisecond) stays readable over HTTP (binary, JSON,
Arrow) and with Spark's reader function; the new append path refuses such a record."""

from __future__ import annotations

import httpx
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from lakelog.client import LakelogClient
from lakelog.ingest_api.codecs import encode_records
from lakelog.log_tables.errors import InvalidTimestampError, RecordTooLargeError
from lakelog.log_tables.reader import read_offset_range
from lakelog.log_tables.records import (
    RECORD_OVERHEAD_BYTES,
    check_record_sizes,
    normalize_produce_batch,
    to_log_batch,
)
from lakelog.log_tables.schema import FETCH_COLUMNS, LOG_SCHEMA, TIMESTAMP_TYPE
from lakelog.log_tables.table_writes import commit_append, open_log_table
from lakelog.protocol.arrow_ipc import read_arrow_ipc

POISON_MS = 9467104535280154  # the reproduction: * 1000 overflows int64


def old_log_batch(offset: int, timestamp_ms: int) -> pa.Table:
    """Log rows as the old ``to_log_batch`` built them: an unchecked ``* 1000`` (wraps around)."""
    return pa.Table.from_arrays([
        pa.array([offset], pa.int64()),
        pc.multiply(pa.array([timestamp_ms], pa.int64()), 1000).cast(TIMESTAMP_TYPE),
        pa.array([b"k"], pa.binary()), pa.array([b'"poison"'], pa.binary()), pa.nulls(1, LOG_SCHEMA.field("headers").type),
        pa.array([0], pa.int32()), pa.nulls(1, pa.int64()), pa.nulls(1, pa.int16()), pa.nulls(1, pa.int32()),
    ], schema=LOG_SCHEMA)


def plant(table_dir, offset: int) -> None:
    table = DeltaTable(str(table_dir))
    commit_append(table, old_log_batch(offset, POISON_MS), compression_type="producer", lake_end_offset=offset + 1)


def test_the_old_batch_is_unreadable_with_a_safe_cast():
    with pytest.raises(pa.ArrowInvalid, match="would lose data"):
        pc.cast(old_log_batch(0, POISON_MS)["timestamp"], pa.timestamp("ms", tz="UTC"))


def test_reader_and_encoders_read_a_planted_record(tmp_path):
    uri, table = open_log_table(tmp_path / "t-0", topic="t", partition=0)
    good = to_log_batch(pa.table({"value": [b"1", b"2"]}), base_offset=0, leader_epoch=0, now_ms=1_700_000_000_000)
    commit_append(table, good, compression_type="producer", lake_end_offset=2)
    plant(tmp_path / "t-0", 2)
    rows = pa.Table.from_batches(list(read_offset_range(uri, 0, 3)))
    assert rows["offset"].to_pylist() == [0, 1, 2]
    for fmt in ("binary", "json"):
        records = orjson.loads(encode_records(rows.select(FETCH_COLUMNS), fmt, topic="t", partition=0))
        assert [r["offset"] for r in records] == [0, 1, 2]
        assert records[0]["timestamp"] == 1_700_000_000_000 and isinstance(records[2]["timestamp"], int)
    arrow = read_arrow_ipc(encode_records(rows.select(FETCH_COLUMNS), "arrow", topic="t", partition=0))
    assert arrow["offset"].to_pylist() == [0, 1, 2] and arrow.schema.field("timestamp").type.unit == "ms"


def test_the_new_append_path_refuses_it():
    with pytest.raises(InvalidTimestampError, match="9223372036854775"):
        to_log_batch(pa.table({"value": [b"x"], "timestamp": pa.array([POISON_MS], pa.int64())}),
                     base_offset=0, leader_epoch=0, now_ms=0)


def test_a_partition_with_a_planted_record_stays_readable_over_http(broker_factory, tmp_path):
    broker = broker_factory()
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("poisoned", partitions=1)
        resp = http.post("/topics/poisoned/partitions/0", json={"records": [{"value": 1}, {"value": 2}]},
                         headers={"Content-Type": "application/vnd.kafka.json.v2+json"})
        assert resp.status_code == 200, resp.text
        refused = http.post("/topics/poisoned", json={"records": [{"value": 1, "timestamp": POISON_MS}]},
                            headers={"Content-Type": "application/vnd.kafka.json.v2+json"})
        assert refused.status_code == 422 and refused.json()["error_code"] == 42221
    broker.stop()
    table_dir = tmp_path / "logs-0" / "poisoned-0"
    plant(table_dir, 2)  # as the old broker wrote it
    broker.start()
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        for accept in ("application/vnd.kafka.binary.v2+json", "application/vnd.kafka.json.v2+json"):
            got = http.get("/topics/poisoned/partitions/0/records", params={"offset": 0, "max_wait_ms": 0},
                           headers={"Accept": accept})
            assert got.status_code == 200, got.text
            assert [r["offset"] for r in got.json()] == [0, 1, 2]
        got = http.get("/topics/poisoned/partitions/0/records", params={"offset": 2, "max_wait_ms": 0},
                       headers={"Accept": "application/vnd.apache.arrow.stream"})
        assert got.status_code == 200, got.text
        assert read_arrow_ipc(got.content)["offset"].to_pylist() == [2]
    rows = pa.Table.from_batches(list(read_offset_range(str(table_dir), 0, 3)))
    assert rows["offset"].to_pylist() == [0, 1, 2]
    assert np.asarray(rows["timestamp"].cast(pa.int64()))[2] == pc.multiply(
        pa.array([POISON_MS], pa.int64()), 1000)[0].as_py()


@pytest.mark.parametrize("sizes", [[900], [10, 900, 10], [10] * 50 + [2_000]])
def test_a_record_over_max_message_bytes_is_refused_whatever_the_batch_around_it(sizes):
    """The size check skips the per-record sizes when the whole batch fits the limit; a record over it
    is still found (named by its index) in a batch of any size."""
    limit = 600
    batch = normalize_produce_batch(pa.table({"value": [b"v" * n for n in sizes]}))
    first = next(i for i, n in enumerate(sizes) if n + RECORD_OVERHEAD_BYTES > limit)
    with pytest.raises(RecordTooLargeError, match=f"Record {first} "):
        check_record_sizes(batch, max_message_bytes=limit, topic="t")
    fits = normalize_produce_batch(pa.table({"value": [b"v" * 10] * 40}))
    assert fits.nbytes + RECORD_OVERHEAD_BYTES > limit  # the per-record path, and every record fits
    check_record_sizes(fits, max_message_bytes=limit, topic="t")
    check_record_sizes(fits.slice(0, 2), max_message_bytes=limit, topic="t")
