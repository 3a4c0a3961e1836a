"""Frames of the segment tail: one Arrow record batch each, with its offsets, length and CRC.

A frame (little-endian, :data:`FRAME_HEADER` is 24 bytes)::

    magic u32 "LKL2" | payload length u32 | crc32 u32 | base offset i64 | record count u32 | payload

The payload is one Arrow IPC record batch message of :data:`~lakelog.log_tables.schema.TAIL_SCHEMA`
(the bytes of ``RecordBatch.serialize``); the CRC (zlib's CRC-32) covers base offset, count and payload.
A batch without attributes (:data:`~lakelog.log_tables.schema.LOG_SCHEMA`, and every frame written before
transactions) is framed with magic "LKL1" (:data:`LEGACY_FRAME_MAGIC`): its records read as attributes 0.

:class:`PreparedFrame` writes a small batch as ``serialize`` + one ``writev``. A large one (at least
:data:`STREAMED_FRAME_MIN_BYTES` of buffers: a bulk produce) is streamed from the batch's own buffers in
two passes, the CRC first and then the bytes, so appending it costs no copy of the records (issue: memory
per produce request a small multiple of the body). Both give the same bytes on disk.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Callable

import pyarrow as pa

from lakelog.log_tables.schema import LOG_SCHEMA, TAIL_SCHEMA

__all__ = ["FRAME_HEADER", "FRAME_MAGIC", "FRAME_MAGICS", "LEGACY_FRAME_MAGIC", "STREAMED_FRAME_MIN_BYTES", "PreparedFrame", "decode_frame",
           "encode_frame", "frame_crc", "frame_magic"]

#: magic, payload length, crc32, base offset, record count.
FRAME_HEADER = struct.Struct("<IIIqI")
#: b"LKL2" read as a little-endian u32: a payload of the tail schema (with attributes).
FRAME_MAGIC = 0x324C4B4C
#: b"LKL1": a frame written before transactions, its payload of the log schema (no attributes).
LEGACY_FRAME_MAGIC = 0x314C4B4C
#: The magics a reader accepts.
FRAME_MAGICS = (FRAME_MAGIC, LEGACY_FRAME_MAGIC)
_CRC_FIELDS = struct.Struct("<qI")
#: Batches of at least this many buffer bytes are streamed into the file instead of serialized first.
STREAMED_FRAME_MIN_BYTES = 4 << 20


def frame_crc(base_offset: int, count: int, payload) -> int:
    """CRC-32 of a frame: over its base offset, record count and payload (any bytes-like)."""
    return zlib.crc32(payload, zlib.crc32(_CRC_FIELDS.pack(base_offset, count)))


def frame_magic(schema: pa.Schema) -> int:
    """The magic of a frame holding batches of ``schema``: :data:`FRAME_MAGIC` for the tail schema,
    :data:`LEGACY_FRAME_MAGIC` for the log schema (a batch without attributes).

    Raises:
        ValueError: another schema.
    """
    if schema.equals(TAIL_SCHEMA):
        return FRAME_MAGIC
    if schema.equals(LOG_SCHEMA):
        return LEGACY_FRAME_MAGIC
    raise ValueError(f"a segment frame holds the tail schema {TAIL_SCHEMA} or the log schema, not {schema}")


def encode_frame(base_offset: int, batch: pa.RecordBatch) -> tuple[bytes, pa.Buffer]:
    """``(header, payload)`` of one frame holding ``batch`` (tail or log schema) from offset ``base_offset``."""
    payload = batch.serialize()
    crc = frame_crc(base_offset, batch.num_rows, payload)
    return FRAME_HEADER.pack(frame_magic(batch.schema), payload.size, crc, base_offset, batch.num_rows), payload


def decode_frame(payload: bytes | pa.Buffer, *, magic: int = FRAME_MAGIC) -> pa.RecordBatch:
    """The record batch of a frame's payload: of the tail schema, or the log schema for a frame of
    :data:`LEGACY_FRAME_MAGIC` (a batch without attributes, read as attributes 0).

    Raises:
        pyarrow.ArrowInvalid: the payload is not a record batch of the frame's schema.
    """
    buffer = pa.py_buffer(payload) if isinstance(payload, (bytes, memoryview)) else payload
    return pa.ipc.read_record_batch(buffer, TAIL_SCHEMA if magic == FRAME_MAGIC else LOG_SCHEMA)


class PreparedFrame:
    """One frame ready to write: its header and payload length known, its payload still the batch's.

    A small batch is serialized here (its payload written later with one ``writev``); a large one (at
    least :data:`STREAMED_FRAME_MIN_BYTES` of buffers) gets its CRC by streaming the batch's buffers
    once, and :meth:`write` streams them again into the file.

    Attributes:
        magic: :func:`frame_magic` of the batch.
        length: payload bytes.
        size: frame bytes (header + payload).
    """

    def __init__(self, base_offset: int, batch: pa.RecordBatch) -> None:
        self.batch = batch
        self.magic = frame_magic(batch.schema)
        count = batch.num_rows
        self.payload: pa.Buffer | None = None
        if batch.nbytes < STREAMED_FRAME_MIN_BYTES:
            self.header, self.payload = encode_frame(base_offset, batch)
            self.length = self.payload.size
        else:
            self.length = pa.ipc.get_record_batch_size(batch)
            crc = zlib.crc32(_CRC_FIELDS.pack(base_offset, count))

            def add_to_crc(data) -> None:
                nonlocal crc
                crc = zlib.crc32(data, crc)

            streamed = _stream_message(batch, add_to_crc)
            if streamed != self.length:
                raise ValueError(f"the record batch streamed {streamed} bytes, not its IPC size {self.length}")
            self.header = FRAME_HEADER.pack(self.magic, self.length, crc, base_offset, count)
        self.size = FRAME_HEADER.size + self.length

    def write(self, fd: int) -> None:
        """Append the frame to the open file ``fd``.

        Raises:
            OSError: a write failed or fell short; part of the frame may be in the file (the caller cuts
                the file back to where the frame began).
        """
        if self.payload is not None:
            _write_all(fd, [self.header, self.payload])
            return
        _write_all(fd, [self.header])
        written = _stream_message(self.batch, lambda data: _write_all(fd, [data]))
        if written != self.length:
            raise OSError(f"the record batch streamed {written} bytes, not the {self.length} of its header")


class _Sink:
    """A write-only file for :class:`pyarrow.PythonFile`: hands each piece to ``consume`` unless muted."""

    closed = False

    def __init__(self, consume: Callable[[object], None]) -> None:
        self.consume = consume
        self.muted = True
        self.bytes = 0

    def write(self, data) -> int:
        if not self.muted:
            self.consume(data)
            self.bytes += len(data)
        return len(data)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _stream_message(batch: pa.RecordBatch, consume: Callable[[object], None]) -> int:
    """Feed the IPC message of ``batch`` (the bytes of ``batch.serialize()``) to ``consume`` piece by
    piece, its buffers zero-copy; return the bytes fed. An IPC stream writer writes the schema (and here
    an empty batch) before the batch and an end-of-stream marker after it: those are muted."""
    sink = _Sink(consume)
    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), batch.schema) as writer:
        writer.write_batch(batch.slice(0, 0))
        sink.muted = False
        writer.write_batch(batch)
        sink.muted = True
    return sink.bytes


def _write_all(fd: int, pieces: list) -> None:
    """Write every byte of ``pieces`` to ``fd``: one ``writev``, more writes only after a short one."""
    views = [memoryview(p).cast("B") for p in pieces]
    written = os.writev(fd, views)
    for view in views:
        if written >= len(view):
            written -= len(view)
            continue
        view, written = view[written:], 0
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(f"a write to the segment wrote {n} bytes")
            view = view[n:]
