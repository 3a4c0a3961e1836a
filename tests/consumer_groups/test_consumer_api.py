"""REST Proxy v2 consumer instances against a real broker: subscribe, read, commit, resume, seek,
manual assignment, pattern subscription, and REST Proxy's errors."""

from __future__ import annotations

import base64

import httpx
import pytest

from lakelog.client import GatewayError
from tests.harness import wait_for

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"


def drain(consumer, expected: int, *, timeout_s: float = 15.0) -> list[dict]:
    """Poll until ``expected`` records arrived."""
    got: list[dict] = []
    wait_for(lambda: got.extend(consumer.poll(timeout_ms=200)) or len(got) >= expected, timeout_s=timeout_s,
             interval_s=0, what=f"{expected} records")
    return got


def values(records: list[dict]) -> list[bytes]:
    return [base64.b64decode(r["value"]) for r in records]


def test_subscribe_read_commit_and_resume(api, topic_name, group):
    api.create_topic(topic_name, partitions=3)
    for p in range(3):
        api.produce_binary(topic_name, [(b"k", f"p{p}-{i}".encode()) for i in range(10)], partition=p)
    with api.groups.create_consumer(group, name="c1", auto_offset_reset="earliest", auto_commit=False) as c:
        assert c.base_uri.endswith(f"/consumers/{group}/instances/c1")
        c.subscribe([topic_name])
        assert c.subscription() == [topic_name]
        got = drain(c, 30)
        assert len(got) == 30 and {r["topic"] for r in got} == {topic_name}
        assert set(got[0]) >= {"topic", "key", "value", "partition", "offset"}
        for p in range(3):
            assert [r["offset"] for r in got if r["partition"] == p] == list(range(10))
        assert sorted(c.assignment()) == [(topic_name, p) for p in range(3)]
        c.commit()  # an empty body commits everything fetched
        committed = c.committed([(topic_name, p) for p in range(3)])
        assert sorted((o["partition"], o["offset"]) for o in committed) == [(0, 10), (1, 10), (2, 10)]
    # a restarted member resumes at the committed offsets
    api.produce_binary(topic_name, [(None, b"new")], partition=1)
    with api.groups.create_consumer(group, name="c2", auto_offset_reset="earliest", auto_commit=False) as c:
        c.subscribe([topic_name])
        got = drain(c, 1)
        assert [(r["partition"], r["offset"], base64.b64decode(r["value"])) for r in got] == [(1, 10, b"new")]
        assert c.poll(timeout_ms=300) == []


def test_auto_offset_reset_latest_and_auto_commit_on_close(api, topic_name, group):
    api.create_topic(topic_name, partitions=1)
    api.produce_binary(topic_name, [(None, b"old")] * 5, partition=0)
    with api.groups.create_consumer(group, auto_offset_reset="latest") as c:  # auto commit on (Kafka's default)
        c.subscribe([topic_name])
        wait_for(lambda: c.assignment(), what="assignment")
        assert c.poll(timeout_ms=100) == []
        api.produce_binary(topic_name, [(None, b"fresh")], partition=0)
        got = drain(c, 1)
        assert values(got) == [b"fresh"] and got[0]["offset"] == 5
    # closing committed the position (auto commit)
    assert [(o["partition"], o["offset"]) for o in api.committed_offsets(group)] == [(0, 6)]


def test_json_format(api, topic_name, group):
    api.create_topic(topic_name, partitions=1)
    api.produce_json(topic_name, [{"key": "a", "value": {"n": 1}}, {"value": [1, 2]}], partition=0)
    with api.groups.create_consumer(group, format="json", auto_offset_reset="earliest") as c:
        c.subscribe([topic_name])
        got = drain(c, 2)
        assert [(r["key"], r["value"]) for r in got] == [("a", {"n": 1}), (None, [1, 2])]


def test_a_large_round_from_several_partitions(api, topic_name, group):
    """More than 500 records in one answer (encoded off the event loop), from two partitions in one array."""
    api.create_topic(topic_name, partitions=2)
    for p in range(2):
        api.produce_binary(topic_name, [(f"k{i}".encode(), f"p{p}-{i}".encode()) for i in range(700)], partition=p)
    with api.groups.create_consumer(group, auto_offset_reset="earliest", auto_commit=False) as c:
        c.assign([(topic_name, 0), (topic_name, 1)])
        got = drain(c, 1400)
    assert len(got) == 1400
    for p in range(2):
        mine = [r for r in got if r["partition"] == p]
        assert [r["offset"] for r in mine] == list(range(700))
        assert values(mine) == [f"p{p}-{i}".encode() for i in range(700)]
        assert [base64.b64decode(r["key"]) for r in mine[:2]] == [b"k0", b"k1"]
    assert all(r["topic"] == topic_name and isinstance(r["timestamp"], int) and r["headers"] == [] for r in got)

