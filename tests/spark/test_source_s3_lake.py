"""The ``lakelog`` source over an S3 lake (``lake.uri``): executors read the partition tables in the real
object store (s3proxy) directly through delta-rs, with the ``lakelog.lake.storage.*`` options, and the
tail from the leader; the broker serves none of the Delta part then (its fetch metric for the topic
stays at zero)."""

from __future__ import annotations

import re

import httpx
import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.spark.source import SourceOptions
from lakelog.spark.source.lake_storage import lake_storage_options_from_env
from lakelog.spark.sql import register_topics_from_gateway
from tests.harness import wait_for

pytestmark = pytest.mark.spark

PARTITIONS, PER_PARTITION = 2, 3
COLUMNS = ["partition", "offset", "CAST(value AS STRING) AS value"]


def storage_options(lake) -> dict[str, str]:
    """The broker's ``lake.storage.*`` settings as the read's ``lakelog.lake.storage.*`` options."""
    return {"lakelog." + k: v for k, v in lake.settings.items() if k.startswith("lake.storage.")}


def fetches(url: str, topic: str) -> float:
    """``lakelog_fetch_requests_total`` of ``topic`` on the broker (0 while it has none)."""
    m = re.search(rf'^lakelog_fetch_requests_total{{topic="{re.escape(topic)}"}} (\S+)$',
                  httpx.get(f"{url}/metrics").text, re.M)
    return 0.0 if m is None else float(m.group(1))


def test_executors_read_an_s3_lake_directly_with_the_lake_storage_options(spark, broker_factory, lake, topic_name):
    broker = broker_factory(extra_env=lake.broker_env())
    with LakelogClient(broker.url) as client:
        # the first two records of each partition are committed to its table (interval 0); the third
        # stays in the leader's tail once the interval is an hour
        client.create_topic(topic_name, partitions=PARTITIONS, configs={"lake.commit.interval.ms": "0"})
        for p in range(PARTITIONS):
            client.produce_arrow(topic_name, p, pa.table({"value": [f"v{p}-{i}".encode() for i in range(2)]}))
        wait_for(lambda: [i["lake_end_offset"] for i in client.topic_logs(topic_name)] == [2] * PARTITIONS,
                 what="the first two records of each partition in its table")
        client.admin.alter_topic_configs(topic_name, set={"lake.commit.interval.ms": "3600000"})
        for p in range(PARTITIONS):
            client.produce_arrow(topic_name, p, pa.table({"value": [f"v{p}-2".encode()]}))
        logs = client.topic_logs(topic_name)
    assert all(info["table_uri"].startswith(f"{lake.uri}/{topic_name}-") for info in logs), logs
    assert [(info["lake_end_offset"], info["high_watermark"]) for info in logs] == [(2, 3)] * PARTITIONS
    expected = [[p, i, f"v{p}-{i}"] for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    options = {"lakelog.bootstrap.servers": broker.url, "subscribe": topic_name, "startingOffsets": "earliest",
               "lakelog.read.tail": "true", **storage_options(lake)}

    def read(mode: str, **more: str) -> list[list]:
        df = spark.read.format("lakelog").options(**options, **{"lakelog.read.mode": mode}, **more).load()
        return sorted(list(r) for r in df.selectExpr(*COLUMNS).collect())

    before = fetches(broker.url, topic_name)
    assert read("direct") == expected
    # auto opens the s3:// tables with the options too (without them it read through the leader)
    assert read("auto") == expected
    # a timestamp look-up on the driver opens the tables with them as well
    assert read("direct", startingTimestamp="0") == expected
    # the leader served only the tails: one fetch per partition and read, none for the Delta part
    assert fetches(broker.url, topic_name) - before == 3 * PARTITIONS

    # a stream reads the same way, and commits its offsets to a group (__consumer_offsets, in the lake too)
    stream_options = {k: v for k, v in options.items() if k != "lakelog.read.tail"}
    query = (spark.readStream.format("lakelog").options(**stream_options, **{"lakelog.read.mode": "direct"})
             .option("kafka.group.id", f"{topic_name}-g").load()
             .selectExpr(*COLUMNS).writeStream.format("memory").queryName("s3_lake_stream")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(list(r) for r in spark.sql("SELECT * FROM s3_lake_stream").collect()) == expected

    # lakelog sql's views (register_topics_from_gateway): a topic in an object store is read through the
    # source, up to its lake end offset as every view; so is __consumer_offsets once it is in the lake
    with LakelogClient(broker.url) as client:
        wait_for(lambda: "__consumer_offsets" in client.admin.list_topics()
                 and sum(i["lake_end_offset"] for i in client.topic_logs("__consumer_offsets")) > 0,
                 what="the stream's offset commit in __consumer_offsets' table")
        names = register_topics_from_gateway(spark, client, source_options={
            "lakelog.bootstrap.servers": broker.url, **storage_options(lake)})
    rows = spark.sql(f"SELECT {', '.join(COLUMNS)} FROM {names[topic_name]}").collect()
    assert sorted(list(r) for r in rows) == [[p, i, f"v{p}-{i}"] for p in range(PARTITIONS) for i in range(2)]
    commits = spark.sql(f"SELECT DISTINCT `group`, topic FROM {names['__consumer_offsets']}").collect()
    assert [tuple(r) for r in commits] == [(f"{topic_name}-g", topic_name)]


def test_the_lake_storage_options_are_checked_and_the_secret_is_never_shown():
    base = {"lakelog.bootstrap.servers": "localhost:1", "subscribe": "t"}
    opts = SourceOptions.parse({**base, "lakelog.lake.storage.endpoint": "http://127.0.0.1:9000",
                                "lakelog.lake.storage.access.key.id": "AKID",
                                "lakelog.lake.storage.secret.access.key": "very-secret",
                                "lakelog.lake.storage.path.style.access": "TRUE",
                                "lakelog.lake.storage.allow.http": "false"}, streaming=False)
    assert opts.lake_storage.for_uri("s3://lake/p/t-1/0") == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "AKID",
        "AWS_SECRET_ACCESS_KEY": "very-secret", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}
    assert opts.lake_storage.for_uri("/data/logs/t-0") is None  # a local table needs none
    assert "very-secret" not in repr(opts) and "very-secret" not in repr(opts.lake_storage)
    with pytest.raises(Exception, match="'lakelog.lake.storage.allow.http' must be 'true' or 'false', got 'yes'"):
        SourceOptions.parse({**base, "lakelog.lake.storage.allow.http": "yes"}, streaming=False)
    with pytest.raises(Exception, match="'lakelog.lake.storage.secret.access.key' is empty") as e:
        SourceOptions.parse({**base, "lakelog.lake.storage.secret.access.key": " "}, streaming=False)
    assert "very-secret" not in str(e.value)


def test_lake_storage_options_come_from_the_brokers_variables():
    env = {"LAKELOG_LAKE_STORAGE_ENDPOINT": "http://127.0.0.1:9000", "LAKELOG_LAKE_STORAGE_ALLOW_HTTP": "true",
           "LAKELOG_LAKE_URI": "s3://lake/p", "AWS_REGION": "x"}
    assert lake_storage_options_from_env(env) == {"lakelog.lake.storage.endpoint": "http://127.0.0.1:9000",
                                                  "lakelog.lake.storage.allow.http": "true"}
