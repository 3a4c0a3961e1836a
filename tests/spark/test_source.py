"""The ``lakelog`` PySpark data source against a real broker: batch and streaming reads, the sink.

Each test starts its own broker (``client`` fixture) and uses its own topic(s); the SparkSession is the
session-scoped ``spark`` fixture. Streaming queries use ``foreachBatch`` to see each micro-batch's rows
and ``processAllAvailable`` to wait for them.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from lakelog.protocol.partitioner import partition_for_key
from lakelog.log_tables.schema import HEADERS_TYPE
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.spark import source
from lakelog.spark.source import (LakelogStreamReader, OffsetRangePartition, SourceOptions, kafka_schema,
                                  rate_limit, split_ranges)
from lakelog.spark.sql import KAFKA_SOURCE_SCHEMA, partition_logs_from_gateway, topic_dataframe

T0 = 1_700_000_000_000  # CreateTime of record i is T0 + 1000 * i


@pytest.fixture(scope="module")
def lakelog_spark(spark):
    source.register(spark)
    return spark


def produce(client, topic: str, partition: int, start: int, n: int, *, headers: bool = False) -> None:
    """Records start..start+n-1 of a partition: key k{i}, value {topic}:{partition}:{i}, CreateTime T0+1000*i."""
    cols = {
        "key": pa.array([b"k%d" % i for i in range(start, start + n)]),
        "value": pa.array([f"{topic}:{partition}:{i}".encode() for i in range(start, start + n)]),
        "timestamp": pa.array([T0 + 1000 * i for i in range(start, start + n)], pa.int64()),
    }
    if headers:
        cols["headers"] = pa.array([[{"key": "i", "value": b"%d" % i}] if i % 2 else [] for i in range(start, start + n)],
                                   HEADERS_TYPE)
    client.produce_arrow(topic, partition, pa.table(cols))


def reader(spark, client, **options):
    r = spark.read.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
    for k, v in options.items():
        r = r.option(k, v)
    return r


def rows(df) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())


def freeze(value):
    """A collected value as something hashable: Rows and lists as tuples, bytearrays as bytes."""
    if isinstance(value, (list, tuple)):  # Row is a tuple
        return tuple(freeze(v) for v in value)
    return bytes(value) if isinstance(value, bytearray) else value


def bag(df) -> Counter:
    """The rows of ``df`` as a multiset."""
    return Counter(freeze(r) for r in df.collect())


def expected(topic: str, ranges: dict[int, range]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, rng in ranges.items() for o in rng)


# -- batch --------------------------------------------------------------------------------------------

@pytest.mark.spark
def test_batch_reads_every_starting_and_ending_offset_form(lakelog_spark, client, create_topic, topic_name):
    spark, t = lakelog_spark, topic_name
    create_topic(t, partitions=2)
    produce(client, t, 0, 0, 10)
    produce(client, t, 0, 10, 10)  # two files in partition 0
    produce(client, t, 1, 0, 5)

    df = reader(spark, client, subscribe=t).load()
    assert df.schema == kafka_schema(include_headers=False)
    got = df.collect()
    assert sorted((r.partition, r.offset) for r in got) == [(0, i) for i in range(20)] + [(1, i) for i in range(5)]
    first = min((r for r in got if r.partition == 0), key=lambda r: r.offset)
    assert (bytes(first.key), bytes(first.value), first.topic, first.timestampType) == (b"k0", f"{t}:0:0".encode(), t, 0)
    assert int(first.timestamp.timestamp() * 1000) == T0

    # a Kafka job's options give the same rows as reading the tables with Delta (lakelog.spark.sql)
    kafka_style = (reader(spark, client, subscribe=t, startingOffsets="earliest", endingOffsets="latest",
                          failOnDataLoss="true", includeHeaders="true").load())
    tables = topic_dataframe(spark, partition_logs_from_gateway(client, t))
    assert kafka_style.schema == KAFKA_SOURCE_SCHEMA == tables.schema
    assert bag(kafka_style) == bag(tables)

    # JSON offsets: -2 earliest, -1 latest
    df = reader(spark, client, subscribe=t, startingOffsets=f'{{"{t}": {{"0": 3, "1": -2}}}}',
                endingOffsets=f'{{"{t}": {{"0": 12, "1": -1}}}}').load()
    assert rows(df) == expected(t, {0: range(3, 12), 1: range(0, 5)})
    # assign: only the assigned partitions
    df = reader(spark, client, assign=f'{{"{t}": [1]}}', startingOffsets=f'{{"{t}": {{"1": 2}}}}').load()
    assert rows(df) == expected(t, {1: range(2, 5)})
    # timestamps: the first offset with a timestamp >= the time (global, then per partition)
    df = reader(spark, client, subscribe=t, startingTimestamp=str(T0 + 4000), endingTimestamp=str(T0 + 15500)).load()
    assert rows(df) == expected(t, {0: range(4, 16), 1: range(4, 5)})
    df = reader(spark, client, subscribe=t,
                startingOffsetsByTimestamp=f'{{"{t}": {{"0": {T0 + 18000}, "1": {T0}}}}}',
                endingOffsetsByTimestamp=f'{{"{t}": {{"0": {T0 + 99000}, "1": {T0 + 2000}}}}}').load()
    assert rows(df) == expected(t, {0: range(18, 20), 1: range(0, 2)})
    # no record that recent: "error" strategy fails, "latest" starts at the end
    with pytest.raises(Exception, match="has a timestamp >= "):
        reader(spark, client, subscribe=t, startingTimestamp=str(T0 + 10**9)).load().collect()
    df = reader(spark, client, subscribe=t, startingTimestamp=str(T0 + 19000),
                startingOffsetsByTimestampStrategy="latest").load()
    assert rows(df) == expected(t, {0: range(19, 20)})
    # errors reach the user as Spark errors with the Kafka source's wording
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        reader(spark, client, subscribe=t, startingOffsets="latest").load().collect()
    with pytest.raises(Exception, match="lakelog.bootstrap.servers"):
        spark.read.format("lakelog").option("subscribe", t).load().collect()
    # minPartitions splits the large range over several tasks, rows unchanged
    df = reader(spark, client, subscribe=t, minPartitions="6").load()
    assert df.rdd.getNumPartitions() >= 5
    assert rows(df) == expected(t, {0: range(20), 1: range(5)})


def plan(client, **options) -> list[OffsetRangePartition]:
    """What a batch read plans (the data source as Spark's planner worker drives it), without Spark."""
    ds = source.LakelogDataSource({"lakelog.bootstrap.servers": client.urls[0], **options})
    return ds.reader(ds.schema()).partitions()


def test_batch_planning_errors_read_like_the_kafka_sources(client, create_topic, topic_name):
    t = topic_name
    create_topic(t, partitions=2)
    produce(client, t, 0, 0, 3)
    cases = [
        (dict(subscribe=t, startingOffsets="latest"), "starting offset can't be latest for batch queries"),
        (dict(subscribe=t, endingOffsets="earliest"), "ending offset can't be earliest for batch queries"),
        (dict(subscribe=t, startingOffsets=f'{{"{t}": {{"0": -1, "1": 0}}}}'), "can't be latest"),
        (dict(subscribe=t, startingOffsets=f'{{"{t}": {{"0": 0}}}}'), "you must specify all topic partitions"),
        (dict(subscribe=t, assign=f'{{"{t}": [0]}}'), "Exactly one of the options"),
        (dict(subscribe=t, startingOffsets=f'{{"{t}": {{"0": 3, "1": 0}}}}',
              endingOffsets=f'{{"{t}": {{"0": 1, "1": 0}}}}'), "Beginning offset 3 is after the ending offset 1"),
        (dict(assign=f'{{"{t}": [7]}}'), "Assigned partitions do not exist"),
        (dict(subscribe=t, maxOffsetsPerTrigger="x"), None),  # streaming-only options are ignored in batch
    ]
    for options, message in cases:
        if message is None:
            plan(client, **options)
            continue
        with pytest.raises(Exception, match=message):
            plan(client, **options)
    # a topic that does not exist (yet) has nothing to read, as with Kafka's subscribe
    assert plan(client, subscribe=t + "-nope") == []
    log = client.topic_logs(t)[0]
    assert plan(client, subscribe=t) == [OffsetRangePartition(t, 0, log["table_uri"], 0, 3, lake_end_offset=3,
                                                              table_id=log["table_id"])]
    assert log["table_id"]  # the leader's table id travels with the range (lakelog.read.mode=auto checks it)


@pytest.mark.spark
def test_include_headers_and_several_topics(lakelog_spark, client, create_topic, topic_name):
    spark = lakelog_spark
    a, b, other = f"{topic_name}-a", f"{topic_name}-b", f"x{topic_name}"
    for t in (a, b, other):
        create_topic(t, partitions=1)
        produce(client, t, 0, 0, 4, headers=True)

    without = reader(spark, client, subscribe=f"{a},{b}").load()
    assert "headers" not in without.columns
    assert rows(without) == sorted(expected(a, {0: range(4)}) + expected(b, {0: range(4)}))

    df = reader(spark, client, subscribePattern=f"{topic_name}-.*", includeHeaders="true").load()
    assert df.schema == KAFKA_SOURCE_SCHEMA
    got = {(r.topic, r.offset): r.headers for r in df.collect()}
    assert set(got) == {(t, i) for t in (a, b) for i in range(4)}
    assert got[(a, 0)] is None  # a record without headers: null, as Kafka's source
    assert [(h.key, bytes(h.value)) for h in got[(b, 3)]] == [("i", b"3")]


# -- streaming ----------------------------------------------------------------------------------------

class Batches:
    """A foreachBatch function that keeps each micro-batch's (topic, partition, offset, value) rows."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[tuple[str, int, int, bytes]]]] = []

    def __call__(self, df, batch_id: int) -> None:
        got = [(r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect()]
        self.batches.append((batch_id, got))

    @property
    def rows(self) -> list[tuple[str, int, int]]:
        return [(t, p, o) for _, b in self.batches for t, p, o, _ in b]

    def offsets_in_order(self, topic: str, partition: int) -> list[int]:
        """The partition's offsets in the order the batches delivered them (and within a batch, by offset)."""
        out = []
        for _, b in sorted(self.batches):
            out += sorted(o for t, p, o, _ in b if (t, p) == (topic, partition))
        return out


def start_stream(spark, client, sink: Batches, checkpoint, *, once: bool = False, **options):
    r = spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
    for k, v in options.items():
        r = r.option(k, v)
    w = r.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    w = w.trigger(availableNow=True) if once else w.trigger(processingTime="0 seconds")
    return w.start()


def source_offsets(progress: dict, key: str) -> dict:
    value = progress["sources"][0][key]
    if value in (None, "None", "null"):  # the first batch of a query has no start offset
        return {}
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.spark
def test_max_offsets_per_trigger_caps_batches_also_after_a_restart(lakelog_spark, client, topic_name, tmp_path):
    spark, t = lakelog_spark, topic_name
    client.create_topic(t, partitions=3)
    for p, n in enumerate((40, 30, 20)):
        produce(client, t, p, 0, n)
    sink = Batches()
    q = start_stream(spark, client, sink, tmp_path / "ckpt", subscribe=t, startingOffsets="earliest",
                     maxOffsetsPerTrigger="25")
    try:
        q.processAllAvailable()
        progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    finally:
        q.stop()
    assert [p["numInputRows"] for p in progress] == [len(b) for _, b in sink.batches if b]
    assert all(p["numInputRows"] <= 25 for p in progress) and len(progress) >= 4
    assert sorted(sink.rows) == expected(t, {0: range(40), 1: range(30), 2: range(20)})
    for p, n in enumerate((40, 30, 20)):
        assert sink.offsets_in_order(t, p) == list(range(n))
    # each batch starts where the previous one ended
    for before, after in zip(progress, progress[1:]):
        assert source_offsets(after, "startOffset") == source_offsets(before, "endOffset")

    # Restart from the checkpoint: Spark tells the reader the last offsets (setLatestSeenOffset ->
    # partitions(X, X)), so the cap applies from there: nothing read twice, nothing skipped.
    for p in range(3):
        produce(client, t, p, (40, 30, 20)[p], 20)
    sink2 = Batches()
    q = start_stream(spark, client, sink2, tmp_path / "ckpt", subscribe=t, startingOffsets="earliest",
                     maxOffsetsPerTrigger="25")
    try:
        q.processAllAvailable()
        progress2 = [p for p in q.recentProgress if p["numInputRows"] > 0]
    finally:
        q.stop()
    assert all(p["numInputRows"] <= 25 for p in progress2) and len(progress2) >= 3
    assert sorted(sink2.rows) == expected(t, {0: range(40, 60), 1: range(30, 50), 2: range(20, 40)})
    assert source_offsets(progress2[0], "startOffset") == {t: {"0": 40, "1": 30, "2": 20}}


@pytest.mark.spark
def test_available_now_reads_what_was_there_in_batches_of_the_limit_and_commits_the_group(
        lakelog_spark, client, topic_name, tmp_path):
    spark, t, group = lakelog_spark, topic_name, f"{topic_name}-g"
    client.create_topic(t, partitions=3)
    for p, n in enumerate((40, 30, 20)):
        produce(client, t, p, 0, n)

    class ProduceDuringTheRun(Batches):
        def __call__(self, df, batch_id: int) -> None:
            super().__call__(df, batch_id)
            if len(self.batches) == 1:  # arrive during the run: they wait for the next one
                produce(client, t, 0, 40, 5)

    def run(sink: Batches) -> list[int]:
        q = start_stream(spark, client, sink, tmp_path / "ckpt", once=True, subscribe=t, startingOffsets="earliest",
                         maxOffsetsPerTrigger="25", minOffsetsPerTrigger="1000", maxTriggerDelay="1h",
                         **{"group.id": group})
        assert q.awaitTermination(180), "the availableNow query did not stop by itself"
        assert q.exception() is None
        return [len(b) for _, b in sink.batches if b]

    sink = ProduceDuringTheRun()
    # several batches of at most 25 (Spark's single-batch fallback would read 25 and stop); the min
    # holds nothing back in an availableNow run
    assert run(sink) == [25, 25, 25, 15]
    assert sorted(sink.rows) == expected(t, {0: range(40), 1: range(30), 2: range(20)})
    for p, n in enumerate((40, 30, 20)):
        assert sink.offsets_in_order(t, p) == list(range(n))
    # the group has the run's end offsets once it stopped
    assert {(o["partition"], o["offset"]) for o in client.committed_offsets(group, t)} == {(0, 40), (1, 30), (2, 20)}

    later = Batches()
    assert run(later) == [5]
    assert sorted(later.rows) == expected(t, {0: range(40, 45)})
    assert {(o["partition"], o["offset"]) for o in client.committed_offsets(group, t)} == {(0, 45), (1, 30), (2, 20)}


@pytest.mark.spark
def test_records_appended_during_the_stream_arrive_in_later_batches_in_offset_order(
        lakelog_spark, client, topic_name, tmp_path):
    spark, t = lakelog_spark, topic_name
    client.create_topic(t, partitions=2)
    produce(client, t, 0, 0, 5)
    sink = Batches()
    q = start_stream(spark, client, sink, tmp_path / "ckpt", subscribe=t, startingOffsets="earliest")
    rounds, per_round = 6, 7

    def producer():
        for r in range(rounds):
            for p in range(2):
                produce(client, t, p, (5 if p == 0 else 0) + r * per_round, per_round)
            time.sleep(0.4)

    thread = threading.Thread(target=producer)
    try:
        q.processAllAvailable()  # the query is up and has read what was there
        assert sorted(sink.rows) == expected(t, {0: range(5)})
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), "the producer thread did not finish in 60 s"
        q.processAllAvailable()
        progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    finally:
        q.stop()
    ends = {0: 5 + rounds * per_round, 1: rounds * per_round}
    for p, n in ends.items():
        assert sink.offsets_in_order(t, p) == list(range(n))  # every record once, in offset order
    assert len([b for _, b in sink.batches if b]) >= 3  # later records came in later batches
    # no batch holds anything outside [its start, its end): never at or past the end offsets it was planned with
    by_batch = dict(sink.batches)
    for prog in progress:
        start, end = source_offsets(prog, "startOffset"), source_offsets(prog, "endOffset")
        for topic, partition, offset, value in by_batch[prog["batchId"]]:
            assert start.get(topic, {}).get(str(partition), 0) <= offset < end[topic][str(partition)]
            assert value == f"{t}:{partition}:{offset}".encode()


