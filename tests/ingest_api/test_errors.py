"""Every bad request answers its HTTP status, REST Proxy error_code and a helpful message, and writes nothing.

Against real broker processes (real ZooKeeper, real Delta tables). One broker serves the module; the
request-size limit needs a broker of its own.
"""

from __future__ import annotations

import base64
import uuid

import httpx
import orjson
import pyarrow as pa
import pytest

from lakelog.client import LakelogClient, arrow_body
from lakelog.protocol import media_types

BINARY = media_types.BINARY_V2
JSON = media_types.JSON_V2
ARROW = media_types.ARROW_STREAM


def new_topic(api: LakelogClient, partitions: int = 3, configs: dict | None = None) -> str:
    name = f"err-{uuid.uuid4().hex[:10]}"
    api.create_topic(name, partitions=partitions, configs=configs)
    return name


@pytest.fixture
def topic(api, http) -> str:
    """A 3-partition topic with records 0..1 in every partition (so 'unchanged' means something)."""
    name = new_topic(api)
    for p in range(3):
        post(http, f"/topics/{name}/partitions/{p}", {"records": [{"value": b64(b"a")}, {"value": b64(b"b")}]}, BINARY)
    return name


def b64(x: bytes) -> str:
    return base64.b64encode(x).decode()


def post(http: httpx.Client, path: str, body, content_type: str | None) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {} if content_type is None else {"Content-Type": content_type}
    return http.post(path, content=content, headers=headers)


def log_state(http: httpx.Client, topic: str) -> list[tuple]:
    """(partition, log start, log end, high watermark, record values) of every partition."""
    info = http.get(f"/topics/{topic}")
    assert info.status_code == 200, info.text
    state = []
    for p in info.json()["partitions"]:
        records = http.get(f"/topics/{topic}/partitions/{p['partition']}/records",
                           params={"offset": p["log_start_offset"], "max_wait_ms": 0, "max_bytes": 1 << 24},
                           headers={"Accept": BINARY}).json()
        state.append((p["partition"], p["log_start_offset"], p["log_end_offset"], p["high_watermark"],
                      [r["value"] for r in records]))
    return state


def assert_error(resp: httpx.Response, status: int, error_code: int, *fragments: str) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json"), resp.headers["content-type"]
    body = resp.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == error_code, body
    message = body["message"]
    assert isinstance(message, str) and len(message) > 10
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# -- 404 ----------------------------------------------------------------------------------------

def test_unknown_topic_is_40401_everywhere(http):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    cid = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    requests = [
        ("GET", f"/topics/{missing}", None, None),
        ("GET", f"/topics/{missing}/partitions", None, None),
        ("GET", f"/topics/{missing}/partitions/0", None, None),
        ("GET", f"/topics/{missing}/partitions/0/offsets", None, None),
        ("GET", f"/topics/{missing}/partitions/0/records?offset=0", None, None),
        ("GET", f"/lakelog/v1/topics/{missing}/logs", None, None),
        ("POST", f"/topics/{missing}", {"records": [{"value": b64(b"x")}]}, BINARY),
        ("POST", f"/topics/{missing}/partitions/0", {"records": [{"value": "x"}]}, JSON),
        ("POST", f"/topics/{missing}/partitions/0/records", arrow_body(pa.table({"value": [b"x"]})), ARROW),
        ("GET", f"/v3/clusters/{cid}/topics/{missing}", None, None),
        ("DELETE", f"/v3/clusters/{cid}/topics/{missing}", None, None),
        ("POST", f"/v3/clusters/{cid}/topics/{missing}/records", {"value": {"type": "STRING", "data": "x"}}, "application/json"),
    ]
    for method, path, body, ctype in requests:
        content = None if body is None else body if isinstance(body, bytes) else orjson.dumps(body)
        resp = http.request(method, path, content=content, headers={"Content-Type": ctype} if ctype else {})
        assert_error(resp, 404, 40401, f"'{missing}'")
    assert missing not in http.get("/topics").json()  # nothing created on the way


