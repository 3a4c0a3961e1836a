"""Spark SQL over a topic returns exactly what was produced through a real broker.

The topics commit to Delta on every append (``lake.commit.interval.ms=0``, the ``create_topic``
fixture): the views read the Delta tables up to the lake end offset, which is then the high watermark.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.spark.sql import KAFKA_SOURCE_SCHEMA, register_topics_from_gateway
from tests.harness import CONDITION_WAIT_S

pytestmark = pytest.mark.spark


def test_sql_over_a_topic_returns_what_was_produced(spark, client, create_topic, topic_name):
    create_topic(topic_name, partitions=3)
    values = [bytes([i]) * (i % 7) for i in range(256)]  # every byte value, empty values too
    sent = client.produce_binary(topic_name, [(f"k{i % 5}".encode(), v) for i, v in enumerate(values)])
    client.produce_json(topic_name, [{"key": "ü-ключ", "value": {"n": 1}}, {"key": None, "value": None}],
                        partition=1)
    client.produce_arrow(topic_name, 2, pa.table({"key": pa.array([b"a", None]), "value": pa.array([None, b"z"])}))

    views = register_topics_from_gateway(spark, client, topics=[topic_name])
    view = views[topic_name]
    df = spark.sql(f"SELECT * FROM {view}")
    assert df.schema == KAFKA_SOURCE_SCHEMA
    rows = {(r.partition, r.offset): (r.key, r.value) for r in df.collect()}

    expected = {}
    for (i, v), o in zip(enumerate(values), sent["offsets"]):
        expected[(o["partition"], o["offset"])] = (f"k{i % 5}".encode(), v)
    assert len(rows) == 256 + 2 + 2
    for pos, kv in expected.items():
        assert (bytes(rows[pos][0]), bytes(rows[pos][1])) == kv
    json_rows = sorted((o, k, v) for (p, o), (k, v) in rows.items() if p == 1 and (k is None or b"\xd1" in bytes(k)))
    assert [(None if k is None else bytes(k).decode(), None if v is None else bytes(v)) for _, k, v in json_rows] \
        == [('"ü-ключ"', b'{"n":1}'), (None, None)]
    counts = {r.partition: r.n for r in spark.sql(f"SELECT partition, count(*) AS n FROM {view} GROUP BY partition").collect()}
    ends = {p: client.partition_offsets(topic_name, p)["end_offset"] for p in range(3)}
    assert counts == {p: n for p, n in ends.items() if n}


def test_sql_never_shows_offsets_at_or_above_the_high_watermark(spark, client, create_topic, topic_name):
    create_topic(topic_name, partitions=1)
    client.produce_binary(topic_name, [(None, b"%d" % i) for i in range(10)], partition=0)
    register_topics_from_gateway(spark, client, topics=[topic_name])
    # records appended after the view was registered are beyond the high watermark it saw
    client.produce_binary(topic_name, [(None, b"late")], partition=0)
    assert spark.sql(f"SELECT max(offset) AS m, count(*) AS n FROM `{topic_name}`").collect()[0].asDict() == {"m": 9, "n": 10}
    register_topics_from_gateway(spark, client, topics=[topic_name])
    assert spark.sql(f"SELECT count(*) AS n FROM `{topic_name}`").collect()[0].n == 11


def test_history_by_offset_and_as_of_a_time_and_consumer_offsets_view(spark, client, create_topic, topic_name):
    import time

    from lakelog.spark.sql import history

    create_topic(topic_name, partitions=1)
    client.produce_binary(topic_name, [(None, b"first-%d" % i) for i in range(5)], partition=0)
    time.sleep(1.5)
    between = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    time.sleep(1.5)
    client.produce_binary(topic_name, [(None, b"second-%d" % i) for i in range(5)], partition=0)

    by_offset = history(spark, client, topic_name, start_offset=3, end_offset=7)
    assert sorted(r.offset for r in by_offset.collect()) == [3, 4, 5, 6]
    then = history(spark, client, topic_name, as_of_timestamp=between)
    assert sorted(bytes(r.value) for r in then.collect()) == [b"first-%d" % i for i in range(5)]

    group = f"sql-{topic_name}"
    client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 4}])
    # the commit is a record of the internal topic __consumer_offsets: in its Delta table once the
    # flusher committed it (lake.commit.interval.ms, 1 s), then in the view when registered again
    deadline = time.monotonic() + CONDITION_WAIT_S
    while True:
        views = register_topics_from_gateway(spark, client)
        assert views["__consumer_offsets"] == "__consumer_offsets"
        row = spark.sql(f"SELECT `offset`, deleted, commit_timestamp FROM __consumer_offsets "
                        f"WHERE `group` = '{group}'").collect()
        if row or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert [(r.offset, r.deleted) for r in row] == [(4, False)] and row[0].commit_timestamp is not None
    assert topic_name in views and "__consumer_offsets" in views
    # The same, through the lakelog schema: a view per topic and lakelog.__consumer_offsets.
    table = topic_name.replace("-", "_")
    assert {table, "__consumer_offsets"} <= {r.tableName for r in spark.sql("SHOW TABLES IN lakelog").collect()}
    assert spark.sql(f"SELECT count(*) AS n FROM lakelog.{table}").collect()[0].n == 10
    row = spark.sql(f"SELECT `offset` FROM lakelog.__consumer_offsets WHERE `group` = '{group}'").collect()
    assert [r.offset for r in row] == [4]
