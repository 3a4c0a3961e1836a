"""RecordBatch v2 to and from Arrow (lakelog.kafka.records), against aiokafka's builder."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from aiokafka.codec import snappy_encode
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from crc32c import crc32c

from lakelog.kafka.records import CorruptBatchError, build_batch, decode_batches

LIMIT = 1 << 20


def _built(codec: int, n: int = 50) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=7,
                                        producer_epoch=1, base_sequence=10, batch_size=2**20)
    for i in range(n):
        builder.append(i, 1_700_000_000_000 + i, f"k{i}".encode(), b"v" * i, [("h", b"1")] if i % 2 else [])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])  # none, gzip, snappy, lz4, zstd
def test_every_codec_decodes_to_the_same_columns(codec):
    (batch,) = decode_batches(_built(codec), max_uncompressed_bytes=LIMIT)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 10)
    rows = batch.records.to_pylist()
    assert [(r["key"], r["value"], r["timestamp"]) for r in rows] == [
        (f"k{i}".encode(), b"v" * i, 1_700_000_000_000 + i) for i in range(50)]
    assert rows[1]["headers"] == [{"key": "h", "value": b"1"}] and rows[0]["headers"] == []


def test_xerial_framed_snappy_as_the_java_client_sends_it():
    raw = bytearray(_built(0))
    payload = snappy_encode(bytes(raw[61:]), xerial_compatible=True, xerial_blocksize=256)
    assert payload[:8] == b"\x82SNAPPY\x00"
    batch = raw[:61] + payload
    batch[22] |= 2
    struct.pack_into(">i", batch, 8, 49 + len(payload))
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    (decoded,) = decode_batches(bytes(batch), max_uncompressed_bytes=LIMIT)
    assert decoded.records.num_rows == 50


def test_decompression_past_the_bound_is_refused():
    with pytest.raises(CorruptBatchError, match="do not decompress into 100 bytes"):
        decode_batches(_built(4), max_uncompressed_bytes=100)


def test_a_fetch_batch_keeps_the_log_offsets():
    (batch,) = decode_batches(_built(0, 3), max_uncompressed_bytes=LIMIT)
    rows = batch.records.append_column("offset", pa.array([40, 41, 45], pa.int64()))
    rows = rows.set_column(rows.schema.get_field_index("timestamp"), "timestamp",
                           pa.array([1_700_000_000_000_000] * 3, pa.timestamp("us", tz="UTC")))
    out = DefaultRecordBatch(build_batch(rows))
    assert out.validate_crc()
    assert [(r.offset, r.timestamp, r.key) for r in out] == [(40, 1_700_000_000_000, b"k0"),
                                                           (41, 1_700_000_000_000, b"k1"),
                                                           (45, 1_700_000_000_000, b"k2")]