@pytest.mark.spark
def test_subscribe_pattern_picks_up_new_topics_from_their_earliest_offset(lakelog_spark, client, topic_name, tmp_path):
    spark = lakelog_spark
    a, b, other = f"{topic_name}-a", f"{topic_name}-b", f"x-{topic_name}"
    client.create_topic(a, partitions=1)
    produce(client, a, 0, 0, 3, headers=True)
    sink = Batches()
    q = start_stream(spark, client, sink, tmp_path / "ckpt", subscribePattern=f"{topic_name}-.*",
                     startingOffsets="earliest", includeHeaders="true")
    try:
        q.processAllAvailable()
        assert sorted(sink.rows) == expected(a, {0: range(3)})
        client.create_topic(b, partitions=2)
        client.create_topic(other, partitions=1)
        produce(client, b, 0, 0, 4)
        produce(client, b, 1, 0, 2)
        produce(client, other, 0, 0, 2)
        produce(client, a, 0, 3, 2)
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(sink.rows) == sorted(expected(a, {0: range(5)}) + expected(b, {0: range(4), 1: range(2)}))


@pytest.mark.spark
def test_fail_on_data_loss(lakelog_spark, broker, client, create_topic, topic_name, tmp_path):
    spark, t = lakelog_spark, topic_name
    create_topic(t, partitions=1)
    produce(client, t, 0, 0, 10)
    produce(client, t, 0, 10, 10)
    sink = Batches()
    q = start_stream(spark, client, sink, tmp_path / "ckpt", once=True, subscribe=t, startingOffsets="earliest")
    try:
        assert q.awaitTermination(120), "the once query did not finish in 120 s"
    finally:
        q.stop()
    assert sorted(sink.rows) == expected(t, {0: range(20)})

    # Retention removes offsets 0-24 while the query is down. Only one writer per table: stop the
    # broker, delete with delta-rs, start it again (same port, log dir and chroot).
    produce(client, t, 0, 20, 10)
    table_uri = client.topic_logs(t)[0]["table_uri"]
    broker.stop()
    DeltaTable(table_uri).delete("offset < 25")
    broker.start()
    assert client.partition_offsets(t, 0) == {"beginning_offset": 25, "end_offset": 30, "last_stable_offset": 30}

    # batch: the driver sees that the offsets asked for are gone
    start10 = f'{{"{t}": {{"0": 10}}}}'
    with pytest.raises(Exception, match="offsets 10 to 24 \\(15 records\\) are no longer in the log"):
        reader(spark, client, subscribe=t, startingOffsets=start10).load().collect()
    df = reader(spark, client, subscribe=t, startingOffsets=start10, failOnDataLoss="false").load()
    assert rows(df) == expected(t, {0: range(25, 30)})

    # streaming: the restarted query needs 20-29; the executors find 20-24 gone
    q = start_stream(spark, client, Batches(), tmp_path / "ckpt", subscribe=t)
    with pytest.raises(Exception, match="offsets 20 to 24 \\(5 records\\) are no longer in the log"):
        q.processAllAvailable()
    q.stop()
    sink = Batches()
    q = start_stream(spark, client, sink, tmp_path / "ckpt", subscribe=t, failOnDataLoss="false")
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(sink.rows) == expected(t, {0: range(25, 30)})


