"""Typed values of records read through the partition leader (:mod:`lakelog.spark.source.typed_tail`), on an
executor's side without Spark: the subject's versions read through a real broker's registry API, each
record decoded with its writer's version, and a version registered later read when a record names it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lakelog.client import LakelogClient
from lakelog.spark.source import typed_tail
from lakelog.spark.source.typed_tail import SubjectValues, subject_view, typed_tail_values

ORDER_V1 = ('{"type": "record", "name": "Order", "fields": ['
            '{"name": "id", "type": "long"}, {"name": "amount", "type": "int"}]}')
ORDER_V2 = ('{"type": "record", "name": "Order", "fields": ['
            '{"name": "id", "type": "long"}, {"name": "amount", "type": "int"}, '
            '{"name": "currency", "type": ["null", "string"], "default": null}]}')
MONEY = '{"type": "record", "name": "Money", "namespace": "shop", "fields": [{"name": "cents", "type": "long"}]}'
PRICED = ('{"type": "record", "name": "Priced", "namespace": "shop", "fields": ['
          '{"name": "id", "type": "long"}, {"name": "price", "type": "shop.Money"}]}')


def test_subject_view_holds_every_version_soft_deleted_ones_marked_and_what_they_reference(broker, topic_name):
    registry = SchemaRegistryClient({"url": broker.url})
    subject = f"{topic_name}-value"
    registry.register_schema(subject, Schema(ORDER_V1, "AVRO"))
    registry.register_schema(subject, Schema(ORDER_V2, "AVRO"))
    registry.delete_version(subject, 1)  # soft delete: its records still decode
    registry.register_schema(f"{topic_name}-money", Schema(MONEY, "AVRO"))
    from confluent_kafka.schema_registry import SchemaReference
    registry.register_schema(f"{topic_name}-priced", Schema(
        PRICED, "AVRO", [SchemaReference("shop.Money", f"{topic_name}-money", 1)]))

    with LakelogClient(broker.url) as client:
        view = subject_view(client, subject)
        assert [(v.version, v.deleted) for v in view.versions(subject, deleted=True)] == [(1, True), (2, False)]
        assert [v.version for v in view.versions(subject)] == [2]
        priced = subject_view(client, f"{topic_name}-priced")
        version, = priced.versions(f"{topic_name}-priced")
        assert priced.referenced_schemas(version.references) == [("shop.Money", priced.versions(
            f"{topic_name}-money")[0].schema)]
        assert subject_view(client, f"{topic_name}-none").versions(f"{topic_name}-none") == []


def test_subject_values_decode_each_record_with_its_version_and_read_a_later_version_when_named(
        broker, topic_name, monkeypatch):
    registry = SchemaRegistryClient({"url": broker.url})
    subject = f"{topic_name}-value"
    context = SerializationContext(topic_name, MessageField.VALUE)
    first = AvroSerializer(registry, ORDER_V1)({"id": 1, "amount": 5}, context)
    reads = []

    def counted(client, name):
        reads.append(name)
        return subject_view(client, name)

    decode = SubjectValues(subject, read_view=counted)
    with LakelogClient(broker.url) as client:
        column = decode(client, pa.array([first, b"not framed", None], pa.binary()))
        assert column.to_pylist() == [{"id": 1, "amount": 5}, None, None]
        # a version registered since: the batch that names its id reads the subject again at once ...
        second = AvroSerializer(registry, ORDER_V2)({"id": 2, "amount": 7, "currency": "EUR"}, context)
        column = decode(client, pa.array([first, second], pa.binary()))
        assert column.to_pylist() == [{"id": 1, "amount": 5, "currency": None},
                                      {"id": 2, "amount": 7, "currency": "EUR"}]
        assert len(reads) == 2
        decode(client, pa.array([second], pa.binary()))  # ... ids it holds read nothing ...
        assert len(reads) == 2
        # ... and an id no version has is looked for once, then not again for VIEW_REFRESH_INTERVAL_S
        monkeypatch.setattr(typed_tail, "VIEW_REFRESH_INTERVAL_S", 3600.0)
        unknown = b"\x00" + (10 ** 6).to_bytes(4, "big") + b"\x02"
        for _ in range(3):
            assert decode(client, pa.array([unknown, second], pa.binary())).to_pylist()[0] is None
        assert len(reads) == 3


def test_a_topic_without_a_subject_reads_null_values(broker, topic_name):
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=1, replication_factor=1)
        decode = typed_tail_values(client, bootstrap_servers=broker.url, topic=topic_name)
        assert decode(pa.array([b"\x00\x00\x00\x00\x01\x02"], pa.binary())).to_pylist() == [None]


@pytest.fixture(autouse=True)
def _fresh_decoders(monkeypatch):
    monkeypatch.setattr(typed_tail, "_by_subject", {})
