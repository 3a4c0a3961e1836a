"""The embedded ZooKeeper server: a real ZooKeeper from the pyspark jars, run with the machine's Java."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from lakelog.errors import LakelogError
from lakelog.processes import DEATH_SIGNAL_SUPPORTED, parent_pid, spawn
from lakelog.replication.errors import ReplicationError, ZooKeeperStartError
from lakelog.runtime.zookeeper_server import (
    MAIN_CLASS,
    ZooKeeperServer,
    find_java,
    four_letter_word,
    free_port,
    zookeeper_classpath,
)
from tests.harness import wait_for, wait_gone


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
    assert json.loads(server.pid_file.read_text()) == {"pid": pid, "parent_pid": os.getpid(),
                                                       "client_port": server.client_port}
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
    assert not server.pid_file.exists()
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


# -- never outliving the parent; reclaiming a server left behind --------------------------------------

# Starts a ZooKeeperServer on argv[1] (data dir), argv[2] (port) and sleeps; with argv[3] == "orphan" it
# starts it without the death signal, as on a system without PR_SET_PDEATHSIG, so it is left behind
# when this script is killed.
_OWNER_SCRIPT = """
import subprocess, sys, time
from pathlib import Path
import lakelog.runtime.zookeeper_server as zs
if sys.argv[3] == "orphan":
    zs.spawn = lambda args, death_signal=None, **kwargs: subprocess.Popen(list(args), **kwargs)
zs.ZooKeeperServer(data_dir=Path(sys.argv[1]), client_port=int(sys.argv[2])).start(timeout_s=60)
print("serving", flush=True)
time.sleep(600)
"""


def _start_owner(data_dir: Path, port: int, mode: str) -> tuple[subprocess.Popen, int]:
    """Run _OWNER_SCRIPT; return it and the pid of its ZooKeeper once that serves."""
    owner = spawn([sys.executable, "-c", _OWNER_SCRIPT, str(data_dir), str(port), mode],
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = owner.stdout.readline()
    assert line.strip() == "serving", line + owner.stdout.read()
    owner.stdout.close()
    record = json.loads((data_dir / "zookeeper.pid").read_text())
    assert record["parent_pid"] == owner.pid and parent_pid(record["pid"]) == owner.pid
    return owner, record["pid"]


@needs_java
@pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="PR_SET_PDEATHSIG is Linux-only")
def test_server_dies_with_its_parent(tmp_path: Path, leftovers) -> None:
    data_dir, port = tmp_path / "zookeeper", free_port()
    owner, zk_pid = _start_owner(data_dir, port, "normal")
    owner.kill()  # SIGKILL: no atexit, no stop(); only the kernel's death signal reaches the JVM
    owner.wait(10)
    wait_gone([zk_pid], what="the ZooKeeper of a killed parent")
    wait_for(lambda: not _port_open("127.0.0.1", port), what="the client port to close")

    # its pid file is stale now: removed, and a new server starts on the same data dir and port
    zk = ZooKeeperServer(data_dir=data_dir, client_port=port)
    assert zk.pid_file.exists()
    assert zk.reclaim() is None and not zk.pid_file.exists()
    with zk:
        assert four_letter_word(zk.host, port, "ruok") == "imok"


@needs_java
def test_server_left_behind_is_stopped_by_the_next_start(tmp_path: Path, leftovers) -> None:
    data_dir, port = tmp_path / "zookeeper", free_port()
    owner, orphan = _start_owner(data_dir, port, "orphan")
    client, chroot = _chroot_client(f"127.0.0.1:{port}")
    try:
        client.create("/brokers/ids/0", b"before", makepath=True)
    finally:
        client.stop()
        client.close()
    owner.kill()
    owner.wait(10)
    time.sleep(0.5)
    assert _process_exists(orphan) and parent_pid(orphan) != owner.pid  # left behind, re-parented
    assert _port_open("127.0.0.1", port)

    # same data dir, same port: the old JVM is stopped (it held the port) and the data is kept
    with ZooKeeperServer(data_dir=data_dir, client_port=port) as zk:
        assert zk.pid != orphan
        wait_gone([orphan], what="the ZooKeeper left behind")
        assert json.loads(zk.pid_file.read_text())["pid"] == zk.pid
        client = _kazoo(zk.connect_string + chroot)
        try:
            assert client.get("/brokers/ids/0")[0] == b"before"
        finally:
            client.stop()
            client.close()
    assert not zk.pid_file.exists()


@needs_java
def test_pid_file_never_stops_an_unrelated_process(tmp_path: Path, leftovers) -> None:
    # A live ZooKeeper of another data dir, and a live process that is no ZooKeeper at all.
    other = ZooKeeperServer(data_dir=tmp_path / "other", client_port=free_port())
    sleeper = spawn(["sleep", "300"])
    try:
        other.start()
        zk = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port())
        zk.data_dir.mkdir()
        for victim in (other.pid, sleeper.pid, "not json", '{"pid": "1"}'):
            zk.pid_file.write_text(json.dumps({"pid": victim, "parent_pid": 1, "client_port": 1})
                                   if isinstance(victim, int) else victim)
            assert zk.reclaim() is None  # what start() does first
            assert not zk.pid_file.exists()  # a stale pid file is removed
            assert other.is_running() and sleeper.poll() is None
        zk.pid_file.write_text(json.dumps({"pid": sleeper.pid, "parent_pid": 1, "client_port": 1}))
        with zk:
            assert json.loads(zk.pid_file.read_text())["pid"] == zk.pid
        assert other.is_running() and sleeper.poll() is None
        args = Path(f"/proc/{other.pid}/cmdline").read_bytes().split(b"\0")
        assert MAIN_CLASS.encode() in args  # it really was a ZooKeeper, only not of this data dir
    finally:
        other.stop()
        sleeper.kill()
        sleeper.wait(10)


@needs_java
def test_data_dir_of_a_running_server_is_refused(tmp_path: Path) -> None:
    first = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port())
    second = ZooKeeperServer(data_dir=tmp_path / "zookeeper", client_port=free_port())
    with first:
        with pytest.raises(ZooKeeperStartError, match="in use by ZooKeeper pid") as info:
            second.start()
        assert str(first.pid) in str(info.value)
        assert first.is_running() and four_letter_word(first.host, first.client_port, "ruok") == "imok"
        assert second.pid is None