# -- sink -----------------------------------------------------------------------------------------------

@pytest.mark.spark
def test_sink_round_trips_a_dataframe_through_topics(lakelog_spark, client, create_topic, topic_name, tmp_path):
    spark = lakelog_spark
    out, side, copy = f"{topic_name}-out", f"{topic_name}-side", f"{topic_name}-copy"
    create_topic(out, partitions=3)
    create_topic(side, partitions=1)
    # the exactly-once writeStream writes in transactions, which need a segment tail (lake.commit.interval.ms > 0)
    create_topic(copy, partitions=2, configs={"lake.commit.interval.ms": "200"})
    data = []
    for i in range(60):
        key = None if i % 5 == 0 else f"key-{i % 7}"
        headers = [("h", b"%d" % i)] if i % 3 == 0 else None
        partition = 2 if i % 11 == 0 else None
        topic = side if i % 10 == 9 else out
        data.append((topic, key, f"value-{i}", headers, partition))
    df = spark.createDataFrame(
        data, "topic string, key string, value string, headers array<struct<key: string, value: binary>>, partition int")
    df.write.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0]).mode("append").save()

    back = reader(spark, client, subscribe=f"{out},{side}", includeHeaders="true").load().collect()
    assert len(back) == 60
    sent = {v: (t, k, h, p) for t, k, v, h, p in data}
    for r in back:
        topic, key, headers, partition = sent[bytes(r.value).decode()]
        assert r.topic == topic
        assert (None if r.key is None else bytes(r.key).decode()) == key
        assert (None if r.headers is None else [(h.key, bytes(h.value)) for h in r.headers]) == headers
        if partition is not None:
            assert r.partition == partition
        elif key is not None:
            assert r.partition == partition_for_key(key.encode(), 3 if topic == out else 1)  # Kafka's murmur2

    # the topic option overrides a topic column; a streaming query writes with writeStream
    spark.createDataFrame([("t-ignored", b"x")], "topic string, value binary").write.format("lakelog") \
        .option("lakelog.bootstrap.servers", client.urls[0]).option("topic", side).mode("append").save()
    assert reader(spark, client, subscribe=side).load().where("value = X'78'").count() == 1
    q = (spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
         .option("subscribe", out).option("startingOffsets", "earliest").load()
         .selectExpr("key", "value", "partition % 2 AS partition")
         .writeStream.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0]).option("topic", copy)
         .option("checkpointLocation", str(tmp_path / "copy-ckpt")).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120), "the availableNow query did not finish in 120 s"
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    original = reader(spark, client, subscribe=out).load().selectExpr("key", "value", "partition % 2 AS p")
    copied = reader(spark, client, subscribe=copy, **{"lakelog.read.tail": "true", "isolation.level": "read_committed"}) \
        .load().selectExpr("key", "value", "partition AS p")
    copied_rows = bag(copied)
    assert copied_rows == bag(original) and sum(copied_rows.values()) == 54

    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        spark.createDataFrame([("k",)], "key string").write.format("lakelog") \
            .option("lakelog.bootstrap.servers", client.urls[0]).option("topic", out).mode("append").save()
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        df.write.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0]).mode("overwrite").save()


