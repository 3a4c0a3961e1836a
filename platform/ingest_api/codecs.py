"""Request bodies to produce batches, and log reads to response bodies.

Content types (Confluent REST Proxy v2 plus Arrow):

- ``application/vnd.kafka.binary.v2+json``: keys, values and header values are base64 strings;
- ``application/vnd.kafka.json.v2+json`` (and plain ``application/json``): keys and values are
  embedded JSON, stored as their compact UTF-8 JSON text;
- ``application/vnd.apache.arrow.stream``: an Arrow IPC stream with columns ``key``, ``value``
  (binary or string), optional ``headers``, ``timestamp`` (ms or Arrow timestamp), ``partition``.

Large JSON bodies are read columnar first (:mod:`lakelog.ingest_api.columnar_json`: pyarrow's JSON
reader and numpy base64, no Python object per record); small ones (below 32 KiB, binary below 16 MiB),
and a body the columnar path cannot take exactly, are validated by pydantic-core record by record,
which words every error (both paths give the same batch). Numbers are then checked against Kafka's
ranges (partition: int32; timestamp: what the log holds) over whole columns. Answers to large produce
requests are built from Arrow columns, small ones with orjson.
"""

from __future__ import annotations

import base64
from datetime import datetime
import logging
from collections.abc import Iterator
from typing import Annotated, Any, Optional

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BeforeValidator, ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

from lakelog.protocol.arrow_ipc import arrow_ipc, read_arrow_ipc
from lakelog.ingest_api.columnar_json import decode_columnar
from lakelog.log_tables.errors import InvalidTimestampError
from lakelog.errors import RecordDeserializationError, RecordValidationError
from lakelog.protocol.errors import (
    FieldOutOfRangeError,
    InvalidBodyFieldError,
    InvalidEncodingError,
    MalformedBodyError,
    NotAcceptableError,
    UnsupportedMediaTypeError,
)
from lakelog.protocol.media_types import ARROW_STREAM, BINARY_V2, JSON, JSON_V2, V2, Format, media_type
from lakelog.log_tables.records import PRODUCE_SCHEMA, TIMESTAMP_RANGE, normalize_produce_batch
from lakelog.log_tables.schema import FETCH_COLUMNS, HEADERS_TYPE


#: Unknown fields are refused (``{"valur": 1}`` would be a null record), as REST Proxy's Jackson models
#: refuse them (``UnrecognizedPropertyException``, 400).
_B64 = ConfigDict(val_json_bytes="base64", extra="forbid")
_log = logging.getLogger(__name__)

#: Kafka's partition is an int32 >= 0.
MAX_PARTITION = 2**31 - 1
_INT64 = (-(2**63), 2**63 - 1)


