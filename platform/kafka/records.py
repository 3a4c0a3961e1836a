"""RecordBatch v2 to and from the log's Arrow columns: the listener's only use of aiokafka's
``aiokafka.record`` (its Cython reader and builder), ``cramjam`` (bounded decompression) and ``crc32c``.

A produce request's ``records`` field holds one or more RecordBatch v2 (Kafka's ``DefaultRecordBatch``:
``baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32 (CRC-32C of
everything after it), attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
producerId int64, producerEpoch int16, baseSequence int32, records [Record]``). Each is checked as Kafka's
``LogValidator`` checks it (magic 2, the CRC, its length against the bytes sent, the record count and
offset deltas, not a control batch) before anything of the request is written, and decoded into the
:data:`~lakelog.log_tables.records.PRODUCE_SCHEMA` table the request layer's
:class:`~lakelog.requests.produce.ProduceRequest` takes. A fetch's rows are built back into one
uncompressed batch whose offsets are the log's.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

import cramjam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from crc32c import crc32c

from lakelog.errors import MalformedBodyError
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.log_tables.schema import HEADERS_TYPE, timestamps_us

__all__ = ["BATCH_OVERHEAD_BYTES", "CorruptBatchError", "InvalidBatchError", "ProducedBatch", "build_batch",
           "decode_batches"]

_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC = struct.Struct(">I")
#: bytes of a RecordBatch v2 header (Kafka's ``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``)
BATCH_OVERHEAD_BYTES = 61
_CONTROL_BIT = 0x20
_TRANSACTIONAL_BIT = 0x10


class CorruptBatchError(MalformedBodyError):
    """A batch whose bytes are broken: wrong magic, bad CRC, a length past the data, undecodable records
    (Kafka's CORRUPT_MESSAGE; 400 / 40001 as any malformed body)."""


class InvalidBatchError(MalformedBodyError):
    """A well-formed batch a client may not send: a control batch, a record count or offset deltas that
    disagree with its records (Kafka's INVALID_RECORD; 400 / 40001 as any malformed body)."""


@dataclass(frozen=True)
class ProducedBatch:
    """One decoded batch of a produce request.

    Attributes:
        records: the :data:`~lakelog.log_tables.records.PRODUCE_SCHEMA` table (key, value, headers,
            timestamp ms), one row per record.
        producer_id, producer_epoch, base_sequence: the idempotent producer's (-1 when none).
        transactional: the batch's transactional attribute bit.
    """

    records: pa.Table
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool


def decode_batches(data: bytes, *, max_uncompressed_bytes: int) -> list[ProducedBatch]:
    """Check and decode every RecordBatch v2 of a produce request's ``records`` bytes.

    Args:
        max_uncompressed_bytes: the most bytes a compressed batch's records may decompress to (the
            broker's ``socket.request.max.bytes``): decompression writes into a buffer of this size and
            stops there, so a small batch that inflates without end (a decompression bomb) costs at most
            this much memory and is refused.

    Raises:
        CorruptBatchError: magic other than 2, bad CRC-32C, a batch length past the data or under the
            header, records that fail to decompress or decode.
        InvalidBatchError: a control batch, or records that disagree with the batch's record count or
            offset deltas (0 to n-1).
    """
    view = memoryview(data)
    out: list[ProducedBatch] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < BATCH_OVERHEAD_BYTES:
            raise CorruptBatchError(f"{len(view) - pos} trailing bytes are too few for a record batch")
        _, length, _, magic = _HEAD.unpack_from(view, pos)
        end = pos + 12 + length
        if length < BATCH_OVERHEAD_BYTES - 12 or end > len(view):
            raise CorruptBatchError(f"batch length {length} does not fit the {len(view) - pos} bytes sent")
        if magic != 2:
            raise CorruptBatchError(f"message format v{magic} is not accepted (Kafka 4 reads v2 only)")
        raw = view[pos:end]
        if crc32c(raw[21:]) != _CRC.unpack_from(raw, 17)[0]:
            raise CorruptBatchError("the batch's CRC-32C does not match its bytes")
        out.append(_decode_one(_uncompressed(raw, max_uncompressed_bytes)))
        pos = end
    return out


_XERIAL_HEADER = b"\x82SNAPPY\x00"


def _inflate(codec: int, payload: memoryview, out: np.ndarray) -> int:
    """Decompress ``payload`` into ``out``; the bytes written. Raises cramjam's DecompressionError when it
    does not fit (or is broken)."""
    if codec == 1:
        return cramjam.gzip.decompress_into(payload, out)
    if codec == 3:
        return cramjam.lz4.decompress_into(payload, out)
    if codec == 4:
        return cramjam.zstd.decompress_into(payload, out)
    if bytes(payload[:8]) != _XERIAL_HEADER:  # snappy: raw, or the Java client's xerial blocks
        return cramjam.snappy.decompress_raw_into(payload, out)
    n, pos = 0, 16
    while pos < len(payload):
        (size,) = struct.unpack_from(">i", payload, pos)
        n += cramjam.snappy.decompress_raw_into(payload[pos + 4:pos + 4 + size], out[n:])
        pos += 4 + size
    return n


def _uncompressed(raw: memoryview, max_bytes: int) -> bytes:
    """The batch with its records decompressed (attributes' codec bits cleared, length updated; the CRC is
    not rewritten, it was checked on the wire bytes), decompressed into at most ``max_bytes``."""
    codec = raw[22] & 0x07
    if codec == 0:
        return bytes(raw)
    if codec > 4:
        raise CorruptBatchError(f"compression codec {codec} is unknown")
    out = np.empty(max_bytes, dtype=np.uint8)  # pages are committed only as they are written
    try:
        n = _inflate(codec, raw[BATCH_OVERHEAD_BYTES:], out)
    except Exception as e:
        raise CorruptBatchError(f"the batch's records do not decompress into {max_bytes} bytes "
                                f"(socket.request.max.bytes): {e}") from e
    head = bytearray(raw[:BATCH_OVERHEAD_BYTES])
    head[22] &= 0xF8
    struct.pack_into(">i", head, 8, BATCH_OVERHEAD_BYTES - 12 + n)
    return bytes(head) + out[:n].tobytes()


def _decode_one(raw: bytes) -> ProducedBatch:
    batch = DefaultRecordBatch(raw)
    if batch.is_control_batch:
        raise InvalidBatchError("a client may not send a control batch")
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[dict]] = []
    timestamps: list[int] = []
    deltas_ok = True
    try:
        for i, record in enumerate(batch):
            deltas_ok = deltas_ok and record.offset - batch.base_offset == i
            keys.append(record.key)
            values.append(record.value)
            headers.append([{"key": k, "value": v} for k, v in record.headers] if record.headers else [])
            timestamps.append(record.timestamp)
    except InvalidBatchError:
        raise
    except Exception as e:  # the reader's own errors (CorruptRecordException, decompression, struct)
        raise CorruptBatchError(f"the batch's records cannot be read: {e}") from e
    count = struct.unpack_from(">i", raw, 57)[0]
    if count != len(keys) or not deltas_ok:
        raise InvalidBatchError(f"the batch claims {count} record(s) but holds {len(keys)} with offset deltas "
                                "0 to n-1" if deltas_ok else "the batch's offset deltas are not 0 to n-1")
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                      "headers": pa.array(headers, HEADERS_TYPE), "timestamp": pa.array(timestamps, pa.int64())},
                     schema=PRODUCE_SCHEMA)
    return ProducedBatch(table, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                         bool(batch.attributes & _TRANSACTIONAL_BIT))


