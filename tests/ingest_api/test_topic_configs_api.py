"""REST Proxy v3 topic configs and partition count on a real broker: list and get configs, batch alter
(SET, DELETE, all or nothing), PATCH partitions_count (only up), and the running broker serving the
change at once (produce validation, partitioning)."""

from __future__ import annotations

import base64

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.config import TopicConfig
from lakelog.protocol.partitioner import murmur2, to_positive
from tests.harness import read_partition


@pytest.fixture
def topic(api, topic_name) -> str:
    api.create_topic(topic_name, partitions=2, configs={"retention.ms": "3600000"})
    return topic_name


def _configs_url(api, topic: str) -> str:
    return f"/v3/clusters/{api.cluster_id}/topics/{topic}/configs"


def _alter(http, api, topic: str, data: list[dict], **extra):
    return http.post(f"{_configs_url(api, topic)}:alter", json={"data": data, **extra})


def test_list_configs_gives_every_config_with_its_source(http, api, topic):
    resp = http.get(_configs_url(api, topic))
    assert resp.status_code == 200
    body = resp.json()
    assert body["kind"] == "KafkaTopicConfigList"
    assert body["metadata"]["self"].endswith(f"/v3/clusters/{api.cluster_id}/topics/{topic}/configs")
    entries = {e["name"]: e for e in body["data"]}
    assert list(entries) == sorted(TopicConfig().to_kafka())  # every config, sorted by name
    retention = entries["retention.ms"]
    assert retention == {
        "kind": "KafkaTopicConfig",
        "metadata": {"self": f"{body['metadata']['self']}/retention.ms",
                     "resource_name": f"crn:///kafka={api.cluster_id}/topic={topic}/config=retention.ms"},
        "cluster_id": api.cluster_id, "topic_name": topic, "name": "retention.ms", "value": "3600000",
        "is_default": False, "is_read_only": False, "is_sensitive": False, "source": "DYNAMIC_TOPIC_CONFIG",
        "synonyms": [{"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"},
                     {"name": "retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG"}]}
    segment = entries["segment.ms"]
    assert (segment["value"], segment["is_default"], segment["source"]) == ("604800000", True, "DEFAULT_CONFIG")
    one = http.get(f"{_configs_url(api, topic)}/retention.ms")
    assert one.status_code == 200 and one.json() == retention


def test_unknown_config_topic_and_cluster_are_404(http, api, topic):
    resp = http.get(f"{_configs_url(api, topic)}/retention.mss")
    assert resp.status_code == 404 and resp.json()["error_code"] == 40440
    assert "retention.mss" in resp.json()["message"]
    assert http.get(_configs_url(api, "no-such-topic")).json()["error_code"] == 40401
    assert _alter(http, api, "no-such-topic", [{"name": "retention.ms", "value": "1"}]).json()["error_code"] == 40401
    resp = http.post(f"/v3/clusters/nope/topics/{topic}/configs:alter", json={"data": []})
    assert resp.status_code == 404 and resp.json()["error_code"] == 40409


