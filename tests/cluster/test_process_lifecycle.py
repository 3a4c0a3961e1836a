"""Child processes never outlive their parent, and SIGTERM/SIGINT stop everything.

Real ``lakelog`` commands (``up``, ``zookeeper start``, ``cluster up``) run as child processes of the
test on ports chosen free at runtime, each test in its own tmp dir. What must hold:

- ``kill -9`` of ``lakelog up`` (or ``lakelog cluster up``) takes its ZooKeeper and brokers with it,
  and ``lakelog up`` restarted on the same ports and data dir serves every acknowledged record;
- SIGTERM (and SIGINT) to each command stops every child: the command exits 0 and no process of its
  data dir is left (checked by pid and by scanning ``/proc/*/cmdline`` for the data dir).
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.processes import DEATH_SIGNAL_SUPPORTED, process_cmdline, spawn
from lakelog.replication.acks import ACKS_HEADER
from lakelog.runtime.zookeeper_server import PID_FILE_NAME, four_letter_word, free_port
from tests.harness import child_pids, pids_mentioning, read_partition, wait_for, wait_gone

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="needs Linux (/proc, PR_SET_PDEATHSIG)"),
]

TOPIC = "lifecycle"
PARTITIONS = 3
# The killed broker's ZooKeeper registration survives the ZooKeeper restart until its session expires;
# a short session keeps the restarted `lakelog up` from waiting the default 18 s for it.
ENV = {"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "4000"}


class Command:
    """One foreground ``lakelog ...`` command in a child process, signalled and waited for by pid.

    It gets SIGKILL if the test process dies. stdout and stderr go to ``{tmp}/{name}.log``.
    """

    def __init__(self, tmp_path: Path, name: str, *args: object, env: dict[str, str] | None = None) -> None:
        self.args = [sys.executable, "-m", "lakelog.cli", *map(str, args)]
        self.log_file = tmp_path / f"{name}.log"
        self.env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.process: subprocess.Popen | None = None

    def start(self) -> "Command":
        with open(self.log_file, "ab") as log:
            self.process = spawn(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=self.env)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def send(self, sig: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, sig)

    def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.args[3:]} still runs {timeout_s} s after the signal:\n{self.log()}") from None


@pytest.fixture
def run(tmp_path, leftovers):
    """Start ``lakelog`` commands for this test; whatever still runs at its end is SIGKILLed by pid."""
    started: list[Command] = []

    def start(name: str, *args: object, env: dict[str, str] | None = None) -> Command:
        command = Command(tmp_path, name, *args, env=env).start()
        started.append(command)
        return command

    yield start
    for command in started:
        if command.running():
            command.send(signal.SIGKILL)
            command.process.wait(10)


def wait_until_serving(command: Command, url: str, timeout_s: float = 90.0) -> None:
    """Poll ``GET {url}/v3/clusters`` until it answers 200; fail early if the command exited."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert command.running(), f"{command.args[3:]} exited with {command.process.returncode}:\n{command.log()}"
        try:
            if httpx.get(f"{url}/v3/clusters", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer within {timeout_s} s:\n{command.log()}"
        time.sleep(0.2)


def zookeeper_pid(zk_data_dir: Path) -> int:
    """The pid the embedded ZooKeeper recorded in its data dir."""
    return json.loads((zk_data_dir / PID_FILE_NAME).read_text())["pid"]


def free_port_pair() -> int:
    """A port p such that p and p + 1 are free now (``cluster up`` gives broker N port + N)."""
    for _ in range(50):
        port = free_port()
        if port >= 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two consecutive free ports")


def assert_nothing_left(data_dir: Path, pids: list[int]) -> None:
    """None of ``pids`` runs, and no process has ``data_dir`` in its command line."""
    wait_gone(pids)
    assert pids_mentioning(os.path.join(data_dir, "")) == [] and pids_mentioning(data_dir) == []


def produce_acked(url: str, batches: int = 8, per_batch: int = 25) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """Create the topic and produce keyed batches with acks=all; returns (partition, offset) -> (key, value)."""
    acked = {}
    with LakelogClient(url) as client:
        client.http.headers[ACKS_HEADER] = "all"
        client.create_topic(TOPIC, partitions=PARTITIONS)
        for b in range(batches):
            records = [(f"key-{b}-{i}".encode(), f"value-{b}-{i}".encode()) for i in range(per_batch)]
            answer = client.produce_binary(TOPIC, records)
            for record, o in zip(records, answer["offsets"], strict=True):
                assert o.get("error_code") is None and o["offset"] >= 0, answer
                acked[(o["partition"], o["offset"])] = record
    assert len(acked) == batches * per_batch
    return acked


def read_all(url: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    out = {}
    for p in range(PARTITIONS):
        for r in read_partition(url, TOPIC, p):
            out[(p, r["offset"])] = (base64.b64decode(r["key"]), base64.b64decode(r["value"]))
    return out


def test_kill_9_of_up_takes_its_children_and_a_restart_serves_every_acked_record(tmp_path: Path, run) -> None:
    data_dir = tmp_path / "data"
    port, zk_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    args = ("up", "--data-dir", data_dir, "--port", port, "--zookeeper-port", zk_port, "--kafka-port", 0,
            "--log-level", "warning")

    up = run("up-1", *args, env=ENV)
    wait_until_serving(up, url)
    zk_pid = zookeeper_pid(data_dir / "zookeeper")
    children = child_pids(up.pid)
    assert zk_pid in children, (zk_pid, children)
    acked = produce_acked(url)

    up.send(signal.SIGKILL)
    assert up.wait(10) == -signal.SIGKILL
    assert_nothing_left(data_dir, [up.pid, *children])

    # same ports, same data dir: no "port already in use", every acknowledged record is there
    again = run("up-2", *args, env=ENV)
    wait_until_serving(again, url)
    new_zk_pid = zookeeper_pid(data_dir / "zookeeper")
    assert new_zk_pid != zk_pid and new_zk_pid in child_pids(again.pid)
    assert read_all(url) == acked

    again.send(signal.SIGTERM)
    assert again.wait(60) == 0, again.log()
    assert_nothing_left(data_dir, [again.pid, new_zk_pid])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_up_stops_its_zookeeper(tmp_path: Path, run, sig: int) -> None:
    data_dir = tmp_path / "data"
    port, zk_port = free_port(), free_port()
    up = run("up", "up", "--data-dir", data_dir, "--port", port, "--zookeeper-port", zk_port, "--kafka-port", 0,
             "--log-level", "warning")
    wait_until_serving(up, f"http://127.0.0.1:{port}")
    zk_pid = zookeeper_pid(data_dir / "zookeeper")
    children = child_pids(up.pid)
    assert zk_pid in children

    up.send(sig)
    assert up.wait(60) == 0, up.log()
    assert_nothing_left(data_dir, [zk_pid, *children])
    assert not (data_dir / "zookeeper" / PID_FILE_NAME).exists()  # a clean stop removes it


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_zookeeper_start_stops_the_server(tmp_path: Path, run, sig: int) -> None:
    data_dir = tmp_path / "zk"
    port = free_port()
    command = run("zookeeper", "zookeeper", "start", "--data-dir", data_dir, "--port", port)

    def serving() -> bool:
        assert command.running(), command.log()
        try:
            return four_letter_word("127.0.0.1", port, "ruok", timeout_s=1) == "imok"
        except OSError:
            return False

    wait_for(serving, what="ZooKeeper to serve")
    zk_pid = zookeeper_pid(data_dir)
    assert child_pids(command.pid) == [zk_pid]

    command.send(sig)
    assert command.wait(30) == 0, command.log()
    assert_nothing_left(data_dir, [zk_pid])


def start_cluster(run, tmp_path: Path, name: str) -> tuple[Command, Path, list[int]]:
    """``lakelog cluster up --brokers 2``, serving; returns it, its data dir and its children's pids."""
    data_dir = tmp_path / "cluster"
    port, zk_port = free_port_pair(), free_port()
    cluster = run(name, "cluster", "up", "--brokers", 2, "--data-dir", data_dir, "--port", port,
                  "--zookeeper-port", zk_port, "--kafka-port", 0, "--log-level", "warning", env=ENV)
    for i in range(2):
        wait_until_serving(cluster, f"http://127.0.0.1:{port + i}")

    def three_children() -> list[int] | None:
        children = child_pids(cluster.pid)
        return children if len(children) == 3 else None

    children = wait_for(three_children, what="ZooKeeper and 2 brokers as children")
    assert zookeeper_pid(data_dir / "zookeeper") in children
    return cluster, data_dir, children


def test_sigterm_to_cluster_up_stops_brokers_and_zookeeper(tmp_path: Path, run) -> None:
    cluster, data_dir, children = start_cluster(run, tmp_path, "cluster")
    cluster.send(signal.SIGTERM)
    assert cluster.wait(90) == 0, cluster.log()
    assert_nothing_left(data_dir, children)


def test_kill_9_of_cluster_up_takes_brokers_and_zookeeper(tmp_path: Path, run) -> None:
    cluster, data_dir, children = start_cluster(run, tmp_path, "cluster")
    cluster.send(signal.SIGKILL)
    assert cluster.wait(10) == -signal.SIGKILL
    assert_nothing_left(data_dir, children)


def test_cluster_up_with_a_zookeeper_ensemble_serves_and_stops_everything(tmp_path: Path, run) -> None:
    """``cluster up --zookeeper-nodes 3``: three ZooKeeper nodes and the brokers, given every node's address and a
    chroot; SIGTERM stops all of them."""
    data_dir = tmp_path / "cluster"
    port = free_port_pair()
    cluster = run("cluster", "cluster", "up", "--brokers", 2, "--zookeeper-nodes", 3, "--data-dir", data_dir,
                  "--port", port, "--log-level", "warning", env=ENV)
    for i in range(2):
        wait_until_serving(cluster, f"http://127.0.0.1:{port + i}")
    children = wait_for(lambda: (lambda c: c if len(c) == 5 else None)(child_pids(cluster.pid)),
                        what="3 ZooKeeper nodes and 2 brokers as children")
    nodes = [data_dir / "zookeeper" / f"node-{myid}" for myid in (1, 2, 3)]
    assert sorted(zookeeper_pid(node) for node in nodes) == sorted(set(children) & {zookeeper_pid(n) for n in nodes})
    for myid, node in enumerate(nodes, start=1):
        assert (node / "myid").read_text().strip() == str(myid)
    modes = [four_letter_word("127.0.0.1", int(re.search(r"^clientPort=(\d+)$", (node / "zoo.cfg").read_text(),
                                                                    re.MULTILINE).group(1)), "srvr") for node in nodes]
    assert sorted(line for reply in modes for line in reply.splitlines() if line.startswith("Mode:")) == [
        "Mode: follower", "Mode: follower", "Mode: leader"]
    connects = {arg for pid in children for arg in (process_cmdline(pid) or []) if arg.count(":") == 3}
    assert len(connects) == 1 and next(iter(connects)).endswith("/lakelog"), connects
    assert len(produce_acked(f"http://127.0.0.1:{port}", batches=2)) == 50

    cluster.send(signal.SIGTERM)
    assert cluster.wait(90) == 0, cluster.log()
    assert_nothing_left(data_dir, children)
