"""A Kafka job's options on format("lakelog"): aliases, consumer groups, options refused or ignored.

Spark's Kafka source options a job carries over unchanged (``kafka.bootstrap.servers``,
``kafka.group.id``, ``groupIdPrefix``, consumer tuning options) and the ones it refuses; checked on
the option parser without Spark, and end to end in a real SparkSession against a real broker.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from lakelog.spark import source
from lakelog.spark.source import LakelogStreamReader, SinkOptions, SourceOptions, kafka_schema

T0 = 1_700_000_000_000  # CreateTime of record i is T0 + 1000 * i
BASE = {"lakelog.bootstrap.servers": "h:1", "subscribe": "t"}


def produce(client, topic: str, partition: int, start: int, n: int) -> None:
    """Records start..start+n-1 of a partition: value {partition}:{i}, CreateTime T0+1000*i."""
    client.produce_arrow(topic, partition, pa.table({
        "key": pa.array([b"k%d" % i for i in range(start, start + n)]),
        "value": pa.array([f"{partition}:{i}".encode() for i in range(start, start + n)]),
        "timestamp": pa.array([T0 + 1000 * i for i in range(start, start + n)], pa.int64()),
    }))


# -- the options, without Spark ---------------------------------------------------------------------

def test_kafka_bootstrap_servers_is_an_alias():
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}, streaming=False)
    assert opts.bootstrap_servers == "h:1"
    same = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "LAKELOG.bootstrap.servers": " h:1 ",
                                "subscribe": "t"}, streaming=True)
    assert same.bootstrap_servers == "h:1"
    with pytest.raises(source.SourceOptionError, match="aliases.*differ"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "lakelog.bootstrap.servers": "h:2",
                             "subscribe": "t"}, streaming=False)
    with pytest.raises(source.SourceOptionError, match="'lakelog.bootstrap.servers' \\(or its alias "
                                                       "'kafka.bootstrap.servers'\\) must be specified"):
        SourceOptions.parse({"subscribe": "t"}, streaming=False)
    assert SinkOptions.parse({"kafka.bootstrap.servers": "h:3"}).bootstrap_servers == "h:3"


def test_unknown_options_are_refused_naming_the_known_ones():
    with pytest.raises(source.SourceOptionError) as e:
        SourceOptions.parse({**BASE, "startingOffset": "earliest"}, streaming=False)  # a typo
    assert "Unknown option 'startingoffset' for the lakelog source" in str(e.value)
    assert "startingOffsets" in str(e.value) and "lakelog.read.tail" in str(e.value)
    # Kafka client security options are refused, not silently dropped
    with pytest.raises(source.SourceOptionError, match="Unknown options 'kafka.sasl.mechanism', "
                                                       "'kafka.security.protocol'"):
        SourceOptions.parse({**BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"},
                            streaming=True)
    # the ones Spark's Kafka source refuses, with its reasons
    with pytest.raises(source.SourceOptionError, match="Instead set the source option 'startingOffsets'"):
        SourceOptions.parse({**BASE, "kafka.auto.offset.reset": "earliest"}, streaming=True)
    with pytest.raises(source.SourceOptionError, match="'value.deserializer' is not supported"):
        SourceOptions.parse({**BASE, "kafka.value.deserializer": "x"}, streaming=False)
    # the sink: its own list; Spark's stream writer options are known
    SinkOptions.parse({"lakelog.bootstrap.servers": "h:1", "checkpointLocation": "/tmp/c", "topic": "t"})
    with pytest.raises(source.SourceOptionError, match="Unknown option 'subscribe' for the lakelog sink"):
        SinkOptions.parse({"lakelog.bootstrap.servers": "h:1", "subscribe": "t"})
    with pytest.raises(source.SourceOptionError, match="'key.serializer' is not supported"):
        SinkOptions.parse({"lakelog.bootstrap.servers": "h:1", "kafka.key.serializer": "x"})


def test_sink_value_format_schema_and_its_subject_option():
    sink = {"lakelog.bootstrap.servers": "h:1", "topic": "t"}
    assert SinkOptions.parse(sink).value_format == "bytes"
    typed = SinkOptions.parse({**sink, "valueFormat": "SCHEMA", "value.schema.subject": " orders-value "})
    assert (typed.value_format, typed.value_subject) == ("schema", "orders-value")
    with pytest.raises(source.SourceOptionError, match="'valueFormat' must be one of bytes, schema, got 'avro'"):
        SinkOptions.parse({**sink, "valueFormat": "avro"})
    with pytest.raises(source.SourceOptionError, match="set valueFormat=schema and a non-empty subject"):
        SinkOptions.parse({**sink, "value.schema.subject": "orders-value"})
    with pytest.raises(source.SourceOptionError, match="set valueFormat=schema and a non-empty subject"):
        SinkOptions.parse({**sink, "valueFormat": "schema", "value.schema.subject": " "})


def test_kafka_consumer_tuning_options_are_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="lakelog.spark.source"):
        opts = SourceOptions.parse({**BASE, "kafka.max.poll.records": "500", "kafkaConsumer.pollTimeoutMs": "512"},
                                   streaming=True)
    assert opts.bootstrap_servers == "h:1"
    assert "'kafka.max.poll.records' tunes Spark's Kafka consumer" in caplog.text
    assert "'kafkaConsumer.pollTimeoutMs'" in caplog.text
    with caplog.at_level(logging.WARNING, logger="lakelog.spark.source"):
        SinkOptions.parse({"lakelog.bootstrap.servers": "h:1", "kafka.linger.ms": "5"})
    assert "'kafka.linger.ms'" in caplog.text


def test_the_group_a_stream_commits_to():
    schema = kafka_schema()
    assert SourceOptions.parse({**BASE, "kafka.group.id": "billing"}, streaming=True).group_id == "billing"
    assert SourceOptions.parse({**BASE, "group.id": "billing"}, streaming=True).group_id == "billing"
    with pytest.raises(source.SourceOptionError, match="aliases.*differ"):
        SourceOptions.parse({**BASE, "group.id": "a", "kafka.group.id": "b"}, streaming=True)
    with pytest.raises(source.SourceOptionError, match="'groupIdPrefix' is empty"):
        SourceOptions.parse({**BASE, "groupIdPrefix": " "}, streaming=True)

    fixed = LakelogStreamReader(SourceOptions.parse({**BASE, "kafka.group.id": "billing", "groupIdPrefix": "p"},
                                                    streaming=True), schema)
    assert fixed.group_id == "billing"  # a fixed group wins over the prefix, as in Spark's Kafka source
    runs = [LakelogStreamReader(SourceOptions.parse({**BASE, "groupIdPrefix": "etl"}, streaming=True), schema)
            for _ in range(2)]
    assert all(r.group_id.startswith("etl-") for r in runs) and runs[0].group_id != runs[1].group_id
    assert LakelogStreamReader(SourceOptions.parse(BASE, streaming=True), schema).group_id is None


class _Commits:
    """A gateway client stand-in that records commit_offsets calls (the reader's only use of it here)."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, list[dict]]] = []

    def commit_offsets(self, group, offsets, *, transaction_app_id, transaction_version):
        self.commits.append((group, offsets))

    def close(self) -> None:
        pass


def test_a_prefixed_group_gets_the_offsets_spark_processed():
    r = LakelogStreamReader(SourceOptions.parse({**BASE, "groupIdPrefix": "etl"}, streaming=True), kafka_schema())
    r._cluster._client = _Commits()
    r.commit({"t": {"0": 9}})
    assert r._cluster.client.commits == [(r.group_id, [{"topic": "t", "partition": 0, "offset": 9}])]


# -- end to end: a Kafka job in a real SparkSession -------------------------------------------------

@pytest.fixture(scope="module")
def lakelog_spark(spark):
    source.register(spark)
    return spark


@pytest.mark.spark
def test_a_kafka_jobs_options_work_unchanged(lakelog_spark, client, topic_name, tmp_path):
    spark, t = lakelog_spark, topic_name
    client.create_topic(t, partitions=2)
    produce(client, t, 0, 0, 30)
    produce(client, t, 1, 0, 10)
    seen: list[tuple[int, int]] = []

    def kafka_job(checkpoint, **options):
        """The stream as a Kafka job writes it: only the format name differs."""
        r = (spark.readStream.format("lakelog").option("kafka.bootstrap.servers", client.urls[0])
             .option("subscribe", t).option("kafka.max.poll.records", "500"))
        for k, v in options.items():
            r = r.option(k, v)
        sink = (lambda df, _: seen.extend((row.partition, row.offset) for row in df.select("partition", "offset")
                                          .collect()))
        return (r.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
                .trigger(processingTime="0 seconds").start())

    # startingOffsetsByTimestamp in a stream; the default trigger; the group gets the end when it stops
    q = kafka_job(tmp_path / "c1", startingOffsetsByTimestamp=f'{{"{t}": {{"0": {T0 + 20_000}, "1": {T0 + 5_000}}}}}',
                  maxOffsetsPerTrigger="4", **{"kafka.group.id": f"{t}-billing"})
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None
    assert sorted(seen) == [(0, o) for o in range(20, 30)] + [(1, o) for o in range(5, 10)]
    committed = {(o["partition"], o["offset"]) for o in client.committed_offsets(f"{t}-billing", t)}
    assert committed == {(0, 30), (1, 10)}

    # groupIdPrefix: a group of its own for this run, with the offsets it processed
    seen.clear()
    q = kafka_job(tmp_path / "c2", startingOffsets="earliest", groupIdPrefix=f"{t}-etl")
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert len(seen) == 40
    groups = [g for g in client.groups.list_groups() if g.startswith(f"{t}-etl-")]
    assert len(groups) == 1
    assert {(o["partition"], o["offset"]) for o in client.committed_offsets(groups[0], t)} == {(0, 30), (1, 10)}

    # an unknown option fails the query at once, naming the known ones
    with pytest.raises(Exception, match="Unknown option 'kafka.security.protocol'.*Known options"):
        (spark.read.format("lakelog").option("kafka.bootstrap.servers", client.urls[0]).option("subscribe", t)
         .option("kafka.security.protocol", "SSL").load().collect())
