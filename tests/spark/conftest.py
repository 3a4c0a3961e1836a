"""Fixtures of the Spark tests: one small local SparkSession with Delta for the whole test session."""

from __future__ import annotations

import fcntl
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A ``local[2]`` SparkSession with Delta (lakelog.spark.session), kept small, stopped at the end.

    The first run on a machine downloads Delta's jars from Maven Central (see
    ``lakelog.spark.session.ensure_delta_jars``) and Spark's own Kafka source and sink
    (``spark-sql-kafka-0-10``, the installed pyspark's version, for test_spark_kafka_format.py); later
    runs use the local cache.
    """
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # Under pytest-xdist each worker starts its own session: one at a time, so two JVMs never resolve
    # spark.jars.packages into the same Ivy cache at once.
    with open(Path(tempfile.gettempdir()) / "lakelog-tests-spark-session.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        spark = _session(warehouse)
    yield spark
    spark.stop()


def _session(warehouse):
    from importlib.metadata import version

    from lakelog.spark.session import SCALA_BINARY_VERSION, session

    return session(master="local[2]", app_name="lakelog-tests", conf={
        "spark.driver.memory": "1g",
        "spark.sql.shuffle.partitions": "4",
        # Delta's VACUUM lists the table with this many tasks (default 10,000: a minute on 2 cores)
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
        "spark.default.parallelism": "2",
        "spark.databricks.delta.snapshotPartitions": "1",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{version('pyspark')}",
    })


@pytest.fixture
def create_topic(client):
    """``create_topic(name, partitions=1, configs=None)``: a topic on the test's broker whose records are
    in its Delta tables as soon as they are acknowledged (``lake.commit.interval.ms=0``, a Delta commit
    per append), so reads bounded by the lake end offset (batch reads, SQL views) see every record
    produced. ``configs`` (``{"name": "value"}``) add topic configs or override that one."""

    def create(name: str, *, partitions: int = 1, configs: dict[str, str] | None = None) -> dict:
        return client.create_topic(name, partitions=partitions,
                                   configs={"lake.commit.interval.ms": "0", **(configs or {})})

    return create
