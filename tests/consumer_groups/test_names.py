"""Group ids and consumer instance names (issue 9, item 1): what ZooKeeper cannot hold as a znode name
is refused with its own code (400 / 40008 group id, 422 / 42209 instance name), never a 500; Kafka's
other group ids (any non-empty string) work; offsets outside int64 are a 422."""

from __future__ import annotations

import httpx
import pytest

from lakelog.consumer_groups.errors import InvalidConsumerInstanceNameError, InvalidGroupIdError
from lakelog.consumer_groups.instances import validate_group_id, validate_instance_name

V2 = "application/vnd.kafka.v2+json"


@pytest.mark.parametrize("group", ["", ".", "..", "a/b", "a\x00b", "a\x1fb", "a\x7fb", "a\x85b", "a\ud800b",
                                   "a\ue000b", "a\ufff0b", "a\U0001f600b", "x" * 250, "x" * 10_000])
def test_group_ids_zookeeper_cannot_hold_are_refused(group):
    with pytest.raises(InvalidGroupIdError) as e:
        validate_group_id(group)
    assert e.value.http_status == 400 and e.value.error_code == 40008


@pytest.mark.parametrize("group", ["g", "...", ".a", "a b", "grüße", "a:b@c", "x" * 249, "zookeeper", "a\u00a0b"])
def test_other_group_ids_are_kafkas_any_string(group):
    validate_group_id(group)


@pytest.mark.parametrize("name", [".", "..", "", "a b", "a/b", "é"])
def test_instance_names_outside_rest_proxys_are_refused(name):
    with pytest.raises(InvalidConsumerInstanceNameError) as e:
        validate_instance_name(name)
    assert e.value.http_status == 422 and e.value.error_code == 42209


@pytest.mark.parametrize("name", ["c1", "...", ".a", "rest-consumer-1:x@y", "a_b.c"])
def test_rest_proxy_instance_names_are_accepted(name):
    validate_instance_name(name)


@pytest.fixture
def http(gw):
    with httpx.Client(base_url=gw.url, timeout=30) as c:
        yield c


def _error(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["error_code"] == code, body
    return body["message"]


@pytest.mark.parametrize("name", [".", ".."])
def test_an_instance_named_dot_is_42209(http, group, name):
    resp = http.post(f"/consumers/{group}", json={"name": name}, headers={"Content-Type": V2})
    assert "not allowed" in _error(resp, 422, 42209)
    resp = http.post(f"/consumers/{group}", json={"id": name}, headers={"Content-Type": V2})
    _error(resp, 422, 42209)


# percent-encoded: clients drop '.' and '..' path segments, the server decodes them
@pytest.mark.parametrize("raw", ["%2E", "%2E%2E", "a%01b", "a%C2%85b", "%F0%9F%98%80"])
def test_group_ids_zookeeper_cannot_hold_are_40008_on_every_route(http, raw):
    json_body = {"Content-Type": "application/json"}
    answers = [
        http.post(f"/consumers/{raw}", json={"name": "c1"}, headers={"Content-Type": V2}),
        http.get(f"/lakelog/v1/consumers/{raw}/members"),
        http.post(f"/consumers/{raw}/offsets", json={"offsets": []}, headers=json_body),
        http.get(f"/consumers/{raw}/offsets"),
        http.get(f"/consumers/{raw}/lag"),
        http.post(f"/consumers/{raw}/offsets/reset", json={"to": "earliest", "topics": ["x"]}, headers=json_body),
        http.get(f"/consumers/{raw}/instances/c1/subscription"),
    ]
    for resp in answers:
        assert "Group id" in _error(resp, 400, 40008), resp.request.url


def test_any_other_group_id_works_and_its_base_uri_is_quoted(http, api, topic_name):
    group = "a group ü"
    api.create_topic(topic_name, partitions=1)
    resp = http.post("/consumers/a%20group%20%C3%BC", json={"name": "c1"}, headers={"Content-Type": V2})
    assert resp.status_code == 200, resp.text
    base_uri = resp.json()["base_uri"]
    assert base_uri.endswith("/consumers/a%20group%20%C3%BC/instances/c1")
    resp = http.post(f"{base_uri}/subscription", json={"topics": [topic_name]}, headers={"Content-Type": V2})
    assert resp.status_code == 204, resp.text
    members = http.get("/lakelog/v1/consumers/a%20group%20%C3%BC/members").json()
    assert members["group"] == group and [m["member_id"] for m in members["members"]] == ["c1"]
    assert http.delete(base_uri).status_code == 204


def test_offsets_outside_int64_are_422(http, api, topic_name, group):
    api.create_topic(topic_name, partitions=1)
    resp = http.post(f"/consumers/{group}/offsets", json={"offsets": [
        {"topic": topic_name, "partition": 0, "offset": 1e30}]})
    _error(resp, 422, 42222)
    resp = http.post(f"/consumers/{group}/offsets", json={"offsets": [
        {"topic": topic_name, "partition": 0, "offset": 2**63}]})
    _error(resp, 422, 42222)
    resp = http.post(f"/consumers/{group}", json={"name": "c1"}, headers={"Content-Type": V2})
    base_uri = resp.json()["base_uri"]
    try:
        http.post(f"{base_uri}/assignments", json={"partitions": [{"topic": topic_name, "partition": 0}]},
                  headers={"Content-Type": V2}).raise_for_status()
        # the last record processed: the group would resume at offset + 1, beyond int64
        resp = http.post(f"{base_uri}/offsets", json={"offsets": [
            {"topic": topic_name, "partition": 0, "offset": 2**63 - 1}]}, headers={"Content-Type": V2})
        _error(resp, 422, 42222)
        resp = http.post(f"{base_uri}/offsets", json={"offsets": [
            {"topic": topic_name, "partition": 0, "offset": 2**63 - 2}]}, headers={"Content-Type": V2})
        assert resp.status_code in (200, 422), resp.text  # in range: never a 500
    finally:
        http.delete(base_uri)