def test_unknown_partition_is_40402(http, topic):
    before = log_state(http, topic)
    for method, path, body, ctype in [
        ("GET", f"/topics/{topic}/partitions/3", None, None),
        ("GET", f"/topics/{topic}/partitions/3/offsets", None, None),
        ("GET", f"/topics/{topic}/partitions/7/records?offset=0", None, None),
        ("POST", f"/topics/{topic}/partitions/3", {"records": [{"value": b64(b"x")}]}, BINARY),
        ("POST", f"/topics/{topic}/partitions/3/records", arrow_body(pa.table({"value": [b"x"]})), ARROW),
    ]:
        content = None if body is None else body if isinstance(body, bytes) else orjson.dumps(body)
        resp = http.request(method, path, content=content, headers={"Content-Type": ctype} if ctype else {})
        assert_error(resp, 404, 40402, "Partition", f"'{topic}'", "0 to 2")
    assert log_state(http, topic) == before


def test_unknown_cluster_is_40404(http):
    assert_error(http.get("/v3/clusters/no-such-cluster/topics"), 404, 40409, "no-such-cluster")


def test_unknown_route_answers_an_error_body(http):
    resp = http.get("/no/such/route")
    assert resp.status_code == 404
    assert set(resp.json()) == {"error_code", "message"}
    resp = http.put("/topics")
    assert resp.status_code == 405 and "error_code" in resp.json()


# -- offsets ------------------------------------------------------------------------------------

def test_fetch_out_of_range_offset_is_42202_with_log_start_and_end(http, topic):
    before = log_state(http, topic)
    resp = http.get(f"/topics/{topic}/partitions/1/records", params={"offset": 5, "max_wait_ms": 0})
    message = assert_error(resp, 422, 42226, "Offset 5", f"{topic}-1", "0 (log start offset)", "2 (high watermark")
    assert "out of range" in message
    # at the high watermark: not an error, an empty answer
    resp = http.get(f"/topics/{topic}/partitions/1/records", params={"offset": 2, "max_wait_ms": 0})
    assert resp.status_code == 200 and resp.json() == []
    assert log_state(http, topic) == before


@pytest.mark.parametrize("params, name", [
    ({"offset": -1}, "offset"),
    ({"offset": "abc"}, "offset"),
    ({"offset": 0, "max_bytes": 0}, "max_bytes"),
    ({"offset": 0, "max_wait_ms": 60_001}, "max_wait_ms"),
])
def test_bad_fetch_parameters_are_40001_naming_the_parameter(http, topic, params, name):
    resp = http.get(f"/topics/{topic}/partitions/0/records", params=params)
    assert_error(resp, 400, 40001, name)


def test_bad_partition_in_path_is_a_client_error(http, topic):
    resp = http.get(f"/topics/{topic}/partitions/-1/records")
    assert_error(resp, 400, 40001, "partition")
    resp = http.get(f"/topics/{topic}/partitions/abc")
    assert_error(resp, 400, 40001, "partition")


# -- record and request size --------------------------------------------------------------------

def test_record_too_large_is_42201_and_writes_nothing(api, http):
    topic = new_topic(api, configs={"max.message.bytes": "1000"})
    post(http, f"/topics/{topic}/partitions/0", {"records": [{"value": b64(b"seed")}]}, BINARY)
    before = log_state(http, topic)
    good = [{"value": b64(b"x" * 100)}] * 5
    too_large = {"key": b64(b"k"), "value": b64(b"y" * 1000)}  # 1 + 1000 + 61 > 1000

    cases = [
        (f"/topics/{topic}/partitions/0", {"records": good[:2] + [too_large] + good[2:]}, BINARY, "Record 2"),
        (f"/topics/{topic}", {"records": [dict(r, key=b64(str(i).encode())) for i, r in enumerate(good)] + [too_large]},
         BINARY, "Record 5"),
        (f"/topics/{topic}/partitions/1", {"records": [{"value": "ok"}, {"value": "z" * 2000}]}, JSON, "Record 1"),
        (f"/topics/{topic}/partitions/2/records",
         arrow_body(pa.table({"value": pa.array([b"a", b"b" * 5000, b"c"], pa.binary())})), ARROW, "Record 1"),
    ]
    for path, body, ctype, which in cases:
        resp = post(http, path, body, ctype)
        assert_error(resp, 422, 42225, which, "max.message.bytes=1000", f"'{topic}'", "nothing was written")
    # headers count too
    resp = post(http, f"/topics/{topic}/partitions/0",
                {"records": [{"value": b64(b"v"), "headers": [{"key": "h", "value": b64(b"h" * 990)}]}]}, BINARY)
    assert_error(resp, 422, 42225)
    assert log_state(http, topic) == before
    # at the limit is fine: 1000 - 61 bytes of key + value
    resp = post(http, f"/topics/{topic}/partitions/0", {"records": [{"key": b64(b"k"), "value": b64(b"v" * 938)}]},
                BINARY)
    assert resp.status_code == 200, resp.text


