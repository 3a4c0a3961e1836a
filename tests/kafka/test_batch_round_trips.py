"""RecordBatch v2 decode and build (lakelog.kafka.records) against the readers and builders of aiokafka and
kafka-python: headers (some, none at all), null keys and values, multi-byte varints, offset gaps, every
codec."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from crc32c import crc32c
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from lakelog.kafka.records import CorruptBatchError, InvalidBatchError, build_batch, decode_batches
from lakelog.log_tables.schema import HEADERS_TYPE

LIMIT = 1 << 24
BASE_TS = 1_700_000_000_000

#: (key, value, headers, timestamp ms): nulls, empty bytes, several headers with a null value, values whose
#: lengths need 1, 2 and 3 varint bytes, timestamps before the first one (negative deltas) and far after
#: it (a varlong of more than 5 bytes)
RECORDS = [
    (b"k0", b"v0", [], BASE_TS),
    (None, b"no key", [("h", b"1")], BASE_TS + 1),
    (b"no value", None, [], BASE_TS - 5),
    (None, None, [("a", b""), ("b", None), ("c\u00e9", b"x" * 200)], BASE_TS + 2),
    (b"", b"", [], BASE_TS),
    (b"k" * 70, b"v" * 300, [], BASE_TS + 10**12),
    (b"big", bytes(range(256)) * 80, [("h", b"2")], BASE_TS),
]


def _aiokafka_batch(records=RECORDS, *, codec: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=9,
                                        producer_epoch=2, base_sequence=5, batch_size=2**30)
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, ts, key, value, headers)
    return bytes(builder.build())


def _kafka_python_batch(records=RECORDS, *, codec: int = 0) -> bytes:
    builder = KafkaPythonBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=9,
                                 producer_epoch=2, base_sequence=5, batch_size=2**30)
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


def _rows(records=RECORDS, offsets=None) -> pa.Table:
    """The log's fetch columns for ``records`` (timestamps in µs, as the log stores them)."""
    offsets = list(range(100, 100 + len(records))) if offsets is None else offsets
    return pa.table({
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array([ts * 1000 for *_, ts in records], pa.timestamp("us", tz="UTC")),
        "key": pa.array([r[0] for r in records], pa.binary()),
        "value": pa.array([r[1] for r in records], pa.binary()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r[2]] for r in records], HEADERS_TYPE),
    })


def _as_tuples(batch) -> list:
    return [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in batch]


#: (builder, codec): aiokafka builds every codec (none, gzip, snappy, lz4, zstd); kafka-python's pure-Python
#: builder only those it finds libraries for (gzip from the standard library)
BUILDS = [(_aiokafka_batch, codec) for codec in range(5)] + [
    (_kafka_python_batch, codec) for codec, has in enumerate(
        (lambda: True, kafka_codec.has_gzip, kafka_codec.has_snappy, kafka_codec.has_lz4, kafka_codec.has_zstd)) if has()]


@pytest.mark.parametrize("builder, codec", BUILDS, ids=[f"{b.__name__[1:-6]}-{c}" for b, c in BUILDS])
def test_decode_reads_what_both_libraries_build(builder, codec):
    raw = builder(codec=codec)
    assert DefaultRecordBatch(raw).validate_crc()
    (batch,) = decode_batches(raw, max_uncompressed_bytes=LIMIT)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 5)
    rows = batch.records.to_pylist()
    assert [(r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]], r["timestamp"]) for r in rows] \
        == [(k, v, h, ts) for k, v, h, ts in RECORDS]


@pytest.mark.parametrize("offsets", [None, [100, 101, 105, 106, 200, 201, 70_000]], ids=["dense", "gaps"])
def test_build_is_byte_identical_to_aiokafkas_builder(offsets):
    rows = _rows(offsets=offsets)
    base = rows["offset"][0].as_py()
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**30)
    for offset, (key, value, headers, ts) in zip(rows["offset"].to_pylist(), RECORDS):
        builder.append(offset - base, ts, key, value, headers)
    expected = bytearray(builder.build())
    struct.pack_into(">q", expected, 0, base)
    assert build_batch(rows) == bytes(expected)


@pytest.mark.parametrize("reader", [DefaultRecordBatch, KafkaPythonBatch], ids=["aiokafka", "kafka-python"])
def test_both_libraries_read_a_fetch_batch_with_gaps(reader):
    offsets = [100, 101, 105, 106, 200, 201, 70_000]  # compacted: gaps, a delta of more than 2 varint bytes
    out = reader(build_batch(_rows(offsets=offsets)))
    assert out.validate_crc()
    assert out.base_offset == 100 and out.producer_id == -1 and not out.is_control_batch
    got = list(out)
    assert [r.offset for r in got] == offsets
    assert [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in got] == RECORDS
    assert out.max_timestamp == max(ts for *_, ts in RECORDS)


def test_build_takes_chunked_columns_and_other_binary_types():
    """A fetch's columns may come in several chunks (segment tail and Delta files) and as large_binary."""
    rows = _rows()
    chunked = pa.concat_tables([rows.slice(0, 3), rows.slice(3)])
    large = chunked.set_column(2, "key", chunked["key"].cast(pa.large_binary()))
    assert build_batch(chunked) == build_batch(large) == build_batch(rows)


def test_a_header_less_fetch_of_many_records_round_trips():
    n = 20_000  # offset deltas past 2 varint bytes (16,384)
    rows = pa.table({"offset": pa.array(np.arange(n, dtype=np.int64)),
                     "timestamp": pa.array(np.full(n, BASE_TS * 1000), pa.timestamp("us", tz="UTC")),
                     "key": pa.nulls(n, pa.binary()), "value": pa.array([b"%d" % i for i in range(n)], pa.binary()),
                     "headers": pa.nulls(n, HEADERS_TYPE)})
    raw = build_batch(rows)
    (back,) = decode_batches(raw, max_uncompressed_bytes=LIMIT)
    assert back.records["value"].to_pylist() == [b"%d" % i for i in range(n)]
    assert back.records["key"].null_count == n and back.records["headers"].to_pylist()[0] == []
    assert len(list(DefaultRecordBatch(raw))) == n


def test_log_append_time_batches_give_every_record_the_max_timestamp():
    raw = bytearray(_aiokafka_batch())
    struct.pack_into(">h", raw, 21, struct.unpack_from(">h", raw, 21)[0] | 0x08)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    (batch,) = decode_batches(bytes(raw), max_uncompressed_bytes=LIMIT)
    assert set(batch.records["timestamp"].to_pylist()) == {struct.unpack_from(">q", raw, 35)[0]}


def test_a_batch_claiming_more_records_than_it_holds_is_invalid():
    raw = bytearray(_aiokafka_batch(RECORDS[:2]))
    struct.pack_into(">i", raw, 57, 5)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    with pytest.raises((InvalidBatchError, CorruptBatchError)):
        decode_batches(bytes(raw), max_uncompressed_bytes=LIMIT)
