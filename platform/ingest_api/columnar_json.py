"""Columnar decoding of REST Proxy v2 JSON produce bodies: memory a small multiple of the body.

``{"records": [...]}`` is one JSON object; :func:`pyarrow.json.read_json` reads it (as one row with a
``records`` list-of-struct column) straight into Arrow columns, with no Python object per record. Keys,
values and header values are then base64-decoded (binary format) with numpy over whole columns; in the JSON
format, keys and values (any JSON: numbers, strings, objects, arrays, booleans, nulls) are taken as their
compact JSON texts from the body's bytes (:mod:`lakelog.ingest_api.json_members`).

This is a fast path, not a second validator: a piece of the body whose meaning it cannot reproduce exactly
(bad JSON, a wrong shape, a binary value that is not a JSON string, base64 that is not canonical, a null
header value, an escape in a JSON-format value, a number orjson would write otherwise, ...) is decoded by
the per-record validator the caller passes (``validate``), which answers the exact error messages, or
accepts the rare legal form taken here as doubtful. Accepted bodies decode to the same bytes either way.
A large body goes a chunk of records at a time either way, so the validator's Python objects stay bounded
by the chunk too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lakelog.ingest_api.json_members import depth_summary, member_texts
from lakelog.log_tables import zero_columns
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.log_tables.schema import HEADERS_TYPE

_HEADER = pa.struct([("key", pa.string()), ("name", pa.string()), ("value", pa.string())])
_RECORD = pa.struct([("key", pa.string()), ("value", pa.string()), ("partition", pa.int64()),
                     ("timestamp", pa.int64()), ("headers", pa.list_(_HEADER))])
_PARSE = pj.ParseOptions(explicit_schema=pa.schema([("records", pa.list_(_RECORD))]),
                         unexpected_field_behavior="ignore", newlines_in_values=True)
# the JSON format: keys and values are any JSON, read from the body's bytes (json_members), not by the reader
_JSON_RECORD = pa.struct([("partition", pa.int64()), ("timestamp", pa.int64()), ("headers", pa.list_(_HEADER))])
_PARSE_JSON = pj.ParseOptions(explicit_schema=pa.schema([("records", pa.list_(_JSON_RECORD))]),
                              unexpected_field_behavior="ignore", newlines_in_values=True)
#: The members a record may have (REST Proxy refuses any other: 400 / 40001, the validator's answer).
_RECORD_MEMBERS = frozenset({b"key", b"value", b"partition", b"headers", b"timestamp"})
#: A member name outside the records' and their headers' members, in a document without escapes (a string
#: there holds no quote, so every ``"...":`` is a member name): one pass of the regex engine.
_UNKNOWN_MEMBER = re.compile(rb'"(?!(?:records|key|value|partition|headers|timestamp|name)"\s*:)[^"]*"\s*:')
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\\]")  # escapes or raw control bytes: strings need decoding
_FIRST_VALUE = re.compile(rb'"value"\s*:\s*(.)')  # the first record's value: how it starts

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_LUT = np.full(256, 255, dtype=np.uint8)
_LUT[np.frombuffer(_ALPHABET, np.uint8)] = np.arange(64, dtype=np.uint8)
_PAD = 64
_LUT[ord("=")] = _PAD
_GROUPS_PER_STEP = 1 << 18  # 1 MiB of base64 text per numpy step bounds the temporaries
#: Bodies larger than this are parsed this many bytes of records at a time (a JSON-format body a quarter of
#: it: finding its keys and values in the bytes takes about 25 bytes of temporaries a byte).
CHUNK_BYTES = 1 << 20
_RECORDS_HEAD = re.compile(rb'\s*\{\s*"records"\s*:\s*\[\s*')
_RECORDS_TAIL = re.compile(rb'\s*\]\s*\}\s*\Z')
_RECORD_SPLIT = re.compile(rb'\}\s*,\s*\{')
_RECORD_GAP = re.compile(rb'\s*,\s*')
#: ``validate(document, first_record)``: the per-record validator's ``(batch, partitions)`` of a document
#: ``{"records": [...]}`` whose first record is record ``first_record`` of the body (for its error messages);
#: raises the body's error.
Validate = Callable[[bytes, int], tuple[pa.Table, "pa.Array | None"]]


def decode_columnar(body: bytes, fmt: str, *, validate: Validate | None = None, per_record: bool = False
                    ) -> tuple[pa.Table, pa.Array | None] | None:
    """``(batch, partitions)`` as :func:`lakelog.ingest_api.codecs.decode_produce`, or None (see module doc).

    ``partitions`` is int64 here (range checks come after); None when no record named one. A body of
    more than :data:`CHUNK_BYTES` is parsed a chunk of records at a time (:func:`_decode_chunked`), so
    the parser's temporaries stay bounded by the chunk and the batch comes back with one chunk per piece;
    a chunk the columnar path cannot take is decoded by ``validate``, when given, else the whole body is
    left to the caller (None).

    ``per_record``: every chunk is decoded by ``validate`` (the columns cannot tell a record's absent members
    from null ones; the chunks keep the validator's memory bounded); None for a body of one chunk.

    Raises:
        what ``validate`` raises.
    """
    if per_record:
        return _decode_chunked(body, fmt, validate, per_record=True) if len(body) > CHUNK_BYTES else None
    decoded = _decode_chunked(body, fmt, validate) if len(body) > CHUNK_BYTES else None
    return decoded if decoded is not None else _decode_document(body, fmt)


def _decode_chunked(body: bytes, fmt: str, validate: Validate | None = None, *, per_record: bool = False
                    ) -> tuple[pa.Table, pa.Array | None] | None:
    """Decode ``{"records": [r, r, ...]}`` (nothing after the array) about :data:`CHUNK_BYTES` of records
    at a time; None when the body has another shape, or a chunk does not decode and there is no
    ``validate`` (the caller then decodes it whole).

    Each chunk is whole records, found by :func:`_chunk_end`.
    """
    head = _RECORDS_HEAD.match(body)
    tail = _RECORDS_TAIL.search(body, max(0, len(body) - 64))
    if head is None or tail is None or tail.start() <= head.end():
        return None
    pieces, pos, stop = [], head.end(), tail.start()
    # binary keys and values decode straight into one buffer each, so the batch needs no second copy;
    # 3/4 of the body bounds them, and pages never written are never resident
    shared = fmt == "binary" and len(body) * 3 // 4 < 2**31
    buffers = (np.empty(len(body) * 3 // 4, np.uint8), np.empty(len(body) * 3 // 4, np.uint8)) if shared else None
    used, first_record = [0, 0], 0
    # JSON keys and values are copied into one growing buffer each as each chunk is decoded (the chunk's
    # own arrays freed at once): the batch needs no second copy of them at the join
    texts = (_TextColumn(len(body)), _TextColumn(len(body))) if fmt == "json" else None
    plain = fmt == "json" and _plain(body)  # once for the body, not per chunk
    size = (CHUNK_BYTES if fmt == "binary" else max(1, CHUNK_BYTES // 2)) if not per_record and (fmt == "binary" or (plain and _string_values(body))) else max(1, CHUNK_BYTES // 4)
    while pos < stop:
        end = _chunk_end(body, pos, stop, size)
        if end is None:
            return None
        into = (buffers[0][used[0]:], buffers[1][used[1]:]) if buffers else None
        document = b'{"records":[' + body[pos:end] + b"]}"
        decoded = None if per_record else _decode_document(document, fmt, into=into, plain=plain)
        if decoded is None:
            if validate is None:
                return None
            decoded = validate(document, first_record)
            buffers = None  # its values are not in the shared buffers: the pieces are joined by copying
        del document
        if texts is not None:
            batch, named = decoded
            texts[0].add(batch.column(0))
            texts[1].add(batch.column(1))
            decoded = _lean(batch.drop_columns(["key", "value"])), named
            del batch, named
        pieces.append(decoded)
        first_record += decoded[0].num_rows
        if buffers:
            used = [used[0] + _data_bytes(decoded[0]["key"]), used[1] + _data_bytes(decoded[0]["value"])]
        pos = stop if end == stop else _RECORD_GAP.match(body, end).end()
    named = [pa.nulls(b.num_rows, pa.int64()) if p is None else p for b, p in pieces] \
        if any(p is not None for _, p in pieces) else None
    # column by column, each column's pieces freed once joined: the pieces and one joined column at a time
    names = PRODUCE_SCHEMA.names[2:] if texts is not None else PRODUCE_SCHEMA.names
    columns = [[b.column(name) for b, _ in pieces] for name in names]
    del pieces
    joined = [texts[0].array(), texts[1].array()] if texts is not None else []
    for chunks in columns:
        i = len(joined)
        column = pa.chunked_array([c for chunk in chunks for c in chunk.chunks], PRODUCE_SCHEMA.field(i).type)
        chunks.clear()
        if column.null_count == len(column):  # no record named it: nulls that take no memory (zero_columns)
            joined.append(zero_columns.nulls(len(column), column.type))
        else:
            joined.append(_joined(column, buffers[i]) if buffers and i < 2 else column.combine_chunks())
        del column
    batch = pa.Table.from_arrays(joined, schema=PRODUCE_SCHEMA)
    return batch, None if named is None else pa.concat_arrays(named)


class _TextColumn:
    """A binary column assembled chunk by chunk: values and offsets written into buffers that grow (by
    doubling, when the values outgrow the body they came from), whose untouched pages are not resident
    (:mod:`~lakelog.log_tables.zero_columns`), so their capacity costs nothing until written.

    Args:
        capacity: bytes the values are expected to fit in (the body's size: a value's compact text is at
            most its text in the body, but for the validator's rewrites).
    """

    def __init__(self, capacity: int) -> None:
        self.data = _writable(max(capacity, 1))
        kind = np.dtype(np.int64 if capacity >= 2**31 else np.int32)  # a record takes 3 bytes or more
        self.offsets = _writable(kind.itemsize * (capacity // 3 + 2)).view(kind)
        self.offsets[0] = 0
        self.valid: list[np.ndarray | int] = []  # per chunk: validity, or n (all valid) / -n (all null)
        self.rows = self.size = self.nulls = 0

    def add(self, column: pa.ChunkedArray) -> None:
        """Append ``column`` (binary)."""
        for chunk in column.chunks:
            n = len(chunk)
            if chunk.null_count == n:
                values, bounds = np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
            else:
                bounds = _offsets(chunk).astype(np.int64)
                values = np.frombuffer(chunk.buffers()[2], np.uint8)[bounds[0]:bounds[-1]]
                bounds = bounds - bounds[0]
            if self.size + len(values) > len(self.data):
                self.data = _grown(self.data, 2 * (self.size + len(values)), self.size)
            if self.rows + n + 1 > len(self.offsets):
                self.offsets = _grown(self.offsets, 2 * (self.rows + n + 1), self.rows + 1)
            self.data[self.size:self.size + len(values)] = values
            self.offsets[self.rows + 1:self.rows + n + 1] = bounds[1:] + self.size
            # a chunk without nulls or of nulls only is kept as its length (the common cases)
            self.valid.append(n if not chunk.null_count else -n if chunk.null_count == n else
                              pc.is_valid(chunk).to_numpy(zero_copy_only=False))
            self.rows, self.size, self.nulls = self.rows + n, self.size + len(values), self.nulls + chunk.null_count

    def array(self) -> pa.Array:
        """The column so far (its buffers are views of this column's: add nothing more)."""
        n = self.rows
        if self.nulls == n:
            return zero_columns.nulls(n, pa.binary())
        validity = None
        if self.nulls:
            valid = [np.full(abs(v), v > 0) if isinstance(v, int) else v for v in self.valid]
            validity = pa.py_buffer(np.packbits(np.concatenate(valid), bitorder="little"))
            del valid
        self.valid = []
        kind = pa.binary() if self.offsets.dtype == np.int32 else pa.large_binary()
        array = pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(self.offsets[:n + 1]),
                                                pa.py_buffer(self.data[:self.size])], null_count=self.nulls)
        return array if kind == pa.binary() else array.cast(pa.binary())


def _lean(piece: pa.Table) -> pa.Table:
    """A decoded chunk's columns with each all-null one as unresident nulls: a column the records did not
    name (headers, timestamps) otherwise keeps the parser's whole output alive until the join."""
    return pa.Table.from_arrays([zero_columns.nulls(len(c), c.type) if c.null_count == len(c) else c
                                 for c in piece.columns], schema=piece.schema)


def _writable(nbytes: int) -> np.ndarray:
    """``nbytes`` zero bytes to write into, resident only where written."""
    return np.frombuffer(zero_columns.writable_zeros(nbytes), np.uint8)


def _grown(array: np.ndarray, items: int, used: int) -> np.ndarray:
    """A larger copy of ``array`` (``items`` items, its first ``used`` copied)."""
    grown = _writable(items * array.itemsize).view(array.dtype)
    grown[:used] = array[:used]
    return grown


def _plain(body: bytes) -> bool:
    """Whether a JSON text holds no escape and no raw control byte (its strings are then their texts):
    ``_CONTROL``'s answer, found with memchr and one numpy comparison where the regex takes ~4 ms a MiB;
    the regex decides only for a text with bytes below 0x20 (newlines, tabs)."""
    if b"\\" in body:
        return False
    return not (np.frombuffer(body, np.uint8) < 32).any() or not _CONTROL.search(body)


def _string_values(body: bytes) -> bool:
    """Whether a JSON-format body (with no escapes) has a string or null as its first value: its chunks
    are then read as strings by pyarrow's reader, whose temporaries are a small multiple of the chunk (the
    other JSON values take about 25 bytes a byte: a quarter of :data:`CHUNK_BYTES` a chunk)."""
    first = _FIRST_VALUE.search(body, 0, 4096)
    return first is None or first.group(1) in b'"n'


def _chunk_end(body: bytes, pos: int, stop: int, size: int) -> int | None:
    """End of a chunk of whole records of the records array from ``pos`` (the start of a record) to at
    most ``stop``: the first ``}`` of a ``}`` ``,`` ``{`` from ``pos + size`` on that closes a record,
    or ``stop``. None when the text is not a run of records (it closes the records array before
    ``stop``: another field follows it, or a bracket or string is left open at ``stop``).

    The bracket depth outside strings (:func:`~lakelog.ingest_api.json_members.depth_summary`: numpy, memory
    a few times the chunk) says where a record ends: where it returns to 0.
    """
    end = min(stop, pos + size)
    while True:
        split = _RECORD_SPLIT.search(body, end, stop) if end < stop else None
        end = split.start() + 1 if split is not None else stop
        lowest, last, outside = depth_summary(np.frombuffer(body, np.uint8, count=end - pos, offset=pos))
        if lowest < 0:
            return None
        if last == 0 and outside:
            return end
        if split is None:
            return None
        end = split.end() - 1  # the "}" fell inside a record (between its headers) or a string


def _offsets(array: pa.Array) -> np.ndarray:
    """The int32 value offsets of a binary array (zeros for one without an offsets buffer)."""
    buffer = array.buffers()[1]
    if buffer is None:
        return np.zeros(len(array) + 1, np.int32)
    return np.frombuffer(buffer, np.int32)[array.offset:array.offset + len(array) + 1]


def _data_bytes(column: pa.ChunkedArray) -> int:
    """Bytes of the values of a one-chunk binary column."""
    offsets = _offsets(column.chunk(0))
    return int(offsets[-1] - offsets[0])


def _joined(column: pa.ChunkedArray, data: np.ndarray) -> pa.Array:
    """One binary array over ``data`` from chunks whose values lie back to back in it from its start (as
    :func:`b64decode` wrote them ``into`` it), without copying the values."""
    bounds, row, base = np.zeros(len(column) + 1, np.int32), 0, 0  # int32: the caller keeps data < 2 GiB
    for chunk in column.chunks:
        offsets = _offsets(chunk)
        np.add(offsets[1:], base - offsets[0], out=bounds[row + 1:row + 1 + len(chunk)])
        row, base = row + len(chunk), base + int(offsets[-1] - offsets[0])
    validity = None
    if column.null_count:
        validity = pa.array(pc.is_valid(column).combine_chunks().to_numpy(zero_copy_only=False)).buffers()[1]
    return pa.BinaryArray.from_buffers(pa.binary(), len(column), [validity, pa.py_buffer(bounds),
                                                                   pa.py_buffer(data[:base])], null_count=column.null_count)


def _decode_document(body: bytes, fmt: str, *, into: tuple[np.ndarray, np.ndarray] | None = None,
                     plain: bool | None = None) -> tuple[pa.Table, pa.Array | None] | None:
    """Decode one ``{"records": [...]}`` document (the body, or a chunk of it) in columns, or None.

    ``into``: binary format only, the arrays to decode keys and values into (see :func:`b64decode`).
    ``plain``: JSON format only, whether the document (or the body it is a chunk of) has no escapes nor
    raw control bytes, when the caller knows. Default: found here.

    A JSON-format document whose keys and values are all strings (or null) is read by pyarrow's reader
    with them as string columns (:func:`_json_texts`: the fastest way); others (numbers, objects, ...)
    by :func:`~lakelog.ingest_api.json_members.member_texts`. Which is tried first follows the first
    record's value.
    """
    if fmt == "binary":
        return _decode_records(body, fmt, _PARSE, into)
    first = _FIRST_VALUE.search(body, 0, 4096)
    if plain is None:
        plain = _plain(body)
    if plain and (first is None or first.group(1) in b'"n'):
        decoded = _decode_records(body, fmt, _PARSE, None)
        if decoded is not None:
            return decoded
    decoded = _decode_records(body, fmt, _PARSE_JSON, None)
    if decoded is None and plain and first is not None and first.group(1) not in b'"n':
        decoded = _decode_records(body, fmt, _PARSE, None)
    return decoded


def _decode_records(body: bytes, fmt: str, options: pj.ParseOptions, into: tuple[np.ndarray, np.ndarray] | None
                    ) -> tuple[pa.Table, pa.Array | None] | None:
    """:func:`_decode_document` with one way of parsing: ``options`` :data:`_PARSE` (keys and values read as
    strings) or :data:`_PARSE_JSON` (any JSON, taken from the bytes)."""
    try:
        table = pj.read_json(pa.py_buffer(body), parse_options=options,
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
    # an unknown member (pyarrow's reader skips it): the validator refuses it and names it
    if options is _PARSE and not _members_known(body, records):
        return None
    if fmt == "binary":
        keys = b64decode(records.field("key"), into=into and into[0])
        values = b64decode(records.field("value"), into=into and into[1])
    elif options is _PARSE:
        keys, values = _json_texts(records.field("key")), _json_texts(records.field("value"))
    else:
        texts = member_texts(body, n, members=_RECORD_MEMBERS)  # None too for an unknown member
        keys, values = (None, None) if texts is None else texts
    if keys is None or values is None:
        return None
    headers = _headers(records.field("headers"), n)
    if headers is None:
        return None
    partitions = records.field("partition")
    batch = pa.Table.from_arrays([keys, values, headers, records.field("timestamp")], schema=PRODUCE_SCHEMA)
    return batch, (partitions if partitions.null_count < n else None)


def _members_known(document: bytes, records: pa.StructArray) -> bool:
    """Whether a document without escapes names no member but the records' and their headers' (pyarrow's
    reader skips the others). In compact JSON every ``":`` ends a member name, so when their count is the
    members the reader found non-null, nothing else is there (one ``bytes.count``); else (nulls, spaces
    before a colon, an unknown member) :data:`_UNKNOWN_MEMBER` decides."""
    found = 1 + sum(len(records) - records.field(f).null_count for f in ("key", "value", "partition", "timestamp", "headers"))
    headers = pc.list_flatten(records.field("headers"))
    found += sum(len(headers) - headers.field(f).null_count for f in ("key", "name", "value"))
    return document.count(b'":') == found or _UNKNOWN_MEMBER.search(document) is None


def _json_texts(strings: pa.Array) -> pa.Array | None:
    """JSON-format keys/values that were JSON strings: their compact JSON text ``"..."`` as bytes.

    The document held no escapes (checked before), so a parsed string needs none either, unless it holds
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


def b64decode(strings: pa.Array, *, into: np.ndarray | None = None) -> pa.Array | None:
    """Decode a string column of canonical, padded, standard base64 (nulls stay null) with numpy.

    ``into``: a uint8 array to decode into from its start (large enough: 3/4 of the text at most);
    the result's data buffer is then a view of it. Default: a new array.

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
    ends = offsets[1:] - base  # end of each value in ``text``
    # 1. padding: only a value's last one or two characters ("xx==", "xxx="), read at those places only
    pad_count = np.zeros(n, np.int64)
    nonempty = np.flatnonzero(lengths > 0)
    last_pad = text[ends[nonempty] - 1] == ord("=")
    second_pad = text[ends[nonempty] - 2] == ord("=")
    if (second_pad & ~last_pad).any():
        return None
    pad_count[nonempty] = last_pad.astype(np.int64) + second_pad
    # canonical: the bits dropped by the padding are zero (as the validator demands)
    one, two = ends[pad_count == 1], ends[pad_count == 2]
    if (_LUT[text[one - 2]] & 3).any() or (_LUT[text[two - 3]] & 15).any():
        return None
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths // 4 * 3 - pad_count, out=new_offsets[1:])
    out = np.empty(int(new_offsets[-1]), np.uint8) if into is None else into[:int(new_offsets[-1])]
    # 2. decode whole values in steps of about _GROUPS_PER_STEP groups, each step's bytes compacted (the
    # padding's bytes dropped) straight into ``out``: temporaries stay bounded by the step
    step_starts = np.searchsorted(ends, np.arange(0, len(text), _GROUPS_PER_STEP * 4), side="right")
    bounds = sorted(set(step_starts.tolist()) | {0, n})
    for v0, v1 in zip(bounds, bounds[1:]):
        t0 = int(ends[v0 - 1]) if v0 else 0
        t1 = int(ends[v1 - 1])
        if t1 == t0:
            continue
        sextets = _LUT[text[t0:t1]]
        if (sextets == 255).any():
            return None
        pads = sextets == _PAD
        # "=" anywhere but the last two characters of a value is refused
        if int(pads.sum()) != int(pad_count[v0:v1].sum()):
            return None
        sextets[pads] = 0
        q = sextets.reshape(-1, 4).astype(np.uint32)
        word = (q[:, 0] << 18) | (q[:, 1] << 12) | (q[:, 2] << 6) | q[:, 3]
        del q, sextets
        chunk = np.empty((len(word), 3), np.uint8)
        chunk[:, 0] = word >> 16
        chunk[:, 1] = (word >> 8) & 255
        chunk[:, 2] = word & 255
        del word
        flat = chunk.reshape(-1)
        padded = np.flatnonzero(pad_count[v0:v1])
        if len(padded):
            keep = np.ones(len(flat), bool)
            out_ends = (ends[v0:v1][padded] - t0) // 4 * 3
            cnt = pad_count[v0:v1][padded]
            keep[out_ends - 1] = False
            keep[out_ends[cnt == 2] - 2] = False
            flat = flat[keep]
        out[int(new_offsets[v0]):int(new_offsets[v1])] = flat
    validity = pc.is_valid(strings).buffers()[1] if strings.null_count else None  # a null decodes to b""
    return pa.BinaryArray.from_buffers(pa.binary(), n, [validity, pa.py_buffer(new_offsets.astype(np.int32)),
                                                        pa.py_buffer(out)], null_count=strings.null_count)