# -- planning logic without Spark (the reader objects as Spark's Python runners drive them) --------------

class FakeClient:
    def __init__(self) -> None:
        self.commits: list[tuple] = []

    def commit_offsets(self, group_id, offsets, transaction_app_id, transaction_version):
        self.commits.append((group_id, offsets, transaction_app_id, transaction_version))


class FakeCluster:
    def __init__(self, states: dict) -> None:
        self.states = states
        self.client = FakeClient()

    def partitions(self):
        return dict(self.states)

    def close(self) -> None:
        pass


def state(topic, partition, lso, hw, uri="/nowhere"):
    return PartitionLogInfo(topic=topic, partition=partition, table_uri=uri, log_start_offset=lso,
                            lake_end_offset=hw, log_end_offset=hw, high_watermark=hw, leader_epoch=0, timestamp_type=0)


def stream_reader(states: dict, **options) -> LakelogStreamReader:
    opts = SourceOptions.parse({"lakelog.bootstrap.servers": "localhost:1", **options}, streaming=True)
    r = LakelogStreamReader(opts, kafka_schema())
    r._cluster = FakeCluster(states)
    return r


def test_stream_reader_admission_control_without_spark():
    states = {("t", 0): state("t", 0, 0, 30), ("t", 1): state("t", 1, 5, 8)}
    r = stream_reader(states, subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="10")
    assert r.getDefaultReadLimit() == ReadMaxRows(10)
    start = r.initialOffset()  # Spark starts a new query's first batch at the initial offsets
    assert start == {"t": {"0": 0, "1": 5}}
    first = r.latestOffset(start, ReadMaxRows(10))
    assert first == {"t": {"0": 9, "1": 6}}  # 10 offsets split 30:3 by largest remainder
    assert json.dumps(first) == '{"t": {"0": 9, "1": 6}}'  # stable text: Spark compares offsets as JSON
    assert r.partitions(start, first) == [
        OffsetRangePartition("t", 0, "/nowhere", 0, 9, lake_end_offset=30),
        OffsetRangePartition("t", 1, "/nowhere", 5, 6, lake_end_offset=8)]
    assert r.latestOffset(first, ReadMaxRows(10)) == {"t": {"0": 18, "1": 7}}
    # ReadAllAvailable: Spark wants everything, whatever the options say
    assert r.latestOffset(first, ReadAllAvailable()) == {"t": {"0": 30, "1": 8}}
    # after a restart Spark passes the checkpoint's last offsets as the start
    r2 = stream_reader(states, subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="10")
    assert r2.latestOffset({"t": {"0": 25, "1": 8}}, r2.getDefaultReadLimit()) == {"t": {"0": 30, "1": 8}}
    assert stream_reader(states, subscribe="t").getDefaultReadLimit() == ReadAllAvailable()

    # new partitions start at offset 0 (their earliest); a partition that is gone is data loss
    grown = {**states, ("u", 0): state("u", 0, 0, 4)}
    r3 = stream_reader(grown, subscribePattern="[tu]")
    with pytest.raises(source.SourceError, match="v-0 are gone"):
        r3.partitions({"t": {"0": 30, "1": 8}, "v": {"0": 1}}, {"t": {"0": 30, "1": 8}, "u": {"0": 4}})
    r4 = stream_reader(grown, subscribePattern="[tu]", failOnDataLoss="false")
    ranges = r4.partitions({"t": {"0": 30, "1": 8}, "v": {"0": 1}}, {"t": {"0": 30, "1": 8}, "u": {"0": 4}})
    assert ranges == [OffsetRangePartition("u", 0, "/nowhere", 0, 4, lake_end_offset=4)]
    # the end below the start (log truncated): data loss, nothing read for it
    assert r4.partitions({"t": {"0": 30, "1": 8}}, {"t": {"0": 20, "1": 8}}) == []