def test_body_larger_than_socket_request_max_bytes_is_41301(broker_factory):
    broker = broker_factory(extra_env={"LAKELOG_SOCKET_REQUEST_MAX_BYTES": "2000"})
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        topic = new_topic(api, partitions=1)
        ok = post(http, f"/topics/{topic}", {"records": [{"value": b64(b"small")}]}, BINARY)
        assert ok.status_code == 200, ok.text
        before = log_state(http, topic)

        big = orjson.dumps({"records": [{"value": b64(b"x" * 100)} for _ in range(30)]})
        assert len(big) > 2000
        resp = post(http, f"/topics/{topic}", big, BINARY)
        assert_error(resp, 413, 41301, str(len(big)), "socket.request.max.bytes=2000")

        # without a Content-Length (chunked): the limit holds as the body is read
        def chunks():
            for i in range(0, len(big), 500):
                yield big[i:i + 500]
        resp = http.post(f"/topics/{topic}", content=chunks(), headers={"Content-Type": BINARY})
        assert_error(resp, 413, 41301, "socket.request.max.bytes=2000")

        resp = post(http, f"/topics/{topic}/partitions/0/records",
                    arrow_body(pa.table({"value": [b"z" * 3000]})), ARROW)
        assert_error(resp, 413, 41301)
        assert log_state(http, topic) == before


# -- bodies -------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, status, code, fragments", [
    (b'{"records": [', 400, 40001, ["not valid JSON"]),
    (b"not json at all", 400, 40001, ["not valid JSON"]),
    (b"", 422, 42222, ["empty"]),  # REST Proxy's @NotNull produce request: 422
], ids=["truncated", "garbage", "empty"])
def test_malformed_json_is_40001(http, topic, body, status, code, fragments):
    before = log_state(http, topic)
    for ctype in (BINARY, JSON):
        resp = post(http, f"/topics/{topic}", body, ctype)
        assert_error(resp, status, code, *fragments)
    assert log_state(http, topic) == before


@pytest.mark.parametrize("body, fragments", [
    ({"records": {"key": "a"}}, ["records"]),
    ({"recs": []}, ["records", "Expected a body like"]),
    ([{"value": "x"}], ["Expected a body like"]),
    ({"records": ["just a string"]}, ["records[0]"]),
    ({"records": [{"value": b64(b"ok")}, {"value": b64(b"ok"), "partition": "one"}]}, ["records[1].partition"]),
    ({"records": [{"value": b64(b"ok"), "timestamp": "yesterday"}]}, ["records[0].timestamp"]),
    ({"records": [{"value": b64(b"ok"), "headers": {"k": "v"}}]}, ["records[0].headers"]),
    ({"records": [{"value": b64(b"ok"), "headers": [{"key": "k"}]}]}, ["records[0].headers[0].value"]),
], ids=["records-not-a-list", "no-records", "bare-list", "record-not-object", "partition-not-int",
        "timestamp-not-int", "headers-not-list", "header-without-value"])
def test_wrong_shape_is_40001_naming_the_field(http, topic, body, fragments):
    before = log_state(http, topic)
    resp = post(http, f"/topics/{topic}", body, BINARY)
    message = assert_error(resp, 400, 40001, *fragments)
    assert "Nothing was written" in message
    assert log_state(http, topic) == before


