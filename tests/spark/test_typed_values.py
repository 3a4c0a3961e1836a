"""A schema'd topic's typed values in Spark, over a real broker process: ``lakelog sql``'s views expose
``value_parsed`` (``SELECT value_parsed.amount``), across partitions whose tables evolved differently, and
``format("lakelog")`` with ``valueFormat=schema`` returns the typed value as ``value`` (no ``from_avro``)."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lakelog.spark.sql import register_topics_from_gateway

pytestmark = pytest.mark.spark

ORDER_V1 = ('{"type": "record", "name": "Order", "fields": ['
            '{"name": "id", "type": "long"}, {"name": "amount", "type": "int"}]}')
ORDER_V2 = ('{"type": "record", "name": "Order", "fields": ['
            '{"name": "id", "type": "long"}, {"name": "amount", "type": "int"}, '
            '{"name": "currency", "type": ["null", "string"], "default": null}]}')


def test_sql_views_and_value_format_schema_read_typed_values(spark, broker, client, create_topic, topic_name):
    create_topic(topic_name, partitions=3, configs={"value.schema.subject": f"{topic_name}-value"})
    registry = SchemaRegistryClient({"url": broker.url})
    context = SerializationContext(topic_name, MessageField.VALUE)
    v1, v2 = AvroSerializer(registry, ORDER_V1), AvroSerializer(registry, ORDER_V2)
    client.produce_binary(topic_name, [(None, v1({"id": 1, "amount": 5}, context))], partition=0)
    # partition 1 only ever saw v2 (one more nested field), partition 2 nothing (no typed column at all)
    client.produce_binary(topic_name, [(None, v2({"id": 2, "amount": 7, "currency": "EUR"}, context))], partition=1)

    view = register_topics_from_gateway(spark, client, topics=[topic_name])[topic_name]
    rows = spark.sql(f"SELECT partition, value_parsed.amount AS amount, value_parsed.currency AS currency "
                     f"FROM {view} ORDER BY partition").collect()
    assert [tuple(r) for r in rows] == [(0, 5, None), (1, 7, "EUR")]

    df = (spark.read.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
          .option("subscribe", topic_name).option("valueFormat", "schema").load())
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,amount:bigint,currency:string>"
    typed = df.select("partition", "value.id", "value.currency").orderBy("partition").collect()
    assert [tuple(r) for r in typed] == [(0, 1, None), (1, 2, "EUR")]


def test_sink_value_format_schema_serializes_rows_with_the_topics_subject(spark, broker, client, create_topic,
                                                                           topic_name):
    """``df.write.format("lakelog")`` with ``valueFormat=schema``: a struct ``value`` column is written in
    Confluent's wire format with the subject's latest schema, so the broker's validation takes it and
    Confluent's deserializer reads it; a row that does not fit the schema fails the write, which writes
    nothing."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from pyspark.sql import functions as F

    create_topic(topic_name, partitions=1, configs={"confluent.value.schema.validation": "true"})
    registry = SchemaRegistryClient({"url": broker.url})
    registry.register_schema(f"{topic_name}-value", Schema(ORDER_V2, "AVRO"))
    rows = spark.createDataFrame([(1, 5, "EUR"), (2, 7, None)], "id long, amount int, currency string")
    writer = (rows.select(F.struct("id", "amount", "currency").alias("value")).write.format("lakelog")
              .option("lakelog.bootstrap.servers", client.urls[0]).option("topic", topic_name)
              .option("valueFormat", "schema").mode("append"))
    writer.save()

    values = client.fetch_arrow(topic_name, 0, 0)["value"].to_pylist()
    deserialize = AvroDeserializer(registry)
    context = SerializationContext(topic_name, MessageField.VALUE)
    # two Spark tasks write the two rows: their order in the partition is either
    assert sorted((deserialize(v, context) for v in values), key=lambda r: r["id"]) == [
        {"id": 1, "amount": 5, "currency": "EUR"}, {"id": 2, "amount": 7, "currency": None}]
    assert all(v[0] == 0 and int.from_bytes(v[1:5], "big") == registry.get_latest_version(
        f"{topic_name}-value").schema_id for v in values)

    # an amount that is no int: the task fails naming the subject, and the partition gains nothing
    bad = spark.createDataFrame([(3, "lots", None)], "id long, amount string, currency string")
    with pytest.raises(Exception, match="does not fit subject"):
        (bad.select(F.struct("id", "amount", "currency").alias("value")).write.format("lakelog")
         .option("lakelog.bootstrap.servers", client.urls[0]).option("topic", topic_name)
         .option("valueFormat", "schema").mode("append").save())
    assert client.fetch_arrow(topic_name, 0, 2).num_rows == 0


