"""Schema validation at produce against a real broker process: a topic with a value subject refuses a
record not in Confluent's wire format or not of the subject's schema (REST: 422 / 42230 naming the record;
the Kafka listener: INVALID_RECORD), nothing written; a tombstone passes; with ``errors.tolerance=all`` the
refused records go to the dead-letter topic with Kafka Connect's error headers, over REST and Kafka; v3
produce serializes a value with a schema id or a subject's version. One broker for the module; topics of
their own per test (the Protobuf check needs no broker: protoc and protobuf only)."""

from __future__ import annotations

import base64
import io
import json
import time
import uuid

import fastavro
import httpx
import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, Producer
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from lakelog.client import LakelogClient
from lakelog.schemas.protobuf_schemas import encode_message_indexes, message_class
from lakelog.schemas.registry_state import RegistryView, SchemaVersion
from lakelog.schemas.validation import SubjectValidator
from lakelog.schemas.wire_format import frame
from tests.harness import read_partition
from tests.kafka.conftest import broker_of_its_own

ORDER_AVRO = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string"}]})
ORDER_JSON = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})
V2_BINARY = "application/vnd.kafka.binary.v2+json"


@pytest.fixture(scope="module")
def node(zookeeper, tmp_path_factory):
    """One broker process with a Kafka listener: ``(broker, "host:port")``; stopped by pid at the end."""
    with broker_of_its_own(zookeeper.connect_string, tmp_path_factory.mktemp("validation") / "logs-0") as cluster:
        yield cluster


def _register(url: str, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    answer = httpx.post(f"{url}/subjects/{subject}/versions", json={"schema": schema, "schemaType": schema_type},
                        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


def _topic(url: str, **configs: str) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with LakelogClient(url) as c:
        c.create_topic(name, partitions=1, replication_factor=1, configs=configs)
    return name


def _avro(order: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(ORDER_AVRO)), order)
    return buf.getvalue()


def _produce(url: str, topic: str, values: list[bytes | None]) -> httpx.Response:
    records = [{"value": None if v is None else base64.b64encode(v).decode()} for v in values]
    return httpx.post(f"{url}/topics/{topic}", json={"records": records}, headers={"Content-Type": V2_BINARY},
                      timeout=60)


def test_rest_produce_refuses_a_record_not_of_the_subject_and_writes_nothing(node):
    url = node[0].url
    topic = _topic(url, **{"confluent.value.schema.validation": "true"})
    schema_id = _register(url, f"{topic}-value", ORDER_AVRO)
    good = frame(schema_id, _avro({"id": 1, "note": "a"}))
    for bad, why in [(b"plain bytes", "magic byte"), (frame(schema_id + 1000, _avro({"id": 2, "note": "b"})),
                                                      "not a version of subject"),
                     (frame(schema_id, b"\x02"), "does not decode as Avro")]:
        answer = _produce(url, topic, [good, None, bad])
        assert answer.status_code == 422, answer.text
        body = answer.json()
        assert body["error_code"] == 42230 and "Record 2" in body["message"] and why in body["message"], body
    assert read_partition(url, topic, 0) == []
    ok = _produce(url, topic, [good, None])  # a tombstone passes
    assert ok.status_code == 200, ok.text
    assert [r["offset"] for r in read_partition(url, topic, 0)] == [0, 1]


def test_json_schema_subject_named_by_value_schema_subject(node):
    url = node[0].url
    subject = f"orders-{uuid.uuid4().hex[:6]}"
    topic = _topic(url, **{"value.schema.subject": subject})
    schema_id = _register(url, subject, ORDER_JSON, "JSON")
    refused = _produce(url, topic, [frame(schema_id, b'{"id": 1}'), frame(schema_id, b'{"id": "one"}')])
    assert refused.status_code == 422 and "Record 1" in refused.json()["message"], refused.text
    assert read_partition(url, topic, 0) == []
    assert _produce(url, topic, [frame(schema_id, b'{"id": 1}')]).status_code == 200


def test_keys_are_validated_against_the_key_subject(node):
    url = node[0].url
    subject = f"order-keys-{uuid.uuid4().hex[:6]}"
    topic = _topic(url, **{"key.schema.subject": subject})
    schema_id = _register(url, subject, ORDER_JSON, "JSON")
    framed = base64.b64encode(frame(schema_id, b'{"id": 7}')).decode()
    body = {"records": [{"key": framed, "value": "AA=="}, {"key": "a2V5", "value": "AA=="}]}
    refused = httpx.post(f"{url}/topics/{topic}", json=body, headers={"Content-Type": V2_BINARY}, timeout=60)
    assert refused.status_code == 422 and "Record 1" in refused.json()["message"], refused.text
    assert "its key" in refused.json()["message"]
    body["records"].pop()
    assert httpx.post(f"{url}/topics/{topic}", json=body, headers={"Content-Type": V2_BINARY},
                      timeout=60).status_code == 200


def _kafka_produce(bootstrap: str, topic: str, values: list[bytes]) -> list:
    """The values produced to partition 0 by confluent-kafka (no retries) in one call, so in one batch
    however slowly this thread runs (two produce() calls went out in two batches under CI's load, even
    with linger.ms 10000): each delivery report's error."""
    reports: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "retries": 0})
    queued = producer.produce_batch(topic, [{"value": v} for v in values], partition=0,
                                    on_delivery=lambda err, msg: reports.append(err))
    assert queued == len(values)
    assert producer.flush(60) == 0
    return reports