def test_stream_reader_min_offsets_and_available_now_without_spark():
    states = {("t", 0): state("t", 0, 0, 30), ("t", 1): state("t", 1, 5, 8)}
    # minOffsetsPerTrigger: no batch until enough offsets are there (or maxTriggerDelay passed)
    r5 = stream_reader(states, subscribe="t", startingOffsets="earliest", minOffsetsPerTrigger="100",
                       maxTriggerDelay="1h")
    assert r5.getDefaultReadLimit() == ReadMinRows(100)
    assert r5.latestOffset(r5.initialOffset(), ReadMinRows(100)) == r5.initialOffset()
    assert r5.latestOffset(r5.initialOffset(), ReadAllAvailable()) == {"t": {"0": 30, "1": 8}}
    r6 = stream_reader(states, subscribe="t", startingOffsets="earliest", minOffsetsPerTrigger="100",
                       maxTriggerDelay="0ms")
    assert r6.latestOffset(r6.initialOffset(), ReadMinRows(100)) == {"t": {"0": 30, "1": 8}}
    # both: the limit is the max; the min still holds batches back
    r7 = stream_reader(states, subscribe="t", startingOffsets="earliest", minOffsetsPerTrigger="100",
                       maxOffsetsPerTrigger="20", maxTriggerDelay="1h")
    assert r7.getDefaultReadLimit() == ReadMaxRows(20)
    assert r7.latestOffset(r7.initialOffset(), ReadMaxRows(20)) == r7.initialOffset()

    # availableNow: the run ends at the offsets there when it started, in batches of the limit; the
    # min does not hold batches back; records and partitions that arrive later wait for the next run
    r8 = stream_reader(states, subscribe="t", startingOffsets="earliest", minOffsetsPerTrigger="100",
                       maxOffsetsPerTrigger="20", maxTriggerDelay="1h")
    r8.prepareForTriggerAvailableNow()
    r8._cluster.states = {("t", 0): state("t", 0, 0, 50), ("t", 1): state("t", 1, 5, 8),
                          ("t", 2): state("t", 2, 0, 5)}
    first = r8.latestOffset(r8.initialOffset(), ReadMaxRows(20))
    assert first == {"t": {"0": 18, "1": 7}}
    second = r8.latestOffset(first, ReadMaxRows(20))
    assert second == {"t": {"0": 30, "1": 8}}
    assert r8.latestOffset(second, ReadMaxRows(20)) == second  # Spark ends the run
    # a restarted availableNow query starts from its checkpoint: startingOffsets (here JSON naming only
    # partition 0 of a topic that has 2) are not resolved again, so they cannot fail the restart
    r9 = stream_reader(states, subscribe="t", startingOffsets='{"t": {"0": 0}}')
    r9.prepareForTriggerAvailableNow()
    assert r9.latestOffset({"t": {"0": 10, "1": 6}}, ReadAllAvailable()) == {"t": {"0": 30, "1": 8}}