def test_manual_assignment_and_seek(api, topic_name, group):
    api.create_topic(topic_name, partitions=2)
    api.produce_binary(topic_name, [(None, f"v{i}".encode()) for i in range(10)], partition=1)
    with api.groups.create_consumer(group, auto_offset_reset="latest", auto_commit=False) as c:
        c.assign([(topic_name, 1)])
        assert c.assignment() == [(topic_name, 1)]
        assert c.poll(timeout_ms=50) == []  # latest: at the end
        c.seek(topic_name, 1, 7)
        assert [r["offset"] for r in drain(c, 3)] == [7, 8, 9]
        c.seek_to_beginning([(topic_name, 1)])
        got = drain(c, 10)
        assert [r["offset"] for r in got] == list(range(10)) and values(got)[0] == b"v0"
        c.seek_to_end([(topic_name, 1)])
        assert c.poll(timeout_ms=50) == []
        # explicit commit: REST Proxy commits the offset of the last processed record + 1
        c.commit([{"topic": topic_name, "partition": 1, "offset": 4}])
        assert c.committed([(topic_name, 1)])[0]["offset"] == 5
        # seeking a partition that is not assigned is an illegal state
        with pytest.raises(GatewayError) as e:
            c.seek(topic_name, 0, 0)
        assert e.value.error_code == 40903
        # manual assignment and subscription are mutually exclusive
        with pytest.raises(GatewayError) as e:
            c.subscribe([topic_name])
        assert e.value.error_code == 40903
    # a new instance of the group starts at the committed offset
    with api.groups.create_consumer(group, auto_offset_reset="latest", auto_commit=False) as c:
        c.assign([(topic_name, 1)])
        assert [r["offset"] for r in drain(c, 5)] == [5, 6, 7, 8, 9]


def test_pattern_subscription_picks_up_a_topic_created_later(api, topic_name, group):
    first, later = f"{topic_name}-a", f"{topic_name}-b"
    api.create_topic(first, partitions=1)
    api.create_topic(f"other-{topic_name}", partitions=1)
    with api.groups.create_consumer(group, auto_offset_reset="earliest") as c:
        c.subscribe(pattern=f"{topic_name}-.*")
        assert c.subscription() == [first]
        api.create_topic(later, partitions=2)
        api.produce_binary(later, [(None, b"x")], partition=1)
        api.produce_binary(f"other-{topic_name}", [(None, b"not mine")], partition=0)
        got = drain(c, 1)
        assert [(r["topic"], r["partition"]) for r in got] == [(later, 1)]
        assert c.subscription() == [first, later]
        assert sorted(c.assignment()) == [(first, 0), (later, 0), (later, 1)]


def test_errors_as_rest_proxy(api, gw, topic_name, group):
    api.create_topic(topic_name, partitions=1)
    http = httpx.Client(base_url=gw.url, timeout=30)
    # unknown instance
    r = http.get(f"/consumers/{group}/instances/nobody/records", headers={"Accept": BINARY})
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    r = http.delete(f"/consumers/{group}/instances/nobody")
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    # create: REST Proxy body and content type; duplicate names
    r = http.post(f"/consumers/{group}", content=b'{"name": "i1", "format": "binary", "auto.offset.reset": "earliest",'
                  b' "auto.commit.enable": "false"}', headers={"Content-Type": V2})
    assert r.status_code == 200 and r.headers["content-type"].startswith(V2)
    assert r.json()["instance_id"] == "i1" and r.json()["base_uri"] == f"{gw.url}/consumers/{group}/instances/i1"
    r = http.post(f"/consumers/{group}", json={"name": "i1"}, headers={"Content-Type": V2})
    assert r.status_code == 409 and r.json()["error_code"] == 40902
    r = http.post(f"/consumers/{group}", json={"name": "bad", "format": "cbor"})
    assert r.status_code == 422
    base = f"/consumers/{group}/instances/i1"
    # reading before subscribing
    r = http.get(f"{base}/records", headers={"Accept": BINARY})
    assert r.status_code == 409 and r.json()["error_code"] == 40903
    # subscribing twice: the same topics is a no-op, other topics a conflict
    assert http.post(f"{base}/subscription", json={"topics": [topic_name]}, headers={"Content-Type": V2}).status_code == 204
    assert http.post(f"{base}/subscription", json={"topics": [topic_name]}).status_code == 204
    r = http.post(f"{base}/subscription", json={"topics": ["another"]})
    assert r.status_code == 409 and r.json()["error_code"] == 40901
    r = http.post(f"{base}/subscription", json={"topic_pattern": "x.*"})
    assert r.status_code == 409 and r.json()["error_code"] == 40901
    r = http.post(f"{base}/assignments", json={"partitions": [{"topic": topic_name, "partition": 0}]})
    assert r.status_code == 409 and r.json()["error_code"] == 40903
    # wrong Accept header: not the instance's format
    r = http.get(f"{base}/records", headers={"Accept": JSON})
    assert r.status_code == 406 and r.json()["error_code"] == 40601
    r = http.get(f"{base}/records", params={"timeout": 100}, headers={"Accept": BINARY})
    assert r.status_code == 200 and r.headers["content-type"].startswith(BINARY) and r.json() == []
    # unsubscribe, then subscribe to something else
    assert http.delete(f"{base}/subscription").status_code == 204
    assert http.get(f"{base}/subscription").json() == {"topics": []}
    assert http.post(f"{base}/subscription", json={"topic_pattern": "x.*"}).status_code == 204
    assert http.delete(base).status_code == 204
    r = http.get(f"{base}/subscription")
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    http.close()


def test_idle_instance_expires(api, topic_name, group):
    from tests.consumer_groups.conftest import INSTANCE_TIMEOUT_MS

    api.create_topic(topic_name, partitions=1)
    c = api.groups.create_consumer(group, name="idle")
    c.subscribe([topic_name])
    wait_for(lambda: api.groups.group_members(group)["members"], what="membership")

    # no request for consumer.instance.timeout.ms: deleted, and it left the group
    wait_for(lambda: api.groups.group_members(group)["members"] == [], timeout_s=INSTANCE_TIMEOUT_MS / 1000.0 + 5,
             interval_s=0.2, what="expiry")
    with pytest.raises(GatewayError) as e:
        c.subscription()
    assert e.value.error_code == 40403