def test_kafka_listener_refuses_with_invalid_record(node):
    broker, bootstrap = node
    topic = _topic(broker.url, **{"confluent.value.schema.validation": "true"})
    schema_id = _register(broker.url, f"{topic}-value", ORDER_AVRO)
    reports = _kafka_produce(bootstrap, topic, [frame(schema_id, _avro({"id": 1, "note": "a"})), b"garbage"])
    assert reports and all(err is not None and err.code() == KafkaError.INVALID_RECORD for err in reports), reports
    assert read_partition(broker.url, topic, 0) == []


def _dead_letter_topics(url: str, **dlq_configs: str) -> tuple[str, str, int]:
    dlq = _topic(url, **dlq_configs)
    topic = _topic(url, **{"confluent.value.schema.validation": "true", "errors.tolerance": "all",
                           "errors.deadletterqueue.topic.name": dlq})
    return topic, dlq, _register(url, f"{topic}-value", ORDER_AVRO)


def _headers(record: dict) -> dict[str, str]:
    return {h["key"]: base64.b64decode(h["value"]).decode() for h in record.get("headers") or []}


def test_dead_letter_topic_over_rest(node):
    url = node[0].url
    topic, dlq, schema_id = _dead_letter_topics(url)
    good = frame(schema_id, _avro({"id": 1, "note": "a"}))
    answer = _produce(url, topic, [good, b"garbage", good])
    assert answer.status_code == 200, answer.text
    entries = answer.json()["offsets"]
    assert [(e["partition"], e["offset"]) for e in entries] == [(0, 0), (None, None), (0, 1)]
    assert entries[1]["error_code"] == 42230 and f"dead-letter topic '{dlq}' (partition 0, offset 0)" in entries[1]["error"]
    assert [base64.b64decode(r["value"]) for r in read_partition(url, topic, 0)] == [good, good]
    dead, = read_partition(url, dlq, 0)
    assert base64.b64decode(dead["value"]) == b"garbage"
    headers = _headers(dead)
    assert headers["__connect.errors.topic"] == topic and headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert "magic byte" in headers["__connect.errors.exception.message"]


def test_a_dead_letter_topic_that_validates_still_takes_the_dead_letters(node):
    url = node[0].url
    topic, dlq, schema_id = _dead_letter_topics(url, **{"confluent.value.schema.validation": "true"})
    answer = _produce(url, topic, [b"garbage", frame(schema_id, _avro({"id": 1, "note": "a"}))])
    assert answer.status_code == 200, answer.text
    assert [(e["partition"], e["offset"]) for e in answer.json()["offsets"]] == [(None, None), (0, 0)]
    dead, = read_partition(url, dlq, 0)
    assert base64.b64decode(dead["value"]) == b"garbage"
    assert _produce(url, dlq, [b"garbage"]).status_code == 422  # a produce of its own is still validated


