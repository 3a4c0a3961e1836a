"""AvroDatumReader decodes as fastavro's schemaless_reader does, for every kind of Avro type."""

from __future__ import annotations

import datetime
import decimal
import io
import json

import fastavro
import pytest

from lakelog.schemas.avro_datums import AvroDatumReader, parse_avro

ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "shop",
                      "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]})
ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "ok", "type": "boolean"},
    {"name": "ratio", "type": "float"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "ship_to", "type": "shop.Address"},
    {"name": "bill_to", "type": ["null", "shop.Address"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "prices", "type": {"type": "map", "values": "double"}},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "raw", "type": "bytes"},
    {"name": "choice", "type": ["null", "string", "long", "shop.State"]},
]})


def _datum(i: int) -> dict:
    return {"id": i, "ok": i % 2 == 0, "ratio": 0.5 * i, "amount": decimal.Decimal(f"{i}.25"),
            "at": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=i),
            "state": ["NEW", "PAID", "SHIPPED"][i % 3], "ship_to": {"city": f"c{i}", "zip": i or None},
            "bill_to": None if i % 2 else {"city": "é", "zip": None}, "tags": [f"t{j}" for j in range(i % 4)],
            "prices": {f"p{j}": j / 3 for j in range(i % 3)}, "digest": b"abcd", "raw": bytes(range(i % 7)),
            "choice": [None, f"s{i}", i * 1000, "PAID"][i % 4]}


def _encode(i: int) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parse_avro(ORDER, [("address", ADDRESS)]), _datum(i))
    return buf.getvalue()


def test_reads_as_schemaless_reader_does_for_every_type() -> None:
    reader = AvroDatumReader(ORDER, [("address", ADDRESS)])
    parsed = parse_avro(ORDER, [("address", ADDRESS)])
    for i in range(12):
        payload = _encode(i)
        expected = fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
        assert reader.read_payload(payload) == expected == _datum(i)


def test_reads_datums_one_after_another_from_one_stream_and_stops_at_each_end() -> None:
    payloads = [_encode(i) for i in range(5)]
    stream = io.BytesIO(b"".join(payloads))
    reader = AvroDatumReader(ORDER, [("address", ADDRESS)])
    end = 0
    for i, payload in enumerate(payloads):
        assert reader.read(stream) == _datum(i)
        end += len(payload)
        assert stream.tell() == end


def test_a_truncated_datum_raises() -> None:
    reader = AvroDatumReader(ORDER, [("address", ADDRESS)])
    payload = _encode(3)
    with pytest.raises(Exception):  # noqa: B017, PT011 - fastavro raises EOFError, StopIteration or IndexError
        reader.read_payload(payload[: len(payload) // 2])
    with pytest.raises(UnicodeDecodeError):
        AvroDatumReader(json.dumps({"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]})) \
            .read_payload(b"\x04\xff\xfe")