def test_sink_value_format_schema_with_a_named_json_schema_subject(spark, broker, client, create_topic, topic_name):
    """The sink's ``value.schema.subject`` option names the subject (JSON Schema here) for a topic that binds
    none; a topic without a subject and without the option is refused with what to set."""
    import json

    from confluent_kafka.schema_registry import Schema
    from pyspark.sql import functions as F

    create_topic(topic_name, partitions=1)
    registry = SchemaRegistryClient({"url": broker.url})
    subject = f"{topic_name}-orders"
    schema_id = registry.register_schema(subject, Schema(json.dumps(
        {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array"}},
         "required": ["id"]}), "JSON"))
    df = spark.createDataFrame([(1, ["a", "b"])], "id long, tags array<string>").select(
        F.struct("id", "tags").alias("value"))
    options = {"lakelog.bootstrap.servers": client.urls[0], "topic": topic_name, "valueFormat": "schema"}
    with pytest.raises(Exception, match="binds no schema registry subject"):
        df.write.format("lakelog").options(**options).mode("append").save()
    df.write.format("lakelog").options(**options).option("value.schema.subject", subject).mode("append").save()

    (value,) = client.fetch_arrow(topic_name, 0, 0)["value"].to_pylist()
    assert value[:5] == b"\x00" + schema_id.to_bytes(4, "big")
    assert json.loads(value[5:]) == {"id": 1, "tags": ["a", "b"]}


def test_value_format_schema_reads_typed_values_of_records_still_in_the_segment_tail(
        spark, broker, client, create_topic, topic_name, tmp_path):
    """Records past the lake end offset (a 10-minute commit interval keeps them in the leader's segment
    tail) are decoded by the executor: a batch read with ``lakelog.read.tail=true``, a read through the
    leader (``lakelog.read.mode=broker``) and a stream (``read.tail`` its default) see them typed, a record of
    a version registered after the read's first one included (bytes not of the subject, which a validated
    topic refuses, read null: ``tests/spark/test_typed_tail.py``)."""
    create_topic(topic_name, partitions=1, configs={"value.schema.subject": f"{topic_name}-value",
                                                    "lake.commit.interval.ms": "600000"})
    registry = SchemaRegistryClient({"url": broker.url})
    context = SerializationContext(topic_name, MessageField.VALUE)
    client.produce_binary(topic_name, [(None, AvroSerializer(registry, ORDER_V1)({"id": 1, "amount": 5}, context))],
                          partition=0)

    def read(**options: str):
        reader = (spark.read.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
                  .option("subscribe", topic_name).option("valueFormat", "schema"))
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    first = read(**{"lakelog.read.tail": "true"})
    assert first.schema["value"].dataType.simpleString() == "struct<id:bigint,amount:bigint>"
    assert [tuple(r) for r in first.select("offset", "value.id", "value.amount").collect()] == [(0, 1, 5)]
    assert read().count() == 0  # without the tail a batch read stops at the lake end offset: nothing there yet

    client.produce_binary(topic_name, [(None, AvroSerializer(registry, ORDER_V2)(
        {"id": 2, "amount": 7, "currency": "EUR"}, context))], partition=0)
    expected = [(0, 1, 5, None), (1, 2, 7, "EUR")]
    for options in ({"lakelog.read.tail": "true"}, {"lakelog.read.tail": "true", "lakelog.read.mode": "broker"}):
        df = read(**options)
        assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,amount:bigint,currency:string>"
        rows = df.select("offset", "value.id", "value.amount", "value.currency").orderBy("offset").collect()
        assert [tuple(r) for r in rows] == expected, options

    stream = (spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
              .option("subscribe", topic_name).option("startingOffsets", "earliest")
              .option("valueFormat", "schema").load()
              .select("offset", "value.id", "value.amount", "value.currency"))
    query = (stream.writeStream.format("memory").queryName(f"typed_tail_{topic_name.replace('-', '_')}")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    rows = spark.sql(f"SELECT * FROM typed_tail_{topic_name.replace('-', '_')} ORDER BY offset").collect()
    assert [tuple(r) for r in rows] == expected