def _not_bool(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("a JSON boolean is not an integer")
    return v


_Int = Annotated[int, BeforeValidator(_not_bool)]

#: Binary bodies from this size on are decoded columnar (below it the validator is faster).
_COLUMNAR_BINARY_MIN_BYTES = 16 << 20
#: JSON bodies from this size on are decoded columnar. Below it the validator is faster: pyarrow's JSON
#: reader costs ~1 ms even for one record (~30 us validated), and it wins only from a few hundred records.
_COLUMNAR_JSON_MIN_BYTES = 32 << 10
#: Produce answers from this many records on are built as Arrow strings; below, orjson of the entries is
#: faster (one record: ~2 us instead of ~200 us) and their Python objects are few.
_ARROW_ANSWER_MIN_RECORDS = 256


@with_config(_B64)
class _BinaryHeader(TypedDict):
    key: NotRequired[str]  # Kafka's and Spark's name
    name: NotRequired[str]  # REST Proxy v3's name
    value: Optional[bytes]


@with_config(_B64)
class _BinaryRecord(TypedDict):
    key: NotRequired[Optional[bytes]]
    value: NotRequired[Optional[bytes]]
    partition: NotRequired[Optional[_Int]]
    headers: NotRequired[Optional[list[_BinaryHeader]]]
    timestamp: NotRequired[Optional[_Int]]


@with_config(_B64)
class _BinaryProduce(TypedDict):
    records: list[_BinaryRecord]
    key_schema: NotRequired[None]  # REST Proxy's schema fields: null only (no schemas here)
    value_schema: NotRequired[None]
    key_schema_id: NotRequired[None]
    value_schema_id: NotRequired[None]


@with_config(_B64)
class _JsonRecord(TypedDict):
    key: NotRequired[Any]
    value: NotRequired[Any]
    partition: NotRequired[Optional[_Int]]
    headers: NotRequired[Optional[list[_BinaryHeader]]]
    timestamp: NotRequired[Optional[_Int]]


@with_config(_B64)
class _JsonProduce(TypedDict):
    records: list[_JsonRecord]
    key_schema: NotRequired[None]  # REST Proxy's schema fields: null only (no schemas here)
    value_schema: NotRequired[None]
    key_schema_id: NotRequired[None]
    value_schema_id: NotRequired[None]


_BINARY_ADAPTER = TypeAdapter(_BinaryProduce)
_JSON_ADAPTER = TypeAdapter(_JsonProduce)


def produce_format(content_type: str | None) -> Format:
    """The produce body format for a Content-Type. Raises :class:`UnsupportedMediaTypeError`."""
    mt = media_type(content_type)
    if mt == BINARY_V2:
        return "binary"
    if mt in (JSON_V2, JSON):
        return "json"
    if mt == ARROW_STREAM:
        return "arrow"
    raise UnsupportedMediaTypeError(
        f"Content-Type {content_type!r} is not supported for produce; use {BINARY_V2} (base64 keys and "
        f"values), {JSON_V2} (embedded JSON) or {ARROW_STREAM} (Arrow IPC stream).")


def decode_produce(body: bytes | bytearray, fmt: Format, *, consume: bool = False) -> tuple[pa.Table, pa.Array | None]:
    """Decode a produce body into a produce batch and the per-record partitions, if any were given.

    Args:
        body: the request body.
        fmt: its format (:func:`produce_format`).
        consume: the caller needs ``body`` no more: a JSON body that is a ``bytearray`` is emptied (its
            memory freed) once decoded, before the batch is assembled in one chunk. Default: False.

    Returns:
        ``(batch, partitions)``: ``batch`` has :data:`PRODUCE_SCHEMA` (one chunk from a JSON body);
        ``partitions`` is an int32 array with nulls where a record named no partition, or None when no
        record named one.

    Raises:
        MalformedBodyError: not JSON / not Arrow, or the wrong shape, an unknown field among them (the
            message names the field).
        InvalidBodyFieldError: an empty ``records`` list, or a record with none of ``key``, ``value``,
            ``partition`` (422, as REST Proxy's ``@NotEmpty`` records).
        InvalidEncodingError: a base64 field does not decode.
    """
    if fmt == "arrow":  # zero copy over the body: it stays
        batch, parts = _decode_arrow(body)
    else:
        # small bodies: the per-record validator is faster there and its memory is small anyway
        small = len(body) < (_COLUMNAR_BINARY_MIN_BYTES if fmt == "binary" else _COLUMNAR_JSON_MIN_BYTES)
        decoded = None if small else decode_columnar(
            body, fmt, validate=lambda document, first: _decode_validated(document, fmt, first_record=first))
        if decoded is not None and _has_empty_record(*decoded):  # the validator tells absent from null,
            decoded = None  # a chunk at a time (its Python objects bounded by the chunk)
            decoded = decode_columnar(body, fmt, per_record=True, validate=lambda document, first: _decode_validated(
                document, fmt, first_record=first))
        batch, parts = decoded if decoded is not None else _decode_validated(body, fmt)
        if consume and isinstance(body, bytearray):
            body.clear()
        batch = batch.combine_chunks()  # a large body decodes in pieces; the log appends one chunk
    return batch, _check_partitions(parts)


def _check_partitions(parts: pa.Array | None) -> pa.Array | None:
    """int64 partitions named by records -> int32, refusing values that are no int32 (negative ones are
    left to the router: they name a partition the topic does not have, 42206)."""
    if parts is None:
        return None
    bounds = pc.min_max(parts)
    if len(parts) > parts.null_count and (bounds["max"].as_py() > MAX_PARTITION or bounds["min"].as_py() < -MAX_PARTITION):
        bad = pc.or_(pc.greater(parts, MAX_PARTITION), pc.less(parts, -MAX_PARTITION))
        i = pc.indices_nonzero(pc.fill_null(bad, False))[0].as_py()
        raise FieldOutOfRangeError(
            f"Record {i} names partition {parts[i].as_py()}; a partition is an int32 from 0 to {MAX_PARTITION}. "
            f"Nothing was written.")
    return parts.cast(pa.int32())


def _decode_validated(body: bytes, fmt: Format, *, first_record: int = 0) -> tuple[pa.Table, pa.Array | None]:
    """The per-record path: pydantic-core validates the body and words the first error.

    ``first_record``: the body is a chunk of a larger one's records, from this record on (error messages
    name records by their place in the larger body). Default: 0.
    """
    adapter = _BINARY_ADAPTER if fmt == "binary" else _JSON_ADAPTER
    try:
        request = adapter.validate_json(body)
    except ValidationError as e:
        raise _validation_error(e, fmt, first_record=first_record) from None
    records = request["records"]
    n = len(records)
    if fmt == "binary":
        keys = [r.get("key") for r in records]
        values = [r.get("value") for r in records]
    else:
        keys = [_json_bytes(r, "key") for r in records]
        values = [_json_bytes(r, "value") for r in records]
    partitions = [r.get("partition") for r in records]
    timestamps = [r.get("timestamp") for r in records]
    headers = [r.get("headers") for r in records]
    has_headers = any(h is not None for h in headers)
    # The shape rules walk the records in Python only where one can fail: a record without key, value and
    # partition has all three None, and a header without a key needs headers (the list scans run in C).
    if n == 0 or has_headers or (None in keys and None in values and None in partitions):
        _check_records(records, first_record=first_record)
    batch = pa.Table.from_arrays([
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([[{"key": h.get("key", h.get("name", "")), "value": h["value"]} for h in hs] if hs is not None else None
                  for hs in headers], HEADERS_TYPE) if has_headers else pa.nulls(n, HEADERS_TYPE),
        _int64(timestamps, lambda i, v: InvalidTimestampError(
            f"Record {first_record + i} of the request has timestamp {v}, outside the legal range {TIMESTAMP_RANGE} (Kafka's "
            f"INVALID_TIMESTAMP); nothing was written.")),
    ], schema=PRODUCE_SCHEMA)
    part_array = _int64(partitions, lambda i, v: FieldOutOfRangeError(
        f"Record {first_record + i} names partition {v}; a partition is an int32 from 0 to {MAX_PARTITION}. Nothing was written.")
    ) if any(p is not None for p in partitions) else None
    return batch, part_array


def _has_empty_record(batch: pa.Table, parts: pa.Array | None) -> bool:
    """Whether some record has a null key, value and partition, or a header with an empty key: absent or
    null / empty, which only the per-record validator tells apart."""
    if batch.num_rows == 0:
        return True
    empty = pc.and_(batch["key"].is_null(), batch["value"].is_null())
    if parts is not None:
        empty = pc.and_(empty, parts.is_null())
    if pc.any(empty).as_py():
        return True
    header_keys = pc.list_flatten(batch["headers"]).combine_chunks().field("key")  # "": no key, or an empty one
    return len(header_keys) > 0 and bool(pc.any(pc.equal(header_keys, "")).as_py())


def _check_records(records: list[dict], *, first_record: int = 0) -> None:
    """REST Proxy's shape rules beyond the types: at least one record, each with a key, value or partition,
    each header with a key."""
    if not records:
        raise InvalidBodyFieldError('records: the list is empty; send at least one record, e.g. '
                                    '{"records": [{"value": ...}]}. Nothing was written.')
    for i, record in enumerate(records):  # the small bodies' path (large ones decode in columns)
        if "value" not in record and "key" not in record and "partition" not in record:
            raise InvalidBodyFieldError(f"records[{first_record + i}] has none of key, value, partition; give at least one. "
                                        f"Nothing was written.")
        headers = record.get("headers")
        if headers:
            for j, header in enumerate(headers):
                if "key" not in header and "name" not in header:
                    raise InvalidBodyFieldError(f"records[{first_record + i}].headers[{j}] has no key; every header needs "
                                                f"one. Nothing was written.")


def _int64(values: list, error) -> pa.Array:
    """Python ints as int64; one outside int64 raises ``error(index, value)``."""
    try:
        return pa.array(values, pa.int64())
    except (OverflowError, pa.ArrowInvalid):
        lo, hi = _INT64
        i = next(i for i, v in enumerate(values) if v is not None and not lo <= v <= hi)
        raise error(i, values[i]) from None


def _json_bytes(record: dict, name: str) -> bytes | None:
    # REST Proxy's JSON format: a missing or null key/value is null, anything else its JSON text.
    value = record.get(name)
    return None if value is None else orjson.dumps(value)


def _decode_arrow(body: bytes) -> tuple[pa.Table, pa.Array | None]:
    try:
        table = read_arrow_ipc(body)
    except (pa.ArrowInvalid, pa.ArrowException) as e:
        raise MalformedBodyError(f"The body is not a valid Arrow IPC stream: {e}") from None
    partitions = None
    if "partition" in table.column_names:
        try:
            partitions = table["partition"].combine_chunks().cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise MalformedBodyError(f"Column 'partition' must be integers: {e}") from None
        table = table.drop_columns(["partition"])
    try:
        batch = normalize_produce_batch(table)
    except ValueError as e:
        raise MalformedBodyError(f"Arrow body: {e}") from None
    return batch, partitions


def _validation_error(e: ValidationError, fmt: Format, *, first_record: int = 0) -> Exception:
    first = e.errors()[0]
    path = list(first["loc"])
    if first_record and len(path) > 1 and path[0] == "records" and isinstance(path[1], int):
        path[1] += first_record
    loc = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in path).lstrip(".") or "body"
    if first["type"] == "bytes_invalid_encoding":
        return InvalidEncodingError(
            f"{loc} is not valid base64 ({first['msg']}); with {BINARY_V2} keys, values and header values "
            f"must be base64-encoded. Nothing was written.")
    if first["type"] == "json_invalid":
        where = f" (in the records from record {first_record} on)" if first_record else ""
        return MalformedBodyError(f"The body is not valid JSON: {first['msg']}{where}. Nothing was written.")
    example = ('{"records": [{"key": "a2V5", "value": "dmFsdWU="}]}' if fmt == "binary"
               else '{"records": [{"key": "k", "value": {"any": "json"}}]}')
    return MalformedBodyError(f"Invalid produce request at {loc}: {first['msg']}. Expected a body like "
                              f"{example}. Nothing was written.")


