"""The embedded ZooKeeper server: a real ZooKeeper from the pyspark jars, run with the machine's Java."""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from lakelog.errors import LakelogError
from lakelog.replication.errors import ReplicationError, ZooKeeperStartError
from lakelog.replication.zookeeper_server import (
    ZooKeeperServer,
    find_java,
    four_letter_word,
    free_port,
    zookeeper_classpath,
)


def _java_available() -> bool:
    try:
        find_java()
        return True
    except ZooKeeperStartError:
        return False


needs_java = pytest.mark.skipif(not _java_available(), reason="no Java (JAVA_HOME or java on PATH)")


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _kazoo(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=15.0)
    return client


def _chroot_client(connect_string: str) -> tuple[KazooClient, str]:
    """A kazoo client under a fresh chroot ``/test-<uuid>`` (created first, as ZooKeeper requires)."""
    chroot = f"/test-{uuid.uuid4().hex}"
    root = _kazoo(connect_string)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    return _kazoo(connect_string + chroot), chroot


@pytest.fixture
def server(tmp_path: Path):
    zk = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port())
    yield zk
    zk.stop()


def test_free_port_and_classpath() -> None:
    port = free_port()
    assert 1024 <= port <= 65535
    entries = zookeeper_classpath().split(os.pathsep)
    assert Path(entries[0]).name.startswith("zookeeper-3.") and Path(entries[0]).is_file()
    assert Path(entries[1]).name.startswith("zookeeper-jute-") and Path(entries[1]).is_file()
    assert entries[-1].endswith("*")


def test_errors_carry_rest_fields() -> None:
    err = ZooKeeperStartError("boom")
    assert isinstance(err, ReplicationError) and isinstance(err, LakelogError)
    assert (err.http_status, err.error_code, err.retriable) == (503, 50303, True)
    assert err.to_body() == {"error_code": 50303, "message": "boom"}


@needs_java
def test_start_serve_stop(server: ZooKeeperServer) -> None:
    started = time.monotonic()
    server.start()
    start_s = time.monotonic() - started
    print(f"ZooKeeper start: {start_s:.2f} s")
    assert server.is_running()
    pid = server.pid
    assert pid is not None and _process_exists(pid)
    assert server.connect_string == f"127.0.0.1:{server.client_port}"

    config = (server.data_dir / "zoo.cfg").read_text()
    assert f"clientPort={server.client_port}\n" in config
    assert f"dataDir={server.data_dir}\n" in config
    assert "4lw.commands.whitelist=ruok,srvr,mntr,stat\n" in config
    assert "admin.enableServer=false\n" in config
    assert "{" not in "".join(line for line in config.splitlines() if not line.startswith("#"))

    assert four_letter_word(server.host, server.client_port, "ruok") == "imok"
    assert "zk_server_state\tstandalone" in four_letter_word(server.host, server.client_port, "mntr")

    client, chroot = _chroot_client(server.connect_string)
    try:
        client.create("/topics/orders", b'{"partitions": 3}', makepath=True)
        data, stat = client.get("/topics/orders")
        assert data == b'{"partitions": 3}' and stat.version == 0
        assert client.get_children("/topics") == ["orders"]
    finally:
        client.stop()
        client.close()
    root = _kazoo(server.connect_string)
    try:
        assert root.exists(f"{chroot}/topics/orders") is not None
    finally:
        root.stop()
        root.close()

    server.stop()
    assert not server.is_running()
    assert not _process_exists(pid)
    assert not _port_open("127.0.0.1", server.client_port)
    server.stop()  # a second stop is a no-op

    log = server.log_file.read_text()
    assert server.log_file == server.data_dir / "zookeeper.log"
    assert " INFO " in log and f"binding to port /127.0.0.1:{server.client_port}" in log
    assert " DEBUG " not in log


@needs_java
def test_restart_keeps_znodes(tmp_path: Path) -> None:
    data_dir = tmp_path / "zookeeper"
    port = free_port()
    with ZooKeeperServer(data_dir=data_dir, client_port=port) as first:
        client, chroot = _chroot_client(first.connect_string)
        try:
            client.create("/brokers/ids/0", b"broker-0", makepath=True)
            client.set("/brokers/ids/0", b"broker-0-v2")
        finally:
            client.stop()
            client.close()
        first_pid = first.pid
    assert not first.is_running() and not _process_exists(first_pid)

    # Same data dir, same port: a new JVM finds the snapshot and transaction log.
    with ZooKeeperServer(data_dir=data_dir, client_port=port) as second:
        assert second.pid != first_pid
        client = _kazoo(second.connect_string + chroot)
        try:
            data, stat = client.get("/brokers/ids/0")
        finally:
            client.stop()
            client.close()
        assert data == b"broker-0-v2" and stat.version == 1
    assert not second.is_running()


@needs_java
def test_port_in_use_fails_fast(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        zk = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=port)
        # fails fast: it raises about the port (not "did not serve within" after the long timeout)
        with pytest.raises(ZooKeeperStartError) as info:
            zk.start(timeout_s=120)
    message = str(info.value)
    assert "did not serve within" not in message
    assert f"127.0.0.1:{port}" in message and "already in use" in message
    assert info.value.retriable and info.value.http_status == 503
    assert zk.pid is None and not zk.is_running()  # no JVM was launched


@needs_java
def test_jvm_exit_during_start_reports_log_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the JVM itself fails (here: ZooKeeper's own bind), the error says why and quotes the log."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        zk = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=port)
        monkeypatch.setattr(zk, "_check_port_free", lambda: None)  # let ZooKeeper find out itself
        # the JVM's exit is reported as such, not waited out until the (long) timeout
        with pytest.raises(ZooKeeperStartError) as info:
            zk.start(timeout_s=120)
    message = str(info.value)
    assert "did not serve within" not in message
    assert "exited with code" in message
    assert "java.net.BindException: Address already in use" in message
    assert str(zk.log_file) in message
    assert not zk.is_running() and not _process_exists(zk.pid)


@needs_java
def test_start_timeout_stops_the_jvm(tmp_path: Path) -> None:
    zk = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port())
    with pytest.raises(ZooKeeperStartError, match="did not serve within"):
        zk.start(timeout_s=0.0)
    assert zk.pid is not None
    assert not zk.is_running() and not _process_exists(zk.pid)


def test_missing_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zk = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port())

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(ZooKeeperStartError, match="JAVA_HOME"):
        zk.start()

    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ZooKeeperStartError, match="Java not found"):
        zk.start()
    assert zk.pid is None


def test_invalid_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="client_port"):
        ZooKeeperServer(data_dir=tmp_path, client_port=0)
    with pytest.raises(ValueError, match="heap_mb"):
        ZooKeeperServer(data_dir=tmp_path, heap_mb=0)
