"""Apache Kafka Connect, unchanged, on lakelog's Kafka listener: a distributed worker keeps its config,
offset and status topics on lakelog (created compacted by the worker itself), a ``FileStreamSource``
connector fills a topic from a file and a ``FileStreamSink`` connector drains it into another file; the
worker killed with SIGKILL and started again resumes from its stored offsets. The jars come from Maven
Central (:func:`lakelog.runtime.kafka_jars.kafka_connect_jars`, cached)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.processes import spawn
from lakelog.runtime.kafka_jars import LOG4J2_WARN, kafka_connect_jars, kafka_jars, kafka_tool_command
from lakelog.runtime.zookeeper_server import free_port

pytestmark = pytest.mark.kafka_tools

CONNECT_DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
INTERNAL_TOPICS = ("connect-configs", "connect-offsets", "connect-status")


class ConnectWorker:
    """One Connect worker JVM in distributed mode (``connect-distributed.sh worker.properties``)."""

    def __init__(self, tmp: Path, bootstrap: str, name: str) -> None:
        self.rest_port = free_port()
        self.log_file = tmp / f"{name}.log"
        properties = tmp / f"{name}.properties"
        properties.write_text("\n".join([
            f"bootstrap.servers={bootstrap}",
            "group.id=connect-cluster",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic=connect-configs",
            "offset.storage.topic=connect-offsets",
            "status.storage.topic=connect-status",
            *(f"{kind}.storage.replication.factor=1" for kind in ("config", "offset", "status")),
            "offset.flush.interval.ms=500",
            f"listeners=http://127.0.0.1:{self.rest_port}",
            "plugin.discovery=only_scan",
        ]) + "\n")
        log4j = tmp / "connect-log4j2.properties"
        log4j.write_text(LOG4J2_WARN)
        self.command = kafka_tool_command(CONNECT_DISTRIBUTED, str(properties), libs=kafka_jars(), heap="512m",
                                          extra_libs=(kafka_connect_jars(),), log4j2_file=log4j)
        self.process: subprocess.Popen | None = None
        self.rest = httpx.Client(base_url=f"http://127.0.0.1:{self.rest_port}", timeout=30)

    def start(self) -> "ConnectWorker":
        with open(self.log_file, "ab") as out:
            self.process = spawn(self.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        _wait_until(lambda: self._serving(), what=f"the Connect worker's REST API; log:\n{self.log_tail()}")
        return self

    def _serving(self) -> bool:
        assert self.process.poll() is None, f"the Connect worker exited:\n{self.log_tail()}"
        try:
            return self.rest.get("/connectors").status_code == 200
        except httpx.TransportError:
            return False

    def running(self, connector: str) -> bool:
        answer = self.rest.get(f"/connectors/{connector}/status")
        if answer.status_code != 200:
            return False
        status = answer.json()
        return status["connector"]["state"] == "RUNNING" and [t["state"] for t in status["tasks"]] == ["RUNNING"]

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        self.rest.close()


def _wait_until(condition, *, what: str, timeout_s: float = 240.0) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` after ``timeout_s`` (a bound for a hung
    JVM, far above the few seconds each step takes)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_connect_worker_keeps_its_state_on_lakelog_and_resumes_after_sigkill(kafka_broker, topic_name, tmp_path,
                                                                                leftovers):
    broker, bootstrap = kafka_broker
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    written = [f"line-{i}" for i in range(500)]
    source_file.write_text("".join(f"{line}\n" for line in written))

    worker = ConnectWorker(tmp_path, bootstrap, "worker-1").start()
    try:
        for name, config in (
                ("file-source", {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                                 "file": str(source_file), "topic": topic_name, "tasks.max": "1"}),
                ("file-sink", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                               "file": str(sink_file), "topics": topic_name, "tasks.max": "1"})):
            answer = worker.rest.post("/connectors", json={"name": name, "config": config})
            assert answer.status_code == 201, answer.text
        _wait_until(lambda: worker.running("file-source") and worker.running("file-sink"), what="both connectors")
        _wait_until(lambda: len(_lines(sink_file)) >= len(written), what="the sink's first 500 lines")

        with LakelogClient(broker.url) as http:
            # 1. the worker created its internal topics compacted, as Connect requires
            for internal in INTERNAL_TOPICS:
                policy = http.admin.topic_configs(internal)["cleanup.policy"]["value"]
                assert policy == "compact", (internal, policy)
            # 2. wait until both connectors stored their positions: the source's file position in
            # connect-offsets, the sink's group offset at the topic's end
            assert http.partition_offsets(topic_name, 0)["end_offset"] == 500

            def source_position_stored() -> bool:
                positions = [(r["value"] or {}).get("position") for r in _records(http, "connect-offsets")]
                return source_file.stat().st_size in positions

            def sink_offset_committed() -> bool:
                committed = http.groups.committed_offsets("connect-file-sink", topic_name)
                return [(c["partition"], c["offset"]) for c in committed] == [(0, 500)]

            _wait_until(source_position_stored, what="the source's stored file position")
            _wait_until(sink_offset_committed, what="the sink's committed offset")
    finally:
        worker.kill()  # 3. SIGKILL: nothing is flushed or left gracefully

    more = [f"line-{i}" for i in range(500, 1000)]
    with open(source_file, "a") as f:
        f.write("".join(f"{line}\n" for line in more))
    worker = ConnectWorker(tmp_path, bootstrap, "worker-2").start()
    try:
        _wait_until(lambda: len(_lines(sink_file)) >= 1000, what="the sink's 1,000 lines after the restart")
        time.sleep(2)  # four offset flush intervals: a duplicate would show up in this time
        # 4. resumed from the stored offsets: every line once, in order, nothing read twice
        assert _lines(sink_file) == written + more
    finally:
        worker.kill()


def _records(http: LakelogClient, topic: str) -> list[dict]:
    """Every record of every partition of ``topic`` over HTTP, keys and values decoded as JSON."""
    out = []
    for partition in range(len(http.admin.describe_topic(topic)["partitions"])):
        offsets = http.partition_offsets(topic, partition)
        if offsets["end_offset"] > offsets["beginning_offset"]:
            out.extend(http.fetch(topic, partition, offsets["beginning_offset"], max_bytes=1 << 20, form="json"))
    return out