def test_bad_base64_is_42203_naming_the_field(http, topic):
    before = log_state(http, topic)
    for body, where in [
        ({"records": [{"value": b64(b"fine")}, {"key": "not base64!!", "value": b64(b"v")}]}, "records[1].key"),
        ({"records": [{"value": "@@@"}]}, "records[0].value"),
        ({"records": [{"value": b64(b"v"), "headers": [{"key": "h", "value": "%%%"}]}]}, "records[0].headers[0].value"),
    ]:
        resp = post(http, f"/topics/{topic}", body, BINARY)
        assert_error(resp, 422, 42203, where, "base64", "Nothing was written")
    cid = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    resp = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", json={"value": {"type": "BINARY", "data": "!!"}})
    assert_error(resp, 422, 42203, "value", "base64")
    assert log_state(http, topic) == before


def test_bad_arrow_body_is_40001(http, topic):
    before = log_state(http, topic)
    resp = post(http, f"/topics/{topic}/partitions/0/records", b"this is not arrow", ARROW)
    assert_error(resp, 400, 40001, "Arrow")
    resp = post(http, f"/topics/{topic}/partitions/0/records", arrow_body(pa.table({"value": [b"x"], "extra": [1]})), ARROW)
    assert_error(resp, 400, 40001, "extra")
    resp = post(http, f"/topics/{topic}/partitions/0/records", arrow_body(pa.table({"value": pa.array([], pa.binary())})),
                ARROW)
    assert_error(resp, 400, 40001, "no records")
    assert log_state(http, topic) == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "application/x-www-form-urlencoded", None])
def test_wrong_content_type_is_41501(http, topic, content_type):
    before = log_state(http, topic)
    resp = post(http, f"/topics/{topic}", {"records": [{"value": b64(b"x")}]}, content_type)
    assert_error(resp, 415, 41501, BINARY, JSON, ARROW)
    assert log_state(http, topic) == before


def test_arrow_to_the_topic_route_is_41501_pointing_to_the_partition_route(http, topic):
    before = log_state(http, topic)
    resp = post(http, f"/topics/{topic}", arrow_body(pa.table({"value": [b"x"]})), ARROW)
    assert_error(resp, 415, 41501, f"/topics/{topic}/partitions/")
    assert log_state(http, topic) == before


def test_content_type_parameters_and_case_are_accepted(http, topic):
    resp = post(http, f"/topics/{topic}/partitions/0", {"records": [{"value": b64(b"x")}]},
                "Application/VND.kafka.binary.v2+json; charset=utf-8")
    assert resp.status_code == 200, resp.text


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "image/png, text/plain"])
def test_unsupported_accept_is_40602(http, topic, accept):
    resp = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0},
                    headers={"Accept": accept})
    assert_error(resp, 406, 40602, accept, BINARY, JSON, ARROW)


def test_accept_list_picks_the_first_supported_form(http, topic):
    resp = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0},
                    headers={"Accept": f"text/html, {JSON}"})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith(JSON)


def test_record_naming_a_missing_partition_is_42206_and_writes_nothing(api, http, topic):
    before = log_state(http, topic)
    for body, ctype, fragments in [
        ({"records": [{"value": b64(b"a"), "partition": 0}, {"value": b64(b"b"), "partition": 3}]}, BINARY,
         ["Record 1", "partition 3", "0 to 2", "Nothing was written"]),
        ({"records": [{"value": 1}, {"value": 2, "partition": 99}, {"value": 3, "partition": 1}]}, JSON,
         ["Record 1", "partition 99"]),
        ({"records": [{"value": b64(b"a"), "partition": -1}]}, BINARY, ["partition -1"]),
    ]:
        resp = post(http, f"/topics/{topic}", body, ctype)
        assert_error(resp, 422, 42206, *fragments)
    # an Arrow 'partition' column that disagrees with the path
    resp = post(http, f"/topics/{topic}/partitions/0/records",
                arrow_body(pa.table({"value": [b"a", b"b"], "partition": [0, 1]})), ARROW)
    assert_error(resp, 422, 42206, "partition")
    # v3: partition_id that does not exist
    resp = http.post(f"/v3/clusters/{api.cluster_id}/topics/{topic}/records",
                     json={"partition_id": 5, "value": {"type": "STRING", "data": "x"}})
    assert_error(resp, 422, 42206, "partition 5")
    assert log_state(http, topic) == before


