#!/usr/bin/env python
"""What an S3 lake costs: object-store requests, bytes stored and lake freshness per partition and hour,
and produce throughput on an S3 lake against a local lake, on the same machine in the same run.

Usage::

    python bench/lake_cost.py                                   # ~6 minutes: 4 partitions, 1,000 records/s each
    python bench/lake_cost.py --quick                           # ~1.5 minutes smoke run
    python bench/lake_cost.py --commit-interval-ms 5000 --rate 200 --seconds 120

What it does, for each lake (``local``: each replica's tables under ``log.dirs``, today's default;
``s3``: ``lake.uri`` on the embedded object store, s3proxy, behind a counting proxy): starts ZooKeeper and
one broker child process (stopped by pid at the end), creates a topic of ``--partitions`` partitions with
``lake.commit.interval.ms`` = ``--commit-interval-ms``, then

1. **paced**: produces ``--rate`` records/s to every partition (Arrow, ``--record-bytes`` values, a request
   every 100 ms per partition, ``acks=all``) for ``--seconds``; a watcher asks the broker every 20 ms for the
   partitions' lake end offsets (``GET /lakelog/v1/topics/{t}/logs``) and takes a record's *lake freshness*
   as the time from its produce answer to the first answer whose lake end offset is past it (the record
   is in the Delta table; the 20 ms poll is the resolution). The counting proxy counts the broker's
   requests to the store by S3 request class: PUT (also POST: multipart), GET (also HEAD), LIST (a GET
   of a bucket with ``list-type``/``prefix``), DELETE. Bytes stored: the S3 bucket's files (s3proxy's
   filesystem backend), or the local tables' files (``_delta_log`` and Parquet) times
   ``--replication-factor`` (each replica keeps its own table), after the run;
2. **throughput**: ``--threads`` threads produce 10,000-record Arrow batches as fast as the broker
   answers, for ``--throughput-seconds``, to a fresh topic; records/s.

Printed: per partition and per hour, PUTs, GETs, LISTs, DELETEs, bytes stored (lake, and the per-replica
layout); lake freshness p50/p99 against the target ``lake.commit.interval.ms + 1 s``; throughput of both
lakes and their ratio (target: the S3 lake within 10% of the local one); and the monthly cost of 1,000
partitions at S3 Standard's public prices (us-east-1: PUT/COPY/POST/LIST $0.005 per 1,000 requests,
GET/HEAD $0.0004 per 1,000, DELETE free, storage $0.023 per GB-month), requests over 730 hours and the
bytes of ``--retention-hours`` kept. The ``bench/`` folder never asserts; targets are printed beside the
figures.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import pyarrow as pa
from _cluster import bench_cluster, make_console
from rich.table import Table

from lakelog.log_tables.segments import SEGMENT_DIR
from lakelog.protocol.arrow_ipc import arrow_ipc
from lakelog.runtime.object_store import ObjectStoreServer

ARROW_STREAM = "application/vnd.apache.arrow.stream"
POLL_S = 0.02
REQUESTS_PER_S = 10  # paced produce: one request per partition every 100 ms
HOURS_PER_MONTH = 730
#: S3 Standard, us-east-1, public prices (USD): per 1,000 requests of each class; per GB-month stored.
PRICE_PER_1000 = {"PUT": 0.005, "LIST": 0.005, "GET": 0.0004, "DELETE": 0.0}
PRICE_GB_MONTH = 0.023
CLASSES = ("PUT", "GET", "LIST", "DELETE")


# -- the counting proxy ------------------------------------------------------------------------------

class CountingProxy(ThreadingHTTPServer):
    """Forwards every request to the S3 server ``upstream`` (``host:port``) unchanged (its Host header too,
    so the signature holds) and counts it by S3 request class (:attr:`counts`)."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.counts)


def request_class(method: str, path: str) -> str:
    """S3's pricing class of a request: PUT (PUT, POST), LIST (a GET of a bucket listing), GET (GET, HEAD), DELETE."""
    if method in ("PUT", "POST"):
        return "PUT"
    if method == "DELETE":
        return "DELETE"
    url = urlsplit(path)
    query = parse_qs(url.query)
    key = url.path.lstrip("/").partition("/")[2]  # path style: /bucket/key
    if method == "GET" and (not key or "list-type" in query or "prefix" in query):
        return "LIST"
    return "GET"


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _forward(self) -> None:
        server: CountingProxy = self.server  # type: ignore[assignment]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with server.lock:
            server.counts[request_class(self.command, self.path)] += 1
        conn = http.client.HTTPConnection(server.upstream, timeout=120)
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


# -- driving the broker ------------------------------------------------------------------------------

def batch(n: int, size: int, seed: int) -> bytes:
    """An Arrow IPC body of ``n`` records with ``size``-byte values."""
    rng = np.random.default_rng(seed)
    values = rng.integers(97, 123, size=(n, size), dtype=np.uint8)
    return arrow_ipc(pa.table({"value": pa.array([v.tobytes() for v in values], pa.binary())}))


