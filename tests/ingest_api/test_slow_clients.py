"""Slow clients against a real broker process (issue 9, item 5): 200 connections that send their
headers a byte at a time, 50 that send their body a byte at a time and 20 that send nothing are all
closed by the broker within its (here short) timeouts, with a 408 / 40802 for the slow ones, while
normal requests meanwhile keep succeeding, each within a generous bound."""

from __future__ import annotations

import selectors
import socket
import threading
import time

import httpx
import pytest

from tests.harness import BrokerProcess, new_chroot

pytestmark = pytest.mark.cluster

TIMEOUT_MS = 1500
SLOW_HEADERS, SLOW_BODIES, IDLE = 200, 50, 20
TRICKLE_INTERVAL_S = 0.25  # one byte per connection this often: 4 bytes/s, far below the minimum rate
MIN_RATE = 100  # request.body.min.bytes.per.sec
SLACK_S = 3.0  # allowed beyond the timeout for the broker to notice and the test to see it
NORMAL_REQUEST_MAX_S = 2.0


@pytest.fixture(scope="module")
def slow_gw(zookeeper, tmp_path_factory):
    broker = BrokerProcess(zookeeper_connect=new_chroot(zookeeper.connect_string),
                           log_dirs=tmp_path_factory.mktemp("slow") / "logs-0",
                           extra_env={"LAKELOG_CONNECTIONS_MAX_IDLE_MS": str(TIMEOUT_MS),
                                      "LAKELOG_REQUEST_HEADER_TIMEOUT_MS": str(TIMEOUT_MS),
                                      "LAKELOG_REQUEST_BODY_TIMEOUT_MS": str(TIMEOUT_MS),
                                      "LAKELOG_REQUEST_BODY_MIN_BYTES_PER_SEC": str(MIN_RATE)})
    broker.start()
    yield broker
    broker.stop()


class SlowConnection:
    def __init__(self, kind: str, port: int, topic: str) -> None:
        self.kind = kind
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setblocking(False)
        self.opened = time.monotonic()
        self.closed_after: float | None = None
        self.answer = b""
        if kind == "header":
            self.pending = b"GET /topics HTTP/1.1\r\nHost: slow\r\nX-Slow: " + b"a" * 10_000
        elif kind == "body":
            head = (f"POST /topics/{topic} HTTP/1.1\r\nHost: slow\r\n"
                    f"Content-Type: application/vnd.kafka.binary.v2+json\r\nContent-Length: 100000\r\n\r\n")
            self.sock.sendall(head.encode())
            self.pending = b'{"records": [' + b" " * 99_000
        else:
            self.pending = b""

    def trickle(self) -> None:
        if self.closed_after is None and self.pending:
            try:
                self.sock.send(self.pending[:1])
                self.pending = self.pending[1:]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.mark_closed()

    def readable(self) -> None:
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.answer += data
        else:
            self.mark_closed()

    def mark_closed(self) -> None:
        if self.closed_after is None:
            self.closed_after = time.monotonic() - self.opened


def hold_slow_connections(conns: list[SlowConnection], limit_s: float) -> None:
    """Trickle bytes and watch for the broker closing the connections, until all are closed or
    ``limit_s`` passes."""
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
    deadline = time.monotonic() + limit_s
    next_trickle = time.monotonic()
    while time.monotonic() < deadline and any(c.closed_after is None for c in conns):
        if time.monotonic() >= next_trickle:
            for c in conns:
                c.trickle()
            next_trickle += TRICKLE_INTERVAL_S
        for key, _ in sel.select(timeout=0.05):
            conn = key.data
            conn.readable()
            if conn.closed_after is not None:
                sel.unregister(conn.sock)
    sel.close()
    for c in conns:
        c.sock.close()


def test_slow_and_idle_connections_are_closed_while_normal_requests_work(slow_gw, topic_name):
    with httpx.Client(base_url=slow_gw.url, timeout=30) as http:
        assert http.post("/v3/clusters/" + http.get("/v3/clusters").json()["data"][0]["cluster_id"] + "/topics",
                         json={"topic_name": topic_name, "partitions_count": 1}).status_code == 201

    conns = [SlowConnection("header", slow_gw.port, topic_name) for _ in range(SLOW_HEADERS)]
    conns += [SlowConnection("body", slow_gw.port, topic_name) for _ in range(SLOW_BODIES)]
    conns += [SlowConnection("idle", slow_gw.port, topic_name) for _ in range(IDLE)]
    holder = threading.Thread(target=hold_slow_connections, args=(conns, TIMEOUT_MS / 1000 + 2 * SLACK_S + 5))
    holder.start()

    # normal requests on a keep-alive client, meanwhile
    latencies: list[float] = []
    failures: list[str] = []
    with httpx.Client(base_url=slow_gw.url, timeout=30) as http:
        while holder.is_alive() and len(latencies) < 2000:
            started = time.monotonic()
            listed = http.get("/topics")
            produced = http.post(f"/topics/{topic_name}", json={"records": [{"value": "aGk="}]},
                                 headers={"Content-Type": "application/vnd.kafka.binary.v2+json"})
            latencies.append(time.monotonic() - started)
            for resp in (listed, produced):
                if resp.status_code != 200:
                    failures.append(f"{resp.request.method} {resp.request.url.path}: {resp.status_code} {resp.text}")
            time.sleep(0.02)
    holder.join()

    assert not failures, failures[:5]
    assert len(latencies) >= 10
    assert max(latencies) < NORMAL_REQUEST_MAX_S, f"slowest normal request pair {max(latencies):.2f} s"
    for kind in ("header", "body", "idle"):
        mine = [c for c in conns if c.kind == kind]
        still_open = [c for c in mine if c.closed_after is None]
        assert not still_open, f"{len(still_open)} of {len(mine)} {kind} connections were never closed"
        slowest = max(c.closed_after for c in mine)
        bound = TIMEOUT_MS / 1000 + SLACK_S + (TIMEOUT_MS / 1000 * 4 / MIN_RATE if kind == "body" else 0)
        assert slowest < bound, f"{kind}: closed after up to {slowest:.2f} s"
        if kind == "idle":
            assert all(c.answer == b"" for c in mine)  # closed without an answer
        else:
            answered = [c for c in mine if c.answer.startswith(b"HTTP/1.1 408 ")]
            assert len(answered) >= 0.9 * len(mine), f"{kind}: {len(answered)} of {len(mine)} got a 408"
            assert all(b'"error_code":40802' in c.answer for c in answered)
    closed = sorted(c.closed_after for c in conns)
    print(f"\n{len(conns)} slow/idle connections closed after {closed[0]:.2f}-{closed[-1]:.2f} s "
          f"(timeouts {TIMEOUT_MS} ms); {len(latencies)} normal GET+produce pairs meanwhile, "
          f"median {sorted(latencies)[len(latencies) // 2] * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")
