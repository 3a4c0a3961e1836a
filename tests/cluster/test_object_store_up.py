"""``lakelog up --object-store`` and ``lakelog cluster up --object-store``: the embedded S3 server started
beside ZooKeeper, the brokers' tables in its bucket, everything stopped by SIGTERM."""

from __future__ import annotations

import signal
from pathlib import Path

from deltalake import DeltaTable

from lakelog.runtime.zookeeper_server import free_port
from tests.cluster.test_process_lifecycle import (ENV, PARTITIONS, TOPIC, assert_nothing_left, free_port_pair,
                                                 produce_acked, run, wait_until_serving)
from tests.harness import child_pids, wait_for

__all__ = ["run"]  # the fixture, imported for these tests

BUCKET_DIR = Path("object-store") / "buckets" / "lakelog" / "lake"


def lake_tables(data_dir: Path) -> list[Path]:
    """The partition tables of TOPIC in the embedded store's bucket (directories holding a _delta_log)."""
    root = data_dir / BUCKET_DIR
    return sorted(p.parent for p in root.glob(f"{TOPIC}-*/*/_delta_log")) if root.is_dir() else []


def storage_options(data_dir: Path) -> dict[str, str]:
    conf = dict(line.split("=", 1) for line in (data_dir / "object-store" / "s3proxy.conf").read_text().splitlines())
    return {"AWS_ENDPOINT_URL": conf["s3proxy.endpoint"], "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": conf["s3proxy.identity"], "AWS_SECRET_ACCESS_KEY": conf["s3proxy.credential"],
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "AWS_ALLOW_HTTP": "true"}


def test_up_with_an_object_store_writes_the_tables_to_it_and_sigterm_stops_it(tmp_path: Path, run) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    up = run("up", "up", "--data-dir", data_dir, "--port", port, "--zookeeper-port", free_port(),
             "--log-level", "warning", "--object-store", env=ENV)
    wait_until_serving(up, f"http://127.0.0.1:{port}")
    store_pid = int((data_dir / "object-store" / "s3proxy.pid").read_text())
    assert store_pid in child_pids(up.pid)
    acked = produce_acked(f"http://127.0.0.1:{port}")
    wait_for(lambda: len(lake_tables(data_dir)) == PARTITIONS, what="a table per partition in the store")
    options = storage_options(data_dir)

    def in_tables() -> int:
        return sum(DeltaTable(f"s3://lakelog/lake/{t.parent.name}/{t.name}", storage_options=options)
                   .to_pyarrow_table(columns=["offset"]).num_rows for t in lake_tables(data_dir))

    wait_for(lambda: in_tables() == len(acked), what="every acknowledged record in the lake")
    assert not list((data_dir / "logs").glob("*/_delta_log"))  # the broker's disk holds only the tail
    assert options["AWS_SECRET_ACCESS_KEY"] not in up.log()
    children = child_pids(up.pid)
    up.send(signal.SIGTERM)
    assert up.wait(60) == 0, up.log()
    assert_nothing_left(data_dir, children)
    assert not (data_dir / "object-store" / "s3proxy.pid").exists()


def test_cluster_up_with_an_object_store_gives_every_broker_the_lake(tmp_path: Path, run) -> None:
    data_dir = tmp_path / "cluster"
    port = free_port_pair()
    cluster = run("cluster", "cluster", "up", "--brokers", 2, "--data-dir", data_dir, "--port", port,
                  "--zookeeper-port", free_port(), "--log-level", "warning", "--object-store", env=ENV)
    for i in range(2):
        wait_until_serving(cluster, f"http://127.0.0.1:{port + i}")
    acked = produce_acked(f"http://127.0.0.1:{port + 1}")
    wait_for(lambda: len(lake_tables(data_dir)) == PARTITIONS, what="a table per partition in the store")
    assert acked
    for i in range(2):
        assert not list((data_dir / f"broker-{i}").glob("*/_delta_log"))
    children = wait_for(lambda: (lambda c: c if len(c) == 4 else None)(child_pids(cluster.pid)),
                        what="ZooKeeper, the object store and 2 brokers as children")
    cluster.send(signal.SIGTERM)
    assert cluster.wait(90) == 0, cluster.log()
    assert_nothing_left(data_dir, children)
