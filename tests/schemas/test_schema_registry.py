"""Confluent's own Python client (``confluent_kafka.schema_registry.SchemaRegistryClient``) and its Avro
serializers, unchanged, against the schema registry of real broker processes on a real ZooKeeper."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.cluster.test_replication import FAST
from tests.harness import read_partition, wait_for

V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}]})
V2 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
                            {"name": "currency", "type": "string", "default": "EUR"}]})
#: ``amount`` becomes a string: no reader of v2 reads it (BACKWARD fails)
BAD = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                  "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "string"}]})


def _client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url})


def test_register_look_up_evolve_configure_and_delete(broker):
    sr = _client(broker.url)
    subject = "orders-value"
    assert sr.get_subjects() == []
    assert set(sr.get_schema_types()) == {"AVRO", "JSON", "PROTOBUF"}

    first = sr.register_schema(subject, Schema(V1, "AVRO"))
    again = _client(broker.url).register_schema(subject, Schema(json.dumps(json.loads(V1), indent=2), "AVRO"))
    assert again == first  # the same schema again: the same id, no new version
    assert sr.get_subjects() == [subject] and sr.get_versions(subject) == [1]
    found = _client(broker.url).lookup_schema(subject, Schema(V1, "AVRO"))
    assert (found.schema_id, found.version, found.subject) == (first, 1, subject)
    assert json.loads(_client(broker.url).get_schema(first).schema_str) == json.loads(V1)

    # evolution: an added field with a default passes BACKWARD (the default); a changed type is refused
    assert sr.get_compatibility() == "BACKWARD"
    assert sr.test_compatibility(subject, Schema(V2, "AVRO")) is True
    assert sr.test_compatibility(subject, Schema(BAD, "AVRO")) is False
    second = sr.register_schema(subject, Schema(V2, "AVRO"))
    assert second != first and sr.get_versions(subject) == [1, 2]
    assert sr.get_latest_version(subject).schema_id == second
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema(subject, Schema(BAD, "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 40901
    assert sr.get_versions(subject) == [1, 2]  # nothing written

    # per-subject config: NONE lets the incompatible schema in; removing it brings the global level back
    assert sr.set_compatibility(subject, "NONE") == {"compatibility": "NONE"}
    assert sr.get_compatibility(subject) == "NONE"
    third = sr.register_schema(subject, Schema(BAD, "AVRO"))
    assert sr.get_versions(subject) == [1, 2, 3]
    sr.delete_config(subject)
    with pytest.raises(SchemaRegistryError) as unset:
        sr.get_compatibility(subject)
    assert unset.value.error_code == 40408

    # errors in Confluent's shapes
    with pytest.raises(SchemaRegistryError) as missing:
        sr.get_version("nosuch-value", 1)
    assert (missing.value.http_status_code, missing.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as missing:
        _client(broker.url).get_schema(99999)
    assert missing.value.error_code == 40403
    with pytest.raises(SchemaRegistryError) as invalid:
        sr.register_schema(subject, Schema("{\"type\": \"record\"}", "AVRO"))
    assert (invalid.value.http_status_code, invalid.value.error_code) == (422, 42201)
    answer = httpx.get(f"{broker.url}/subjects/{subject}/versions/zero")
    assert answer.status_code == 422 and answer.json()["error_code"] == 42202
    assert answer.headers["content-type"] == "application/json"
    assert httpx.get(f"{broker.url}/subjects").headers["content-type"] == "application/vnd.schemaregistry.v1+json"

    # soft delete, then permanent
    with pytest.raises(SchemaRegistryError) as not_soft:
        sr.delete_version(subject, 3, permanent=True)
    assert not_soft.value.error_code == 40407
    assert sr.delete_version(subject, 3) == 3
    assert sr.get_versions(subject) == [1, 2]
    assert sr.get_versions(subject, deleted=True) == [1, 2, 3]
    assert sr.delete_version(subject, 3, permanent=True) == 3
    assert sr.get_versions(subject, deleted=True) == [1, 2]
    assert sr.delete_subject(subject) == [1, 2]
    assert sr.get_subjects() == [] and sr.get_subjects(deleted=True) == [subject]
    assert sr.delete_subject(subject, permanent=True) == [1, 2]
    assert sr.get_subjects(deleted=True) == []
    with pytest.raises(SchemaRegistryError) as gone:
        _client(broker.url).get_schema(third)
    assert gone.value.error_code == 40403

    # the registry lives in the compacted topic _schemas
    topic = httpx.get(f"{broker.url}/v3/clusters/{_cluster(broker.url)}/topics/_schemas/configs/cleanup.policy").json()
    assert topic["value"] == "compact"


def _cluster(url: str) -> str:
    return httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]


def test_avro_and_json_serializers_round_trip_through_a_topic(broker, client, topic_name):
    """Confluent's AvroSerializer registers the subject's schema and frames each record (magic byte 0, the
    4-byte schema id); the records go through the HTTP binary produce and come back byte for byte, and
    AvroDeserializer reads them with the schema it fetches by id. JSONSerializer / JSONDeserializer alike."""
    client.create_topic(topic_name, partitions=1, replication_factor=1)
    sr = _client(broker.url)
    serialize = AvroSerializer(sr, V2)
    deserialize = AvroDeserializer(_client(broker.url))
    context = SerializationContext(topic_name, MessageField.VALUE)
    orders = [{"id": i, "amount": i * 1.5, "currency": "EUR" if i % 2 else "USD"} for i in range(5)]
    values = [serialize(order, context) for order in orders]
    schema_id = sr.get_latest_version(f"{topic_name}-value").schema_id
    assert all(v[0] == 0 and int.from_bytes(v[1:5], "big") == schema_id for v in values)

    client.produce_binary(topic_name, [(None, v) for v in values], partition=0)
    read = [base64.b64decode(r["value"]) for r in read_partition(broker.url, topic_name, 0)]
    assert read == values
    assert [deserialize(v, context) for v in read] == orders

    # JSON Schema alike, on the key: registered as a JSON schema, validated by the serializer
    key_schema = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})
    key_context = SerializationContext(topic_name, MessageField.KEY)
    keys = [JSONSerializer(key_schema, sr)({"id": i}, key_context) for i in range(2)]
    assert sr.get_latest_version(f"{topic_name}-key").schema.schema_type == "JSON"
    client.produce_binary(topic_name, [(k, None) for k in keys], partition=0)
    read_keys = [base64.b64decode(r["key"]) for r in read_partition(broker.url, topic_name, 0)[len(values):]]
    assert [JSONDeserializer(None, schema_registry_client=_client(broker.url))(k, key_context)
            for k in read_keys] == [{"id": 0}, {"id": 1}]


@pytest.mark.cluster
def test_ids_are_unique_across_brokers_and_any_broker_answers(broker_factory):
    """Two brokers: writes sent to each go to the one writer (the leader of _schemas-0), ids never
    collide, and each broker answers a read right after its own write (read-your-writes) and the other's
    writes once its view follows."""
    brokers = [broker_factory(broker_id=i, extra_env=FAST) for i in range(2)]
    clients = [_client(b.url) for b in brokers]
    ids = {}
    for n in range(6):
        subject = f"s{n}-value"
        schema = json.dumps({"type": "record", "name": f"R{n}", "fields": [{"name": "f", "type": "long"}]})
        sr = clients[n % 2]
        ids[subject] = sr.register_schema(subject, Schema(schema, "AVRO"))
        assert sr.get_latest_version(subject).schema_id == ids[subject]  # read-your-writes, on either broker
    assert len(set(ids.values())) == len(ids)
    for b in brokers:
        wait_for(lambda b=b: httpx.get(f"{b.url}/subjects").json() == sorted(ids), what=f"broker {b.broker_id}'s view")
        for subject, schema_id in ids.items():
            assert httpx.get(f"{b.url}/schemas/ids/{schema_id}/subjects").json() == [subject]


def test_rest_proxy_avro_produce_writes_confluents_wire_format(broker, client, topic_name):
    """REST Proxy v2's ``application/vnd.kafka.avro.v2+json``: the value schema is registered under
    ``{topic}-value`` and its id answered; each value is framed (magic byte, id, Avro) so Confluent's
    AvroDeserializer reads it; a second request names the schema by id. Bad requests write nothing."""
    client.create_topic(topic_name, partitions=1, replication_factor=1)
    avro = {"Content-Type": "application/vnd.kafka.avro.v2+json", "Accept": "application/vnd.kafka.v2+json"}
    url = f"{broker.url}/topics/{topic_name}"
    first = httpx.post(url, headers=avro, json={"value_schema": V2, "records": [
        {"value": {"id": 1, "amount": 2.5, "currency": "EUR"}}, {"value": {"id": 2, "amount": 4.0, "currency": "USD"}}]})
    assert first.status_code == 200, first.text
    schema_id = _client(broker.url).get_latest_version(f"{topic_name}-value").schema_id
    assert first.json()["value_schema_id"] == schema_id and first.json()["key_schema_id"] is None
    second = httpx.post(url, headers=avro, json={"value_schema_id": schema_id, "records": [
        {"value": {"id": 3, "amount": 1.0, "currency": "CHF"}}]})
    assert second.status_code == 200 and second.json()["value_schema_id"] == schema_id

    for body, status, code in [
        ({"records": [{"value": {"id": 4}}]}, 422, 42202),  # no value schema
        ({"value_schema_id": schema_id, "records": [{"value": {"id": "four"}}]}, 422, 42203),  # not the schema
        ({"value_schema": "{\"type\": \"nosuch\"}", "records": [{"value": 1}]}, 422, 42205),  # not a schema
        ({"value_schema_id": schema_id, "records": [{"key": "k", "value": {"id": 5}}]}, 422, 42201),  # no key schema
    ]:
        refused = httpx.post(url, headers=avro, json=body)
        assert (refused.status_code, refused.json()["error_code"]) == (status, code), refused.text

    values = [base64.b64decode(r["value"]) for r in read_partition(broker.url, topic_name, 0)]
    assert len(values) == 3 and all(v[0] == 0 and int.from_bytes(v[1:5], "big") == schema_id for v in values)
    deserialize = AvroDeserializer(_client(broker.url))
    context = SerializationContext(topic_name, MessageField.VALUE)
    assert [deserialize(v, context)["id"] for v in values] == [1, 2, 3]