# -- responses ----------------------------------------------------------------------------------

def fetch_format(accept: str | None, default: Format = "binary") -> Format:
    """The response form for an Accept header; ``*/*`` or none gives ``default``.

    Raises:
        NotAcceptableError: no supported form is acceptable.
    """
    if not accept:
        return default
    for entry in accept.split(","):
        mt = media_type(entry)
        if mt == BINARY_V2:
            return "binary"
        if mt in (JSON_V2, JSON):
            return "json"
        if mt == ARROW_STREAM:
            return "arrow"
        if mt in ("*/*", V2, "application/*"):
            return default
    raise NotAcceptableError(
        f"Accept {accept!r} is not supported; use {BINARY_V2}, {JSON_V2} or {ARROW_STREAM}.")


def encode_records(table: pa.Table, fmt: Format, *, topic: str, partition: int, json_only: bool = False) -> bytes:
    """Encode log records (columns :data:`FETCH_COLUMNS`) as a fetch response body.

    JSON forms: a JSON array of REST Proxy v2 consumer records plus ``timestamp`` (ms) and
    ``headers`` (``[{"key": str, "value": base64 | null}]``)::

        [{"topic": "t", "key": ..., "value": ..., "partition": 0, "offset": 0, "timestamp": 1700000000000,
          "headers": []}]

    Arrow: an IPC stream with ``offset``, ``timestamp`` (ms, UTC), ``key``, ``value``, ``headers``.

    ``json_only`` (``json`` form): a key or value that is not JSON raises
    :class:`~lakelog.errors.RecordDeserializationError` (a REST Proxy ``json`` consumer instance, 408 / 40801)
    instead of being answered as a JSON string of its UTF-8 text. Default: False.
    """
    if fmt == "arrow":
        out = table.select(FETCH_COLUMNS)
        return arrow_ipc(out.set_column(1, "timestamp", readable_ms(out["timestamp"], topic, partition)))
    n = table.num_rows
    if n == 0:
        return b"[]"
    offsets = table["offset"].to_pylist()
    timestamps = pc.cast(readable_ms(table["timestamp"], topic, partition), pa.int64()).to_pylist()
    keys = table["key"].to_pylist()
    values = table["value"].to_pylist()
    headers = [
        [{"key": h["key"], "value": None if h["value"] is None else base64.b64encode(h["value"]).decode()} for h in hs]
        if hs else [] for hs in table["headers"].to_pylist()
    ]
    if fmt == "binary":
        b64 = base64.b64encode
        keys = [None if k is None else b64(k).decode() for k in keys]
        values = [None if v is None else b64(v).decode() for v in values]
    else:
        fragment = _json_fragment(topic, partition, offsets) if json_only else _fragment
        keys = [None if k is None else fragment(k, i, "key") for i, k in enumerate(keys)]
        values = [None if v is None else fragment(v, i, "value") for i, v in enumerate(values)]
    records = [
        {"topic": topic, "key": k, "value": v, "partition": partition, "offset": o, "timestamp": t, "headers": h}
        for k, v, o, t, h in zip(keys, values, offsets, timestamps, headers)
    ]
    return orjson.dumps(records)


