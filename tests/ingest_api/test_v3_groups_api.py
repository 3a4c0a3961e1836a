"""REST Proxy v3 consumer groups on a real broker: Confluent's shapes (groups, consumers, assignments, lags,
lag summary), the lag numbers (high watermark minus committed offset), the owning member of each lag,
404s with their own error codes, and every ``related``/``self`` link answering 200."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.harness import v3_links, wait_for


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic(api, topic_name) -> str:
    """A topic with 2 partitions: 10 records in partition 0, 4 in partition 1."""
    api.create_topic(topic_name, partitions=2)
    api.produce_binary(topic_name, [(None, b"x")] * 10, partition=0)
    api.produce_binary(topic_name, [(None, b"y")] * 4, partition=1)
    return topic_name


def _cluster(gw, api) -> str:
    return f"{gw.url}/v3/clusters/{api.cluster_id}"


def _walk(client: httpx.Client, *start: str, within: str) -> dict[str, dict]:
    """GET each of ``start`` and every link reachable from them through answers whose URL starts with
    ``within`` (links leaving it are fetched, not followed further); each must answer 200. Returns the
    bodies by URL."""
    seen: dict[str, dict] = {}
    todo = list(start)
    while todo:
        url = todo.pop(0)
        if url in seen:
            continue
        resp = client.get(url)
        assert resp.status_code == 200, f"GET {url}: {resp.status_code} {resp.text}"
        seen[url] = resp.json()
        if url.startswith(within):
            todo += [u for u in v3_links(seen[url]) if u not in seen]
    return seen


def test_a_group_with_committed_offsets_only(http, gw, api, topic, group):
    """A group that only committed (a Spark query's, a tool's): simple, EMPTY, no consumers; lags are
    the high watermark minus the committed offset, only for the committed partitions."""
    api.commit_offsets(group, [{"topic": topic, "partition": 0, "offset": 3},
                               {"topic": topic, "partition": 1, "offset": 4}])
    cluster = _cluster(gw, api)
    url = f"{cluster}/consumer-groups/{group}"
    body = http.get(url).json()
    assert body == {
        "kind": "KafkaConsumerGroup",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={api.cluster_id}/consumer-group={group}"},
        "cluster_id": api.cluster_id, "consumer_group_id": group, "is_simple": True, "partition_assignor": "",
        "state": "EMPTY", "coordinator": {"related": f"{cluster}/brokers/0"},
        "consumers": {"related": f"{url}/consumers"}, "lag_summary": {"related": f"{url}/lag-summary"}}
    listed = http.get(f"{cluster}/consumer-groups").json()
    assert listed["kind"] == "KafkaConsumerGroupList"
    assert listed["metadata"] == {"self": f"{cluster}/consumer-groups", "next": None}
    assert body in listed["data"]

    assert http.get(f"{url}/consumers").json() == {
        "kind": "KafkaConsumerList", "metadata": {"self": f"{url}/consumers", "next": None}, "data": []}

    lags = http.get(f"{url}/lags").json()
    assert lags["kind"] == "KafkaConsumerLagList" and lags["metadata"] == {"self": f"{url}/lags", "next": None}
    lag0 = {
        "kind": "KafkaConsumerLag",
        "metadata": {"self": f"{url}/lags/{topic}/partitions/0",
                     "resource_name": f"crn:///kafka={api.cluster_id}/consumer-group={group}/lag={topic}/partition=0"},
        "cluster_id": api.cluster_id, "consumer_group_id": group, "topic_name": topic, "partition_id": 0,
        "current_offset": 3, "log_end_offset": 10, "lag": 7, "consumer_id": "", "instance_id": None,
        "client_id": ""}
    assert lags["data"][0] == lag0
    assert [(x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"]) for x in lags["data"]] == [
        (0, 3, 10, 7), (1, 4, 4, 0)]
    assert http.get(f"{url}/lags/{topic}/partitions/0").json() == lag0

    summary = http.get(f"{url}/lag-summary").json()
    assert summary == {
        "kind": "KafkaConsumerGroupLagSummary",
        "metadata": {"self": f"{url}/lag-summary",
                     "resource_name": f"crn:///kafka={api.cluster_id}/consumer-group={group}/lag-summary"},
        "cluster_id": api.cluster_id, "consumer_group_id": group, "max_lag_consumer_id": "",
        "max_lag_instance_id": None, "max_lag_client_id": "", "max_lag_topic_name": topic,
        "max_lag_partition_id": 0, "max_lag": 7, "total_lag": 7, "max_lag_consumer": None,
        "max_lag_partition": {"related": f"{cluster}/topics/{topic}/partitions/0"}}

    # more records: the lag follows the high watermark
    api.produce_binary(topic, [(None, b"z")] * 6, partition=1)
    summary = http.get(f"{url}/lag-summary").json()
    assert (summary["max_lag_partition_id"], summary["max_lag"], summary["total_lag"]) == (0, 7, 13)
    api.produce_binary(topic, [(None, b"z")] * 2, partition=1)
    summary = http.get(f"{url}/lag-summary").json()
    assert (summary["max_lag_partition_id"], summary["max_lag"], summary["total_lag"]) == (1, 8, 15)

    seen = _walk(http, url, f"{url}/lags", within=url)
    assert {f"{url}/consumers", f"{url}/lag-summary", f"{url}/lags/{topic}/partitions/0", f"{cluster}/brokers/0",
            f"{cluster}/topics/{topic}/partitions/1"} <= set(seen)


def test_a_group_with_members(http, gw, api, topic, group):
    """Live members: STABLE, not simple, each member's assignment; a member's lag names it; a group with
    members but no committed offsets has no lag summary (null link, 404 / 40405)."""
    cluster = _cluster(gw, api)
    url = f"{cluster}/consumer-groups/{group}"
    with api.groups.create_consumer(group, name="m-1", assignor="range") as c:
        c.subscribe([topic])
        wait_for(lambda: len(c.assignment()) == 2, what="the member's assignment")
        wait_for(lambda: http.get(url).json().get("state") == "STABLE", what="a stable group")
        body = http.get(url).json()
        assert (body["is_simple"], body["partition_assignor"], body["lag_summary"]) == (False, "range", None)
        assert group in [g["consumer_group_id"] for g in http.get(f"{cluster}/consumer-groups").json()["data"]]
        nothing = http.get(f"{url}/lag-summary")
        assert nothing.status_code == 404 and nothing.json()["error_code"] == 40405

        api.commit_offsets(group, [{"topic": topic, "partition": 1, "offset": 1}])
        consumer = {
            "kind": "KafkaConsumer",
            "metadata": {"self": f"{url}/consumers/m-1",
                         "resource_name": f"crn:///kafka={api.cluster_id}/consumer-group={group}/consumer=m-1"},
            "cluster_id": api.cluster_id, "consumer_group_id": group, "consumer_id": "m-1", "instance_id": None,
            "client_id": "m-1", "assignments": {"related": f"{url}/consumers/m-1/assignments"}}
        assert http.get(f"{url}/consumers").json()["data"] == [consumer]
        assert http.get(f"{url}/consumers/m-1").json() == consumer

        assignments = http.get(f"{url}/consumers/m-1/assignments").json()
        assert assignments["kind"] == "KafkaConsumerAssignmentList"
        a1 = {
            "kind": "KafkaConsumerAssignment",
            "metadata": {"self": f"{url}/consumers/m-1/assignments/{topic}/partitions/1",
                         "resource_name": f"crn:///kafka={api.cluster_id}/consumer-group={group}/consumer=m-1"
                                          f"/assignment={topic}/partition=1"},
            "cluster_id": api.cluster_id, "consumer_group_id": group, "consumer_id": "m-1", "topic_name": topic,
            "partition_id": 1, "partition": {"related": f"{cluster}/topics/{topic}/partitions/1"},
            "lag": {"related": f"{url}/lags/{topic}/partitions/1"}}
        assert assignments["data"][1] == a1
        assert assignments["data"][0]["lag"] is None  # nothing committed for partition 0
        assert http.get(f"{url}/consumers/m-1/assignments/{topic}/partitions/1").json() == a1

        lags = http.get(f"{url}/lags").json()["data"]
        assert [(x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"], x["consumer_id"],
                 x["client_id"]) for x in lags] == [(1, 1, 4, 3, "m-1", "m-1")]
        summary = http.get(f"{url}/lag-summary").json()
        assert (summary["max_lag_consumer_id"], summary["max_lag"], summary["total_lag"]) == ("m-1", 3, 3)
        assert summary["max_lag_consumer"] == {"related": f"{url}/consumers/m-1"}

        seen = _walk(http, f"{cluster}/consumer-groups", f"{url}/lags", within=f"{cluster}/consumer-groups")
        assert {url, f"{url}/consumers/m-1", f"{url}/consumers/m-1/assignments/{topic}/partitions/1",
                f"{url}/lags/{topic}/partitions/1", f"{url}/lag-summary", f"{cluster}/brokers/0"} <= set(seen)

        for path, code in [(f"{url}/consumers/m-2", 40403), (f"{url}/consumers/m-2/assignments", 40403),
                           (f"{url}/consumers/m-1/assignments/{topic}/partitions/5", 40405),
                           (f"{url}/lags/{topic}/partitions/0", 40405)]:
            resp = http.get(path)
            assert resp.status_code == 404 and resp.json()["error_code"] == code, (path, resp.text)

    # the member left: EMPTY, but the group stays (committed offsets) and is not simple
    wait_for(lambda: http.get(url).json()["state"] == "EMPTY", what="an empty group")
    body = http.get(url).json()
    assert body["is_simple"] is False and http.get(f"{url}/consumers").json()["data"] == []
    assert http.get(f"{url}/lags").json()["data"][0]["consumer_id"] == ""


@pytest.mark.parametrize("path, status, code", [
    ("/v3/clusters/no-such-cluster/consumer-groups", 404, 40409),
    ("/v3/clusters/no-such-cluster/consumer-groups/{group}", 404, 40409),
    ("/v3/clusters/{cluster}/consumer-groups/{group}", 404, 40405),
    ("/v3/clusters/{cluster}/consumer-groups/{group}/consumers", 404, 40405),
    ("/v3/clusters/{cluster}/consumer-groups/{group}/consumers/m-1", 404, 40405),
    ("/v3/clusters/{cluster}/consumer-groups/{group}/consumers/m-1/assignments", 404, 40405),
    ("/v3/clusters/{cluster}/consumer-groups/{group}/lags", 404, 40405),
    ("/v3/clusters/{cluster}/consumer-groups/{group}/lags/t/partitions/0", 404, 40405),
    ("/v3/clusters/{cluster}/consumer-groups/{group}/lag-summary", 404, 40405),
    ("/v3/clusters/{cluster}/consumer-groups/a%01b", 400, 40008),
    ("/v3/clusters/{cluster}/consumer-groups/{group}/lags/t/partitions/-1", 400, 40001),
])
def test_unknown_cluster_and_group(http, api, group, path, status, code):
    resp = http.get(path.format(cluster=api.cluster_id, group=group))
    assert resp.status_code == status, resp.text
    assert resp.json()["error_code"] == code


def test_the_openapi_document_names_the_routes_and_their_models(http):
    doc = http.get("/openapi.json").json()
    base = "/v3/clusters/{cluster_id}/consumer-groups"
    routes = {
        base: "ConsumerGroupDataList",
        base + "/{consumer_group_id}": "ConsumerGroupData",
        base + "/{consumer_group_id}/consumers": "ConsumerDataList",
        base + "/{consumer_group_id}/consumers/{consumer_id}": "ConsumerData",
        base + "/{consumer_group_id}/consumers/{consumer_id}/assignments": "ConsumerAssignmentDataList",
        base + "/{consumer_group_id}/consumers/{consumer_id}/assignments/{topic_name}/partitions/{partition_id}":
            "ConsumerAssignmentData",
        base + "/{consumer_group_id}/lags": "ConsumerLagDataList",
        base + "/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}": "ConsumerLagData",
        base + "/{consumer_group_id}/lag-summary": "ConsumerGroupLagSummaryData",
    }
    for path, model in routes.items():
        answers = doc["paths"][path]["get"]["responses"]
        assert answers["200"]["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}
        assert "40405" in answers["404"]["description"] or path == base
        assert answers["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
