"""Reads: filter pushdown of batch reads and ``lakelog.read.mode``.

- ``topic``/``partition``/``offset`` filters narrow the planned offset ranges on the driver (fewer Spark
  tasks, files of other offsets never opened); ``timestamp`` filters prune Delta files and row groups by
  their statistics and filter rows (Spark filters them too); all others stay with Spark. Every query is
  checked against the same filter applied by Spark to a cached, unfiltered read.
  (The pruning of files and row groups by timestamp statistics is tested without Spark in
  ``tests/log_tables/test_timestamp_pruning.py``.)
- ``lakelog.read.mode``: ``broker`` gives the rows ``direct`` gives; ``auto`` falls back to the leader when
  the table cannot be opened; other values are refused.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNull, LessThan, LessThanOrEqual,
                                    Not)

from lakelog.log_tables.schema import HEADERS_TYPE
from lakelog.spark import source
from lakelog.spark.source import (OffsetRangePartition, SourceOptionError, SourceOptions, TailFetch, kafka_schema,
                                  push_filters, read_partition)
from lakelog.spark.source.pushdown import MAX_OFFSET_INTERVALS, PushedFilters

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # ms
UTC = dt.timezone.utc


def at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC)


def us(ms: int) -> int:
    return ms * 1000


# -- sorting Spark's filters (no Spark needed) ---------------------------------------------------------

def test_push_filters_keeps_exact_ones_returns_timestamp_and_other_ones_to_spark():
    ge, lt = GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 20)
    part = In(("partition",), (0, 2, None))
    topic = EqualTo(("topic",), "a")
    ts_low, ts_high = GreaterThan(("timestamp",), at(T0)), LessThanOrEqual(("timestamp",), at(T0 + 5000))
    value, not_offset, null_key = EqualTo(("value",), b"x"), Not(EqualTo(("offset",), 3)), IsNull(("key",))
    filters = [ge, value, lt, part, topic, ts_low, not_offset, ts_high, null_key]
    pushed, rest = push_filters(filters)
    assert [id(f) for f in rest] == [id(f) for f in (value, ts_low, not_offset, ts_high, null_key)]  # same objects
    assert pushed.topics == {"a"} and pushed.offsets == ((10, 20),)
    assert pushed.timestamps == (us(T0) + 1, us(T0 + 5000))
    ranges = [OffsetRangePartition(t, p, f"/x/{t}-{p}", 0, 30, lake_end_offset=25) for t in "ab" for p in range(3)]
    narrowed = pushed.narrow(ranges)
    assert [(r.topic, r.partition, r.start, r.end, r.lake_end_offset) for r in narrowed] == [
        ("a", 0, 10, 20, 25), ("a", 2, 10, 20, 25)]

    # IN on offsets: one range per run; contradictions: nothing planned
    pushed, rest = push_filters([In(("offset",), (1, 2, 3, 7, 40)), LessThanOrEqual(("offset",), 7)])
    assert rest == [] and pushed.offsets == ((1, 4), (7, 8))
    assert [(r.start, r.end) for r in pushed.narrow(ranges[:1])] == [(1, 4), (7, 8)]
    assert push_filters([EqualTo(("partition",), 1), EqualTo(("partition",), 2)])[0].narrow(ranges) == []
    assert push_filters([EqualTo(("topic",), "a"), In(("topic",), ("b",))])[0].narrow(ranges) == []
    # too many runs: the hull prunes, Spark picks the offsets
    many = In(("offset",), tuple(range(0, 4 * MAX_OFFSET_INTERVALS, 2)))
    pushed, rest = push_filters([many])
    assert rest == [many] and pushed.offsets == ((0, 4 * MAX_OFFSET_INTERVALS - 1),)
    # not pushable: other literal types, naive datetimes (TIMESTAMP_NTZ), nested columns
    odd = [EqualTo(("offset",), 1.5), EqualTo(("offset",), True), GreaterThan(("timestamp",), dt.datetime(2024, 1, 1)),
           EqualTo(("topic",), 3), EqualTo(("headers", "key"), "k")]
    pushed, rest = push_filters(odd)
    assert rest == odd and pushed == PushedFilters()


# -- Spark: pushed-down results are Spark's, with fewer tasks ---------------------------------------------

@pytest.fixture(scope="module")
def lakelog_spark(spark):
    source.register(spark)
    return spark


def produce_batches(client, topic: str, partitions: int, batches: int, per_batch: int) -> None:
    """``batches`` appends of ``per_batch`` records per partition (a Delta file each); record i of a
    partition: key k{i % 3}, value {p}:{i}, CreateTime T0 + 1000 * i, except every 7th one an hour early."""
    for p in range(partitions):
        for b in range(batches):
            idx = range(b * per_batch, (b + 1) * per_batch)
            client.produce_arrow(topic, p, pa.table({
                "key": pa.array([b"k%d" % (i % 3) for i in idx]),
                "value": pa.array([f"{p}:{i}".encode() for i in idx]),
                "timestamp": pa.array([T0 + 1000 * i - (3_600_000 if i % 7 == 0 else 0) for i in idx], pa.int64()),
                "headers": pa.array([[{"key": "i", "value": b"%d" % i}] if i % 2 else [] for i in idx], HEADERS_TYPE),
            }))


def freeze(v):
    """A collected value as something hashable: Rows and lists as tuples, bytearrays as bytes."""
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x) for x in v)
    return bytes(v) if isinstance(v, bytearray) else v


def bag(df) -> Counter:
    return Counter(freeze(r) for r in df.collect())


def test_pushed_filters_plan_fewer_tasks_and_return_what_spark_filters_return(lakelog_spark, client, create_topic,
                                                                               topic_name):
    spark, t = lakelog_spark, topic_name
    create_topic(t, partitions=3)
    produce_batches(client, t, partitions=3, batches=6, per_batch=5)  # 30 offsets per partition, 6 files each
    assert spark.conf.get(source.PUSHDOWN_CONF) == "true"

    def load():  # one task per 5 offsets: tasks count the offset ranges planned
        return (spark.read.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
                .option("subscribe", t).option("includeHeaders", "true").option("maxRecordsPerPartition", 5).load())

    everything = load().cache()
    assert everything.count() == 90 and load().rdd.getNumPartitions() == 18
    cases = [
        (F.col("offset") >= 20, 6),
        ((F.col("offset") > 4) & (F.col("offset") <= 12) & (F.col("partition") == 1), 2),  # 5..12: 2 tasks
        (F.col("partition").isin(0, 2) & (F.col("offset") < 5), 2),
        (F.col("offset").isin(3, 17, 29) & (F.col("topic") == t), 9),
        (F.col("topic") == "other", 0),
        ((F.col("partition") == 7) & (F.col("offset") >= 8), 0),
        (F.col("timestamp") >= F.lit(at(T0 + 25_000)), 18),  # partial: prunes files inside the tasks
        ((F.col("timestamp") < F.lit(at(T0 + 9_000))) & (F.col("partition") == 2), 6),
        (F.expr(f"timestamp BETWEEN '{at(T0 + 3_000).isoformat()}' AND '{at(T0 + 12_000).isoformat()}'"), 18),
        (F.expr("timestamp < TIMESTAMP '2023-11-14 21:30:00 UTC'") & (F.col("offset") >= 10), 12),
        ((F.col("value") == b"1:21") | (F.col("offset") == 3), 18),  # OR: nothing pushed
        (~(F.col("offset") == 3) & F.col("key").isNotNull(), 18),
    ]
    for condition, tasks in cases:
        pushed = load().where(condition)
        assert pushed.rdd.getNumPartitions() == max(tasks, 1), str(condition)  # an empty plan still runs 1 task
        assert bag(pushed) == bag(everything.where(condition)), str(condition)
    assert bag(load().where(F.col("timestamp") >= F.lit(at(T0 + 25_000)))) != Counter()
    everything.unpersist()


def test_the_tail_fetched_from_the_leader_is_filtered_by_timestamp_too(client, create_topic, topic_name):
    t = topic_name
    create_topic(t)
    produce_batches(client, t, partitions=1, batches=2, per_batch=10)
    uri = client.topic_logs(t)[0]["table_uri"]
    part = OffsetRangePartition(t, 0, uri, 2, 18, lake_end_offset=6)  # 6.. from the leader
    bounds = (us(T0 + 4_000), us(T0 + 15_000))
    got = pa.Table.from_batches(list(read_partition(part, kafka_schema(), fail_on_data_loss=True,
                                                    tail=TailFetch(client.urls[0]), timestamps=bounds)))
    want = [i for i in range(2, 18) if i % 7 and 4 <= i <= 15]
    assert got["offset"].to_pylist() == want


# -- lakelog.read.mode --------------------------------------------------------------------------------

def test_read_mode_option_values():
    base = {"lakelog.bootstrap.servers": "localhost:1", "subscribe": "t"}
    assert SourceOptions.parse(base, streaming=False).read_mode == "auto"
    for value in ("direct", "BROKER", " auto "):
        assert SourceOptions.parse({**base, "lakelog.read.mode": value}, streaming=True).read_mode == value.strip().lower()
    with pytest.raises(SourceOptionError, match="'lakelog.read.mode' must be 'direct'.*got 'gateway'"):
        SourceOptions.parse({**base, "lakelog.read.mode": "gateway"}, streaming=False)


def test_broker_and_auto_modes_read_the_rows_direct_reads(lakelog_spark, client, create_topic, topic_name, tmp_path):
    spark, t = lakelog_spark, topic_name
    create_topic(t, partitions=2)
    produce_batches(client, t, partitions=2, batches=3, per_batch=4)

    def load(mode=None, **more):
        r = (spark.read.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0]).option("subscribe", t)
             .option("includeHeaders", "true"))
        if mode is not None:
            r = r.option("lakelog.read.mode", mode)
        for k, v in more.items():
            r = r.option(k, v)
        return r.load()

    direct = bag(load("direct"))
    assert sum(direct.values()) == 24
    assert bag(load("broker")) == direct and bag(load()) == direct
    assert bag(load("broker").where("offset >= 5 AND timestamp >= TIMESTAMP '2023-11-14 22:13:27 UTC'")) == \
        bag(load("direct").where("offset >= 5 AND timestamp >= TIMESTAMP '2023-11-14 22:13:27 UTC'"))
    with pytest.raises(Exception, match="lakelog.read.mode"):
        load("sometimes").collect()

    # streams too: an availableNow query through the leader gets every record once
    seen = []
    query = (spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
             .option("subscribe", t).option("startingOffsets", "earliest").option("lakelog.read.mode", "broker")
             .option("includeHeaders", "true").load().writeStream
             .foreachBatch(lambda df, _id: seen.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert Counter(freeze(r) for r in seen) == direct

    # auto, on an executor that cannot open the table: read through the leader
    uri = client.topic_logs(t)[0]["table_uri"]
    moved = OffsetRangePartition(t, 0, str(tmp_path / "not-here"), 1, 11)
    fetch = TailFetch(client.urls[0])
    schema = kafka_schema(True)
    there = pa.Table.from_batches(list(read_partition(dataclasses.replace(moved, table_uri=uri), schema,
                                                      fail_on_data_loss=True, mode="direct")))
    assert there["offset"].to_pylist() == list(range(1, 11))
    for mode in ("auto", "broker"):
        got = pa.Table.from_batches(list(read_partition(moved, schema, fail_on_data_loss=True, tail=fetch, mode=mode)))
        assert got.equals(there), mode
    with pytest.raises(source.SourceError, match="read through the partition leader \\(lakelog.read.mode=broker\\)"):
        list(read_partition(moved, schema, fail_on_data_loss=True, mode="broker"))

    # auto, where the path holds another table (as another replica's at the same path on another machine):
    # the leader's table id tells them apart, so the range is read through the leader, not from that table
    logs = {log["partition"]: log for log in client.topic_logs(t)}
    assert logs[0]["table_id"] == DeltaTable(uri).metadata().id != logs[1]["table_id"]
    elsewhere = OffsetRangePartition(t, 0, logs[1]["table_uri"], 1, 11, table_id=logs[0]["table_id"])
    got = pa.Table.from_batches(list(read_partition(elsewhere, schema, fail_on_data_loss=True, tail=fetch, mode="auto")))
    assert got.equals(there)