def test_alter_sets_and_deletes_and_describe_shows_it(http, api, topic):
    resp = _alter(http, api, topic, [{"name": "max.message.bytes", "value": "2000"},
                                     {"name": "cleanup.policy", "value": "delete,compact", "operation": "SET"},
                                     {"name": "retention.ms", "operation": "DELETE"}])
    assert resp.status_code == 204 and resp.content == b""
    configs = api.admin.topic_configs(topic)
    assert configs["max.message.bytes"]["value"] == "2000"
    assert configs["max.message.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "compact,delete"
    assert configs["retention.ms"]["value"] == "604800000" and configs["retention.ms"]["is_default"]
    # v2 describe and v3 topic show the change too
    assert api.admin.describe_topic(topic)["configs"]["max.message.bytes"] == "2000"
    v3 = http.get(f"/v3/clusters/{api.cluster_id}/topics/{topic}").json()
    assert {c["name"]: c["value"] for c in v3["configs_list"]} == {"cleanup.policy": "compact,delete",
                                                                   "max.message.bytes": "2000"}


@pytest.mark.parametrize("bad, named", [
    ({"name": "retention.mss", "value": "1"}, "retention.mss"),
    ({"name": "max.message.bytes", "value": "lots"}, "max.message.bytes"),
    ({"name": "no.such", "operation": "DELETE"}, "no.such"),
    ({"name": "segment.ms", "value": "5"}, "segment.ms"),  # the same key twice in one request
])
def test_a_bad_key_is_refused_naming_it_and_nothing_is_written(http, api, topic, bad, named):
    before = api.admin.topic_configs(topic)
    resp = _alter(http, api, topic, [{"name": "segment.ms", "value": "1000"}, bad])
    assert resp.status_code == 400, resp.text
    assert resp.json()["error_code"] == 40003 and f"'{named}'" in resp.json()["message"]
    assert api.admin.topic_configs(topic) == before  # the valid change in the same request was not made


def test_validate_only_and_malformed_bodies(http, api, topic):
    assert _alter(http, api, topic, [{"name": "retention.ms", "value": "5"}], validate_only=True).status_code == 204
    assert api.admin.topic_configs(topic)["retention.ms"]["value"] == "3600000"
    resp = _alter(http, api, topic, [{"name": "retention.ms", "value": "5", "operation": "APPEND"}])
    assert resp.status_code == 422


def test_max_message_bytes_change_is_enforced_at_once(http, api, topic):
    big = b"x" * 3000
    assert api.produce_binary(topic, [(None, big)], partition=0)["offsets"][0]["error_code"] is None
    assert _alter(http, api, topic, [{"name": "max.message.bytes", "value": "1000"}]).status_code == 204
    resp = http.post(f"/topics/{topic}/partitions/0", headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
                     json={"records": [{"value": base64.b64encode(big).decode()}]})
    assert resp.status_code == 422 and resp.json()["error_code"] == 42225, resp.text
    assert len(read_partition(http, topic, 0)) == 1  # nothing written


def test_patch_adds_partitions_that_take_records(http, api, topic):
    url = f"/v3/clusters/{api.cluster_id}/topics/{topic}"
    resp = http.patch(url, json={"partitions_count": 5})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["kind"] == "KafkaTopic" and body["partitions_count"] == 5 and body["topic_name"] == topic
    parts = http.get(f"/topics/{topic}/partitions").json()
    assert [p["partition"] for p in parts] == [0, 1, 2, 3, 4] and all(p["leader"] == 0 for p in parts)
    for p in (2, 3, 4):
        assert api.produce_binary(topic, [(None, b"new %d" % p)], partition=p)["offsets"][0]["offset"] == 0
        assert [base64.b64decode(r["value"]) for r in read_partition(http, topic, p)] == [b"new %d" % p]
    # keyed records are partitioned over the new count (murmur2, as Kafka's producer)
    key = next(k for k in (b"key-%d" % i for i in range(1000)) if to_positive(murmur2(k)) % 5 >= 2)
    answer = api.produce_binary(topic, [(key, b"keyed")])
    assert answer["offsets"][0]["partition"] == to_positive(murmur2(key)) % 5


def test_patch_never_makes_fewer_partitions(http, api, topic):
    url = f"/v3/clusters/{api.cluster_id}/topics/{topic}"
    resp = http.patch(url, json={"partitions_count": 1})
    assert resp.status_code == 400
    assert resp.json() == {"error_code": 40005,
                           "message": "Topic currently has 2 partitions, which is higher than the requested 1."}
    assert http.patch(url, json={"partitions_count": 2}).json()["error_code"] == 40005
    assert http.patch(url, json={"partitions_count": 0}).status_code == 422
    assert http.patch(f"/v3/clusters/{api.cluster_id}/topics/no-such-topic",
                      json={"partitions_count": 3}).json()["error_code"] == 40401
    assert http.get(url).json()["partitions_count"] == 2


def test_a_config_the_topic_does_not_set_follows_the_brokers_setting(broker_factory, topic_name):
    """As Kafka: the broker's ``log.retention.ms`` and ``message.max.bytes`` are the defaults of every
    topic that sets no ``retention.ms`` / ``max.message.bytes`` (source STATIC_BROKER_CONFIG, not a
    default), also after the topic's own value is deleted; they are not stored on the topic."""
    broker = broker_factory(extra_env={"LAKELOG_LOG_RETENTION_MS": "3600000", "LAKELOG_MESSAGE_MAX_BYTES": "1500"})
    big = {"records": [{"value": base64.b64encode(b"x" * 2000).decode()}]}
    with LakelogClient(broker.url) as client, httpx.Client(base_url=broker.url, timeout=30) as http:
        client.create_topic(topic_name, configs={"retention.ms": "1000"})
        v3 = http.get(f"/v3/clusters/{client.cluster_id}/topics/{topic_name}").json()
        assert v3["configs_list"] == [{"name": "retention.ms", "value": "1000"}]  # nothing of the broker's
        assert client.admin.topic_configs(topic_name)["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"

        client.admin.alter_topic_configs(topic_name, delete=["retention.ms"])
        retention = client.admin.topic_configs(topic_name)["retention.ms"]
        assert (retention["value"], retention["is_default"], retention["source"]) == (
            "3600000", False, "STATIC_BROKER_CONFIG")
        assert retention["synonyms"] == [
            {"name": "log.retention.ms", "value": "3600000", "source": "STATIC_BROKER_CONFIG"},
            {"name": "retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG"}]
        assert client.admin.describe_topic(topic_name)["configs"]["retention.ms"] == "3600000"  # not 7 days

        size = client.admin.topic_configs(topic_name)["max.message.bytes"]
        assert (size["value"], size["is_default"], size["source"]) == ("1500", False, "STATIC_BROKER_CONFIG")
        produce = f"/topics/{topic_name}/partitions/0"
        headers = {"Content-Type": "application/vnd.kafka.binary.v2+json"}
        resp = http.post(produce, headers=headers, json=big)
        assert resp.status_code == 422 and resp.json()["error_code"] == 42225, resp.text  # message.max.bytes
        client.admin.alter_topic_configs(topic_name, set={"max.message.bytes": "5000"})
        assert http.post(produce, headers=headers, json=big).status_code == 200
        client.admin.alter_topic_configs(topic_name, delete=["max.message.bytes"])  # back to the broker's 1500
        assert http.post(produce, headers=headers, json=big).json()["error_code"] == 42225


def test_a_broker_properties_file_sets_the_default_of_lakelogs_own_topic_configs(broker_factory, topic_name, tmp_path):
    """``lake.vacuum.retention.ms`` in a broker's properties file is the default of every topic's
    ``lake.vacuum.retention.ms`` (lakelog's ``lake.*`` configs keep their name as the broker key), shown
    with source STATIC_BROKER_CONFIG, as ``log.retention.ms`` is ``retention.ms``'s."""
    props = tmp_path / "broker.properties"
    props.write_text("lake.vacuum.retention.ms=5000\nlog.roll.ms=600000\n")
    broker = broker_factory(config_file=props)
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name)
        configs = client.admin.topic_configs(topic_name)
        vacuum = configs["lake.vacuum.retention.ms"]
        assert (vacuum["value"], vacuum["is_default"], vacuum["source"]) == ("5000", False, "STATIC_BROKER_CONFIG")
        assert vacuum["synonyms"][0] == {"name": "lake.vacuum.retention.ms", "value": "5000",
                                         "source": "STATIC_BROKER_CONFIG"}
        assert configs["segment.ms"]["synonyms"][0]["name"] == "log.roll.ms"
        assert configs["lake.commit.bytes"]["source"] == "DEFAULT_CONFIG"
