"""REST Proxy's embedded formats against a real broker process: JSON Schema and Protobuf produce
(``application/vnd.kafka.jsonschema.v2+json`` / ``.protobuf.``), consumer instances of format ``avro``,
``jsonschema`` and ``protobuf`` answering decoded JSON, and Confluent's serializers over the Kafka listener
reading and writing the same wire format. One broker for the module; one topic per test."""

from __future__ import annotations

import base64
import json
import uuid

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lakelog.client import LakelogClient
from lakelog.schemas.protobuf_schemas import message_class
from tests.harness import read_partition, wait_for
from tests.kafka.conftest import broker_of_its_own

ORDER_JSON = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
                         "required": ["id"], "additionalProperties": False})
ORDER_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order {\n  int64 id = 1;\n  string note = 2;\n}\n'
V2 = "application/vnd.kafka.v2+json"


@pytest.fixture(scope="module")
def node(zookeeper, tmp_path_factory):
    """One broker process with a Kafka listener: ``(broker, "host:port")``; stopped by pid at the end."""
    with broker_of_its_own(zookeeper.connect_string, tmp_path_factory.mktemp("formats") / "logs-0") as cluster:
        yield cluster


@pytest.fixture
def topic(node) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with LakelogClient(node[0].url) as c:
        c.create_topic(name, partitions=1, replication_factor=1)
    return name


def _consume(url: str, topic: str, fmt: str, count: int) -> list[dict] | httpx.Response:
    """Records of ``topic`` read by a new consumer instance of format ``fmt``; the refusing answer if any."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    created = httpx.post(f"{url}/consumers/{group}", headers={"Content-Type": V2},
                         json={"name": "c", "format": fmt, "auto.offset.reset": "earliest"})
    assert created.status_code == 200, created.text
    base = created.json()["base_uri"]
    assert httpx.post(f"{base}/subscription", headers={"Content-Type": V2},
                      json={"topics": [topic]}).status_code == 204
    got: list[dict] = []
    accept = {"Accept": f"application/vnd.kafka.{fmt}.v2+json"}

    retried: list[httpx.Response] = []

    def more() -> bool | httpx.Response:
        answer = httpx.get(f"{base}/records", headers=accept, params={"timeout": 500})
        if answer.status_code >= 500:  # a server error is retriable: poll again, as a REST client would
            retried.append(answer)
            return False
        if answer.status_code != 200:
            got.append({"refused": answer})
            return True
        got.extend(answer.json())
        return len(got) >= count

    try:
        try:
            wait_for(more, what=f"{count} {fmt} records")
        except AssertionError as e:
            raise AssertionError(f"{e}; the last server errors: {[(r.status_code, r.text[:300]) for r in retried[-3:]]}")
    finally:
        httpx.delete(base)
    if got and "refused" in got[-1]:
        return got[-1]["refused"]
    return got


def test_jsonschema_produce_validates_frames_and_consumers_decode(node, topic):
    """REST jsonschema produce registers the schema, validates each value (422 / 42203, nothing written) and
    frames it; Confluent's JSONDeserializer reads it; JSONSerializer's records over the Kafka listener and
    REST's are decoded alike by a jsonschema consumer instance; a record not in the wire format is 40801."""
    broker, bootstrap = node
    url = f"{broker.url}/topics/{topic}"
    headers = {"Content-Type": "application/vnd.kafka.jsonschema.v2+json", "Accept": V2}
    first = httpx.post(url, headers=headers, json={"value_schema": ORDER_JSON, "records": [
        {"value": {"id": 1, "note": "a"}}, {"value": {"id": 2}}]})
    assert first.status_code == 200, first.text
    registry = SchemaRegistryClient({"url": broker.url})
    latest = registry.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON" and first.json()["value_schema_id"] == latest.schema_id

    for body, code in [({"value_schema_id": latest.schema_id, "records": [{"value": {"id": "three"}}]}, 42203),
                       ({"value_schema_id": latest.schema_id, "records": [{"value": {"id": 3}},
                                                                          {"value": {"id": 4, "x": 1}}]}, 42203),
                       ({"value_schema": "{\"type\": 5}", "records": [{"value": 1}]}, 42205)]:
        refused = httpx.post(url, headers=headers, json=body)
        assert (refused.status_code, refused.json()["error_code"]) == (422, code), refused.text

    raw = [base64.b64decode(r["value"]) for r in read_partition(broker.url, topic, 0)]
    assert len(raw) == 2  # the refused requests wrote nothing
    context = SerializationContext(topic, MessageField.VALUE)
    deserialize = JSONDeserializer(None, schema_registry_client=registry)
    assert [deserialize(v, context) for v in raw] == [{"id": 1, "note": "a"}, {"id": 2}]
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=JSONSerializer(ORDER_JSON, registry)({"id": 3}, context), partition=0)
    assert producer.flush(60) == 0
    assert [r["value"] for r in _consume(broker.url, topic, "jsonschema", 3)] == [
        {"id": 1, "note": "a"}, {"id": 2}, {"id": 3}]

    # a record not in the wire format: Confluent's deserialization error, 408 / 40801
    with LakelogClient(broker.url) as c:
        c.produce_binary(topic, [(None, b"plain")], partition=0)
    refused = _consume(broker.url, topic, "jsonschema", 4)
    assert isinstance(refused, httpx.Response) and refused.status_code == 408
    assert refused.json()["error_code"] == 40801 and "offset 3" in refused.json()["message"]


