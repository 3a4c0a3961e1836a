"""The HTTP gateway against a real broker process (real ZooKeeper, real Delta tables).

One broker serves this module (a broker start costs seconds); every test works in its own topics.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from pathlib import Path

import httpx
import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.broker import Broker
from lakelog.client import GatewayError, LakelogClient, arrow_body
from lakelog.config import BrokerSettings
from lakelog.ingest_api import codecs
from lakelog.ingest_api.app import create_app
from lakelog.protocol.partitioner import murmur2, to_positive

BINARY = codecs.BINARY_V2
JSON = codecs.JSON_V2
ARROW = codecs.ARROW_STREAM

RECORD_FIELDS = {"topic", "key", "value", "partition", "offset", "timestamp", "headers"}


@pytest.fixture
def topic(api) -> str:
    """A fresh 3-partition topic."""
    name = f"gw-{uuid.uuid4().hex[:10]}"
    api.create_topic(name, partitions=3)
    return name


def b64(x: bytes | None) -> str | None:
    return None if x is None else base64.b64encode(x).decode()


def unb64(x: str | None) -> bytes | None:
    return None if x is None else base64.b64decode(x)


def post(http: httpx.Client, path: str, body, content_type: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return http.post(path, content=content, headers={"Content-Type": content_type})


def fetch(http: httpx.Client, topic: str, partition: int, offset: int = 0, *, accept: str = BINARY,
          **params) -> httpx.Response:
    resp = http.get(f"/topics/{topic}/partitions/{partition}/records",
                    params={"offset": offset, "max_wait_ms": 0, **params}, headers={"Accept": accept})
    assert resp.status_code == 200, resp.text
    return resp


def fetch_all(http: httpx.Client, topic: str, partition: int, *, accept: str = BINARY) -> list[dict]:
    return orjson.loads(fetch(http, topic, partition, accept=accept, max_bytes=64 * 1024 * 1024).content)


# -- v2 produce ---------------------------------------------------------------------------------

def test_binary_produce_to_topic_and_partition(http, topic):
    resp = post(http, f"/topics/{topic}/partitions/1",
                {"records": [{"key": b64(b"k1"), "value": b64(b"v1")}, {"value": b64(b"v2")}]}, BINARY)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/vnd.kafka.v2+json")
    body = resp.json()
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    assert body["offsets"] == [{"partition": 1, "offset": 0, "error_code": None, "error": None},
                               {"partition": 1, "offset": 1, "error_code": None, "error": None}]

    resp = post(http, f"/topics/{topic}", {"records": [{"key": b64(b"x"), "value": b64(b"y"), "partition": 1},
                                                       {"value": b64(b"z"), "partition": 0}]}, BINARY)
    assert resp.status_code == 200, resp.text
    assert [(o["partition"], o["offset"]) for o in resp.json()["offsets"]] == [(1, 2), (0, 0)]

    records = fetch_all(http, topic, 1)
    assert [(unb64(r["key"]), unb64(r["value"]), r["offset"]) for r in records] == [
        (b"k1", b"v1", 0), (None, b"v2", 1), (b"x", b"y", 2)]
    assert [unb64(r["value"]) for r in fetch_all(http, topic, 0)] == [b"z"]
    assert fetch_all(http, topic, 2) == []


def test_json_produce_to_topic_and_partition(http, topic):
    values = [{"a": 1, "b": [1, 2, None]}, "text", 12.5, True, [1, "x"]]
    resp = post(http, f"/topics/{topic}/partitions/2",
                {"records": [{"key": "k", "value": v} for v in values]}, JSON)
    assert resp.status_code == 200, resp.text
    assert [(o["partition"], o["offset"]) for o in resp.json()["offsets"]] == [(2, i) for i in range(5)]

    records = fetch_all(http, topic, 2, accept=JSON)
    assert [r["value"] for r in records] == values
    assert [r["key"] for r in records] == ["k"] * 5
    # stored as the compact JSON text: the binary form gives those bytes
    raw = fetch_all(http, topic, 2, accept=BINARY)
    assert unb64(raw[0]["value"]) == orjson.dumps(values[0])
    assert unb64(raw[0]["key"]) == b'"k"'

    # plain application/json is the JSON format too
    resp = post(http, f"/topics/{topic}", {"records": [{"value": {"n": 1}, "partition": 0}]}, "application/json")
    assert resp.status_code == 200, resp.text
    assert fetch_all(http, topic, 0, accept=JSON)[0]["value"] == {"n": 1}


def test_json_fetch_record_shape(http, topic):
    before = int(time.time() * 1000) - 5_000
    post(http, f"/topics/{topic}/partitions/0",
         {"records": [{"key": {"id": 7}, "value": {"v": "x"},
                       "headers": [{"key": "trace", "value": b64(b"abc")}]}]}, JSON)
    for accept in (JSON, BINARY, "application/json"):
        resp = fetch(http, topic, 0, accept=accept)
        expected_type = BINARY if accept == BINARY else JSON
        assert resp.headers["content-type"].startswith(expected_type)
        assert resp.headers["x-lakelog-high-watermark"] == "1"
        assert resp.headers["x-lakelog-log-start-offset"] == "0"
        (record,) = resp.json()
        assert set(record) == RECORD_FIELDS
        assert record["topic"] == topic and record["partition"] == 0 and record["offset"] == 0
        assert isinstance(record["timestamp"], int) and record["timestamp"] >= before
        assert record["headers"] == [{"key": "trace", "value": b64(b"abc")}]
        if accept == BINARY:
            assert unb64(record["key"]) == b'{"id":7}'
        else:
            assert record["key"] == {"id": 7} and record["value"] == {"v": "x"}
    # no Accept header (or */*): the binary form
    resp = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0})
    assert resp.headers["content-type"].startswith(BINARY)
    resp = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0},
                    headers={"Accept": "*/*"})
    assert unb64(resp.json()[0]["value"]) == b'{"v":"x"}'


def test_create_time_from_the_producer_is_kept(http, topic):
    post(http, f"/topics/{topic}/partitions/0", {"records": [{"value": b64(b"x"), "timestamp": 1_600_000_000_123}]},
         BINARY)
    assert fetch_all(http, topic, 0)[0]["timestamp"] == 1_600_000_000_123


def test_log_append_time_topic_stamps_broker_time(api, http):
    name = f"gw-lat-{uuid.uuid4().hex[:8]}"
    api.create_topic(name, partitions=1, configs={"message.timestamp.type": "LogAppendTime"})
    sent_at = int(time.time() * 1000)
    post(http, f"/topics/{name}/partitions/0", {"records": [{"value": b64(b"x"), "timestamp": 1_600_000_000_123},
                                                           {"value": b64(b"y")}]}, BINARY)
    stamps = [r["timestamp"] for r in fetch_all(http, name, 0)]
    assert stamps[0] == stamps[1] != 1_600_000_000_123
    assert abs(stamps[0] - sent_at) < 10_000
    assert api.topic_logs(name)[0]["timestamp_type"] == 1


# -- partitioning -------------------------------------------------------------------------------

def test_keyed_records_land_on_kafkas_murmur2_partition(http, topic):
    n = 3
    keys = [f"key-{i}" for i in range(60)] + ["", "ключ", "🔑"]
    # JSON format: the key bytes are the key's JSON text
    resp = post(http, f"/topics/{topic}", {"records": [{"key": k, "value": i} for i, k in enumerate(keys)]}, JSON)
    assert resp.status_code == 200, resp.text
    offsets = resp.json()["offsets"]
    expected = [to_positive(murmur2(orjson.dumps(k))) % n for k in keys]
    assert [o["partition"] for o in offsets] == expected
    assert set(expected) == {0, 1, 2}
    # binary format: the key bytes are the decoded base64
    raw_keys = [f"key-{i}".encode() for i in range(60)] + [bytes(range(256))]
    resp = post(http, f"/topics/{topic}", {"records": [{"key": b64(k), "value": b64(b"v")} for k in raw_keys]}, BINARY)
    assert [o["partition"] for o in resp.json()["offsets"]] == [to_positive(murmur2(k)) % n for k in raw_keys]
    # a known vector: Kafka puts "a" (JSON text b'"a"') where murmur2 says
    resp = post(http, f"/topics/{topic}", {"records": [{"key": "a", "value": 1}]}, JSON)
    assert resp.json()["offsets"][0]["partition"] == to_positive(murmur2(b'"a"')) % n

    # each record really is in the partition and at the offset it was told
    for p in range(n):
        stored = {r["offset"]: r for r in fetch_all(http, topic, p, accept=JSON)}
        for i, (o, k) in enumerate(zip(offsets, keys)):
            if o["partition"] == p:
                assert stored[o["offset"]]["key"] == k and stored[o["offset"]]["value"] == i
    # the same key always lands on the same partition
    again = post(http, f"/topics/{topic}", {"records": [{"key": k, "value": 0} for k in keys]}, JSON)
    assert [o["partition"] for o in again.json()["offsets"]] == expected


def test_keyless_records_spread_over_partitions_across_requests(http, topic):
    seen = set()
    total = 0
    for _ in range(12):
        resp = post(http, f"/topics/{topic}", {"records": [{"value": b64(b"v")}, {"value": b64(b"w")}]}, BINARY)
        assert resp.status_code == 200, resp.text
        seen.update(o["partition"] for o in resp.json()["offsets"])
        total += 2
    assert len(seen) >= 2, seen
    assert sum(len(fetch_all(http, topic, p)) for p in range(3)) == total


def test_explicit_record_partition_overrides_the_key(http, topic):
    k = "k"
    hashed = to_positive(murmur2(orjson.dumps(k))) % 3
    other = (hashed + 1) % 3
    resp = post(http, f"/topics/{topic}", {"records": [{"key": k, "value": 1, "partition": other},
                                                       {"key": k, "value": 2}]}, JSON)
    assert [o["partition"] for o in resp.json()["offsets"]] == [other, hashed]


# -- payload fidelity ---------------------------------------------------------------------------

ODD_RECORDS = [
    (None, None),  # tombstone without a key
    (b"k-null-value", None),  # tombstone
    (None, b"no key"),
    (b"", b""),  # empty is not null
    (bytes(range(256)), bytes(range(255, -1, -1))),  # every byte value
    ("ключ-🔑-キー".encode(), "värde ✓".encode()),  # unicode keys
    (b"\x00", b"\xff\xfe\x00"),
]


def test_binary_path_keeps_nulls_empties_all_bytes_and_unicode(http, topic):
    resp = post(http, f"/topics/{topic}/partitions/0", {"records": [{"key": b64(k), "value": b64(v)}
                                                                    for k, v in ODD_RECORDS]}, BINARY)
    assert resp.status_code == 200, resp.text
    got = [(unb64(r["key"]), unb64(r["value"])) for r in fetch_all(http, topic, 0)]
    assert got == ODD_RECORDS
    with LakelogClient(str(http.base_url)) as api:
        table = api.fetch_arrow(topic, 0, 0)
    assert list(zip(table["key"].to_pylist(), table["value"].to_pylist())) == ODD_RECORDS


def test_arrow_path_keeps_nulls_empties_all_bytes_and_unicode(api, topic):
    table = pa.table({"key": pa.array([k for k, _ in ODD_RECORDS], pa.binary()),
                      "value": pa.array([v for _, v in ODD_RECORDS], pa.binary())})
    resp = api.produce_arrow(topic, 2, table)
    assert resp == {"partition": 2, "base_offset": 0, "last_offset": len(ODD_RECORDS) - 1,
                    "record_count": len(ODD_RECORDS)}
    got = api.fetch_arrow(topic, 2, 0)
    assert list(zip(got["key"].to_pylist(), got["value"].to_pylist())) == ODD_RECORDS
    binary = api.fetch(topic, 2, 0)
    assert [(unb64(r["key"]), unb64(r["value"])) for r in binary] == ODD_RECORDS


def test_unicode_json_keys_and_values_survive(http, topic):
    records = [{"key": "ключ-🔑", "value": {"текст": "日本語 ✓", "e": "\u0000\t\n"}}, {"key": "", "value": ""}]
    post(http, f"/topics/{topic}/partitions/1", {"records": records}, JSON)
    got = fetch_all(http, topic, 1, accept=JSON)
    assert [(r["key"], r["value"]) for r in got] == [(r["key"], r["value"]) for r in records]


def test_headers_survive_binary_json_and_arrow(http, api, topic):
    headers = [{"key": "trace-id", "value": b64(b"\x00\x01abc")}, {"key": "empty", "value": b64(b"")},
               {"key": "null", "value": None}, {"key": "dup", "value": b64(b"1")}, {"key": "dup", "value": b64(b"2")},
               {"key": "ключ", "value": b64("знач".encode())}]
    post(http, f"/topics/{topic}/partitions/0", {"records": [{"value": b64(b"v"), "headers": headers},
                                                             {"value": b64(b"no headers")}]}, BINARY)
    post(http, f"/topics/{topic}/partitions/0", {"records": [{"value": 1, "headers": headers}]}, JSON)
    # REST Proxy v3 spells the header key "name"
    post(http, f"/topics/{topic}/partitions/0", {"records": [{"value": b64(b"x"),
                                                             "headers": [{"name": "n", "value": b64(b"y")}]}]}, BINARY)
    records = fetch_all(http, topic, 0)
    assert records[0]["headers"] == headers
    assert records[1]["headers"] == []
    assert records[2]["headers"] == headers
    assert records[3]["headers"] == [{"key": "n", "value": b64(b"y")}]

    table = api.fetch_arrow(topic, 0, 0)
    assert table["headers"].to_pylist()[0] == [{"key": h["key"], "value": unb64(h["value"])} for h in headers]

    # Arrow produce with a headers column
    arrow_headers = pa.array([[{"key": "a", "value": b"1"}], None], codecs.HEADERS_TYPE)
    api.produce_arrow(topic, 1, pa.table({"value": pa.array([b"x", b"y"]), "headers": arrow_headers}))
    assert fetch_all(http, topic, 1)[0]["headers"] == [{"key": "a", "value": b64(b"1")}]
    assert fetch_all(http, topic, 1)[1]["headers"] == []


# -- Arrow --------------------------------------------------------------------------------------

def test_arrow_produce_and_arrow_fetch_round_trip(api, http, topic):
    n = 6000
    table = pa.table({
        "key": pa.array([f"k{i % 17}" for i in range(n)]),  # strings are taken as their UTF-8 bytes
        "value": pa.array([f"value-{i}".encode() * (i % 5) for i in range(n)], pa.binary()),
        "timestamp": pa.array([1_600_000_000_000 + i for i in range(n)], pa.timestamp("ms", tz="UTC")),
    })
    first = api.produce_arrow(topic, 0, table.slice(0, 4500))
    second = api.produce_arrow(topic, 0, table.slice(4500))
    assert (first["base_offset"], first["last_offset"], first["record_count"]) == (0, 4499, 4500)
    assert (second["base_offset"], second["last_offset"], second["record_count"]) == (4500, 5999, 1500)

    got = api.fetch_arrow(topic, 0, 0)
    assert got.column_names == ["offset", "timestamp", "key", "value", "headers"]
    assert got.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert got["offset"].to_pylist() == list(range(n))
    assert got["key"].to_pylist() == [f"k{i % 17}".encode() for i in range(n)]
    assert got["value"].to_pylist() == table["value"].to_pylist()
    assert got["timestamp"].to_pylist() == table["timestamp"].to_pylist()

    # from an offset in the middle; the response carries the high watermark
    resp = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 1234, "max_wait_ms": 0},
                    headers={"Accept": ARROW})
    assert resp.headers["content-type"] == ARROW
    assert resp.headers["x-lakelog-high-watermark"] == str(n)
    part = pa.ipc.open_stream(resp.content).read_all()
    assert part["offset"].to_pylist() == list(range(1234, n))
    # the JSON forms of a large fetch agree with the Arrow one
    records = fetch_all(http, topic, 0)
    assert [r["offset"] for r in records] == list(range(n))
    assert [unb64(r["value"]) for r in records] == table["value"].to_pylist()
    assert [r["timestamp"] for r in records[:3]] == [1_600_000_000_000, 1_600_000_000_001, 1_600_000_000_002]

    # Arrow to the plain partition route works too; an Arrow 'partition' column must match it
    resp = post(http, f"/topics/{topic}/partitions/1", arrow_body(pa.table({"value": [b"a"], "partition": [1]})), ARROW)
    assert resp.status_code == 200, resp.text
    assert resp.json()["base_offset"] == 0


def test_fetch_max_bytes_returns_at_least_one_record_and_pages_through(http, topic):
    post(http, f"/topics/{topic}/partitions/0",
         {"records": [{"value": b64(f"{i:04d}".encode() * 50)} for i in range(40)]}, BINARY)
    post(http, f"/topics/{topic}/partitions/0",
         {"records": [{"value": b64(f"{i:04d}".encode() * 50)} for i in range(40, 60)]}, BINARY)
    one = fetch(http, topic, 0, 0, max_bytes=1).json()
    assert [r["offset"] for r in one] == [0]
    offset, seen = 0, []
    while offset < 60:
        page = fetch(http, topic, 0, offset, max_bytes=2000).json()
        assert page and page[0]["offset"] == offset
        assert len(page) < 60
        seen += [r["offset"] for r in page]
        offset = page[-1]["offset"] + 1
    assert seen == list(range(60))


# -- long poll ----------------------------------------------------------------------------------

def test_long_poll_returns_records_produced_while_waiting(gw, http, topic):
    post(http, f"/topics/{topic}/partitions/0", {"records": [{"value": b64(b"first")}]}, BINARY)
    errors = []

    def produce_later():
        time.sleep(0.3)
        try:
            with httpx.Client(base_url=gw.url) as other:
                post(other, f"/topics/{topic}/partitions/0", {"records": [{"value": b64(b"late")}]}, BINARY)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    producer = threading.Thread(target=produce_later)
    started = time.monotonic()
    producer.start()
    max_wait_s = 20.0
    resp = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 1, "max_wait_ms": int(max_wait_s * 1000)},
                    headers={"Accept": BINARY})
    elapsed = time.monotonic() - started
    producer.join()
    assert not errors
    assert resp.status_code == 200
    # the record produced while the fetch waited is in its answer ...
    assert [(r["offset"], unb64(r["value"])) for r in resp.json()] == [(1, b"late")]
    # ... it did wait for it (the record came 0.3 s in), and the produce ended the wait, not max_wait_ms
    assert 0.25 <= elapsed < max_wait_s, elapsed


def test_empty_long_poll_returns_after_max_wait(http, topic):
    started = time.monotonic()
    resp = http.get(f"/topics/{topic}/partitions/2/records", params={"offset": 0, "max_wait_ms": 800})
    elapsed = time.monotonic() - started
    # an empty answer (not a hang: the request returned), after waiting max_wait_ms
    assert resp.status_code == 200 and resp.json() == []
    assert elapsed >= 0.75, elapsed
    # max_wait_ms=0 does not wait: it answers before the 800 ms long poll above did
    started = time.monotonic()
    assert fetch(http, topic, 2, 0).json() == []
    assert time.monotonic() - started < elapsed


# -- metadata -----------------------------------------------------------------------------------

def test_topic_and_partition_metadata(api, http):
    name = f"gw-meta-{uuid.uuid4().hex[:8]}"
    api.create_topic(name, partitions=2, configs={"retention.ms": "1000", "compression.type": "zstd"})
    post(http, f"/topics/{name}/partitions/1", {"records": [{"value": b64(b"a")}, {"value": b64(b"b")}]}, BINARY)

    topics = http.get("/topics")
    assert topics.status_code == 200 and name in topics.json()
    assert topics.json() == sorted(topics.json())

    info = http.get(f"/topics/{name}").json()
    assert info["name"] == name
    assert info["configs"]["retention.ms"] == "1000"
    assert info["configs"]["compression.type"] == "zstd"
    assert info["configs"]["cleanup.policy"] == "delete"  # defaults are listed too
    assert [p["partition"] for p in info["partitions"]] == [0, 1]
    p1 = info["partitions"][1]
    assert p1["leader"] == 0 and p1["leader_epoch"] == 0
    assert p1["replicas"] == [{"broker": 0, "leader": True, "in_sync": True}]
    assert (p1["log_start_offset"], p1["log_end_offset"], p1["high_watermark"]) == (0, 2, 2)

    parts = http.get(f"/topics/{name}/partitions").json()
    assert parts == info["partitions"]
    assert http.get(f"/topics/{name}/partitions/1").json() == p1
    assert http.get(f"/topics/{name}/partitions/0/offsets").json() == {
        "beginning_offset": 0, "end_offset": 0, "last_stable_offset": 0}
    assert http.get(f"/topics/{name}/partitions/1/offsets").json() == {
        "beginning_offset": 0, "end_offset": 2, "last_stable_offset": 2}

    logs = api.topic_logs(name)
    assert [(l["partition"], l["log_end_offset"], l["high_watermark"]) for l in logs] == [(0, 0, 0), (1, 2, 2)]
    assert logs[1]["table_uri"].endswith(f"{name}-1")
    assert logs[1]["timestamp_type"] == 0


def test_topic_logs_table_version_files_and_size(http, api):
    """``GET /lakelog/v1/topics/{t}/logs?details=true`` names each partition table's Delta version, its data
    files and the replica's bytes on disk, as the table and the directory have them; without it they are null."""
    name = "table-facts"
    api.create_topic(name, partitions=1, configs={"lake.commit.interval.ms": "0"})  # a Delta commit per append
    before = http.get(f"/lakelog/v1/topics/{name}/logs", params={"details": "true"}).json()[0]
    for i in range(3):
        assert http.post(f"/topics/{name}/partitions/0", json={"records": [{"value": {"n": i}}]},
                         headers={"Content-Type": "application/vnd.kafka.json.v2+json"}).status_code == 200
    plain = http.get(f"/lakelog/v1/topics/{name}/logs").json()[0]  # a reader's planning call: no directory walk
    assert (plain["table_version"], plain["table_files"], plain["size_bytes"]) == (None, None, None)
    info = http.get(f"/lakelog/v1/topics/{name}/logs", params={"details": "true"}).json()[0]
    table = DeltaTable(info["table_uri"])
    assert (info["table_version"], info["table_files"]) == (table.version(), len(table.file_uris()))
    assert (info["table_version"] - before["table_version"], info["table_files"] - before["table_files"]) == (3, 3)
    on_disk = sum(f.stat().st_size for f in Path(info["table_uri"]).rglob("*") if f.is_file())
    assert info["size_bytes"] == on_disk > 0


