"""A broker in a child process (``lakelog broker start``), started and stopped by pid.

Used by the demo, the benchmarks, ``lakelog cluster up`` and the tests (the kazoo testing model:
real processes, signals by pid)::

    broker = BrokerProcess(zookeeper_connect="127.0.0.1:2181/lakelog", log_dirs=Path("data/logs")).start()
    ...                       # broker.url, broker.pid; broker.kill() / pause() / resume() for faults
    broker.stop()             # SIGTERM (controlled shutdown), SIGKILL if it does not exit in time

The broker never outlives the process that started it: on Linux the kernel sends it SIGKILL when its
parent dies (:func:`lakelog.processes.spawn`). A broker whose parent died is a crash, not a controlled
shutdown: the ZooKeeper it would hand its leaderships over through usually dies with the same parent,
and recovery after SIGKILL loses no acknowledged record.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import httpx

from lakelog.config import read_properties
from lakelog.processes import spawn
from lakelog.client.tls import client_ssl_context
from lakelog.runtime.zookeeper_server import free_port


class BrokerProcess:
    """One broker child process on ``127.0.0.1``.

    Args:
        zookeeper_connect: ``host:port[/chroot]``.
        log_dirs: where its partition tables go (created).
        broker_id: ``broker.id``. Default: 0.
        port: HTTP port. Default: a free one.
        extra_env: extra environment, e.g. ``LAKELOG_*`` settings. Default: none.
        log_file: where its stdout and stderr go. Default: ``broker-{id}-{port}.log`` beside ``log_dirs``.
        log_level: ``--log-level``. Default: ``warning``.
        new_session: run it in its own session, so a Ctrl-C in the terminal reaches only the parent,
            which then stops it. Default: False.
        config_file: a ``broker.properties`` passed as ``--config``. Default: none.
        log_format: ``--log-format``: ``text`` or ``json`` (one JSON object per line). Default: ``text``.
        ssl_certfile, ssl_keyfile, ssl_cafile: the broker's ``ssl.certfile``/``ssl.keyfile``/``ssl.cafile``
            (PEM; set in its environment, over ``extra_env``): it serves HTTPS, :attr:`url` is ``https://``
            and the readiness poll verifies it against ``ssl_cafile`` and presents the broker's own
            certificate (so ``ssl.client.auth=required`` brokers answer it too). Default: none: those the
            child gets from ``LAKELOG_SSL_*`` in its environment or from ``config_file``, if any (else HTTP).
        kafka_port: its Kafka listener's port (``lakelog broker start --kafka-port``; 0: a free one) when
            ``listeners`` is set neither in its environment nor in ``config_file``. Default: None: no Kafka
            listener unless those set ``listeners``.
    """

    def __init__(self, *, zookeeper_connect: str, log_dirs: Path, broker_id: int = 0, port: int | None = None,
                 extra_env: dict[str, str] | None = None, log_file: Path | None = None,
                 log_level: str = "warning", new_session: bool = False, config_file: Path | None = None,
                 log_format: Literal["text", "json"] = "text", ssl_certfile: Path | None = None,
                 ssl_keyfile: Path | None = None, ssl_cafile: Path | None = None,
                 kafka_port: int | None = None) -> None:
        self.zookeeper_connect = zookeeper_connect
        self.kafka_port = kafka_port
        self.log_dirs = Path(log_dirs)
        self.broker_id = broker_id
        self.port = port or free_port()
        self.extra_env = extra_env or {}
        self.config_file = config_file
        #: the TLS files (``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``) as LakelogClient keyword arguments
        self.tls = {k: str(v) for k, v in (("ssl_cafile", ssl_cafile), ("ssl_certfile", ssl_certfile),
                                           ("ssl_keyfile", ssl_keyfile)) if v is not None}
        if ssl_certfile is not None:
            self.extra_env = {**self.extra_env, **{f"LAKELOG_{k.upper()}": v for k, v in self.tls.items()}}
        else:  # TLS set through the environment or the config file: poll it over TLS too
            self.tls = self._configured_tls()
        self.log_file = Path(log_file) if log_file else self.log_dirs.parent / f"broker-{broker_id}-{self.port}.log"
        self.log_level = log_level
        self.log_format = log_format
        self.new_session = new_session
        self.process: subprocess.Popen | None = None
        self.startup_s: float | None = None

    def _configured_tls(self) -> dict[str, str]:
        """The ``ssl.*`` files the child will read from its environment (``LAKELOG_SSL_*``, ``extra_env`` over
        this process's) or, below that, its ``config_file``; ``{}`` when it gets no ``ssl.certfile``."""
        env = {**os.environ, **self.extra_env}
        file_values = read_properties(self.config_file, missing_ok=True) if self.config_file is not None else {}
        tls = {}
        for arg in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            value = env.get(f"LAKELOG_{arg.upper()}") or file_values.get(arg.replace("_", "."))
            if value:
                tls[arg] = value
        return tls if "ssl_certfile" in tls else {}

    @property
    def url(self) -> str:
        """``http://127.0.0.1:{port}`` (``https://`` with ``ssl_certfile``): its gateway."""
        return f"{'https' if 'ssl_certfile' in self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """Pid of the broker process (after :meth:`start`; AssertionError before)."""
        assert self.process is not None
        return self.process.pid

    def start(self, *, timeout_s: float = 60.0) -> "BrokerProcess":
        """Start it and wait until ``GET /v3/clusters`` answers (:attr:`startup_s` = the seconds it took).

        The child gets SIGKILL if this process dies (Linux).

        Raises:
            RuntimeError: it exited, or did not answer within ``timeout_s`` (then it is killed); the
                message ends with the tail of its log.
        """
        t0 = time.monotonic()
        self.log_dirs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.extra_env, "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "lakelog.cli", "broker", "start", "--broker-id", str(self.broker_id),
               "--port", str(self.port), "--log-dirs", str(self.log_dirs),
               "--zookeeper-connect", self.zookeeper_connect, "--log-level", self.log_level,
               "--log-format", self.log_format]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        if self.kafka_port is not None:
            cmd += ["--kafka-port", str(self.kafka_port)]
        elif "LAKELOG_LISTENERS" not in env and (self.config_file is None or "listeners" not in read_properties(
                self.config_file, missing_ok=True)):
            env["LAKELOG_LISTENERS"] = ""  # broker start's default listener (9092) only when asked for
        with open(self.log_file, "ab") as log:
            self.process = spawn(cmd, death_signal=signal.SIGKILL, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=self.new_session)
        verify = client_ssl_context(**self.tls) if self.tls else True
        with httpx.Client(verify=verify, timeout=1) as http:
            while time.monotonic() - t0 < timeout_s:
                if self.process.poll() is not None:
                    raise RuntimeError(f"broker {self.broker_id} exited with {self.process.returncode}:\n{self.log_tail()}")
                try:
                    # /health: answered once the broker started, without credentials (authentication.methods)
                    if http.get(f"{self.url}/health").status_code == 200:
                        self.startup_s = time.monotonic() - t0
                        return self
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"broker {self.broker_id} did not answer within {timeout_s} s:\n{self.log_tail()}")

    def kafka_endpoints(self) -> list[str]:
        """The Kafka endpoints it registered (``PLAINTEXT://host:port``, from ``GET /v3/clusters/{c}/brokers/{id}``);
        empty when it opens none. Raises httpx.HTTPError when it does not answer (or wants credentials)."""
        verify = client_ssl_context(**self.tls) if self.tls else True
        with httpx.Client(verify=verify, timeout=10) as http:
            clusters = http.get(f"{self.url}/v3/clusters")
            clusters.raise_for_status()
            cluster_id = clusters.json()["data"][0]["cluster_id"]
            broker = http.get(f"{self.url}/v3/clusters/{cluster_id}/brokers/{self.broker_id}")
            broker.raise_for_status()
            return list(broker.json().get("endpoints", []))

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of its log ("" when there is none)."""
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def running(self) -> bool:
        """Whether the process has not exited yet (an unreaped zombie counts as exited).

        Does not reap it (``waitid`` with ``WNOWAIT``), so it is safe while another thread is in :meth:`stop`.
        """
        if self.process is None:
            return False
        try:
            return os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:  # already reaped
            return False

    def signal(self, sig: int) -> None:
        """Send ``sig`` by pid if it still runs (it may exit between the check and the kill)."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.kill(self.process.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, *, timeout_s: float = 20.0) -> int | None:
        """SIGTERM by pid (a controlled shutdown), wait; SIGKILL if it does not exit in time.

        Returns:
            The exit code, or None when it had to be killed or was never started.
        """
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.signal(signal.SIGCONT)  # in case it was paused
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL by pid: a crash."""
        if self.process is not None and self.process.poll() is None:
            self.signal(signal.SIGKILL)
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP by pid: the process freezes (its ZooKeeper session and fetches stop with it)."""
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT by pid after :meth:`pause`."""
        self.signal(signal.SIGCONT)
