"""The ``lakelog`` source's ``isolation.level`` (issue 15, point 4): with read_committed "latest" is the last
stable offset and the leader's fetch drops aborted records; read_uncommitted (the default) fetches open and
aborted records too, never markers; the SQL views (the Delta tables) are read_committed by construction. A real in-process broker and ZooKeeper, a real SparkSession; the
transactions are written straight into the partition log (``tests.transactions_inprocess``)."""

from __future__ import annotations

import pytest

from lakelog.client import LakelogClient
from lakelog.spark import source
from lakelog.spark.errors import SourceOptionError
from lakelog.spark.source import SourceOptions
from lakelog.spark.sql import register_topics_from_gateway
from tests.harness import wait_for
from tests.transactions_inprocess import ServedBroker


def test_the_isolation_level_option_is_checked():
    base = {"lakelog.bootstrap.servers": "localhost:1", "subscribe": "t"}
    assert SourceOptions.parse(base, streaming=False).isolation_level == "read_uncommitted"
    for name in ("isolation.level", "kafka.isolation.level"):
        assert SourceOptions.parse({**base, name: "read_committed"}, streaming=True).isolation_level == "read_committed"
        with pytest.raises(SourceOptionError, match=f"'{name}' must be 'read_uncommitted' or 'read_committed'"):
            SourceOptions.parse({**base, name: "READ_COMMITTED"}, streaming=False)
    with pytest.raises(SourceOptionError, match="differ"):
        SourceOptions.parse({**base, "isolation.level": "read_committed",
                             "kafka.isolation.level": "read_uncommitted"}, streaming=False)


@pytest.mark.spark
def test_read_committed_ends_at_the_lso_and_drops_aborted_records(spark, zk_connect, tmp_path):
    source.register(spark)
    with ServedBroker(zk_connect, tmp_path / "logs") as served, LakelogClient(served.url) as client:
        client.create_topic("iso-s", partitions=1)
        client.produce_binary("iso-s", [(None, b"p0"), (None, b"p1")], partition=0)
        served.append_transactional("iso-s", 0, [b"o0"], producer_id=21)  # open: holds the LSO at 2
        served.append_transactional("iso-s", 0, [b"x0"], producer_id=22)
        served.end_transaction("iso-s", 0, producer_id=22, commit=False)
        served.append_transactional("iso-s", 0, [b"c0"], producer_id=23)
        served.end_transaction("iso-s", 0, producer_id=23, commit=True)

        def read(**options) -> list[bytes]:
            r = (spark.read.format("lakelog").option("lakelog.bootstrap.servers", served.url)
                 .option("subscribe", "iso-s").option("lakelog.read.tail", "true"))
            for name, value in options.items():
                r = r.option(name.replace("_", "."), value)
            return [row.value for row in r.load().orderBy("offset").select("value").collect()]

        assert read(isolation_level="read_committed") == [b"p0", b"p1"]
        assert read() == [b"p0", b"p1", b"o0", b"x0", b"c0"]  # read_uncommitted: no markers

        def sql_values(lake_end: int) -> list[bytes]:
            """The topic's SQL view (the Delta table, which the flusher fills below the LSO only)."""
            wait_for(lambda: client.admin.describe_topic("iso-s")["partitions"][0]["lake_end_offset"] == lake_end,
                     what=f"the flush up to offset {lake_end}")
            view = register_topics_from_gateway(spark, client, topics=["iso-s"], schema=None)["iso-s"]
            return [row.value for row in spark.sql(f"SELECT value FROM {view} ORDER BY offset").collect()]

        assert sql_values(2) == [b"p0", b"p1"]  # the open transaction holds the flush at the LSO
        served.end_transaction("iso-s", 0, producer_id=21, commit=True)
        assert read(kafka_isolation_level="read_committed") == [b"p0", b"p1", b"o0", b"c0"]
        assert sql_values(8) == [b"p0", b"p1", b"o0", b"c0"]  # never the aborted record, never a marker