def test_commit_sends_the_group_offsets_once_per_batch(monkeypatch, caplog):
    states = {("t", 0): state("t", 0, 0, 30), ("t", 1): state("t", 1, 0, 8)}
    monkeypatch.setattr(source.stream, "CAN_COMMIT_OFFSETS", True)
    r = stream_reader(states, subscribe="t", **{"group.id": "billing"})
    r.commit({"t": {"1": 8, "0": 12}})
    r.commit({"t": {"0": 12, "1": 8}})  # the same batch again (e.g. after a restart): no second call
    r.commit({"t": {"0": 30, "1": 8}})
    assert r._cluster.client.commits == [
        ("billing", [{"topic": "t", "partition": 0, "offset": 12}, {"topic": "t", "partition": 1, "offset": 8}],
         "billing", 20),
        ("billing", [{"topic": "t", "partition": 0, "offset": 30}, {"topic": "t", "partition": 1, "offset": 8}],
         "billing", 38),
    ]
    # each latestOffset(start, limit) commits its start: the previous batch is done (not at a new query's first)
    g = stream_reader(states, subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="10", **{"group.id": "g2"})
    first = g.latestOffset(g.initialOffset(), ReadMaxRows(10))
    assert first == {"t": {"0": 8, "1": 2}} and g._cluster.client.commits == []
    g.latestOffset(first, ReadMaxRows(10))
    assert g._cluster.client.commits == [
        ("g2", [{"topic": "t", "partition": 0, "offset": 8}, {"topic": "t", "partition": 1, "offset": 2}], "g2", 10)]
    no_group = stream_reader(states, subscribe="t")
    no_group.commit({"t": {"0": 1}})
    assert no_group._cluster.client.commits == []
    monkeypatch.setattr(source.stream, "CAN_COMMIT_OFFSETS", False)
    old_client = stream_reader(states, subscribe="t", **{"group.id": "g"})
    with caplog.at_level("WARNING", logger="lakelog.spark.source"):
        old_client.commit({"t": {"0": 1}})
    assert old_client._cluster.client.commits == [] and "no commit_offsets" in caplog.text