def create_topic(url: str, topic: str, partitions: int, commit_interval_ms: int) -> None:
    cluster = httpx.get(f"{url}/v3/clusters", timeout=30).json()["data"][0]["cluster_id"]
    resp = httpx.post(f"{url}/v3/clusters/{cluster}/topics", timeout=60, json={
        "topic_name": topic, "partitions_count": partitions, "replication_factor": 1,
        "configs": [{"name": "lake.commit.interval.ms", "value": str(commit_interval_ms)}]})
    resp.raise_for_status()


def paced(url: str, topic: str, *, partitions: int, rate: int, size: int, seconds: float) -> list[float]:
    """Produce ``rate`` records/s to each partition for ``seconds``; the lake freshness of every request's
    last record (seconds), from the watcher's view of the lake end offsets."""
    per_request = max(1, rate // REQUESTS_PER_S)
    body = batch(per_request, size, seed=1)
    acked: list[tuple[int, int, float]] = []  # (partition, last offset, ack time)
    lock, done = threading.Lock(), threading.Event()
    visible: dict[tuple[int, int], float] = {}

    def producer(p: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            start = time.monotonic()
            i = 0
            while (due := start + i / REQUESTS_PER_S) < start + seconds:
                time.sleep(max(0.0, due - time.monotonic()))
                resp = client.post(f"/topics/{topic}/partitions/{p}/records", content=body,
                                   headers={"Content-Type": ARROW_STREAM}, params={"acks": "all"})
                resp.raise_for_status()
                last = resp.json()["last_offset"]
                with lock:
                    acked.append((p, last, time.monotonic()))
                i += 1

    def watcher() -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            while not done.is_set():
                ends = {i["partition"]: i["lake_end_offset"] for i in client.get(f"/lakelog/v1/topics/{topic}/logs").json()}
                now = time.monotonic()
                with lock:
                    pending = [(p, o) for p, o, _ in acked if (p, o) not in visible]
                for p, o in pending:
                    if ends.get(p, 0) > o:
                        visible[(p, o)] = now
                time.sleep(POLL_S)

    watch = threading.Thread(target=watcher, daemon=True)
    watch.start()
    threads = [threading.Thread(target=producer, args=(p,)) for p in range(partitions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(visible) < len(acked):  # the last records reach the lake
        time.sleep(POLL_S)
    done.set()
    watch.join()
    return [visible[(p, o)] - t for p, o, t in acked if (p, o) in visible]


def throughput(url: str, topic: str, *, partitions: int, threads: int, size: int, seconds: float) -> float:
    """Records/s of ``threads`` threads producing 10,000-record Arrow batches round-robin over the partitions."""
    n = 10_000
    body = batch(n, size, seed=2)
    count = [0] * threads
    stop_at = time.monotonic() + seconds

    def worker(k: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            i = k
            while time.monotonic() < stop_at:
                resp = client.post(f"/topics/{topic}/partitions/{i % partitions}/records", content=body,
                                   headers={"Content-Type": ARROW_STREAM})
                resp.raise_for_status()
                count[k] += n
                i += threads

    started = time.monotonic()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(count) / (time.monotonic() - started)


def tree_bytes(root: Path) -> int:
    """Bytes of the files under ``root`` (0 when it is not there)."""
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.exists() else 0


# -- one lake -------------------------------------------------------------------------------------------

def run_lake(kind: str, args, console, store: ObjectStoreServer | None) -> dict | None:
    """Both phases on one lake; None when the cluster failed (printed)."""
    env: dict[str, str] = {}
    proxy = None
    bucket = f"cost-{int(time.time())}"
    if kind == "s3":
        assert store is not None
        store.create_bucket(bucket)
        proxy = CountingProxy(urlsplit(store.endpoint_url).netloc)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        settings = {**store.lake_settings(f"s3://{bucket}/lakelog"), "lake.storage.endpoint": proxy.endpoint_url}
        env = {"LAKELOG_" + k.replace(".", "_").upper(): v for k, v in settings.items()}
    out: dict = {}
    with bench_cluster(console, prefix=f"lakelog-cost-{kind}-", env=env, keep=False) as run:
        url = run.broker.url
        create_topic(url, "paced", args.partitions, args.commit_interval_ms)
        before = proxy.snapshot() if proxy else Counter()
        with console.status(f"{kind}: {args.rate} records/s per partition for {args.seconds} s"):
            started = time.monotonic()
            fresh = paced(url, "paced", partitions=args.partitions, rate=args.rate, size=args.record_bytes,
                          seconds=args.seconds)
            elapsed = time.monotonic() - started
        counts = (proxy.snapshot() - before) if proxy else Counter()
        if kind == "s3":
            stored = tree_bytes(store.buckets_dir / bucket)
        else:
            stored = sum(tree_bytes(d) - tree_bytes(d / SEGMENT_DIR) for d in (run.tmp / "logs").glob("paced-*"))
        create_topic(url, "throughput", args.partitions, args.commit_interval_ms)
        with console.status(f"{kind}: throughput for {args.throughput_seconds} s"):
            rate = throughput(url, "throughput", partitions=args.partitions, threads=args.threads,
                              size=args.record_bytes, seconds=args.throughput_seconds)
        out = {"counts": counts, "elapsed": elapsed, "fresh": fresh, "stored": stored, "throughput": rate}
    if proxy is not None:
        proxy.shutdown()
        proxy.server_close()
    return out if run.return_code == 0 else None


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=1000, help="records/s per partition in the paced phase")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=120, help="paced phase length per lake")
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--throughput-seconds", type=float, default=30)
    parser.add_argument("--replication-factor", type=int, default=3, help="copies of the per-replica layout")
    parser.add_argument("--retention-hours", type=float, default=168, help="hours of records kept (cost of storage)")
    parser.add_argument("--quick", action="store_true", help="--seconds 20 --throughput-seconds 10")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.throughput_seconds = 20, 10
    console = make_console()
    results: dict[str, dict] = {}
    store_dir = Path(tempfile.mkdtemp(prefix="lakelog-cost-store-"))
    try:
        store = ObjectStoreServer(data_dir=store_dir)
        with console.status("starting the object store (s3proxy)"):
            store.start()
        with store:  # stopped by pid at the end
            for kind in ("local", "s3"):
                got = run_lake(kind, args, console, store)
                if got is None:
                    return 1
                results[kind] = got
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    report(console, args, results)
    return 0


def report(console, args, results: dict[str, dict]) -> None:
    s3, local = results["s3"], results["local"]
    per_hour = 3600 / (s3["elapsed"] * args.partitions)  # a count of the run -> per partition per hour
    console.print(f"\n{args.partitions} partitions, {args.rate} records/s each of {args.record_bytes}-byte values, "
                  f"lake.commit.interval.ms={args.commit_interval_ms}, paced {args.seconds:.0f} s per lake")
    table = Table(title="per partition per hour (S3 lake)")
    for col in ("PUT", "GET", "LIST", "DELETE", "MB stored, S3 lake", f"MB stored, local x{args.replication_factor}"):
        table.add_column(col, justify="right")
    local_per_hour = 3600 / (local["elapsed"] * args.partitions)
    table.add_row(*[f"{s3['counts'][c] * per_hour:,.0f}" for c in CLASSES],
                  f"{s3['stored'] * per_hour / 1e6:,.1f}",
                  f"{local['stored'] * local_per_hour * args.replication_factor / 1e6:,.1f}")
    console.print(table)
    target = args.commit_interval_ms / 1000 + 1
    fresh = Table(title="lake freshness (produce answer -> record in the Delta table)")
    for col in ("lake", "records", "p50 s", "p99 s", "max s", "target p99"):
        fresh.add_column(col, justify="right")
    for kind in ("local", "s3"):
        f = results[kind]["fresh"]
        fresh.add_row(kind, f"{len(f)}", f"{percentile(f, 50):.2f}", f"{percentile(f, 99):.2f}",
                      f"{max(f) if f else float('nan'):.2f}", f"<= {target:.1f}")
    console.print(fresh)
    ratio = s3["throughput"] / local["throughput"] if local["throughput"] else float("nan")
    console.print(f"produce throughput ({args.threads} threads, 10,000-record Arrow batches): local "
                  f"{local['throughput']:,.0f} records/s, S3 lake {s3['throughput']:,.0f} records/s: "
                  f"{ratio:.2f}x (target >= 0.90x)")
    cost = Table(title=f"monthly cost of 1,000 partitions on S3 Standard ({HOURS_PER_MONTH} h; "
                       f"{args.retention_hours:.0f} h of records kept)")
    for col in ("item", "per month", "USD"):
        cost.add_column(col, justify="right")
    total = 0.0
    for c in CLASSES:
        n = s3["counts"][c] * per_hour * HOURS_PER_MONTH * 1000
        usd = n / 1000 * PRICE_PER_1000[c]
        total += usd
        cost.add_row(f"{c} requests", f"{n:,.0f}", f"{usd:,.2f}")
    gb = s3["stored"] * per_hour * args.retention_hours * 1000 / 1e9
    usd = gb * PRICE_GB_MONTH
    total += usd
    cost.add_row("storage (GB kept)", f"{gb:,.1f}", f"{usd:,.2f}")
    cost.add_row("total", "", f"{total:,.2f}")
    console.print(cost)
    console.print("prices (S3 Standard, us-east-1, USD): " + ", ".join(
        f"{c} ${PRICE_PER_1000[c]} per 1,000" for c in CLASSES) + f", storage ${PRICE_GB_MONTH} per GB-month")
    local_gb = local["stored"] * local_per_hour * args.replication_factor * args.retention_hours * 1000 / 1e9
    console.print(f"the per-replica layout (x{args.replication_factor}) keeps {local_gb:,.1f} GB of broker disk "
                  f"for the same {args.retention_hours:.0f} h of records; the S3 lake {gb:,.1f} GB in the store")


if __name__ == "__main__":
    sys.exit(main())