# -- v3 -----------------------------------------------------------------------------------------

def test_v3_clusters(http, gw):
    body = http.get("/v3/clusters").json()
    assert body["kind"] == "KafkaClusterList"
    (cluster,) = body["data"]
    cid = cluster["cluster_id"]
    assert cid and cluster["kind"] == "KafkaCluster"
    assert cluster["metadata"]["self"] == f"{gw.url}/v3/clusters/{cid}"
    assert cluster["topics"]["related"] == f"{gw.url}/v3/clusters/{cid}/topics"
    # a stable id
    assert http.get("/v3/clusters").json()["data"][0]["cluster_id"] == cid


def test_v3_topic_create_list_get_delete_and_recreate(api, http):
    cid = api.cluster_id
    name = f"gw-v3-{uuid.uuid4().hex[:8]}"
    resp = http.post(f"/v3/clusters/{cid}/topics", json={
        "topic_name": name, "partitions_count": 2, "replication_factor": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}]})
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert created["kind"] == "KafkaTopic" and created["topic_name"] == name and created["cluster_id"] == cid
    assert (created["partitions_count"], created["replication_factor"], created["is_internal"]) == (2, 1, False)
    assert created["configs_list"] == [{"name": "cleanup.policy", "value": "compact"}]
    assert created["metadata"]["self"].endswith(f"/v3/clusters/{cid}/topics/{name}")

    listed = http.get(f"/v3/clusters/{cid}/topics").json()
    assert listed["kind"] == "KafkaTopicList"
    assert name in [t["topic_name"] for t in listed["data"]]
    got = http.get(f"/v3/clusters/{cid}/topics/{name}")
    assert got.status_code == 200 and got.json()["partitions_count"] == 2

    # default partition count: num.partitions (1)
    other = f"{name}-default"
    assert http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": other}).json()["partitions_count"] == 1

    # a compacted topic: every record needs a key
    post(http, f"/topics/{name}/partitions/0", {"records": [{"key": b64(b"k"), "value": b64(b"old")}] * 3}, BINARY)
    assert api.partition_offsets(name, 0)["end_offset"] == 3

    resp = http.delete(f"/v3/clusters/{cid}/topics/{name}")
    assert resp.status_code == 204 and resp.content == b""
    assert name not in http.get("/topics").json()
    gone = http.get(f"/v3/clusters/{cid}/topics/{name}")
    assert gone.status_code == 404 and gone.json()["error_code"] == 40401
    assert http.get(f"/topics/{name}").json()["error_code"] == 40401
    assert http.delete(f"/v3/clusters/{cid}/topics/{name}").json()["error_code"] == 40401

    # the same name again: a new, empty log starting at offset 0
    api.create_topic(name, partitions=2)
    assert api.partition_offsets(name, 0) == {"beginning_offset": 0, "end_offset": 0, "last_stable_offset": 0}
    assert fetch_all(http, name, 0) == []
    resp = post(http, f"/topics/{name}/partitions/0", {"records": [{"value": b64(b"new")}]}, BINARY)
    assert resp.json()["offsets"][0]["offset"] == 0
    assert [unb64(r["value"]) for r in fetch_all(http, name, 0)] == [b"new"]
    api.admin.delete_topic(other)