def test_rate_limit_and_split_ranges():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 100, ("t", 3): 5}  # t-3 is new: from 0
    end = rate_limit(start, latest, {}, 100)
    sizes = {tp: end[tp] - start.get(tp, 0) for tp in end}
    assert sum(sizes.values()) == 100 and sizes[("t", 2)] == 0
    assert sizes[("t", 0)] > sizes[("t", 1)] > 0 and all(end[tp] <= latest[tp] for tp in end)
    assert rate_limit(start, latest, {}, 10_000) == latest
    # offsets retention removed do not count against the limit
    assert rate_limit({("t", 0): 0}, {("t", 0): 100}, {("t", 0): 95}, 10) == {("t", 0): 100}

    big = OffsetRangePartition("t", 0, "u", 0, 1000)
    small = OffsetRangePartition("t", 1, "u", 0, 10)
    assert split_ranges([big, small]) == [big, small]
    parts = split_ranges([big, small], min_partitions=5)
    assert len(parts) == 5 and parts[-1] == small
    assert [(p.start, p.end) for p in parts[:4]] == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    parts = split_ranges([big], max_records_per_partition=300)
    assert [(p.start, p.end) for p in parts] == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    assert split_ranges([OffsetRangePartition("t", 0, "u", 5, 5)], min_partitions=3) == []


