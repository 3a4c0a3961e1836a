"""Spark's own Kafka source and sink (``format("kafka")``: ``org.apache.spark:spark-sql-kafka-0-10``, the
jar matching the installed pyspark, in the session's ``spark.jars.packages``: see conftest.py), unchanged,
against a lakelog broker's Kafka listener: a batch read, an ``availableNow`` stream with a group id into
a Delta table, and a batch write into a topic read back over HTTP."""

from __future__ import annotations

import base64
import uuid

import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from tests.harness import BrokerProcess, read_partition

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # CreateTime of record i is T0 + 1000 * i


@pytest.fixture(scope="module")
def kafka_listener(zookeeper, tmp_path_factory):
    """One broker process with a Kafka listener for the module: ``(broker, "127.0.0.1:port")``."""
    from tests.kafka.conftest import broker_of_its_own

    with broker_of_its_own(zookeeper.connect_string, tmp_path_factory.mktemp("spark-kafka") / "logs-0") as listener:
        yield listener


def _topic(broker: BrokerProcess, partitions: int) -> str:
    name = f"spark-kafka-{uuid.uuid4().hex[:10]}"
    with LakelogClient(broker.url) as http:
        http.create_topic(name, partitions=partitions, replication_factor=1)
    return name


def _produce(broker: BrokerProcess, topic: str, per_partition: dict[int, int]) -> list[tuple]:
    """Records ``k{i}`` / ``{partition}:{i}`` with CreateTime T0 + 1000 * i; the expected
    ``(key, value, partition, offset, timestamp ms)`` rows, sorted."""
    expected = []
    with LakelogClient(broker.url) as http:
        for p, n in per_partition.items():
            http.produce_arrow(topic, p, pa.table({
                "key": pa.array([b"k%d" % i for i in range(n)]),
                "value": pa.array([f"{p}:{i}".encode() for i in range(n)]),
                "timestamp": pa.array([T0 + 1000 * i for i in range(n)], pa.int64()),
            }))
            expected += [(b"k%d" % i, f"{p}:{i}".encode(), p, i, T0 + 1000 * i) for i in range(n)]
    return sorted(expected)


def _rows(df) -> list[tuple]:
    return sorted((bytes(r.key), bytes(r.value), r.partition, r.offset, r.ts)
                  for r in df.selectExpr("key", "value", "partition", "offset",
                                         "unix_millis(timestamp) AS ts").collect())


def test_batch_read_gives_keys_values_partitions_offsets_and_timestamps(spark, kafka_listener):
    broker, bootstrap = kafka_listener
    topic = _topic(broker, 2)
    expected = _produce(broker, topic, {0: 25, 1: 17})
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    assert _rows(df) == expected
    assert {r.topic for r in df.select("topic").collect()} == {topic}
    assert {r.timestampType for r in df.select("timestampType").collect()} == {0}  # CreateTime


def test_available_now_stream_with_a_group_id_into_delta(spark, kafka_listener, tmp_path):
    broker, bootstrap = kafka_listener
    topic = _topic(broker, 3)
    expected = _produce(broker, topic, {0: 12, 1: 9, 2: 20})
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.group.id", f"spark-{uuid.uuid4().hex[:8]}").option("maxOffsetsPerTrigger", "25").load())
    query = (stream.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start(str(tmp_path / "table")))
    query.awaitTermination()
    assert query.exception() is None
    assert _rows(spark.read.format("delta").load(str(tmp_path / "table"))) == expected


def test_batch_write_into_a_topic(spark, kafka_listener):
    broker, bootstrap = kafka_listener
    topic = _topic(broker, 2)
    rows = [(f"k{i}", f"value-{i}", i % 2) for i in range(30)]
    header = "array(named_struct('key', 'source', 'value', CAST('spark' AS BINARY))) AS headers"
    df = spark.createDataFrame(rows, "key string, value string, partition int").selectExpr(
        "key", "value", "partition", header)
    (df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("includeHeaders", "true").save())
    got = []
    for p in range(2):
        for r in read_partition(broker.url, topic, p):
            got.append((base64.b64decode(r["key"]).decode(), base64.b64decode(r["value"]).decode(), p))
            assert [(h["key"], base64.b64decode(h["value"])) for h in r["headers"]] == [("source", b"spark")]
    assert sorted(got) == sorted(rows)
