"""Produce input is checked against Kafka's ranges before anything is written, bodies are read within
``socket.request.max.bytes`` as they stream in, and ``queued.max.request.bytes`` caps what is in flight."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pyarrow as pa
import pytest

from lakelog.client import LakelogClient, arrow_body
from lakelog.ingest_api import codecs, columnar_json
from lakelog.ingest_api.columnar_json import decode_columnar
from lakelog.ingest_api.records_api import InFlightBytes
from lakelog.log_tables.errors import InvalidTimestampError
from lakelog.log_tables.records import MAX_TIMESTAMP_MS
from lakelog.protocol.errors import FieldOutOfRangeError, ProduceQueueFullError
from tests.ingest_api.test_errors import ARROW, BINARY, JSON, assert_error, b64, log_state, new_topic, post


@pytest.fixture
def topic(api) -> str:
    return new_topic(api, partitions=2)


@pytest.mark.parametrize("record, status, code, fragment", [
    ({"value": 1, "partition": 6460575665}, 422, 42220, "partition 6460575665"),
    ({"value": 1, "partition": -6460575665}, 422, 42220, "partition -6460575665"),
    ({"value": 1, "partition": 1.4e28}, 400, 40001, "records[0].partition"),
    ({"value": 1, "partition": True}, 400, 40001, "records[0].partition"),
    ({"value": 1, "timestamp": True}, 400, 40001, "records[0].timestamp"),
    ({"value": 1, "timestamp": 9467104535280154}, 422, 42221, "9223372036854775"),
    ({"value": 1, "timestamp": MAX_TIMESTAMP_MS + 1}, 422, 42221, "Record 0"),
    ({"value": 1, "timestamp": 2**63 - 1}, 422, 42221, "INVALID_TIMESTAMP"),
    ({"value": 1, "timestamp": -(2**63)}, 422, 42221, "-1 (none)"),
    ({"value": 1, "timestamp": 2**63}, 422, 42221, "Record 0"),
    ({"value": 1, "timestamp": -2}, 422, 42221, "Record 0"),
], ids=["partition-int64", "partition-negative-int64", "partition-1.4e28", "partition-bool", "timestamp-bool",
        "timestamp-overflows-us", "timestamp-max+1", "timestamp-int64-max", "timestamp-int64-min",
        "timestamp-beyond-int64", "timestamp-negative"])
def test_out_of_range_fields_are_refused_and_write_nothing(http, topic, record, status, code, fragment):
    before = log_state(http, topic)
    for ctype in (JSON, BINARY):
        body = {"records": [{"value": b64(b"ok")}, dict(record, value=b64(b"x") if ctype == BINARY else 1)]}
        resp = post(http, f"/topics/{topic}", body, ctype)
        message = assert_error(resp, status, code, fragment.replace("Record 0", "Record 1").replace("[0]", "[1]"))
        assert "othing was written" in message
    assert log_state(http, topic) == before


def test_legal_extremes_are_stored_and_read_back(http, topic):
    resp = post(http, f"/topics/{topic}/partitions/0",
                {"records": [{"value": b64(b"a"), "timestamp": MAX_TIMESTAMP_MS}, {"value": b64(b"b"), "timestamp": -1},
                             {"value": b64(b"c"), "timestamp": 0}]}, BINARY)
    assert resp.status_code == 200, resp.text
    for accept in (BINARY, JSON):
        got = http.get(f"/topics/{topic}/partitions/0/records", params={"max_wait_ms": 0}, headers={"Accept": accept})
        assert got.status_code == 200, got.text
        assert [r["timestamp"] for r in got.json()] == [MAX_TIMESTAMP_MS, -1, 0]


def test_arrow_timestamp_and_partition_ranges(http, topic):
    before = log_state(http, topic)
    body = arrow_body(pa.table({"value": [b"a", b"b"], "timestamp": pa.array([0, 2**62], pa.int64())}))
    assert_error(post(http, f"/topics/{topic}/partitions/0/records", body, ARROW), 422, 42221, "Record 1")
    body = arrow_body(pa.table({"value": [b"a"], "partition": pa.array([2**40], pa.int64())}))
    assert_error(post(http, f"/topics/{topic}/partitions/0/records", body, ARROW), 422, 42220, "int32")
    assert log_state(http, topic) == before


def test_columnar_and_validated_decoders_agree():
    """The columnar fast path and the per-record validator give the same batch for what both take."""
    bodies = [
        (b'{"records":[{"key":"a2V5","value":"dmFsdWU=","partition":1,"timestamp":5,'
         b'"headers":[{"key":"h","value":"QQ=="},{"name":"n","value":""}]},{"value":null},{"key":""}]}', "binary"),
        (b'{"records":[{"key":"k","value":"v \xc3\xa9"},{"value":null,"headers":[]},{"value":null,"timestamp":7}], "value_schema_id": null}', "json"),
        (b'{\n  "records": [\n    {"value": "dmFsdWU="}\n  ]\n}\n', "binary"),
    ]
    for body, fmt in bodies:
        fast = decode_columnar(body, fmt)
        assert fast is not None, body
        slow = codecs._decode_validated(body, fmt)
        assert fast[0].equals(slow[0]), (fast[0].to_pylist(), slow[0].to_pylist())
        assert (fast[1] is None) == (slow[1] is None)
        assert fast[1] is None or fast[1].cast(slow[1].type).equals(slow[1]), (fast[1], slow[1])


@pytest.mark.parametrize("value", ["QR==", "QQ", "YW-_", "Q=Q=", "not base64!!"])
def test_doubtful_base64_goes_to_the_validator(value):
    body = b'{"records":[{"value":"%s"}]}' % value.encode()
    assert decode_columnar(body, "binary") is None
    try:
        expected = codecs._decode_validated(body, "binary")[0]
    except Exception as e:
        with pytest.raises(type(e)):
            codecs.decode_produce(body, "binary")
    else:
        assert codecs.decode_produce(body, "binary")[0].equals(expected)


def test_read_body_stops_reading_a_chunked_body_at_the_limit():
    from starlette.requests import Request

    from lakelog.ingest_api.records_api import read_body
    from lakelog.protocol.errors import RequestTooLargeError
    received = []

    async def receive():
        received.append(1)
        return {"type": "http.request", "body": b"x" * 1000, "more_body": len(received) < 10_000}
    request = Request({"type": "http", "method": "POST", "headers": []}, receive)
    budget = InFlightBytes(-1)
    with pytest.raises(RequestTooLargeError, match="socket.request.max.bytes=5000"):
        asyncio.run(read_body(request, limit=5000, budget=budget))
    assert len(received) == 6 and budget.held == 0  # 6 kB read of 10 MB, nothing left held


def test_in_flight_bytes_admits_one_request_then_caps():
    budget = InFlightBytes(100)
    budget.take(500)  # alone: admitted even above the cap
    with pytest.raises(ProduceQueueFullError):
        budget.take(1)
    budget.give(500)
    budget.take(60)
    with pytest.raises(ProduceQueueFullError):
        budget.take(41)
    assert budget.held == 60
    unbounded = InFlightBytes(-1)
    unbounded.take(10**12)
    unbounded.take(10**12)


def test_chunked_body_stops_at_the_limit_and_queue_full_is_429(broker_factory):
    broker = broker_factory(extra_env={"LAKELOG_SOCKET_REQUEST_MAX_BYTES": "100000",
                                       "LAKELOG_QUEUED_MAX_REQUEST_BYTES": "1000"})
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        topic = new_topic(api, partitions=1)
        resp = http.post(f"/topics/{topic}", content=(b"x" * 1000 for _ in range(1000)),
                         headers={"Content-Type": BINARY})
        assert_error(resp, 413, 41301, "socket.request.max.bytes=100000")

    async def slow_and_second():
        async with httpx.AsyncClient(base_url=broker.url, timeout=30) as client:
            gate = asyncio.Event()

            async def trickle():
                yield b'{"records": [{"value": "' + b"QUFB" * 400
                await gate.wait()
                yield b'"}]}'
            first = asyncio.create_task(client.post(f"/topics/{topic}", content=trickle(),
                                                    headers={"Content-Type": BINARY}))
            await asyncio.sleep(0.5)
            second = await client.post(f"/topics/{topic}", json={"records": [{"value": b64(b"y" * 100)}]},
                                       headers={"Content-Type": BINARY})
            gate.set()
            return await first, second
    first, second = asyncio.run(slow_and_second())
    assert first.status_code == 200, first.text
    assert_error(second, 429, 42901, "queued.max.request.bytes=1000")
    assert second.headers["Retry-After"] == "1" and second.headers["X-Lakelog-Retriable"] == "true"
    with httpx.Client(base_url=broker.url, timeout=30) as http:  # the budget was given back
        ok = post(http, f"/topics/{topic}", {"records": [{"value": b64(b"z")}]}, BINARY)
        assert ok.status_code == 200, ok.text


def test_error_classes():
    assert (FieldOutOfRangeError.http_status, FieldOutOfRangeError.error_code) == (422, 42220)
    assert (InvalidTimestampError.http_status, InvalidTimestampError.error_code) == (422, 42221)
    assert ProduceQueueFullError.retriable and ProduceQueueFullError.error_code == 42901


@pytest.mark.parametrize("indent", [None, 2])
def test_a_large_body_decodes_in_chunks_to_the_same_batch(monkeypatch, indent):
    """A body over CHUNK_BYTES is parsed a chunk of records at a time; splits that fall inside a record
    (between its headers, inside a string holding ``},{``) are retried, and the batch is the same as the
    whole body's, partitions included."""
    monkeypatch.setattr(columnar_json, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(codecs, "_COLUMNAR_BINARY_MIN_BYTES", 0)
    records = []
    for i in range(600):
        record = {"key": base64.b64encode(b"k%d" % i).decode() if i % 7 else None,
                  "value": base64.b64encode(b"v" * (i % 90 * 20)).decode()}
        if i % 3 == 0:
            record["headers"] = [{"key": "a},{b", "value": "QQ=="}, {"name": "n", "value": ""}, {"key": "c", "value": "Qg=="}]
        if i % 4 == 0:
            record["partition"] = i % 5
        records.append(record)
    body = json.dumps({"records": records}, indent=indent).encode()
    parsed = []
    monkeypatch.setattr(columnar_json, "_decode_document",
                        lambda b, f, real=columnar_json._decode_document, **kw: parsed.append(len(b)) or real(b, f, **kw))
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    chunked = codecs.decode_produce(bytearray(body), "binary", consume=True)
    # keys and values were decoded into one buffer each (not Arrow's pool): no copy joined the chunks
    values_bytes = sum(len(v) for v in chunked[0]["value"].to_pylist() if v)
    assert values_bytes > 500_000 and pool.bytes_allocated() - before < values_bytes // 4
    assert len(parsed) > 10 and max(parsed) < len(body) // 4  # chunks, never the whole body
    whole = codecs._decode_validated(body, "binary")
    assert chunked[0].equals(whole[0]) and chunked[0]["value"].num_chunks == 1
    assert chunked[1].equals(whole[1].cast(pa.int32()))


@pytest.mark.parametrize("after", [',"x":[{"a":1},{"value":"Q0ND"}]', ',"records":[{"value":"Q0ND"}]'])
def test_a_chunked_decode_never_takes_records_from_after_the_records_array(monkeypatch, after):
    """Another field (or a second "records") after the array is ignored, as the whole-body decoders do:
    chunking must not split inside it and read its objects as records."""
    monkeypatch.setattr(columnar_json, "CHUNK_BYTES", 40)
    body = ('{"records":[' + ",".join(['{"value":"QUFB"}'] * 4) + "]" + after + "}").encode()
    assert columnar_json._decode_chunked(body, "binary") is None
    whole = columnar_json._decode_document(body, "binary")  # what the body decodes to as before
    fast = decode_columnar(body, "binary")
    assert (fast is None and whole is None) or fast[0].equals(whole[0])


def test_an_empty_records_array_after_whitespace_decodes_to_nothing(monkeypatch):
    monkeypatch.setattr(columnar_json, "CHUNK_BYTES", 40)
    body = b" " * 100 + b'{"records":[]}'
    assert columnar_json._decode_chunked(body, "json") is None
    assert decode_columnar(body, "json")[0].num_rows == 0