def test_options_are_checked_like_the_kafka_sources():
    base = {"lakelog.bootstrap.servers": "h:1"}
    with pytest.raises(source.SourceOptionError, match="ending offset not valid|not valid in streaming"):
        SourceOptions.parse({**base, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(source.SourceOptionError, match="must be 'true' or 'false'"):
        SourceOptions.parse({**base, "subscribe": "t", "failOnDataLoss": "maybe"}, streaming=True)
    with pytest.raises(source.SourceOptionError, match="Option 'assign' must be JSON"):
        SourceOptions.parse({**base, "assign": "t:0"}, streaming=False)
    with pytest.raises(source.SourceOptionError, match="kafka.bootstrap.servers"):
        SourceOptions.parse({"subscribe": "t"}, streaming=False)
    opts = SourceOptions.parse({**base, "SUBSCRIBE": " a, b ", "maxoffsetspertrigger": "5", "maxTriggerDelay": "30s",
                                "startingOffsets": '{"a": {"0": -2}, "b": {"1": 7}}'}, streaming=True)
    assert opts.subscribe == ("a", "b") and opts.max_offsets_per_trigger == 5 and opts.max_trigger_delay_ms == 30_000
    assert opts.starting_offsets == {("a", 0): -2, ("b", 1): 7} and opts.fail_on_data_loss and not opts.include_headers
    assert SourceOptions.parse({**base, "subscribe": "t"}, streaming=True).starting_offsets == "latest"
    assert SourceOptions.parse({**base, "subscribe": "t"}, streaming=False).starting_offsets == "earliest"


def test_read_partition_shapes_rows_like_kafka_and_handles_data_loss(tmp_path, caplog):
    from lakelog.config import TopicConfig
    from lakelog.log_tables.partition_log import PartitionLog

    log = PartitionLog.open(topic="t", partition=3, table_uri=tmp_path / "t-3", tail_cache_max_bytes=0,
                            config=TopicConfig(lake_commit_interval_ms=0))  # appends are Delta commits
    for base in (0, 5):
        log.append(pa.table({"key": pa.array([b"k%d" % i for i in range(base, base + 5)]),
                             "value": pa.array([b"v%d" % i for i in range(base, base + 5)]),
                             "headers": pa.array([[{"key": "i", "value": b"x"}] if i % 2 else [] for i in range(base, base + 5)],
                                                 HEADERS_TYPE),
                             "timestamp": pa.array([T0 + i for i in range(base, base + 5)], pa.int64())}))
    part = OffsetRangePartition("t", 3, log.table_uri, 2, 8, timestamp_type=1)
    batches = list(source.read_partition(part, kafka_schema(True), fail_on_data_loss=True, batch_rows=2))
    table = pa.Table.from_batches(batches)
    assert table.schema.names == KAFKA_SOURCE_SCHEMA.fieldNames()
    assert table["offset"].to_pylist() == list(range(2, 8))
    assert set(table["topic"].to_pylist()) == {"t"} and set(table["partition"].to_pylist()) == {3}
    assert set(table["timestampType"].to_pylist()) == {1}
    assert table["headers"].to_pylist() == [None, [{"key": "i", "value": b"x"}]] * 3  # null when empty
    assert [b.num_rows for b in batches] == [2, 1, 2, 1]  # per file, each at most batch_rows

    DeltaTable(log.table_uri).delete("offset < 5")
    with pytest.raises(source.DataLossError, match="t-3: offsets 2 to 4 \\(3 records\\).*failOnDataLoss"):
        list(source.read_partition(part, kafka_schema(), fail_on_data_loss=True))
    with caplog.at_level("WARNING", logger="lakelog.spark.source"):
        table = pa.Table.from_batches(list(source.read_partition(part, kafka_schema(), fail_on_data_loss=False)))
    assert table["offset"].to_pylist() == [5, 6, 7] and "offsets 2 to 4" in caplog.text
    assert list(source.read_partition(None, kafka_schema(), fail_on_data_loss=True)) == []
    # PySpark 4.2 runs a batch that planned no range as one task with InputPartition(None)
    assert list(source.read_partition(InputPartition(None), kafka_schema(), fail_on_data_loss=True)) == []
