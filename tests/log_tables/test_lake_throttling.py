"""The object store answers 503 SlowDown (S3's throttling) to some of a broker's requests: the writes are
retried with backoff (delta-rs' object store client) and every acknowledged record reaches the partition
table once. A small HTTP proxy in front of the real S3 server answers SlowDown to every second write."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from tests.cluster.test_replication import create_topic, produce
from tests.harness import Lake, wait_for

_SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
              b"<Message>Please reduce your request rate.</Message></Error>")


class _ThrottlingProxy(ThreadingHTTPServer):
    """Forwards every request to ``upstream`` (``host:port``) as it came (its Host header too, so the
    request's signature still holds), but answers every ``every``-th PUT with 503 SlowDown."""

    daemon_threads = True

    def __init__(self, upstream: str, *, every: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream, self.every = upstream, every
        self.lock, self.puts, self.refused = threading.Lock(), 0, 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _forward(self) -> None:
        server: _ThrottlingProxy = self.server  # type: ignore[assignment]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.command == "PUT":
            with server.lock:
                server.puts += 1
                refuse = server.puts % server.every == 0
                server.refused += refuse
            if refuse:
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(_SLOW_DOWN)))
                self.end_headers()
                self.wfile.write(_SLOW_DOWN)
                return
        conn = http.client.HTTPConnection(server.upstream, timeout=60)
        try:
            conn.request(self.command, self.path, body=body or None, headers=dict(self.headers.items()))
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


def test_slow_down_answers_are_retried_and_nothing_is_lost(broker_factory, object_store):
    bucket = "throttled"
    object_store.create_bucket(bucket)
    proxy = _ThrottlingProxy(urlsplit(object_store.endpoint_url).netloc, every=2)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        lake = Lake(object_store, f"s3://{bucket}/lakelog")
        env = lake.broker_env()
        env["LAKELOG_LAKE_STORAGE_ENDPOINT"] = f"http://127.0.0.1:{proxy.server_address[1]}"
        broker = broker_factory(extra_env=env)
        assert create_topic(broker.url, "orders", partitions=1, rf=1,
                            configs={"lake.commit.interval.ms": "200"}).status_code == 201
        sent = []
        for i in range(10):
            values = [f"r{i}-{j}".encode() for j in range(20)]
            assert produce(broker.url, "orders", 0, values, acks="all").status_code == 200
            sent += values

        wait_for(lambda: lake.partition_values("orders") == sent,
                 what="every record in the table once, through SlowDown answers")
        # the store did throttle the broker's writes: a commit PUTs its data file and its log entry, and every
        # second PUT is refused, so even one commit of all 200 records meets SlowDown (how many commits the
        # flusher makes depends on how the appends batch)
        assert proxy.refused >= 1, proxy.refused
    finally:
        proxy.shutdown()
        proxy.server_close()
