"""The gateway floor of ``bench/latency.py`` (scenario f): the broker's HTTP stack with a stub append.

Run as a child process: ``python bench/_gateway_floor.py PORT``. It serves the real gateway app
(:func:`lakelog.ingest_api.app.create_app`) under the broker's real uvicorn configuration
(:func:`lakelog.runtime.server.uvicorn_config`: uvloop, the guarded httptools protocol) on ``127.0.0.1:PORT``,
with a stub broker whose every topic has one partition and whose produce assigns offsets at once
(no ZooKeeper, no validation in the request layer, no log). A one-record produce then pays only what
the gateway itself does: HTTP parse, routing, body read and decode, the answer. No lifespan runs.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from lakelog.config import BrokerSettings
from lakelog.ingest_api.app import create_app
from lakelog.replication.metadata import TopicMetadata
from lakelog.requests import ProduceRequest, ProduceResult
from lakelog.security.authentication import Authenticator
from lakelog.security.authorizer import Authorizer
from lakelog.runtime.server import uvicorn_config


class _StubRequests:
    """The request layer's produce, with offsets assigned at once (no validation, no log)."""

    def __init__(self) -> None:
        self._next = itertools.count()
        self._topics: dict[str, TopicMetadata] = {}

    async def describe_topic(self, name: str, *, context, with_configs: bool = False) -> TopicMetadata:
        meta = self._topics.get(name)
        if meta is None:
            meta = self._topics[name] = TopicMetadata(name=name, topic_id=name, replicas={0: [0]}, configs={})
        return meta

    async def produce(self, request: ProduceRequest, *, context) -> ProduceResult:
        n = request.records.num_rows
        base = next(self._next)
        for _ in range(n - 1):
            next(self._next)
        return ProduceResult(np.full(n, request.partition or 0, np.int64), np.arange(base, base + n, dtype=np.int64), {})


class StubBroker:
    """What the produce routes use of a broker; every topic exists with one partition."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.cluster_id = "gateway-floor"
        self.requests = _StubRequests()
        self.coordinator = None
        self.authenticator = Authenticator()  # authentication.methods=none: every request is User:ANONYMOUS
        self.authorizer = Authorizer(enabled=False, zk=None)  # authorizer.enabled=false: every request allowed


class GatewayFloorProcess:
    """This module as a child process (its own session; SIGKILL if the parent dies), stopped by pid."""

    def __init__(self, port: int, log_file: Path) -> None:
        self.port, self.log_file, self.process = port, log_file, None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout_s: float = 30.0) -> "GatewayFloorProcess":
        from lakelog.processes import spawn

        with open(self.log_file, "ab") as log:
            self.process = spawn([sys.executable, __file__, str(self.port)], death_signal=signal.SIGKILL,
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"the gateway floor process exited with {self.process.returncode}: "
                                   f"{self.log_file.read_text(errors='replace')[-2000:]}")
            try:
                httpx.get(f"{self.url}/_floor", timeout=1)  # 404: up
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the gateway floor process did not answer")

    def cpu_seconds(self) -> float:
        from _cluster import process_cpu

        return process_cpu(self.pid)

    def cpu_split(self) -> tuple[float, float]:
        from _cluster import process_cpu_split

        return process_cpu_split(self.pid)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def main() -> None:
    port = int(sys.argv[1])
    settings = BrokerSettings.load(port=port, host="127.0.0.1")
    config = uvicorn_config(create_app(StubBroker(settings)), settings, log_level="warning", lifespan="off")
    import uvicorn

    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