def test_v3_single_record_produce(api, http, topic):
    cid = api.cluster_id
    resp = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", json={
        "partition_id": 1,
        "headers": [{"name": "h", "value": b64(b"hv")}],
        "key": {"type": "BINARY", "data": b64(b"\x00key")},
        "value": {"type": "JSON", "data": {"amount": 10}},
    })
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["cluster_id"], body["topic_name"], body["partition_id"], body["offset"]) == (cid, topic, 1, 0)
    assert body["error_code"] == 200

    resp = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", json={
        "key": {"type": "STRING", "data": "user-1"}, "value": {"type": "STRING", "data": "hello"},
        "timestamp": "2020-09-13T12:26:40.123Z"})
    body = resp.json()
    assert body["partition_id"] == to_positive(murmur2(b"user-1")) % 3

    (first,) = fetch_all(http, topic, 1)
    assert unb64(first["key"]) == b"\x00key"
    assert unb64(first["value"]) == b'{"amount":10}'
    assert first["headers"] == [{"key": "h", "value": b64(b"hv")}]
    second = fetch_all(http, topic, body["partition_id"])[body["offset"]]
    assert (unb64(second["key"]), unb64(second["value"])) == (b"user-1", b"hello")
    assert second["timestamp"] == 1_600_000_000_123

    # a value-only record
    resp = http.post(f"/v3/clusters/{cid}/topics/{topic}/records", json={"value": {"type": "STRING", "data": "v"}})
    assert resp.status_code == 200, resp.text