def test_dead_letter_topic_over_kafka(node):
    broker, bootstrap = node
    topic, dlq, schema_id = _dead_letter_topics(broker.url)
    good = frame(schema_id, _avro({"id": 2, "note": "b"}))
    reports = _kafka_produce(bootstrap, topic, [good, b"garbage"])
    assert reports == [None, None], [str(e) for e in reports]
    assert [base64.b64decode(r["value"]) for r in read_partition(broker.url, topic, 0)] == [good]
    dead, = read_partition(broker.url, dlq, 0)
    assert base64.b64decode(dead["value"]) == b"garbage"
    assert _headers(dead)["__connect.errors.stage"] == "VALUE_CONVERTER"


def test_v3_produce_serializes_with_a_schema_id_or_a_subject_version(node):
    url = node[0].url
    topic = _topic(url, **{"confluent.value.schema.validation": "true"})
    first = _register(url, f"{topic}-value", ORDER_AVRO)
    with_default = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": "string"},
        {"name": "qty", "type": "int", "default": 1}]})
    second = _register(url, f"{topic}-value", with_default)
    cluster = httpx.get(f"{url}/v3/clusters", timeout=30).json()["data"][0]["cluster_id"]
    records = f"{url}/v3/clusters/{cluster}/topics/{topic}/records"
    by_id = httpx.post(records, json={"value": {"schema_id": first, "data": {"id": 1, "note": "a"}}}, timeout=30)
    assert by_id.status_code == 200 and by_id.json()["offset"] == 0, by_id.text
    by_version = httpx.post(records, json={"value": {"subject": f"{topic}-value", "schema_version": 2,
                                                     "data": {"id": 2, "note": "b", "qty": 5}}}, timeout=30)
    assert by_version.status_code == 200, by_version.text
    latest = httpx.post(records, json={"value": {"subject_name_strategy": "TOPIC_NAME", "data": {"id": 3, "note": "c"}}},
                        timeout=30)
    assert latest.status_code == 200, latest.text
    tombstone = httpx.post(records, json={"key": {"type": "STRING", "data": "k"}, "value": None}, timeout=30)
    assert tombstone.status_code == 200, tombstone.text
    refused = httpx.post(records, json={"value": {"schema_id": first, "data": {"id": "x"}}}, timeout=30)
    assert refused.status_code == 422 and refused.json()["error_code"] == 42203, refused.text
    unknown = httpx.post(records, json={"value": {"subject": f"{topic}-value", "schema_version": 9, "data": {}}},
                         timeout=30)
    assert unknown.status_code == 422 and unknown.json()["error_code"] == 42205, unknown.text
    values = [r["value"] for r in read_partition(url, topic, 0)]
    assert values[:3] == [base64.b64encode(frame(first, _avro({"id": 1, "note": "a"}))).decode(),
                          base64.b64encode(frame(second, _avro({"id": 2, "note": "b"}) + b"\x0a")).decode(),
                          base64.b64encode(frame(second, _avro({"id": 3, "note": "c"}) + b"\x02")).decode()]
    assert values[3] is None and len(values) == 4


def test_protobuf_values_decode_with_their_message_indexes():
    proto = 'syntax = "proto3";\npackage shop;\nmessage Order {\n  int64 id = 1;\n}\n'
    version = SchemaVersion(subject="shop-value", version=1, schema_id=7, schema_type="PROTOBUF", schema=proto)
    validator = SubjectValidator("shop-value", field="value", versions=[version], view=RegistryView())
    good = frame(7, encode_message_indexes([0]) + message_class(proto)(id=5).SerializeToString())
    column = pa.array([good, None, frame(7, encode_message_indexes([3]) + b"\x08\x05"),
                       frame(7, encode_message_indexes([0]) + b"\xff\xff")], pa.binary())
    failures = validator.failures(column)
    assert sorted(failures) == [2, 3] and all("Protobuf of schema id 7" in m for m in failures.values()), failures


