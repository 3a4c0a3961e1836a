"""A ZooKeeper ensemble from the pyspark jars: ``ZooKeeperEnsemble`` on one host, and one node per
``lakelog zookeeper start --myid N --server ...`` (or ``--config zoo.cfg``) as across hosts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from lakelog.processes import spawn
from lakelog.replication.metadata import BROKERS_PATH
from lakelog.runtime.broker_process import BrokerProcess
from lakelog.runtime.zookeeper_ensemble import ZooKeeperEnsemble
from lakelog.runtime.zookeeper_server import QuorumServer, ZooKeeperServer, four_letter_word, free_port
from tests.harness import CONDITION_WAIT_S, wait_for, wait_gone
from tests.runtime.test_zookeeper_server import needs_java


def _kazoo(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=30.0)
    return client


def test_quorum_server_lines_parse_and_render() -> None:
    server = QuorumServer.parse("2=zk2.example.com:2888:3888")
    assert server == QuorumServer(2, "zk2.example.com", 2888, 3888)
    assert server.config_line() == "server.2=zk2.example.com:2888:3888"
    assert QuorumServer.parse("server.3=10.0.0.3:2888:3888") == QuorumServer(3, "10.0.0.3", 2888, 3888)
    for bad in ("zk1:2888:3888", "1=zk1:2888", "0=zk1:2888:3888", "1=zk1:2888:70000"):
        with pytest.raises(ValueError):
            QuorumServer.parse(bad)
    with pytest.raises(ValueError, match="odd number"):
        ZooKeeperEnsemble(data_dir=Path("unused"), nodes=4)
    with pytest.raises(ValueError, match="not among"):
        ZooKeeperServer(data_dir=Path("unused"), myid=4, quorum=[server])


@needs_java
def test_an_ensemble_serves_through_the_loss_of_any_one_node(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(data_dir=tmp_path / "zookeeper", nodes=3, tick_time_ms=500)
    ensemble.start()
    try:
        assert len(ensemble.connect_string.split(",")) == 3
        for node in ensemble.servers:
            assert (node.data_dir / "myid").read_text().strip() == str(node.myid)
            assert node.data_dir == tmp_path / "zookeeper" / f"node-{node.myid}"
            config = node.config_file.read_text()
            assert all(server.config_line() + "\n" in config for server in ensemble.quorum)
        assert sorted(node.mode() for node in ensemble.servers) == ["follower", "follower", "leader"]

        client = _kazoo(ensemble.connect_string)
        try:
            client.create("/orders", b"0")
            leader = ensemble.leader()
            assert leader is not None
            leader.kill()  # SIGKILL: the others elect a new leader and go on serving
            # the client may have been on that node, or on a follower that drops its clients while the
            # others elect: kazoo's retry reconnects and writes again
            client.retry(client.set, "/orders", b"1")
            assert ensemble.leader() not in (None, leader)
            leader.start()  # it rejoins as a follower with every write it missed
            assert leader.mode() == "follower"
            direct = _kazoo(leader.connect_string)  # read from that node alone
            try:
                direct.retry(direct.sync, "/orders")
                assert direct.retry(direct.get, "/orders")[0] == b"1"
            finally:
                direct.stop()
                direct.close()
        finally:
            client.stop()
            client.close()
    finally:
        ensemble.stop()
    assert not any(node.is_running() for node in ensemble.servers)


@needs_java
def test_an_ensemble_of_five_serves_through_the_loss_of_two_nodes(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(data_dir=tmp_path / "zookeeper", nodes=5, tick_time_ms=500, heap_mb=128)
    ensemble.start()
    try:
        assert sorted(node.mode() for node in ensemble.servers) == ["follower"] * 4 + ["leader"]
        client = _kazoo(ensemble.connect_string)
        try:
            client.create("/orders", b"0")
            lost = [ensemble.leader(), next(node for node in ensemble.servers if node.mode() == "follower")]
            for node in lost:
                node.kill()  # three of five still form a quorum
            client.retry(client.set, "/orders", b"1")
            assert client.retry(client.get, "/orders")[0] == b"1"
        finally:
            client.stop()
            client.close()
    finally:
        ensemble.stop()


def _node_command(tmp_path: Path, myid: int, *args: object) -> subprocess.Popen:
    with open(tmp_path / f"node-{myid}.log", "ab") as log:
        return spawn([sys.executable, "-m", "lakelog.cli", "zookeeper", "start", *map(str, args)],
                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                     env={**os.environ, "PYTHONUNBUFFERED": "1"})


@needs_java
def test_zookeeper_start_runs_one_node_of_an_ensemble(tmp_path: Path, leftovers) -> None:
    """Three ``lakelog zookeeper start`` commands, as on three hosts: two with --myid and --server, the
    third with a zoo.cfg of its own; together they serve, and SIGTERM stops each."""
    quorum = [QuorumServer(myid, "127.0.0.1", free_port(), free_port()) for myid in (1, 2, 3)]
    client_ports = {server.myid: free_port() for server in quorum}
    servers = [f"--server={server.myid}=127.0.0.1:{server.quorum_port}:{server.election_port}" for server in quorum]
    commands = [_node_command(tmp_path, myid, "--myid", myid, *servers, "--port", client_ports[myid],
                              "--data-dir", tmp_path / f"zk-{myid}") for myid in (1, 2)]
    config = tmp_path / "zoo-3.cfg"
    config.write_text(f"tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={tmp_path / 'zk-3'}\n"
                      f"clientPort={client_ports[3]}\nclientPortAddress=127.0.0.1\n"
                      "4lw.commands.whitelist=ruok,srvr\nadmin.enableServer=false\n"
                      + "".join(server.config_line() + "\n" for server in quorum))
    commands.append(_node_command(tmp_path, 3, "--config", config, "--myid", 3))

    def modes() -> list[str] | None:
        try:
            replies = [four_letter_word("127.0.0.1", port, "srvr") for port in client_ports.values()]
        except OSError:
            return None
        found = sorted(line.split(": ")[1] for reply in replies for line in reply.splitlines()
                       if line.startswith("Mode: "))
        return found if len(found) == 3 else None

    assert wait_for(modes, what="three nodes serving") == ["follower", "follower", "leader"]
    assert (tmp_path / "zk-3" / "myid").read_text().strip() == "3"
    writer, reader = _kazoo(f"127.0.0.1:{client_ports[1]}"), _kazoo(f"127.0.0.1:{client_ports[3]}")
    try:
        writer.create("/written-on-node-1", b"x")
        reader.sync("/written-on-node-1")
        assert reader.get("/written-on-node-1")[0] == b"x"
    finally:
        for client in (writer, reader):
            client.stop()
            client.close()
    for command in commands:
        assert command.poll() is None, (tmp_path / "node-1.log").read_text()
        os.kill(command.pid, signal.SIGTERM)
    for command in commands:
        assert command.wait(CONDITION_WAIT_S) == 0
    wait_gone([command.pid for command in commands])


def test_zookeeper_start_refuses_half_an_ensemble(tmp_path: Path) -> None:
    def run(*args: object) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lakelog.cli", "zookeeper", "start", "--data-dir", tmp_path,
                               *map(str, args)], capture_output=True, text=True, timeout=60)

    missing_myid = run("--server", "1=127.0.0.1:2888:3888")
    assert missing_myid.returncode != 0 and "--myid" in missing_myid.stderr + missing_myid.stdout
    missing_servers = run("--myid", "1")
    assert missing_servers.returncode != 0 and "--server" in missing_servers.stderr + missing_servers.stdout
    bad = run("--myid", "1", "--server", "1=127.0.0.1:2888")
    assert bad.returncode != 0 and "ID=HOST:QUORUM_PORT:ELECTION_PORT" in bad.stderr + bad.stdout


def test_a_broker_creates_the_chroot_of_its_zookeeper_connect(zookeeper, tmp_path: Path) -> None:
    """As Kafka's brokers: ``zookeeper.connect`` may name a chroot that does not exist yet."""
    chroot = f"/created-by-a-broker-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(zookeeper_connect=zookeeper.connect_string + chroot, log_dirs=tmp_path / "logs").start()
    try:
        client = _kazoo(zookeeper.connect_string)
        try:
            assert client.exists(f"{chroot}{BROKERS_PATH}/0") is not None
        finally:
            client.stop()
            client.close()
    finally:
        broker.stop()
