"""REST Proxy v3 cluster, broker, partition and replica routes on real brokers: Confluent's shapes, every
``related``/``self`` link answering 200, 404s with their own error codes; with three brokers, the live
brokers, replicas and ISR as ZooKeeper has them, before and after a broker is killed."""

from __future__ import annotations

import httpx
import pytest

from lakelog.ingest_api.v3_models import PartitionDataList

from tests.harness import v3_links, wait_for

@pytest.fixture
def topic(api, topic_name) -> str:
    api.create_topic(topic_name, partitions=2)
    return topic_name


def _cluster(gw, api) -> str:
    return f"{gw.url}/v3/clusters/{api.cluster_id}"


def _walk(client: httpx.Client, start: str) -> dict[str, dict]:
    """GET ``start`` and every link reachable from it (breadth first); each must answer 200 with JSON.
    Returns the bodies by URL."""
    seen: dict[str, dict] = {}
    todo = [start]
    while todo:
        url = todo.pop(0)
        if url in seen:
            continue
        resp = client.get(url)
        assert resp.status_code == 200, f"GET {url}: {resp.status_code} {resp.text}"
        seen[url] = resp.json()
        todo += [u for u in v3_links(seen[url]) if u not in seen]
    return seen


# -- one broker ------------------------------------------------------------------------------------

def test_cluster_links_its_controller_brokers_and_topics(http, gw, api):
    url = _cluster(gw, api)
    cluster = http.get(url).json()
    assert cluster == {
        "kind": "KafkaCluster",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={api.cluster_id}"},
        "cluster_id": api.cluster_id,
        "controller": {"related": f"{url}/brokers/0"},
        "acls": None, "brokers": {"related": f"{url}/brokers"}, "broker_configs": None,
        "consumer_groups": {"related": f"{url}/consumer-groups"}, "topics": {"related": f"{url}/topics"},
        "partition_reassignments": None}
    listed = http.get("/v3/clusters").json()
    assert listed == {"kind": "KafkaClusterList", "metadata": {"self": f"{gw.url}/v3/clusters", "next": None},
                      "data": [cluster]}


def test_brokers_are_the_live_registrations(http, gw, api):
    url = _cluster(gw, api)
    body = http.get(f"{url}/brokers").json()
    broker = {"kind": "KafkaBroker",
              "metadata": {"self": f"{url}/brokers/0", "resource_name": f"crn:///kafka={api.cluster_id}/broker=0"},
              "cluster_id": api.cluster_id, "broker_id": 0, "host": "127.0.0.1", "port": gw.port, "rack": None,
              "endpoints": [], "configs": None, "partition_replicas": None}
    assert body == {"kind": "KafkaBrokerList", "metadata": {"self": f"{url}/brokers", "next": None},
                    "data": [broker]}
    assert http.get(f"{url}/brokers/0").json() == broker


def test_partitions_link_the_leader_replica_and_the_replicas(http, gw, api, topic):
    url = f"{_cluster(gw, api)}/topics/{topic}/partitions"
    body = http.get(url).json()
    assert body["kind"] == "KafkaPartitionList" and body["metadata"] == {"self": url, "next": None}
    assert [p["partition_id"] for p in body["data"]] == [0, 1]
    p1 = body["data"][1]
    assert p1 == {
        "kind": "KafkaPartition",
        "metadata": {"self": f"{url}/1", "resource_name": f"crn:///kafka={api.cluster_id}/topic={topic}/partition=1"},
        "cluster_id": api.cluster_id, "topic_name": topic, "partition_id": 1,
        "leader": {"related": f"{url}/1/replicas/0"}, "replicas": {"related": f"{url}/1/replicas"},
        "reassignment": None}
    assert http.get(f"{url}/1").json() == p1
    # the list is encoded from plain dicts: it still is the documented model, field for field
    assert PartitionDataList.model_validate(body).model_dump(mode="json") == body

    replica = {
        "kind": "KafkaReplica",
        "metadata": {"self": f"{url}/1/replicas/0",
                     "resource_name": f"crn:///kafka={api.cluster_id}/topic={topic}/partition=1/replica=0"},
        "cluster_id": api.cluster_id, "topic_name": topic, "partition_id": 1, "broker_id": 0,
        "is_leader": True, "is_in_sync": True, "broker": {"related": f"{_cluster(gw, api)}/brokers/0"}}
    assert http.get(f"{url}/1/replicas").json() == {
        "kind": "KafkaReplicaList", "metadata": {"self": f"{url}/1/replicas", "next": None}, "data": [replica]}
    assert http.get(f"{url}/1/replicas/0").json() == replica