# -- OpenAPI ------------------------------------------------------------------------------------

EXPECTED_ROUTES = {
    ("/topics", "get"),
    ("/topics/{topic}", "get"),
    ("/topics/{topic}", "post"),
    ("/topics/{topic}/partitions", "get"),
    ("/topics/{topic}/partitions/{partition}", "get"),
    ("/topics/{topic}/partitions/{partition}", "post"),
    ("/topics/{topic}/partitions/{partition}/offsets", "get"),
    ("/topics/{topic}/partitions/{partition}/records", "get"),
    ("/topics/{topic}/partitions/{partition}/records", "post"),
    ("/lakelog/v1/topics/{topic}/logs", "get"),
    ("/v3/clusters", "get"),
    ("/v3/clusters/{cluster_id}/topics", "get"),
    ("/v3/clusters/{cluster_id}/topics", "post"),
    ("/v3/clusters/{cluster_id}/topics/{topic}", "get"),
    ("/v3/clusters/{cluster_id}/topics/{topic}", "delete"),
    ("/v3/clusters/{cluster_id}/topics/{topic}/records", "post"),
}


def test_openapi_lists_every_route_and_the_produce_content_types(http, tmp_path):
    resp = http.get("/openapi.json")
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["openapi"].startswith("3.")
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert EXPECTED_ROUTES <= documented

    # every route the app serves is documented (built locally: not started, nothing connected)
    app = create_app(Broker(BrokerSettings.load(log_dirs=tmp_path, zookeeper_connect="127.0.0.1:1")))
    def leaf_routes(routes):
        for route in routes:
            included = getattr(route, "original_router", None)  # an included APIRouter
            if included is not None:
                yield from leaf_routes(included.routes)
            else:
                yield route

    served = {(route.path_format, m.lower()) for route in leaf_routes(app.routes)
              if getattr(route, "include_in_schema", False) for m in route.methods}
    assert served == documented

    for path in ("/topics/{topic}", "/topics/{topic}/partitions/{partition}"):
        content = doc["paths"][path]["post"]["requestBody"]["content"]
        assert {BINARY, JSON} <= set(content), (path, list(content))
        for media in (BINARY, JSON):
            schema = _resolve(doc, content[media]["schema"])
            assert schema["type"] == "object" and "records" in schema["properties"], schema
    bulk = doc["paths"]["/topics/{topic}/partitions/{partition}/records"]["post"]["requestBody"]["content"]
    assert {ARROW, BINARY, JSON} <= set(bulk)
    fetch_op = doc["paths"]["/topics/{topic}/partitions/{partition}/records"]["get"]
    assert {ARROW, BINARY, JSON} <= set(fetch_op["responses"]["200"]["content"])
    params = {p["name"] for p in fetch_op["parameters"]}
    assert {"offset", "max_bytes", "max_wait_ms"} <= params
    # error responses documented with the error body
    assert "404" in doc["paths"]["/topics/{topic}"]["get"]["responses"]
    assert "ErrorBody" in doc["components"]["schemas"]


