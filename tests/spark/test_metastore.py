"""Topics in a Hive metastore: ``lakelog metastore sync`` registers a view per topic in Spark's embedded
metastore (Derby under the data dir); a second Spark process that never imports lakelog (plain PySpark
with Delta, ``metastore_reader.py``) finds the topic with ``spark.table("lakelog.<topic>")``; partitions
added and a topic deleted reach the metastore by themselves (``lakelog metastore sync --follow`` syncs
again after each change, each sync a JVM of its own).

Each Spark is its own process (Derby embedded admits one JVM at a time, and this test session's Spark has
Spark's in-memory catalog); each is waited for until it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.processes import spawn
from lakelog.spark.metastore import metastore_conf, topic_table_sql
from lakelog.protocol.log_info import PartitionLogInfo

pytestmark = pytest.mark.spark

READER = Path(__file__).with_name("metastore_reader.py")
VENV_BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path, timeout_s: float = 600) -> str:
    """Run ``cmd`` to its end (stopped by pid on a timeout); its stdout, or the assertion with its stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    proc = spawn(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{cmd[:3]} timed out after {timeout_s} s:\n{err[-3000:]}") from None
    assert proc.returncode == 0, f"{cmd[:3]} exited with {proc.returncode}:\n{err[-4000:]}"
    return out


def test_metastore_sync_registers_topics_that_a_plain_spark_session_reads(leftovers, broker, client, create_topic,
                                                                          topic_name):
    kept, deleted = f"{topic_name}-kept", f"{topic_name}-gone"
    create_topic(kept, partitions=1)
    create_topic(deleted, partitions=1)
    client.produce_arrow(kept, 0, pa.table({"value": [b"a", b"b"]}))
    data_dir = leftovers / "data"
    # lakelog metastore sync --follow: a sync at start, another after the cluster changes (each its own JVM)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    follow = spawn([sys.executable, "-m", "lakelog.cli", "metastore", "sync", "-b", broker.url, "--data-dir",
                    str(data_dir), "--follow", "--interval-s", "0.5"], cwd=leftovers, env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def next_sync() -> str:
            line = follow.stdout.readline()  # a sync's line; "" when the process ended
            assert line, f"metastore sync --follow exited with {follow.wait()}"
            return " ".join(line.split())

        out = next_sync()
        assert f"registered 2 topics: {deleted}, {kept}" in out, out

        client.admin.add_partitions(kept, partitions_count=2)
        client.produce_arrow(kept, 1, pa.table({"value": [b"c"]}))
        client.produce_arrow(kept, 0, pa.table({"value": [b"d"]}))  # after the sync: the view is not bounded
        client.admin.delete_topic(deleted)
        out = next_sync()
        while f"dropped 1: {deleted}" not in out:  # a look between the two changes synced one of them first
            assert "registered" in out, out
            out = next_sync()
        assert "registered 1 topics" in out, out
    finally:
        follow.terminate()
        follow.wait(60)

    conf = metastore_conf(data_dir=data_dir)
    view = kept.replace("-", "_")
    seen = json.loads(run([sys.executable, str(READER), json.dumps(conf), f"lakelog.{view}"], leftovers)
                      .strip().splitlines()[-1])
    assert seen["tables"] == [view]  # the deleted topic's view is gone
    assert sorted(map(tuple, seen["rows"])) == [(kept, 0, 0, "a"), (kept, 0, 1, "b"), (kept, 0, 2, "d"),
                                                (kept, 1, 0, "c")]
    assert seen["columns"] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                               "headers"]


def test_topic_table_sql_names_s3_tables_by_the_s3a_filesystem_and_has_no_offset_bound():
    infos = [PartitionLogInfo(topic="orders", partition=p, table_uri=f"s3://lake/p/orders-id/{p}",
                              log_start_offset=0, lake_end_offset=5, log_end_offset=9, high_watermark=9,
                              leader_epoch=0, timestamp_type=0) for p in (1, 0)]
    sql = topic_table_sql(infos)
    assert "delta.`s3a://lake/p/orders-id/0`" in sql and "delta.`s3a://lake/p/orders-id/1`" in sql
    assert sql.index("orders-id/0") < sql.index("orders-id/1")
    assert "offset <" not in sql and "s3://" not in sql


def test_an_s3_lakes_views_get_the_typed_columns_and_the_sync_its_s3a_settings(broker_factory, lake, topic_name,
                                                                               monkeypatch):
    """A schema'd topic on an S3 lake (the real object store): with delta-rs storage options the view's SQL
    reads ``value_parsed`` from the tables (without them it cannot see it), and the sync's session gets
    the S3A settings of the same store from the broker's ``LAKELOG_LAKE_STORAGE_*`` variables."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from lakelog.client import LakelogClient
    from lakelog.spark.metastore import lake_storage_s3a_conf
    from lakelog.spark.source.lake_storage import lake_storage_option, lake_storage_options_from_env
    from lakelog.spark.sql import partition_logs_from_gateway
    from tests.harness import wait_for

    broker = broker_factory(extra_env=lake.broker_env())
    schema = '{"type": "record", "name": "Order", "fields": [{"name": "amount", "type": "long"}]}'
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=1, configs={"value.schema.subject": f"{topic_name}-value",
                                                               "lake.commit.interval.ms": "0"})
        serialize = AvroSerializer(SchemaRegistryClient({"url": broker.url}), schema)
        client.produce_binary(topic_name, [(None, serialize({"amount": 5}, SerializationContext(
            topic_name, MessageField.VALUE)))], partition=0)
        wait_for(lambda: client.topic_logs(topic_name)[0]["lake_end_offset"] == 1, what="the record in its table")
        partitions = partition_logs_from_gateway(client, topic_name)

    monkeypatch.setattr(os, "environ", {**os.environ, **lake.broker_env()})
    storage = lake_storage_option({k.lower(): v for k, v in lake_storage_options_from_env().items()}).options
    assert "value_parsed" in topic_table_sql(partitions, storage_options=storage)
    assert "value_parsed" not in topic_table_sql(partitions, storage_options={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    conf = lake_storage_s3a_conf(storage)
    assert conf["spark.jars.packages"].startswith("org.apache.hadoop:hadoop-aws:")
    assert conf["spark.hadoop.fs.s3a.endpoint"] == lake.store.endpoint_url
    assert conf["spark.hadoop.fs.s3a.access.key"] == lake.store.access_key_id
    assert conf["spark.hadoop.fs.s3a.secret.key"] == lake.store.secret_access_key
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
