"""Columns of zeros and of nulls that cost no resident memory until written: one bulk produce of tiny
records would otherwise spend most of its memory on columns that hold nothing.

A log batch carries per record an offset, a timestamp, a leader epoch, producer id/epoch/sequence and the
attributes (Kafka keeps those per batch); for a produce that is not idempotent the producer columns are all
null and the attributes all zero, as are a request's keys, headers and timestamps when it names none. The
buffers here are anonymous memory mappings (:class:`mmap.mmap`) of :data:`UNRESIDENT_MIN_BYTES` and more:
the kernel maps their pages to its shared zero page when read (CRC, a segment write, a Delta commit) and
gives one a page only when written, so a column of a million nulls costs nothing resident. Arrow never
writes into a buffer it did not allocate; a computation over such a column allocates its result as any.
Smaller buffers are plain numpy zeros (a mapping would cost more than the page it saves).
"""

from __future__ import annotations

import mmap

import pyarrow as pa

__all__ = ["UNRESIDENT_MIN_BYTES", "nulls", "writable_zeros", "zero_buffer", "zeros"]

#: Buffers of at least this many bytes are anonymous mappings (below it: numpy zeros).
UNRESIDENT_MIN_BYTES = 64 * 1024


def writable_zeros(nbytes: int) -> bytearray | mmap.mmap:
    """``nbytes`` zero bytes to write into (a buffer-protocol object), resident only where written when
    at least :data:`UNRESIDENT_MIN_BYTES`: capacity reserved for a column whose final size is not known
    yet costs only what is filled."""
    if nbytes < UNRESIDENT_MIN_BYTES:
        return bytearray(nbytes)
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)


def zero_buffer(nbytes: int) -> pa.Buffer:
    """``nbytes`` zero bytes, not resident when at least :data:`UNRESIDENT_MIN_BYTES` (module doc)."""
    return pa.py_buffer(writable_zeros(nbytes))


def zeros(n: int, type: pa.DataType) -> pa.Array:
    """``n`` zeros of the fixed-width ``type`` (an integer or timestamp type), without nulls."""
    return pa.Array.from_buffers(type, n, [None, zero_buffer(n * type.bit_width // 8)], null_count=0)


def nulls(n: int, type: pa.DataType) -> pa.Array:
    """``n`` nulls of ``type`` (an integer, timestamp, binary/string or list type), as
    :func:`pyarrow.nulls` but over one zero buffer that is not resident (module doc): a validity bitmap
    of zeros and zero offsets or values, sharing that buffer.

    Below :data:`UNRESIDENT_MIN_BYTES` it is :func:`pyarrow.nulls` itself (a one-record produce's columns:
    a mapping would cost more than the page it saves).

    Raises:
        TypeError: another type.
    """
    kind = _NULLS_KINDS.get(type.id)
    if kind is None:
        raise TypeError(f"no unresident nulls of type {type}")
    width = 4 * (n + 1) if kind != "fixed" else n * type.bit_width // 8
    size = max(width, (n + 7) // 8)
    if size < UNRESIDENT_MIN_BYTES:
        return pa.nulls(n, type)
    shared = zero_buffer(size)
    bitmap = shared.slice(0, (n + 7) // 8)
    if kind == "list":
        child = pa.array([], type.value_type)
        return pa.Array.from_buffers(type, n, [bitmap, shared.slice(0, width)], null_count=n, children=[child])
    if kind == "binary":
        return pa.Array.from_buffers(type, n, [bitmap, shared.slice(0, width), pa.py_buffer(b"")], null_count=n)
    return pa.Array.from_buffers(type, n, [bitmap, shared.slice(0, width)], null_count=n)


#: The Arrow type ids :func:`nulls` takes, by the buffers their arrays have: 32-bit offsets and values
#: (binary, string), 32-bit offsets and a child (list), one fixed-width buffer (integers, timestamps).
_NULLS_KINDS = {
    **{t.id: "binary" for t in (pa.binary(), pa.string())},
    pa.list_(pa.int8()).id: "list",
    **{t.id: "fixed" for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
                               pa.uint32(), pa.uint64(), pa.timestamp("ms"))},
}
