"""Columnar decoding of REST Proxy v2 JSON produce bodies: memory a small multiple of the body.

``{"records": [...]}`` is one JSON object; :func:`pyarrow.json.read_json` reads it (as one row with a
``records`` list-of-struct column) straight into Arrow columns, with no Python object per record. Keys,
values and header values are then base64-decoded (binary format) with numpy over whole columns, or
wrapped as JSON string texts (JSON format).

This is a fast path, not a second validator: :func:`decode_columnar` returns None for any body whose
meaning it cannot reproduce exactly (bad JSON, a wrong shape, a value that is not a JSON string,
base64 that is not canonical, a null header value, escapes in a JSON-format body, ...), and the caller
then decodes it with the per-record validator, which answers the exact error messages of before, or
accepts the rare legal form taken here as doubtful. Accepted bodies decode to the same bytes either way.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.log_tables.schema import HEADERS_TYPE

_HEADER = pa.struct([("key", pa.string()), ("name", pa.string()), ("value", pa.string())])
_RECORD = pa.struct([("key", pa.string()), ("value", pa.string()), ("partition", pa.int64()),
                     ("timestamp", pa.int64()), ("headers", pa.list_(_HEADER))])
_PARSE = pj.ParseOptions(explicit_schema=pa.schema([("records", pa.list_(_RECORD))]),
                         unexpected_field_behavior="ignore", newlines_in_values=True)
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\\]")  # escapes or raw control bytes: not taken here

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_LUT = np.full(256, 255, dtype=np.uint8)
_LUT[np.frombuffer(_ALPHABET, np.uint8)] = np.arange(64, dtype=np.uint8)
_PAD = 64
_LUT[ord("=")] = _PAD
_GROUPS_PER_STEP = 1 << 22  # 16 MiB of base64 text per numpy step bounds the temporaries


def decode_columnar(body: bytes, fmt: str) -> tuple[pa.Table, pa.Array | None] | None:
    """``(batch, partitions)`` as :func:`lakelog.ingest_api.codecs.decode_produce`, or None (see module doc).

    ``partitions`` is int64 here (range checks come after); None when no record named one.
    """
    if fmt == "json" and _CONTROL.search(body):
        return None
    try:
        table = pj.read_json(pa.py_buffer(body), parse_options=_PARSE,
                             read_options=pj.ReadOptions(block_size=len(body) + 64, use_threads=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != 1:
        return None
    lists = table["records"].combine_chunks()
    if lists.null_count:
        return None
    records = lists.flatten()
    del table, lists
    n = len(records)
    if records.null_count:
        return None
    keys, values = records.field("key"), records.field("value")
    if fmt == "binary":
        keys, values = b64decode(keys), b64decode(values)
    else:
        keys, values = _json_texts(keys), _json_texts(values)
    if keys is None or values is None:
        return None
    headers = _headers(records.field("headers"), n)
    if headers is None:
        return None
    partitions = records.field("partition")
    batch = pa.Table.from_arrays([keys, values, headers, records.field("timestamp")], schema=PRODUCE_SCHEMA)
    return batch, (partitions if partitions.null_count < n else None)


def _json_texts(strings: pa.Array) -> pa.Array | None:
    """JSON-format keys/values that were JSON strings: their compact JSON text ``"..."`` as bytes.

    The body held no escapes (checked before), so a parsed string needs none either, unless it holds
    a raw control character, which JSON does not allow (None: the validator refuses it)."""
    if strings.null_count == len(strings):
        return pa.nulls(len(strings), pa.binary())
    if pc.any(pc.match_substring_regex(strings, r"[\x00-\x1f]")).as_py():
        return None
    return pc.binary_join_element_wise('"', strings, '"', "").cast(pa.binary())


def _headers(headers: pa.Array, n: int) -> pa.Array | None:
    """Header lists as :data:`HEADERS_TYPE` (``key`` else ``name`` else "" as the key; base64 values)."""
    if headers.null_count == n:
        return pa.nulls(n, HEADERS_TYPE)
    items = headers.flatten()
    if items.null_count:
        return None
    value = items.field("value")
    if value.null_count:  # null or missing: only the validator tells them apart
        return None
    raw = b64decode(value)
    if raw is None:
        return None
    key = pc.coalesce(items.field("key"), items.field("name"), pa.scalar("", pa.string()))
    structs = pa.StructArray.from_arrays([key, raw], fields=list(HEADERS_TYPE.value_type))
    offsets = headers.offsets
    if offsets[0].as_py():
        offsets = pc.subtract(offsets, offsets[0])
    return pa.ListArray.from_arrays(offsets, structs, type=HEADERS_TYPE,
                                    mask=pc.is_null(headers) if headers.null_count else None)


def b64decode(strings: pa.Array) -> pa.Array | None:
    """Decode a string column of canonical, padded, standard base64 (nulls stay null) with numpy.

    Returns None when any value is not exactly that (wrong length, a character outside the alphabet,
    misplaced padding, non-zero trailing bits): the per-record validator decides those.
    """
    n = len(strings)
    if strings.null_count == n:
        return pa.nulls(n, pa.binary())
    _, offs_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(offs_buf, np.int32)[strings.offset:strings.offset + n + 1].astype(np.int64)
    lengths = np.diff(offsets)
    if (lengths & 3).any():
        return None
    base = int(offsets[0])
    text = np.frombuffer(data_buf, np.uint8)[base:int(offsets[-1])]
    groups = len(text) // 4
    out = np.empty(groups * 3, np.uint8)
    pads_at: list[np.ndarray] = []
    for g0 in range(0, groups, _GROUPS_PER_STEP):
        g1 = min(groups, g0 + _GROUPS_PER_STEP)
        sextets = _LUT[text[g0 * 4:g1 * 4]]
        if (sextets == 255).any():
            return None
        pad = np.flatnonzero(sextets == _PAD)
        if len(pad):
            sextets[pad] = 0
            pads_at.append(pad + g0 * 4)
        q = sextets.reshape(-1, 4).astype(np.uint32)
        word = (q[:, 0] << 18) | (q[:, 1] << 12) | (q[:, 2] << 6) | q[:, 3]
        chunk = out[g0 * 3:g1 * 3].reshape(-1, 3)
        chunk[:, 0] = word >> 16
        chunk[:, 1] = (word >> 8) & 255
        chunk[:, 2] = word & 255
    ends = offsets[1:] - base  # end of each value in ``text``
    nonempty = lengths > 0
    pad_count = np.zeros(n, np.int64)
    if pads_at:
        pad = np.concatenate(pads_at)
        last_char, second_last = ends[nonempty] - 1, ends[nonempty] - 2
        is_pad = np.zeros(len(text), bool)
        is_pad[pad] = True
        pad_count[nonempty] = is_pad[last_char].astype(np.int64) + is_pad[second_last]
        # padding only as the value's last one or two characters, "xx==" or "xxx="
        if int(pad_count.sum()) != len(pad) or (is_pad[second_last] & ~is_pad[last_char]).any():
            return None
        # canonical: the bits dropped by the padding are zero (as the validator demands)
        one, two = ends[pad_count == 1], ends[pad_count == 2]
        if (_LUT[text[one - 2]] & 3).any() or (_LUT[text[two - 3]] & 15).any():
            return None
        keep = np.ones(len(out), bool)
        out_ends = ends // 4 * 3
        keep[out_ends[pad_count >= 1] - 1] = False
        keep[out_ends[pad_count == 2] - 2] = False
        out = out[keep]
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths // 4 * 3 - pad_count, out=new_offsets[1:])
    decoded = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(new_offsets.astype(np.int32)),
                                                           pa.py_buffer(out)])
    if strings.null_count:
        decoded = pc.if_else(pc.is_valid(strings), decoded, pa.scalar(None, pa.binary()))
    return decoded
