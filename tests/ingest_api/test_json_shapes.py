"""JSON-format produce bodies of every shape (numbers, objects, arrays, nulls, booleans, tiny strings) are
decoded columnar, to the same batch as the per-record validator, and a large one read back exactly."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pytest

from lakelog.ingest_api import codecs, columnar_json, json_members
from lakelog.ingest_api.columnar_json import decode_columnar
from lakelog.protocol.errors import MalformedBodyError
from tests.ingest_api.test_errors import JSON, new_topic

#: values orjson writes back as they were sent (compactly): the columnar path takes them
CANONICAL = [0, 1, -7, 2**62, -(2**62), 1.0, -2.5, 0.1, 0.0001, 123456789012345.0, 12345.678901234, -0.0, 0.0,
             True, False, "", "s", "é ü 漢", "a},{b", {"a": 1, "b": [1, 2, {"c": None}]}, [], {}, [1, "x", None, 2.5],
             {"nested": {"deeper": [[], [{}], "]}"]}}]


def _record(i: int, value) -> dict:
    record = {"value": value}
    if i % 3 == 0:
        record["key"] = CANONICAL[(i * 7) % len(CANONICAL)]
    if i % 4 == 0:
        record["partition"] = i % 2
    if i % 5 == 0:
        record["headers"] = [{"key": "h", "value": base64.b64encode(b"hv").decode()}]
    if i % 6 == 0:
        record["timestamp"] = 1_700_000_000_000 + i
    if i % 11 == 0:
        record.pop("value")  # a missing value is null
        if not record.keys() & {"key", "partition"}:
            record["key"] = "k"  # a record needs one of key, value, partition (REST Proxy's rule)
    return record


def _same(fast, slow) -> None:
    assert fast[0].equals(slow[0]), (fast[0].slice(0, 5).to_pylist(), slow[0].slice(0, 5).to_pylist())
    assert (fast[1] is None) == (slow[1] is None)
    assert fast[1] is None or fast[1].cast(slow[1].type).equals(slow[1])


@pytest.mark.parametrize("indent", [False, True])
def test_every_json_shape_decodes_columnar_to_the_validators_batch(indent):
    records = [_record(i, CANONICAL[i % len(CANONICAL)]) for i in range(len(CANONICAL) * 5)]
    body = orjson.dumps({"records": records}, option=orjson.OPT_INDENT_2 if indent else 0)
    fast = decode_columnar(body, "json")
    assert fast is not None  # columnar, no validator
    _same(fast, codecs._decode_validated(body, "json"))
    values = fast[0]["value"].to_pylist()
    assert values[1] == b"1" and values[5] == b"1.0" and values[19] == b'{"a":1,"b":[1,2,{"c":null}]}'


@pytest.mark.parametrize("value", ["1e5", "1E5", "1.50", "-0", "0.00001", "12345678901234567890", "1234567890123456.5",
                                   '"tab\\tand \\u00e9"', '"\\/"', '{"a" : 1 ,"a":2}'])
def test_forms_orjson_writes_otherwise_are_left_to_the_validator(value):
    body = ('{"records":[{"value":1},{"value":' + value + '}]}').encode()
    fast = decode_columnar(body, "json")
    if value == '{"a" : 1 ,"a":2}':  # the one form kept as sent: a nested object naming a member twice
        assert fast[0]["value"].to_pylist()[1] == b'{"a":1,"a":2}'
        return
    assert fast is None
    assert codecs.decode_produce(body, "json")[0].equals(codecs._decode_validated(body, "json")[0])


def test_a_large_body_goes_columnar_chunk_by_chunk_and_only_doubtful_chunks_are_validated(monkeypatch):
    monkeypatch.setattr(columnar_json, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(codecs, "_COLUMNAR_JSON_MIN_BYTES", 0)
    records = [_record(i, CANONICAL[i % len(CANONICAL)]) for i in range(3000)]
    records[1700]["value"] = 1e300  # an exponent: its chunk goes to the validator
    records[2100]["value"] = "line\nbreak"  # an escape: its chunk too
    body = orjson.dumps({"records": records})
    validated = []
    real = codecs._decode_validated
    monkeypatch.setattr(codecs, "_decode_validated", lambda b, f, **kw: validated.append(len(b)) or real(b, f, **kw))
    batch, parts = codecs.decode_produce(bytearray(body), "json", consume=True)
    assert len(validated) == 2 and max(validated) < 4096 * 2
    expected = real(body, "json")
    assert batch.equals(expected[0]) and parts.equals(expected[1].cast(pa.int32()))
    assert batch["value"].to_pylist()[1700] == orjson.dumps(1e300)


def test_a_bad_record_in_a_later_chunk_is_named_by_its_place_in_the_body(monkeypatch):
    monkeypatch.setattr(columnar_json, "CHUNK_BYTES", 4096)
    records = [{"value": i} for i in range(5000)]
    records[4321]["partition"] = "two"
    body = orjson.dumps({"records": records})
    with pytest.raises(MalformedBodyError, match=r"records\[4321\]\.partition"):
        codecs.decode_produce(body, "json")


@pytest.mark.parametrize("text", [
    b'{"key":"a},{b","value":[1,{"x":"]"}]},{"value":2}', b'{"value":"open string},{', b'}],"x":[{',
    b'{"value":"esc \\" quote}"},{"value":"\\\\"}', b'{"headers":[{"name":"h"},{"name":"g"}', b'', b'"]"',
    b'{"value":"tab\tin"}   ,   {"value":{}}'])
def test_depth_summary_says_what_the_full_structure_says_of_a_chunks_end(text):
    """_chunk_end's cut test: brackets in strings, escaped quotes, a cut inside a string or a record, a
    chunk that closes the records array, with and without backslashes."""
    array = np.frombuffer(text, np.uint8)
    shape = json_members.structure(array)
    expected = (min(0, int(shape.depth.min())), int(shape.depth[-1]), bool(shape.outside[-1])) if len(text) else (0, 0, True)
    assert json_members.depth_summary(array) == expected


def test_a_body_with_raw_control_bytes_or_escapes_is_not_plain():
    assert columnar_json._plain(b'{"records":[{"value":"a"}]}')
    assert columnar_json._plain(b'{"records":[\n{"value":"a"}\r\n]}')  # whitespace outside strings
    assert not columnar_json._plain(b'{"records":[{"value":"a\\"b"}]}')
    assert not columnar_json._plain(b'{"records":[{"value":"a\x01b"}]}')


def _status_kb(pid: int, field: str) -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])


def test_a_large_request_of_tiny_json_records_is_read_back_exactly(gw, api, http):
    """300,000 records of every shape in one request (many chunks): accepted within a small multiple of the
    body in broker memory (the per-record validator took ~300x), and each value read back as the JSON it
    was (numbers stay numbers), in order."""
    topic = new_topic(api, partitions=1)
    values = [CANONICAL[i % len(CANONICAL)] for i in range(300_000)]
    body = orjson.dumps({"records": [{"value": v} for v in values]})
    warm = http.post(f"/topics/{new_topic(api, partitions=1)}/partitions/0", content=body,
                     headers={"Content-Type": JSON}, timeout=300)  # the broker's first large request loads modules
    assert warm.status_code == 200, warm.text[:500]
    Path(f"/proc/{gw.pid}/clear_refs").write_text("5")  # the high-water mark from the current RSS on
    before_kb = _status_kb(gw.pid, "VmRSS")
    resp = http.post(f"/topics/{topic}/partitions/0", content=body, headers={"Content-Type": JSON}, timeout=300)
    assert resp.status_code == 200, resp.text[:500]
    growth = (_status_kb(gw.pid, "VmHWM") - before_kb) * 1024
    assert growth < 20 * len(body), f"the broker grew by {growth / len(body):.1f}x the {len(body)}-byte body"
    offsets = resp.json()["offsets"]
    assert len(offsets) == len(values) and offsets[-1]["offset"] == len(values) - 1
    stored = []
    while len(stored) < len(values):
        table = api.fetch_arrow(topic, 0, len(stored), max_bytes=32 << 20)
        stored.extend(table["value"].to_pylist())
    assert stored == [orjson.dumps(v) for v in values]
    got = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0},
                   headers={"Accept": JSON}).json()
    assert [r["value"] for r in got] == values[:len(got)] and len(got) > len(CANONICAL)
    assert isinstance(got[1]["value"], int) and isinstance(got[5]["value"], float)