def build_batch(rows: pa.Table) -> bytes:
    """One uncompressed RecordBatch v2 of ``rows`` (the log's ``offset``, ``timestamp``, ``key``, ``value``,
    ``headers`` columns, offset order; gaps allowed, as after compaction), its base offset the first row's;
    empty bytes for no rows.

    aiokafka's builder appends the records one by one; the columns reach it as plain lists (offsets and
    timestamps through numpy, which is quicker than Arrow's ``to_pylist``), and the headers column is
    turned into Python lists only when some record has headers (``bench/kafka_protocol.py --only codec``
    measures this against the per-record reference).
    """
    n = rows.num_rows
    if n == 0:
        return b""
    offsets = rows["offset"].to_numpy().tolist()
    timestamps = pc.divide(timestamps_us(rows["timestamp"]), 1000).to_numpy().tolist()  # us -> ms (integer division)
    keys = rows["key"].to_pylist()
    values = rows["value"].to_pylist()
    headers_column = rows["headers"]
    if pc.max(pc.list_value_length(headers_column)).as_py():
        headers = [[(h["key"], h["value"]) for h in hdrs] if hdrs else [] for hdrs in headers_column.to_pylist()]
    else:
        headers = itertools.repeat([], n)
    base = offsets[0]
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    append = builder.append
    for offset, ts, key, value, hdrs in zip(offsets, timestamps, keys, values, headers):
        append(offset - base, ts, key, value, hdrs)
    out = builder.build()
    struct.pack_into(">q", out, 0, base)  # baseOffset lies outside the CRC
    return bytes(out)