def test_kafka_answer_names_each_refused_record_in_record_errors(node):
    """ProduceResponse v9's ``record_errors`` (KIP-467): the batch index and why of each refused record."""
    from kafka.protocol.producer.produce import ProduceResponse

    from tests.kafka.test_protocol_edges import _batch, _connect, _produce_frame, _read_frame

    broker, bootstrap = node
    topic = _topic(broker.url, **{"confluent.value.schema.validation": "true"})
    schema_id = _register(broker.url, f"{topic}-value", ORDER_AVRO)
    good = frame(schema_id, _avro({"id": 1, "note": "a"}))
    with _connect(bootstrap) as sock:
        sock.sendall(_produce_frame(topic, bytes(_batch([good, b"x", good, frame(schema_id, b"\x02")]))))
        answer = ProduceResponse.decode(_read_frame(sock), version=9, header=True)
    (partition,) = answer.responses[0].partition_responses
    assert partition.error_code == 87 and partition.base_offset == -1  # INVALID_RECORD
    assert [e.batch_index for e in partition.record_errors] == [1, 3]
    assert "magic byte" in partition.record_errors[0].batch_index_error_message
    assert "Record 1" in partition.error_message
    assert read_partition(broker.url, topic, 0) == []


@pytest.mark.cluster
def test_a_broker_that_cannot_read_the_registry_since_its_restart_neither_refuses_nor_nulls(broker_factory):
    """Broker 0 leads the validated topic; ``_schemas`` lives on broker 1 only. With broker 1 down, a restarted
    broker 0 has an empty registry view: a produce is answered retriably (500 / 50002) rather than refused
    for an unknown schema id, and the record its kill left in the segment tail is not flushed with a null
    typed value. Once broker 1 is back, the produce is taken and both records reach Delta typed."""
    env = {"LAKELOG_REQUEST_TIMEOUT_MS": "3000", "LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "3000"}
    b0 = broker_factory(broker_id=0, extra_env=env)
    topic = _topic(b0.url, **{"confluent.value.schema.validation": "true", "lake.commit.interval.ms": "1500"})
    b0.stop()
    b1 = broker_factory(broker_id=1, extra_env=env)  # alone: _schemas is created with one replica, on it
    schema_id = _register(b1.url, f"{topic}-value", ORDER_AVRO)
    b0.start()
    assert _produce(b0.url, topic, [frame(schema_id, _avro({"id": 1, "note": "a"}))]).status_code == 200
    b1.kill()
    b0.kill()  # offset 0 is still in the segment tail (flushed every 1.5 s)
    b0.start()
    answer = _produce(b0.url, topic, [frame(schema_id, _avro({"id": 2, "note": "b"}))])
    assert answer.status_code == 500 and answer.json()["error_code"] == 50002, answer.text
    time.sleep(3)  # two flush rounds: none may commit offset 0 without its typed value
    b1.start()
    deadline = time.monotonic() + 60
    while (answer := _produce(b0.url, topic, [frame(schema_id, _avro({"id": 2, "note": "b"}))])).status_code != 200:
        assert answer.json()["error_code"] == 50002 and time.monotonic() < deadline, answer.text
    table = None
    while time.monotonic() < deadline:
        try:  # the table exists from the topic's creation; value_parsed from its first flush
            table = DeltaTable(str(b0.log_dirs / f"{topic}-0")).to_pyarrow_table()
        except (TableNotFoundError, OSError):
            table = None
        if table is not None and table.num_rows == 2:
            break
        time.sleep(0.2)
    assert table is not None and sorted(
        (r["offset"], r["value_parsed"]["id"]) for r in table.select(["offset", "value_parsed"]).to_pylist()) \
        == [(0, 1), (1, 2)]
