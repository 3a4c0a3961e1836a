"""A single-node Apache Kafka broker (KRaft, combined broker + controller) for the benchmarks and for the
tests that run Kafka's ecosystem between Apache Kafka and lakelog (MirrorMaker 2 mirroring from Kafka).

lakelog itself never runs a Kafka broker. The jars come from
:func:`lakelog.runtime.kafka_jars.kafka_jars` (Maven Central, cached in
``~/.cache/lakelog-bench/kafka-{version}/libs``; the tests of Kafka's tools use the same cache). :class:`KafkaBroker` formats a data dir under the
caller's temp dir (``kafka.tools.StorageTool format``), starts ``kafka.Kafka server.properties`` on two
ports free at start (client listener and controller), creates topics with
``org.apache.kafka.tools.TopicCommand`` and stops the JVM by its pid (SIGTERM, then SIGKILL after 30 s).
"""

from __future__ import annotations

import base64
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from lakelog.processes import spawn, stop_child
from lakelog.runtime.kafka_jars import KAFKA_VERSION, kafka_jars
from lakelog.runtime.kafka_jars import LOG4J2_WARN as _LOG4J2
from lakelog.runtime.zookeeper_server import find_java, free_port


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class KafkaBroker:
    """One Kafka JVM in KRaft combined mode, data and log under ``data_dir``."""

    def __init__(self, data_dir: Path, version: str = KAFKA_VERSION, heap: str = "1g") -> None:
        self.data_dir, self.version, self.heap = Path(data_dir), version, heap
        self.port = self.controller_port = 0
        self.process: subprocess.Popen | None = None
        self.log_file = self.data_dir / "kafka.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    def _java(self, main: str, *args: str, heap: str = "256m", jvm: tuple[str, ...] = ()) -> list[str]:
        return [find_java(), f"-Xmx{heap}", *jvm, "-cp", str(self.libs / "*"),
                f"-Dlog4j2.configurationFile={(self.data_dir / 'log4j2.properties').as_uri()}", main, *args]

    def tool_command(self, main: str, *args: str, heap: str = "512m") -> list[str]:
        """The command line of one of Kafka's tools (``org.apache.kafka.tools.ProducerPerformance``, ...) on
        the broker's jars; the broker must have been started (its jars fetched)."""
        return self._java(main, *args, heap=heap)

    def _run(self, main: str, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(self._java(main, *args), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} exited with {done.returncode}:\n"
                               f"{(done.stdout + done.stderr)[-2000:]}")
        return done.stdout

    def start(self, timeout_s: float = 90) -> "KafkaBroker":
        """Fetch the jars if needed, format the storage, start the broker and wait for its listener."""
        self.libs = kafka_jars(self.version)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2)
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        props = self.data_dir / "server.properties"
        props.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={self.data_dir / 'data'}",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
        ]) + "\n")
        # the StorageTool is Scala in kafka_2.13 up to 4.x (kafka.tools.StorageTool)
        self._run("kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(props))
        with open(self.log_file, "ab") as out:
            # the JVM options of Kafka's kafka-server-start.sh / kafka-run-class.sh
            jvm = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                   "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true")
            self.process = spawn(self._java("kafka.Kafka", str(props), heap=self.heap, jvm=jvm), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, death_signal=signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while not _port_open(self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka did not listen on {self.port} in {timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)
        return self

    def create_topic(self, topic: str, partitions: int) -> None:
        self._run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", self.bootstrap, "--create",
                  "--topic", topic, "--partitions", str(partitions), "--replication-factor", "1")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM the broker's pid (a controlled shutdown), SIGKILL if it is still there after ``timeout_s``."""
        if self.process is not None:
            stop_child(self.process, timeout_s=timeout_s)


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (what ``random-uuid`` prints)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