def readable_ms(timestamps: pa.ChunkedArray | pa.Array, topic: str, partition: int) -> pa.ChunkedArray | pa.Array:
    """The log's ``timestamp[us]`` column as ``timestamp[ms, UTC]``, as every consumer sees it.

    A record written before produce checked timestamp ranges may hold microseconds that are no whole
    millisecond (a timestamp whose ``* 1000`` overflowed int64): it is read back truncated to its
    millisecond, with a warning, instead of failing every fetch of the partition.
    """
    ms = pa.timestamp("ms", tz="UTC")
    try:
        return pc.cast(timestamps, ms)
    except pa.ArrowInvalid:
        _log.warning("%s-%d holds timestamps that are no whole millisecond (written by an older broker with an "
                     "out-of-range produce timestamp); they are read truncated to the millisecond", topic, partition)
        return pc.cast(timestamps, ms, safe=False)


def _json_fragment(topic: str, partition: int, offsets: list[int]):
    def fragment(raw: bytes, i: int, what: str) -> Any:
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise RecordDeserializationError(
                f"Error deserializing the {what} of {topic}-{partition} at offset {offsets[i]} as JSON ({e}); this "
                f"json consumer instance cannot return it. Read it with a binary instance or seek past it.") from None
        return orjson.Fragment(raw)
    return fragment


