"""Spark maintenance jobs (``lakelog job optimize|vacuum``) on a real broker's tables, under the committer
lease: OPTIMIZE while a producer writes finds every acknowledged record exactly once, the merged files keep
disjoint offset ranges in offset order, VACUUM deletes what the table removed, and ZORDER BY is refused
on a compacted topic."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from kazoo.client import KazooClient

from lakelog.client import LakelogClient
from lakelog.log_tables.cleaner import cleaned_offset
from lakelog.log_tables.data_files import FileSnapshot
from lakelog.spark.maintenance import plan_runs, run_job
from tests.harness import read_partition, wait_for

pytestmark = pytest.mark.spark


@pytest.fixture
def zk(zk_connect):
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def lake_end(client: LakelogClient, topic: str) -> int:
    return client.topic_logs(topic)[0]["lake_end_offset"]


def hw(client: LakelogClient, topic: str) -> int:
    return client.topic_logs(topic)[0]["high_watermark"]


class Producer(threading.Thread):
    """Produces 20-record requests to partition 0 until stopped; keeps the offsets acknowledged."""

    def __init__(self, url: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.url, self.topic = url, topic
        self.stop = threading.Event()
        self.acknowledged: list[int] = []
        self.errors: list[Exception] = []

    def run(self) -> None:
        with LakelogClient(self.url) as client:
            n = 0
            while not self.stop.is_set():
                try:
                    answer = client.produce_json(self.topic, [{"value": {"n": n + i}} for i in range(20)], partition=0)
                except Exception as e:  # noqa: BLE001 - reported by the test
                    self.errors.append(e)
                    continue
                first = answer["offsets"][0]["offset"]
                self.acknowledged.extend(range(first, first + 20))
                n += 20
                time.sleep(0.01)


def test_optimize_while_producing_keeps_every_acknowledged_record_once(spark, broker, client, zk, topic_name):
    client.create_topic(topic_name, partitions=1, configs={"lake.commit.interval.ms": "50"})
    for i in range(30):  # 30 small flushes: about 30 small data files
        client.produce_json(topic_name, [{"value": {"pre": i * 10 + j}} for j in range(10)], partition=0)
        time.sleep(0.06)
    wait_for(lambda: lake_end(client, topic_name) == 300, what="the first flushes")
    uri = client.topic_logs(topic_name)[0]["table_uri"]
    files_before = len(DeltaTable(uri).file_uris())
    assert files_before >= 10

    producer = Producer(broker.url, topic_name)
    producer.start()
    try:
        time.sleep(0.5)
        results = run_job("optimize", spark=spark, client=client, zk=zk, topic=topic_name, partitions=[0])
        time.sleep(0.5)
    finally:
        producer.stop.set()
        producer.join(30)
    assert not producer.errors and len(producer.acknowledged) > 100
    (result,) = results
    assert result.commits >= 1 and result.files_after < result.files_before

    end = hw(client, topic_name)
    assert end == 300 + len(producer.acknowledged)
    wait_for(lambda: lake_end(client, topic_name) == end, what="the flush after the lease")
    # every acknowledged record once: through the broker and in the Delta table
    fetched = [r["offset"] for r in read_partition(broker.url, topic_name, 0)]
    assert fetched == list(range(end))
    assert set(producer.acknowledged) <= set(fetched) and len(set(producer.acknowledged)) == len(producer.acknowledged)
    table = DeltaTable(uri)
    offsets = table.to_pyarrow_table(columns=["offset"])["offset"].to_pylist()
    assert sorted(offsets) == list(range(end))
    # the merged files keep disjoint offset ranges with rows in offset order
    snapshot = FileSnapshot.of_table(table)
    assert snapshot.disjoint
    for f in snapshot.files:
        rows = pq.read_table(snapshot.path(f), filesystem=snapshot.fs, columns=["offset"])["offset"].to_pylist()
        assert rows == sorted(rows)
    optimizes = [c for c in table.history() if "optimize" in (c.get("userMetadata") or "")]
    assert optimizes and all(c["operationParameters"].get("mode") == "Overwrite" for c in optimizes)
    assert json.loads(optimizes[0]["userMetadata"])["lakelog.operation"] == "optimize"


def test_vacuum_deletes_what_the_table_removed(spark, broker_factory, zk, topic_name):
    broker = broker_factory(extra_env={"LAKELOG_LOG_RETENTION_CHECK_INTERVAL_MS": "200"})
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=1, configs={"lake.commit.interval.ms": "0",
                                                               "lake.vacuum.retention.ms": "0"})
        for i in range(12):
            client.produce_json(topic_name, [{"value": {"i": i}}], partition=0)
        uri = client.topic_logs(topic_name)[0]["table_uri"]
        # the broker syncs the table's retention property at its maintenance round
        wait_for(lambda: "0 milliseconds" in DeltaTable(uri).metadata().configuration.get(
            "delta.deletedFileRetentionDuration", ""), what="the table properties")
        (opt,) = run_job("optimize", spark=spark, client=client, zk=zk, topic=topic_name)
        assert opt.files_before == 12 and opt.files_after == 1
        (vac,) = run_job("vacuum", spark=spark, client=client, zk=zk, topic=topic_name)
        assert vac.files_deleted >= 12
        assert len(list(Path(uri).glob("*.parquet"))) == 1
        client.produce_json(topic_name, [{"value": {"i": 12}}], partition=0)
        assert [r["offset"] for r in read_partition(broker.url, topic_name, 0)] == list(range(13))


def test_zorder_is_refused_on_a_compacted_topic(spark, client, zk, topic_name):
    client.create_topic(topic_name, partitions=1, configs={"cleanup.policy": "compact"})
    with pytest.raises(ValueError, match="ZORDER BY refused"):
        run_job("optimize", spark=spark, client=client, zk=zk, topic=topic_name, zorder_by="key")


def test_runs_are_neighbouring_small_files():
    from lakelog.log_tables.data_files import DataFile

    def f(lo: int, hi: int, size: int) -> DataFile:
        return DataFile(f"{lo}.parquet", lo, hi, 0, hi - lo + 1, size)

    files = [f(0, 9, 10), f(10, 19, 10), f(20, 29, 1000), f(30, 39, 10), f(40, 49, 10), f(50, 59, 10),
             f(61, 70, 10)]  # a gap before 61 ends a run
    runs = plan_runs(files, target_file_bytes=200)
    assert [[x.min_offset for x in run] for run in runs] == [[0, 10], [30, 40, 50]]


def test_compact_keeps_the_latest_record_per_key_and_the_broker_reads_it(spark, broker, client, zk, topic_name):
    client.create_topic(topic_name, partitions=1, configs={"cleanup.policy": "compact", "lake.commit.interval.ms": "0",
                                                           "delete.retention.ms": "0"})
    for version in range(5):  # keys k0..k9, five versions each: offsets 0..49
        client.produce_json(topic_name, [{"key": f"k{k}", "value": {"v": version}} for k in range(10)], partition=0)
    client.produce_json(topic_name, [{"key": "k0", "value": None}], partition=0)  # a tombstone at 50

    (result,) = run_job("compact", spark=spark, client=client, zk=zk, topic=topic_name)
    assert result.commits == 1
    uri = client.topic_logs(topic_name)[0]["table_uri"]
    table = DeltaTable(uri)
    # k1..k9: their fifth versions at 41..49; k0: the tombstone at 50
    assert sorted(table.to_pyarrow_table(columns=["offset"])["offset"].to_pylist()) == list(range(41, 51))
    # the tombstone stays: it was not below the previous cleaned offset (it has not been through a cleaning)
    assert cleaned_offset(table) == 51
    # the broker re-reads the table after the lease: fetches skip the gaps, new records follow
    client.produce_json(topic_name, [{"key": "k1", "value": {"v": 5}}], partition=0)
    fetched = read_partition(broker.url, topic_name, 0)
    assert [r["offset"] for r in fetched] == list(range(41, 52))
    assert fetched[-2]["value"] is None

    with pytest.raises(ValueError, match="compact refused"):
        other = f"{topic_name}-plain"
        client.create_topic(other, partitions=1)
        run_job("compact", spark=spark, client=client, zk=zk, topic=other)
