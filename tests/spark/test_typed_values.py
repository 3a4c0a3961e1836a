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
