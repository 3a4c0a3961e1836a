"""lakelog's Spark source and sink on a real Spark standalone cluster (issue 16).

The test starts a Spark standalone master and one worker (1 core, 1 GiB) as child processes, with the
classes of the pyspark install (``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) on
free ports, and runs ``tests/spark/cluster_app.py`` with ``spark-submit --master spark://...``, as the
README's "Running on a Spark cluster" says: the driver is the ``spark-submit`` process, the reads,
writes and the Delta probe run in the worker's executor, whose Python is this venv's
(``spark.pyspark.python``; lakelog is installed there), and Delta's jars come from ``--packages``. The
app produces six records, reads them back with a batch read and an ``availableNow`` streaming read
(``lakelog.read.mode=broker``) and copies them with the sink to a second topic, which the test reads
through the gateway.

Master, worker and driver are stopped by pid at the end (the worker stops its executors); any process
still naming the test's tmp dir is killed then (the ``leftovers`` fixture).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from base64 import b64decode
from collections import Counter
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.processes import spawn
from lakelog.runtime.zookeeper_server import free_port
from lakelog.spark.session import delta_maven_coordinates
from tests.harness import read_partition, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

APP = Path(__file__).with_name("cluster_app.py")
S3_LAKE_APP = Path(__file__).with_name("s3_lake_app.py")
VENV_BIN = Path(sys.executable).parent


def pyspark_home() -> Path:
    """The pyspark install: its ``jars/`` are Spark's, ``bin/`` has ``spark-submit``, ``spark-class``."""
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """A Spark standalone master and one worker, JVM child processes of this process, on free ports."""

    def __init__(self, root: Path, *, worker_memory: str = "1g") -> None:
        self.root = root
        self.master_port, self.master_ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.worker_memory = worker_memory
        self.work_dir = root / "worker-work"
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _start(self, name: str, main_class: str, args: list[str]) -> None:
        """``spark-class MAIN_CLASS ARGS`` (it ``exec``s the JVM: the child's pid is the JVM's)."""
        env = {**os.environ, "SPARK_HOME": str(pyspark_home()), "SPARK_DAEMON_MEMORY": "256m",
               # -Djava.io.tmpdir names the test's tmp dir in the command line: the leftovers fixture finds it
               "SPARK_DAEMON_JAVA_OPTS": f"-Djava.io.tmpdir={self.root / 'tmp'}",
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",  # else it takes the fixed port 6066
               "SPARK_WORKER_DIR": str(self.work_dir), "SPARK_LOCAL_DIRS": str(self.root / "worker-local")}
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the child holds it; closed below
        try:
            self.processes[name] = spawn([str(pyspark_home() / "bin" / "spark-class"), main_class, *args],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=self.root)
        finally:
            log.close()

    def start(self, timeout_s: float = 300) -> "StandaloneCluster":
        """Start the master, then the worker; return once the master lists the worker as alive."""
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master",
                    ["--host", "127.0.0.1", "--port", str(self.master_port), "--webui-port", str(self.master_ui_port)])
        self._start("worker", "org.apache.spark.deploy.worker.Worker",
                    [self.master_url, "--host", "127.0.0.1", "--cores", "1", "--memory", self.worker_memory,
                     "--webui-port", str(self.worker_ui_port), "--work-dir", str(self.work_dir)])
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < 1:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise AssertionError(f"spark {name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no worker registered with {self.master_url} in {timeout_s} s:\n"
                                     f"{self.log_tail('master')}\n{self.log_tail('worker')}")
            time.sleep(0.25)
        return self

    def alive_workers(self) -> int:
        """``aliveworkers`` of the master's JSON status page (0 while it does not answer)."""
        try:
            return httpx.get(f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=2).json()["aliveworkers"]
        except (httpx.HTTPError, ValueError, KeyError):
            return 0

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.root / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {name}.log ---\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM by pid, worker first (its shutdown stops its executors), then SIGKILL after 20 s."""
        for name in ("worker", "master"):
            proc = self.processes.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def spark_cluster(leftovers):
    """A started :class:`StandaloneCluster` in the test's tmp dir; stopped by pid at the end."""
    cluster = StandaloneCluster(leftovers / "spark")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def submit(cluster: StandaloneCluster, args: list[str], cwd: Path, timeout_s: float = 240, app: Path = APP) -> dict:
    """Run ``app`` with ``spark-submit`` against the cluster, as the README says; returns its JSON line."""
    cmd = [str(VENV_BIN / "spark-submit"), "--master", cluster.master_url,
           "--packages", delta_maven_coordinates()[0],
           "--driver-memory", "512m", "--executor-memory", "512m", "--total-executor-cores", "1",
           # the executors' Python: the one lakelog is installed in (an editable install here)
           "--conf", f"spark.pyspark.python={sys.executable}",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.executor.extraJavaOptions=-Djava.io.tmpdir={cluster.root / 'tmp'}",
           str(app), *args]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    # as in an activated venv: spark-submit finds pyspark's Spark home with the first python3 on the PATH
    env.update(PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", SPARK_LOCAL_DIRS=str(cwd / "driver-local"))
    proc = spawn(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"spark-submit timed out after {timeout_s} s:\n{err[-4000:]}") from None
    (cwd / "spark-submit.log").write_text(err)
    errors = "\n".join(line for line in err.splitlines() if "job failed" in line or line.startswith(("ERROR", "E ")))
    assert proc.returncode == 0, f"spark-submit exited with {proc.returncode}:\n{errors[-4000:]}\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def test_source_and_sink_on_a_standalone_cluster(leftovers, spark_cluster, broker, client, create_topic, topic_name):
    source_topic, sink_topic = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(source_topic, partitions=2)
    create_topic(sink_topic, partitions=2)
    app_dir = leftovers / "app"
    app_dir.mkdir()

    out = submit(spark_cluster, [f"127.0.0.1:{broker.port}", source_topic, sink_topic, str(app_dir)], app_dir)

    assert out["master"] == spark_cluster.master_url
    expected = [[p, i, f"k{p}-{i}", f"v{p}-{i}"] for p in range(2) for i in range(3)]
    assert out["produced"] == expected
    assert out["batch"] == expected
    assert out["stream"] == expected
    # the tasks ran in the worker's executor (its working directory is in the worker's work dir) ...
    cwd, imported_from = out["executor"]
    assert Path(cwd).is_relative_to(spark_cluster.work_dir), cwd
    # ... whose Python imported lakelog from this checkout (the venv's editable install)
    assert Path(imported_from).is_relative_to(Path(__file__).resolve().parents[2] / "platform"), imported_from
    assert out["delta_rows"] == 3  # Delta's jars (--packages) reached the executor
    # lakelog.read.mode=broker: the executors read the source topic through the leader's fetch (a direct
    # read of these tables, whose records are all in Delta, would fetch nothing): per partition, at least
    # one fetch for the batch read and one for the stream
    metrics = httpx.get(f"{broker.url}/metrics").text
    fetches = re.search(rf'^lakelog_fetch_requests_total{{topic="{re.escape(source_topic)}"}} (\S+)$', metrics, re.M)
    assert fetches is not None and float(fetches.group(1)) >= 4, metrics[:2000]
    # the sink's output, through the gateway (binary format: keys and values in base64)
    written = Counter((b64decode(r["key"]).decode(), b64decode(r["value"]).decode())
                      for p in range(2) for r in read_partition(broker.url, sink_topic, p))
    assert written == Counter((k, v) for _, _, k, v in expected)


def test_executors_on_a_standalone_cluster_read_an_s3_lake_directly(leftovers, spark_cluster, broker_factory, lake,
                                                                    topic_name):
    """A broker on an S3 lake (the real object store); the job's executors read the topic with
    ``lakelog.read.mode=direct`` and the ``lakelog.lake.storage.*`` options: every record, none fetched
    through the broker."""
    broker = broker_factory(extra_env=lake.broker_env())
    with LakelogClient(broker.url) as client:
        client.create_topic(topic_name, partitions=2, configs={"lake.commit.interval.ms": "0"})
        for p in range(2):
            client.produce_arrow(topic_name, p, pa.table({"value": [f"v{p}-{i}".encode() for i in range(3)]}))
        wait_for(lambda: [i["lake_end_offset"] for i in client.topic_logs(topic_name)] == [3, 3],
                 what="every record in its partition's table")
    app_dir = leftovers / "app"
    app_dir.mkdir()
    options = {"lakelog." + k: v for k, v in lake.settings.items() if k.startswith("lake.storage.")}

    out = submit(spark_cluster, [broker.url, topic_name, json.dumps(options)], app_dir, app=S3_LAKE_APP)

    assert out["master"] == spark_cluster.master_url
    assert out["rows"] == [[p, i, f"v{p}-{i}"] for p in range(2) for i in range(3)]
    assert Path(out["executor"]).is_relative_to(spark_cluster.work_dir), out["executor"]
    # the executors read the tables in the store: the broker served no fetch of the topic
    metrics = httpx.get(f"{broker.url}/metrics").text
    assert not re.search(rf'^lakelog_fetch_requests_total{{topic="{re.escape(topic_name)}"}} [1-9]', metrics, re.M)
    assert lake.store.secret_access_key not in (app_dir / "spark-submit.log").read_text()  # never logged