def test_every_link_of_the_v3_responses_answers(http, gw, api, topic):
    """From ``GET /v3/clusters``, follow every ``related`` and ``self`` link (cluster, brokers, topics,
    topic configs, partitions, replicas, consumer groups), each to a 200."""
    seen = _walk(http, f"{gw.url}/v3/clusters")
    url = _cluster(gw, api)
    expected = [url, f"{url}/brokers", f"{url}/brokers/0", f"{url}/topics", f"{url}/topics/{topic}",
                f"{url}/topics/{topic}/configs", f"{url}/topics/{topic}/configs/retention.ms",
                f"{url}/consumer-groups", f"{url}/topics/{topic}/partitions", f"{url}/topics/{topic}/partitions/1",
                f"{url}/topics/{topic}/partitions/1/replicas", f"{url}/topics/{topic}/partitions/1/replicas/0"]
    assert not [u for u in expected if u not in seen]
    kinds = {body.get("kind") for body in seen.values()}
    assert {"KafkaClusterList", "KafkaCluster", "KafkaBrokerList", "KafkaBroker", "KafkaTopicList", "KafkaTopic",
            "KafkaTopicConfigList", "KafkaTopicConfig", "KafkaPartitionList", "KafkaPartition", "KafkaReplicaList",
            "KafkaReplica"} <= kinds
    # every link of a topic's answers, created or described, is among those that answered
    created = http.get(f"{url}/topics/{topic}").json()
    assert set(v3_links(created)) <= set(seen)


@pytest.mark.parametrize("path, status, code", [
    ("/v3/clusters/no-such-cluster", 404, 40409),
    ("/v3/clusters/no-such-cluster/brokers", 404, 40409),
    ("/v3/clusters/no-such-cluster/brokers/0", 404, 40409),
    ("/v3/clusters/no-such-cluster/topics/{topic}/partitions", 404, 40409),
    ("/v3/clusters/no-such-cluster/topics/{topic}/partitions/0/replicas/0", 404, 40409),
    ("/v3/clusters/{cluster}/brokers/7", 404, 40410),
    ("/v3/clusters/{cluster}/brokers/-1", 400, 40001),
    ("/v3/clusters/{cluster}/topics/no-such-topic/partitions", 404, 40401),
    ("/v3/clusters/{cluster}/topics/no-such-topic/partitions/0", 404, 40401),
    ("/v3/clusters/{cluster}/topics/{topic}/partitions/2", 404, 40402),
    ("/v3/clusters/{cluster}/topics/{topic}/partitions/2/replicas", 404, 40402),
    ("/v3/clusters/{cluster}/topics/{topic}/partitions/-1", 400, 40001),
    ("/v3/clusters/{cluster}/topics/{topic}/partitions/0/replicas/7", 404, 40411),
])
def test_unknown_cluster_broker_topic_partition_and_replica(http, api, topic, path, status, code):
    resp = http.get(path.format(cluster=api.cluster_id, topic=topic))
    assert resp.status_code == status, resp.text
    assert resp.json()["error_code"] == code


# -- three brokers ---------------------------------------------------------------------------------

#: Short timeouts so a killed broker leaves the live brokers and the ISR within seconds.
FAST = {
    "LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "3000",
    "LAKELOG_REPLICA_LAG_TIME_MAX_MS": "1500",
    "LAKELOG_REPLICA_FETCH_WAIT_MAX_MS": "200",
}


def _replicas(client: httpx.Client, cluster: str, topic: str, p: int) -> list[dict]:
    resp = client.get(f"/v3/clusters/{cluster}/topics/{topic}/partitions/{p}/replicas")
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def _in_sync(client: httpx.Client, cluster: str, topic: str, p: int) -> set[int]:
    return {r["broker_id"] for r in _replicas(client, cluster, topic, p) if r["is_in_sync"]}


