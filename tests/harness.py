"""Test harness: real ZooKeeper, real broker processes, stopped by pid (the kazoo testing model).

``BrokerProcess`` runs ``python -m lakelog.cli broker start`` as a child process on a free port with
its own log dir and ZooKeeper chroot; tests stop it with SIGTERM or kill it with SIGKILL by pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from kazoo.client import KazooClient

from lakelog.replication.zookeeper_server import free_port


def new_chroot(zk_connect: str) -> str:
    """Create a fresh chroot znode and return ``host:port/chroot``."""
    chroot = f"/test-{uuid.uuid4().hex[:12]}"
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return zk_connect + chroot


class BrokerProcess:
    """A broker in a child process (``lakelog broker start``), on a free port.

    Args:
        zookeeper_connect: ``host:port/chroot``.
        log_dirs: where its tables go.
        broker_id: broker.id. Default: 0.
        extra_env: extra ``LAKELOG_*`` settings.
    """

    def __init__(self, *, zookeeper_connect: str, log_dirs: Path, broker_id: int = 0,
                 port: int | None = None, extra_env: dict[str, str] | None = None) -> None:
        self.zookeeper_connect = zookeeper_connect
        self.log_dirs = Path(log_dirs)
        self.broker_id = broker_id
        self.port = port or free_port()
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen | None = None
        self.log_file = self.log_dirs.parent / f"broker-{broker_id}-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, *, timeout_s: float = 60.0) -> "BrokerProcess":
        self.log_dirs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.extra_env, "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "lakelog.cli", "broker", "start", "--broker-id", str(self.broker_id),
               "--port", str(self.port), "--log-dirs", str(self.log_dirs),
               "--zookeeper-connect", self.zookeeper_connect, "--log-level", "warning"]
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/v3/clusters", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"broker did not answer within {timeout_s}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, *, timeout_s: float = 20.0) -> int | None:
        """SIGTERM by pid, wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        os.kill(self.process.pid, signal.SIGCONT)  # in case it was paused
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL by pid: a crash."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP by pid: the process freezes (its ZooKeeper session and fetches stop with it)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT by pid after :meth:`pause`."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