def test_openapi_references_resolve(http):
    doc = http.get("/openapi.json").json()
    # every $ref resolves (Swagger UI and code generators fail on dangling ones)
    schemas = doc["components"]["schemas"]
    dangling = sorted({ref for ref in _refs(doc) if ref.rsplit("/", 1)[1] not in schemas})
    assert dangling == [], f"$refs to schemas missing from components.schemas: {dangling}"
    # the produce records and fetched records are described field by field
    for path, media in [("/topics/{topic}", BINARY), ("/topics/{topic}", JSON)]:
        body = _resolve(doc, doc["paths"][path]["post"]["requestBody"]["content"][media]["schema"])
        record = _resolve(doc, body["properties"]["records"]["items"])
        assert {"key", "value", "partition", "headers", "timestamp"} <= set(record["properties"])
    fetched = doc["paths"]["/topics/{topic}/partitions/{partition}/records"]["get"]["responses"]["200"]["content"]
    consumer_record = _resolve(doc, fetched[JSON]["schema"]["items"])
    assert set(consumer_record["properties"]) == RECORD_FIELDS


def _resolve(doc: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_client_reports_gateway_errors(api):
    with pytest.raises(GatewayError) as e:
        api.admin.describe_topic(f"missing-{uuid.uuid4().hex[:6]}")
    assert e.value.error_code == 40401 and e.value.http_status == 404


def test_brokers_lists_the_live_broker_ids(http, gw):
    resp = http.get("/brokers")  # REST Proxy v2 BrokersResource
    assert resp.status_code == 200 and resp.json() == {"brokers": [0]}
