"""REST Proxy v3's streaming produce on a real broker: a body of JSON records one after another is
answered record by record, in order; a bad record gets its own error and the others are produced."""

from __future__ import annotations

import base64

import httpx
import orjson
import pytest

from lakelog.errors import for_code
from lakelog.protocol.errors import InvalidEncodingError
from lakelog.protocol.producer_headers import ProducerBatch
from tests.ingest_api.test_errors import new_topic
from tests.producers.test_idempotent_routes import log_end, new_producer


def _b64(x: bytes) -> str:
    return base64.b64encode(x).decode()


def _answers(resp: httpx.Response) -> list[dict]:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.content.endswith(b"\r\n")
    return [orjson.loads(line) for line in resp.content.split(b"\r\n")[:-1]]


def _values(http: httpx.Client, topic: str, partition: int) -> list[bytes]:
    got = http.get(f"/topics/{topic}/partitions/{partition}/records", params={"offset": 0, "max_wait_ms": 0},
                   headers={"Accept": "application/vnd.kafka.binary.v2+json"})
    return [base64.b64decode(r["value"]) for r in got.json()]


@pytest.fixture
def topic(api) -> str:
    return new_topic(api, partitions=2)


def test_a_stream_of_records_is_answered_record_by_record_in_order(api, http, topic):
    records = [{"partition_id": i % 2, "key": {"type": "STRING", "data": f"k{i}"},
                "value": {"type": ["STRING", "JSON", "BINARY"][i % 3],
                          "data": [f"v{i}", {"n": i}, _b64(b"b%d" % i)][i % 3]}} for i in range(7)]
    body = b"".join(orjson.dumps(r) + (b"\n" if i % 2 else b"") for i, r in enumerate(records))  # with or without gaps
    answers = _answers(http.post(f"/v3/clusters/{api.cluster_id}/topics/{topic}/records", content=body,
                                 headers={"Content-Type": "application/json"}))
    assert [a["error_code"] for a in answers] == [200] * 7
    assert [(a["partition_id"], a["offset"]) for a in answers] == [(i % 2, i // 2) for i in range(7)]
    assert {a["cluster_id"] for a in answers} == {api.cluster_id} and {a["topic_name"] for a in answers} == {topic}
    assert _values(http, topic, 0) == [b"v0", b"b2", b'{"n":4}', b"v6"]
    assert _values(http, topic, 1) == [b'{"n":1}', b"v3", b"b5"]


def test_a_bad_record_gets_its_own_error_and_the_others_are_produced(api, http, topic):
    records = [
        {"partition_id": 0, "value": {"type": "STRING", "data": "first"}},
        {"partition_id": 0, "value": {"type": "BINARY", "data": "not base64!!"}},  # 42203
        {"partition_id": 9, "value": {"type": "STRING", "data": "nowhere"}},  # 42206: no partition 9
        {"partition_id": "zero", "value": {"type": "STRING", "data": "x"}},  # 42222: not an integer
        {"partition_id": 0, "value": {"type": "STRING", "data": "last"}},
    ]
    body = b"".join(orjson.dumps(r) for r in records)
    answers = _answers(http.post(f"/v3/clusters/{api.cluster_id}/topics/{topic}/records", content=body,
                                 headers={"Content-Type": "application/json"}))
    assert [a["error_code"] for a in answers] == [200, 42203, 42206, 42222, 200]
    assert "partition 9" in answers[2]["message"] and "partition_id" in answers[3]["message"]
    assert set(answers[1]) == {"error_code", "message"}
    assert (answers[0]["offset"], answers[4]["offset"]) == (0, 1)
    assert _values(http, topic, 0) == [b"first", b"last"] and _values(http, topic, 1) == []


def test_a_body_that_stops_being_json_ends_the_stream_with_an_error(api, http, topic):
    good = orjson.dumps({"partition_id": 1, "value": {"type": "STRING", "data": "kept"}})
    answers = _answers(http.post(f"/v3/clusters/{api.cluster_id}/topics/{topic}/records",
                                 content=good + b'{"value": {"type": "STRING", "data": ' + good,
                                 headers={"Content-Type": "application/json"}))
    assert [a["error_code"] for a in answers] == [200, 40001]
    assert "Record 1" in answers[1]["message"]
    assert _values(http, topic, 1) == [b"kept"]


def test_a_retried_idempotent_stream_is_answered_with_the_original_offsets(api, http, topic):
    pid, epoch = new_producer(http)
    body = b"".join(orjson.dumps({"value": {"type": "JSON", "data": i}}) for i in range(5))
    headers = {**ProducerBatch(pid, epoch, 0).headers(), "Content-Type": "application/json"}
    path = f"/v3/clusters/{api.cluster_id}/topics/{topic}/records"
    first = _answers(http.post(path, content=body, headers=headers))
    ends = log_end(http, topic, 2)
    again = _answers(http.post(path, content=body, headers=headers))
    assert [(a["partition_id"], a["offset"]) for a in again] == [(a["partition_id"], a["offset"]) for a in first]
    assert log_end(http, topic, 2) == ends and sum(ends) == 5  # one sticky partition, written once


def test_the_client_sends_a_stream_and_reads_each_answer(api, http, topic):
    answers = api.produce_v3(topic, [{"partition_id": 1, "value": {"type": "JSON", "data": [1, 2]}},
                                     {"value": {"type": "BINARY", "data": "%%"}},
                                     {"partition_id": 1, "key": {"type": "STRING", "data": "k"}}])
    assert [a["error_code"] for a in answers] == [200, 42203, 200]
    assert for_code(answers[1]["error_code"]) is InvalidEncodingError
    assert [a.get("offset") for a in answers] == [0, None, 1]
    (one,) = api.produce_v3(topic, [{"partition_id": 0, "value": {"type": "STRING", "data": "alone"}}])
    assert (one["error_code"], one["partition_id"], one["offset"]) == (200, 0, 0)