def test_protobuf_over_rest_and_the_kafka_listener(node, topic):
    """REST protobuf produce frames the first message with its indexes; Confluent's ProtobufDeserializer
    reads it from a Kafka consumer; Confluent's ProtobufSerializer (which registers the file as a base64
    descriptor) writes over the Kafka listener and a protobuf consumer instance answers its JSON."""
    broker, bootstrap = node
    headers = {"Content-Type": "application/vnd.kafka.protobuf.v2+json", "Accept": V2}
    produced = httpx.post(f"{broker.url}/topics/{topic}", headers=headers, json={
        "value_schema": ORDER_PROTO, "records": [{"value": {"id": "7", "note": "rest"}}]})
    assert produced.status_code == 200, produced.text
    schema_id = produced.json()["value_schema_id"]
    refused = httpx.post(f"{broker.url}/topics/{topic}", headers=headers, json={
        "value_schema_id": schema_id, "records": [{"value": {"id": 8, "nosuch": 1}}]})
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42203), refused.text
    bad_schema = httpx.post(f"{broker.url}/topics/{topic}", headers=headers, json={
        "value_schema": "syntax = \"proto3\"; message X { strin a = 1; }", "records": [{"value": {}}]})
    assert (bad_schema.status_code, bad_schema.json()["error_code"]) == (422, 42205), bad_schema.text

    order = message_class(ORDER_PROTO)
    registry = SchemaRegistryClient({"url": broker.url})
    context = SerializationContext(topic, MessageField.VALUE)
    serialize = ProtobufSerializer(order, registry, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=serialize(order(id=9, note="kafka"), context), partition=0)
    assert producer.flush(60) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    deserialize = ProtobufDeserializer(order, {"use.deprecated.format": False})
    try:
        consumer.subscribe([topic])
        read = []
        wait_for(lambda: (m := consumer.poll(0.5)) is not None and not m.error() and read.append(m.value())
                 or len(read) >= 2, what="2 records over the Kafka listener")
    finally:
        consumer.close()
    assert [(m.id, m.note) for m in (deserialize(v, context) for v in read)] == [(7, "rest"), (9, "kafka")]
    consumed = _consume(broker.url, topic, "protobuf", 2)
    assert isinstance(consumed, list), (consumed.status_code, consumed.text)
    assert [r["value"] for r in consumed] == [{"id": "7", "note": "rest"}, {"id": "9", "note": "kafka"}]


def test_protobuf_serializer_registers_imports_as_references(node, topic):
    """A message whose file imports another file and a well-known type: Confluent's ProtobufSerializer
    registers the imported file (a base64 descriptor) under its own subject and the message's file with a
    reference to it; the record written over REST names that schema id, and a protobuf consumer reads it."""
    broker, _ = node
    money = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; string currency = 2; }\n'
    order_text = ('syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
                  'import "google/protobuf/timestamp.proto";\n'
                  'message Order { int64 id = 1; common.Money amount = 2; google.protobuf.Timestamp at = 3; }\n')
    order = message_class(order_text, imports=[("common/money.proto", money)])
    registry = SchemaRegistryClient({"url": broker.url})
    context = SerializationContext(topic, MessageField.VALUE)
    framed = ProtobufSerializer(order, registry, {"use.deprecated.format": False})(
        order(id=1, amount={"units": 5, "currency": "EUR"}), context)
    latest = registry.get_latest_version(f"{topic}-value")
    assert [r.name for r in latest.schema.references] == ["common/money.proto"]
    assert int.from_bytes(framed[1:5], "big") == latest.schema_id
    produced = httpx.post(f"{broker.url}/topics/{topic}", headers={
        "Content-Type": "application/vnd.kafka.protobuf.v2+json", "Accept": V2}, json={
        "value_schema_id": latest.schema_id,
        "records": [{"value": {"id": "2", "amount": {"units": "7", "currency": "USD"}, "at": "2024-01-01T00:00:00Z"}}]})
    assert produced.status_code == 200, produced.text
    with LakelogClient(broker.url) as c:
        c.produce_binary(topic, [(None, framed)], partition=0)
    assert [r["value"] for r in _consume(broker.url, topic, "protobuf", 2)] == [
        {"id": "2", "amount": {"units": "7", "currency": "USD"}, "at": "2024-01-01T00:00:00Z"},
        {"id": "1", "amount": {"units": "5", "currency": "EUR"}}]


def test_avro_consumer_instances_answer_avros_json(node, topic):
    broker, _ = node
    schema = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]})
    produced = httpx.post(f"{broker.url}/topics/{topic}", headers={
        "Content-Type": "application/vnd.kafka.avro.v2+json", "Accept": V2}, json={
        "value_schema": schema, "key_schema": "\"string\"",
        "records": [{"key": "k1", "value": {"id": 1, "note": {"string": "x"}}}, {"key": "k2", "value": {"id": 2}}]})
    assert produced.status_code == 200, produced.text
    read = _consume(broker.url, topic, "avro", 2)
    assert [(r["key"], r["value"]) for r in read] == [("k1", {"id": 1, "note": {"string": "x"}}),
                                                      ("k2", {"id": 2, "note": None})]
    mismatch = httpx.post(f"{broker.url}/consumers/g-{uuid.uuid4().hex[:8]}", headers={"Content-Type": V2},
                          json={"name": "c", "format": "avro"})
    base = mismatch.json()["base_uri"]
    try:
        answer = httpx.get(f"{base}/records", headers={"Accept": "application/vnd.kafka.json.v2+json"})
        assert (answer.status_code, answer.json()["error_code"]) == (406, 40601)
    finally:
        httpx.delete(base)