def _fragment(raw: bytes, i: int = 0, what: str = "value") -> Any:
    # A value produced in JSON format is stored as its JSON text: embed it as is. Values produced
    # in another format may not be JSON; they come back as a JSON string of their UTF-8 text.
    try:
        orjson.loads(raw)
        return orjson.Fragment(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", errors="replace")


# -- produce responses and v3 records ------------------------------------------------------------

_OK_ENTRY = (b'{"partition":', b',"offset":', b',"error_code":null,"error":null},')
_ANSWER_HEAD = b'{"offsets":['
_ANSWER_TAIL = b'],"key_schema_id":null,"value_schema_id":null}'
#: A produce answer of more records than this is built and sent in pieces of this many records.
ANSWER_PIECE_RECORDS = 16384


def produce_response_body(result: Any) -> bytes:
    """REST Proxy v2's produce answer for a :class:`~lakelog.requests.produce.ProduceResult`, as
    JSON bytes: ``{"offsets": [{"partition", "offset", "error_code", "error"}], "key_schema_id": null,
    "value_schema_id": null}``, one entry per record in request order.

    A record whose partition's share failed has ``offset`` null and ``error_code`` 2 (retriable) or 1 (not),
    as REST Proxy reports Kafka errors per record. A record that schema validation sent to the topic's
    dead-letter topic (``errors.tolerance=all``) has ``partition`` and ``offset`` null, ``error_code`` 42230
    and an ``error`` naming the dead-letter topic, partition and offset and why. When every share succeeded and the request had at
    least :data:`_ARROW_ANSWER_MIN_RECORDS` records, the entries are built as Arrow strings
    (:func:`produce_response_pieces`, no Python object per record); both ways give the same bytes.
    """
    if result.errors or result.dead_letters or len(result.offsets) < _ARROW_ANSWER_MIN_RECORDS:
        return orjson.dumps(_produce_response_entries(result))
    return b"".join(produce_response_pieces(result)[1])


def produce_response_pieces(result: Any) -> tuple[int, Iterator[bytes]]:
    """``(content length, pieces)`` of the produce answer of a result without failed shares: the bytes of
    :func:`produce_response_body`, built :data:`ANSWER_PIECE_RECORDS` entries at a time as Arrow strings,
    so a 1,000,000-record answer (~60 MB) is never whole in memory when it is streamed."""
    partitions, offsets = np.asarray(result.partitions, np.int64), np.asarray(result.offsets, np.int64)
    n = len(offsets)
    length = (len(_ANSWER_HEAD) + n * sum(map(len, _OK_ENTRY)) - (1 if n else 0) + len(_ANSWER_TAIL)
              + _decimal_chars(partitions) + _decimal_chars(offsets))

    def pieces() -> Iterator[bytes]:
        yield _ANSWER_HEAD
        head, middle, tail = (pa.scalar(x, pa.binary()) for x in _OK_ENTRY)
        for start in range(0, n, ANSWER_PIECE_RECORDS):
            stop = min(n, start + ANSWER_PIECE_RECORDS)
            entries = pc.binary_join_element_wise(
                head, pa.array(partitions[start:stop]).cast(pa.string()).cast(pa.binary()), middle,
                pa.array(offsets[start:stop]).cast(pa.string()).cast(pa.binary()), tail, pa.scalar(b"", pa.binary()))
            _, bounds, data = entries.buffers()
            bounds = np.frombuffer(bounds, np.int32)[entries.offset:entries.offset + len(entries) + 1]
            used = int(bounds[-1]) - (1 if stop == n else 0)  # no comma after the last entry
            yield bytes(memoryview(data)[int(bounds[0]):used])
        yield _ANSWER_TAIL

    return length, pieces()


def _decimal_chars(values: np.ndarray) -> int:
    """Characters of the decimal texts of ``values`` (int64 from -9 up), summed."""
    total = 0
    for start in range(0, len(values), ANSWER_PIECE_RECORDS):  # a piece at a time: bounded temporaries
        piece = values[start:start + ANSWER_PIECE_RECORDS]
        total += len(piece) + int((piece < 0).sum())
        magnitude, power = np.abs(piece), 10
        top = int(magnitude.max())
        while power <= top:
            total += int((magnitude >= power).sum())
            power *= 10
    return total


def _produce_response_entries(result: Any) -> dict:
    """The produce answer as Python objects (the path with failed shares)."""
    entries = []
    letters = result.dead_letters
    for i, (p, o) in enumerate(zip(result.partitions.tolist(), result.offsets.tolist())):
        err = result.errors.get(p)
        letter = letters.get(i) if letters else None
        if letter is not None:
            entries.append({"partition": None, "offset": None, "error_code": RecordValidationError.error_code,
                            "error": letter.message(i)})
        elif err is None:
            entries.append({"partition": p, "offset": o, "error_code": None, "error": None})
        else:
            entries.append({"partition": p, "offset": None,
                            "error_code": 2 if getattr(err, "retriable", False) else 1, "error": str(err)})
    return {"offsets": entries, "key_schema_id": None, "value_schema_id": None}


def v3_data_bytes(data: Any, what: str) -> bytes | None:
    """The bytes of a REST Proxy v3 ``{"type": "BINARY"|"JSON"|"STRING", "data": ...}`` (None for none).

    Raises:
        InvalidEncodingError: BINARY data that is not base64.
        MalformedBodyError: another ``type``.
    """
    framed = getattr(data, "_framed", None)
    if framed is not None:  # serialized with its schema (the request layer's encode_v3_data)
        return framed
    if data is None or data.data is None:
        return None
    kind = (data.type or "BINARY").upper()
    if kind == "BINARY":
        try:
            return base64.b64decode(data.data, validate=True)
        except (ValueError, TypeError):
            raise InvalidEncodingError(f"{what}.data is not valid base64 (type BINARY).") from None
    if kind == "JSON":
        return orjson.dumps(data.data)
    if kind == "STRING":
        return str(data.data).encode()
    raise MalformedBodyError(f"{what}.type {data.type!r} is not supported; use BINARY, JSON or STRING.")


def decode_v3_record(body: Any) -> pa.Table:
    """A REST Proxy v3 single-record produce body (``V3ProduceRequest``) as a one-row produce batch.

    Raises:
        MalformedBodyError: ``timestamp`` is not an ISO-8601 date-time, or a data ``type`` is unknown.
        InvalidEncodingError: BINARY data that is not base64.
    """
    ts = None
    if body.timestamp is not None:
        try:
            ts = int(datetime.fromisoformat(body.timestamp.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            raise MalformedBodyError(f"timestamp {body.timestamp!r} is not an ISO-8601 date-time") from None
    headers = [{"key": h.get("name", h.get("key", "")), "value": v3_data_bytes(_Binary(h.get("value")), "header")}
               for h in body.headers]
    batch = pa.table({
        "key": pa.array([v3_data_bytes(body.key, "key")], pa.binary()),
        "value": pa.array([v3_data_bytes(body.value, "value")], pa.binary()),
        "headers": pa.array([headers], HEADERS_TYPE),
        "timestamp": pa.array([ts], pa.int64()),
    })
    return normalize_produce_batch(batch)


class _Binary:
    """A v3 header value: always BINARY (base64)."""

    type = "BINARY"

    def __init__(self, data: Any) -> None:
        self.data = data
