"""Typed table columns of schema'd topics, against a real broker process and its real Delta tables: a topic
bound to a subject gets ``value_parsed`` beside the raw ``value``, decoded with the registry's schemas when
the tail is committed to Delta; a record that does not decode reads null; a compatible evolution adds a
nested column to the table without rewriting a file. One broker for the module; one topic per test."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable

from lakelog.client import LakelogClient
from lakelog.runtime.broker_process import BrokerProcess
from tests.harness import new_chroot, wait_for

ORDER_V1 = ('{"type": "record", "name": "Order", "namespace": "shop", "fields": ['
            '{"name": "id", "type": "long"}, {"name": "amount", "type": "int"}]}')
# BACKWARD compatible: a field added with a default, amount widened int -> long (Avro's promotion)
ORDER_V2 = ('{"type": "record", "name": "Order", "namespace": "shop", "fields": ['
            '{"name": "id", "type": "long"}, {"name": "amount", "type": "long"}, '
            '{"name": "currency", "type": ["null", "string"], "default": null}]}')


@pytest.fixture(scope="module")
def node(zookeeper, tmp_path_factory):
    """One broker process: ``(broker, log dir)``; stopped by pid at the end."""
    logs = tmp_path_factory.mktemp("typed") / "logs-0"
    broker = BrokerProcess(zookeeper_connect=new_chroot(zookeeper.connect_string), log_dirs=logs)
    broker.start()
    yield broker, logs
    broker.stop()


def _serializer(url: str, schema: str):
    """Confluent's AvroSerializer (registers ``schema`` under ``<topic>-value``, TopicNameStrategy)."""
    return AvroSerializer(SchemaRegistryClient({"url": url}), schema)


def _value_fields(table: DeltaTable) -> list[str]:
    return pa.schema(table.schema().to_arrow()).field("value_parsed").type.names


def _rows(table_dir) -> list[dict]:
    table = DeltaTable(str(table_dir))
    names = table.schema().to_arrow().names
    columns = ["offset", "value_parsed"] if "value_parsed" in names else ["offset"]
    return sorted(table.to_pyarrow_table(columns=columns).to_pylist(), key=lambda r: r["offset"])


def test_typed_values_at_flush_and_a_record_that_does_not_decode_reads_null(node):
    broker, logs = node
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    context = SerializationContext(topic, MessageField.VALUE)
    with LakelogClient(broker.url) as client:
        # records wait in the segment tail (a long commit interval)
        client.create_topic(topic, partitions=1, replication_factor=1,
                            configs={"lake.commit.interval.ms": "600000", "lake.commit.bytes": "104857600"})
        serialize = _serializer(broker.url, ORDER_V1)
        client.produce_binary(topic, [(None, b"written before the topic had a subject"),
                                      (None, serialize({"id": 1, "amount": 5}, context))], partition=0)
        # the subject turns typed columns on; a small lake.commit.bytes makes the next produce flush
        client.admin.alter_topic_configs(topic, set={"value.schema.subject": f"{topic}-value", "lake.commit.bytes": "1"})

        def flushed() -> bool:
            client.produce_binary(topic, [(None, serialize({"id": 2, "amount": 7}, context))], partition=0)
            return len(_rows(logs / f"{topic}-0")) >= 3
        wait_for(flushed, what="the tail committed to Delta with the subject set")

    rows = _rows(logs / f"{topic}-0")
    assert rows[0] == {"offset": 0, "value_parsed": None}  # not in the wire format: null, the bytes stay
    assert rows[1] == {"offset": 1, "value_parsed": {"id": 1, "amount": 5}}
    assert rows[2] == {"offset": 2, "value_parsed": {"id": 2, "amount": 7}}
    raw = DeltaTable(str(logs / f"{topic}-0")).to_pyarrow_table(columns=["offset", "value"]).to_pylist()
    assert {r["offset"]: r["value"] for r in raw}[0] == b"written before the topic had a subject"


def test_a_compatible_evolution_adds_a_column_without_rewriting_files(node):
    broker, logs = node
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    context = SerializationContext(topic, MessageField.VALUE)
    table_dir = logs / f"{topic}-0"
    with LakelogClient(broker.url) as client:
        # a Delta commit per append; a subject from the start
        client.create_topic(topic, partitions=1, replication_factor=1,
                            configs={"lake.commit.interval.ms": "0", "value.schema.subject": f"{topic}-value"})
        client.produce_binary(topic, [(None, _serializer(broker.url, ORDER_V1)({"id": 1, "amount": 5}, context))],
                              partition=0)
        before = DeltaTable(str(table_dir))
        files_before = set(before.file_uris())
        assert _value_fields(before) == ["id", "amount"]
        client.produce_binary(topic, [(None, _serializer(broker.url, ORDER_V2)(
            {"id": 2, "amount": 2**40, "currency": "EUR"}, context))], partition=0)

    after = DeltaTable(str(table_dir))
    assert _value_fields(after) == ["id", "amount", "currency"]
    assert files_before <= set(after.file_uris())  # the old file is still the table's: nothing rewritten
    assert _rows(table_dir) == [
        {"offset": 0, "value_parsed": {"id": 1, "amount": 5, "currency": None}},  # an old row reads null
        {"offset": 1, "value_parsed": {"id": 2, "amount": 2**40, "currency": "EUR"}}]