# -- topic admin --------------------------------------------------------------------------------

def test_topic_already_exists_is_40002(api, http, topic):
    before = log_state(http, topic)
    resp = http.post(f"/v3/clusters/{api.cluster_id}/topics", json={"topic_name": topic, "partitions_count": 5})
    assert_error(resp, 400, 40002, f"'{topic}'", "already exists")
    assert log_state(http, topic) == before  # still 3 partitions, records kept


@pytest.mark.parametrize("name, fragment", [
    ("bad name!", "letters, digits"),
    ("a/b", "letters, digits"),
    ("ünïcode", "letters, digits"),
    ("..", "'..'"),
    ("x" * 250, "249"),
])
def test_invalid_topic_name_is_40004(api, http, name, fragment):
    resp = http.post(f"/v3/clusters/{api.cluster_id}/topics", json={"topic_name": name})
    assert_error(resp, 400, 40004, fragment)
    assert name not in http.get("/topics").json()


def test_empty_topic_name_is_refused(api, http):
    resp = http.post(f"/v3/clusters/{api.cluster_id}/topics", json={"topic_name": ""})
    assert resp.status_code == 400 and resp.json()["error_code"] == 40004


def test_bad_topic_config_names_the_key(api, http):
    cid = api.cluster_id
    name = f"err-cfg-{uuid.uuid4().hex[:8]}"
    resp = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name,
                                                         "configs": [{"name": "retention.msx", "value": "1"}]})
    assert_error(resp, 400, 40003, "retention.msx", "retention.ms")
    resp = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name,
                                                         "configs": [{"name": "cleanup.policy", "value": "shred"}]})
    assert_error(resp, 400, 40003, "cleanup.policy", "shred")
    resp = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name,
                                                         "configs": [{"name": "max.message.bytes", "value": "-5"}]})
    assert_error(resp, 400, 40003, "max.message.bytes")
    assert name not in http.get("/topics").json()


def test_bad_create_topic_bodies(api, http):
    cid = api.cluster_id
    name = f"err-body-{uuid.uuid4().hex[:8]}"
    resp = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name, "partitions_count": 0})
    assert resp.status_code in (400, 422)
    assert "partitions_count" in resp.json()["message"]
    resp = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name, "replication_factor": 3})
    assert_error(resp, 400, 40006, "3", "live brokers")
    resp = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name, "partitions": 3})
    assert resp.status_code in (400, 422) and "partitions" in resp.json()["message"]
    resp = http.post(f"/v3/clusters/{cid}/topics", content=b"{", headers={"Content-Type": "application/json"})
    assert resp.status_code in (400, 422) and "error_code" in resp.json()
    assert name not in http.get("/topics").json()


def test_a_record_without_a_key_to_a_compacted_topic_is_42223_and_writes_nothing(api, http):
    topic = new_topic(api, configs={"cleanup.policy": "compact"})
    post(http, f"/topics/{topic}/partitions/0", {"records": [{"key": b64(b"k"), "value": b64(b"seed")}]}, BINARY)
    before = log_state(http, topic)
    cases = [
        (f"/topics/{topic}/partitions/0", {"records": [{"key": b64(b"a"), "value": b64(b"1")}, {"value": b64(b"2")}]},
         BINARY),
        (f"/topics/{topic}", {"records": [{"key": b64(b"a"), "value": b64(b"1")}, {"value": b64(b"2")}]}, BINARY),
        (f"/topics/{topic}/partitions/1/records", arrow_body(pa.table({"value": pa.array([b"a"], pa.binary())})), ARROW),
    ]
    for path, body, ctype in cases:
        resp = post(http, path, body, ctype)
        assert_error(resp, 422, 42223, "without a key", "Nothing was written")
    assert log_state(http, topic) == before
    resp = post(http, f"/topics/{topic}", {"records": [{"key": b64(b"a"), "value": None}]}, BINARY)  # a tombstone
    assert resp.status_code == 200, resp.text