@pytest.mark.cluster
def test_three_brokers_their_replicas_and_isr_before_and_after_a_kill(broker_factory, topic_name):
    brokers = {i: broker_factory(broker_id=i, extra_env={**FAST, "LAKELOG_RACK": f"rack-{i}"}) for i in range(3)}
    with httpx.Client(base_url=brokers[0].url, timeout=30) as c0:
        cluster = c0.get("/v3/clusters").json()["data"][0]["cluster_id"]
        base = f"{brokers[0].url}/v3/clusters/{cluster}"
        wait_for(lambda: len(c0.get(f"{base}/brokers").json()["data"]) == 3, what="three live brokers")
        listed = c0.get(f"{base}/brokers").json()["data"]
        assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in listed] == [
            (i, "127.0.0.1", brokers[i].port, f"rack-{i}") for i in range(3)]
        controller = c0.get(base).json()["controller"]["related"]
        assert controller in {f"{base}/brokers/{i}" for i in range(3)}

        resp = c0.post(f"/v3/clusters/{cluster}/topics", json={
            "topic_name": topic_name, "partitions_count": 2, "replication_factor": 3})
        assert resp.status_code == 201, resp.text
        for p in range(2):
            wait_for(lambda p=p: _in_sync(c0, cluster, topic_name, p) == {0, 1, 2},
                     what=f"partition {p}'s full ISR")
        # the v3 replicas agree with the v2 partition (leader, replicas, in_sync) and follow the assignment
        for p in range(2):
            v2 = c0.get(f"/topics/{topic_name}/partitions/{p}").json()
            v3 = _replicas(c0, cluster, topic_name, p)
            assert [(r["broker_id"], r["is_leader"], r["is_in_sync"]) for r in v3] == [
                (r["broker"], r["leader"], r["in_sync"]) for r in v2["replicas"]]
            assert sorted(r["broker_id"] for r in v3) == [0, 1, 2]
            assert [r["broker_id"] for r in v3 if r["is_leader"]] == [v2["leader"]]
            part = c0.get(f"{base}/topics/{topic_name}/partitions/{p}").json()
            assert part["leader"] == {"related": f"{base}/topics/{topic_name}/partitions/{p}/replicas/{v2['leader']}"}
        # any broker answers the same, and every link of its answers resolves
        with httpx.Client(base_url=brokers[2].url, timeout=30) as c2:
            other = c2.get(f"/v3/clusters/{cluster}/brokers").json()["data"]
            assert [(b["broker_id"], b["port"], b["rack"]) for b in other] == [
                (b["broker_id"], b["port"], b["rack"]) for b in listed]
            assert other[1]["metadata"]["self"] == f"{brokers[2].url}/v3/clusters/{cluster}/brokers/1"
            seen = _walk(c2, f"{brokers[2].url}/v3/clusters/{cluster}/topics/{topic_name}/partitions")
            assert len([u for u in seen if "/replicas/" in u]) == 6

        brokers[2].kill()
        wait_for(lambda: [b["broker_id"] for b in c0.get(f"{base}/brokers").json()["data"]] == [0, 1],
                 what="broker 2 to leave the live brokers")
        gone = c0.get(f"{base}/brokers/2")
        assert gone.status_code == 404 and gone.json()["error_code"] == 40410
        for p in range(2):
            wait_for(lambda p=p: _in_sync(c0, cluster, topic_name, p) == {0, 1},
                     what=f"broker 2 to leave partition {p}'s ISR")
            v3 = {r["broker_id"]: r for r in _replicas(c0, cluster, topic_name, p)}
            assert set(v3) == {0, 1, 2}  # the assignment keeps the dead broker's replica
            assert not v3[2]["is_leader"] and v3[0]["is_in_sync"] and v3[1]["is_in_sync"]
            leader = c0.get(f"{base}/topics/{topic_name}/partitions/{p}").json()["leader"]["related"]
            assert leader.rsplit("/", 1)[1] in {"0", "1"}
