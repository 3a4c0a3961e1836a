"""Test harness: real ZooKeeper, real broker processes, stopped by pid (the kazoo testing model).

``BrokerProcess`` (:mod:`lakelog.broker_process`) runs ``python -m lakelog.cli broker start`` as a child
process on a free port with its own log dir and ZooKeeper chroot; tests stop it with SIGTERM or kill
it with SIGKILL by pid.
"""

from __future__ import annotations

import time
import uuid

import httpx
from kazoo.client import KazooClient

from lakelog.broker_process import BrokerProcess
from lakelog.protocol import media_types


def wait_for(predicate, timeout_s: float = 15.0, what: str = "condition", interval_s: float = 0.05):
    """Poll ``predicate`` until it returns a truthy value (returned) or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def read_partition(http: httpx.Client | str, topic: str, partition: int) -> list[dict]:
    """Every record of a partition (JSON records, binary key/value in base64), paging from offset 0.

    ``http`` is a client whose base URL is the broker, or the broker's URL.
    """
    if isinstance(http, str):
        with httpx.Client(base_url=http, timeout=30) as client:
            return read_partition(client, topic, partition)
    out, offset = [], 0
    while True:
        resp = http.get(f"/topics/{topic}/partitions/{partition}/records",
                        params={"offset": offset, "max_wait_ms": 0, "max_bytes": 64 * 1024 * 1024},
                        headers={"Accept": media_types.BINARY_V2})
        assert resp.status_code == 200, resp.text
        page = resp.json()
        if not page:
            return out
        out += page
        offset = page[-1]["offset"] + 1


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


__all__ = ["BrokerProcess", "new_chroot", "read_partition", "wait_for"]
