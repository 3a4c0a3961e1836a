#!/usr/bin/env python
"""Replication benchmark: produce throughput and latency with acks=1 and acks=all on three local
brokers (replication factor 3), and the time from losing a leader to the first successful produce on
the new one.

Usage::

    python bench/replication.py                  # ~1.5 minutes
    python bench/replication.py --seconds 10 --threads 6 --session-timeout-ms 6000

What it does: starts an embedded ZooKeeper (temp dir, free port) and three broker child processes
(``lakelog broker start``, own log dirs and ports, stopped by pid), creates a topic with 3 partitions,
replication factor 3, ``min.insync.replicas=2``, then:

- throughput: ``--threads`` client threads send binary-JSON requests of 1,000 records (100-byte values)
  round-robin to the partitions' leaders for ``--seconds``, once with ``acks=1`` and once with
  ``acks=all``; records/s and the p50/p99 request latency;
- latency: one thread, 10-record requests, one at a time: p50/p99 with ``acks=1`` and ``acks=all``;
- failover: one thread produces 10-record ``acks=all`` requests to partition 0 in a loop; the leader
  is killed (SIGKILL: detected when its ZooKeeper session expires, ``zookeeper.session.timeout.ms``)
  and, separately, stopped with SIGTERM (controlled shutdown hands leadership over first); the figure
  is the time from the signal to the first acknowledged produce on the new leader.

All processes share the machine's cores, so the figures are a lower bound for real deployments.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson

from lakelog.runtime.broker_process import BrokerProcess
from lakelog.protocol import media_types
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port


def body(n: int, value_size: int = 100) -> bytes:
    rng = np.random.default_rng(n)
    values = [base64.b64encode(rng.bytes(value_size)).decode() for _ in range(n)]
    return orjson.dumps({"records": [{"key": base64.b64encode(f"k{i}".encode()).decode(), "value": v}
                                     for i, v in enumerate(values)]})


class Cluster:
    def __init__(self, brokers: list[BrokerProcess], topic: str) -> None:
        self.brokers, self.topic = brokers, topic

    def leaders(self) -> dict[int, str]:
        for b in self.brokers:
            try:
                info = httpx.get(f"{b.url}/topics/{self.topic}", timeout=5).json()
            except (httpx.TransportError, ValueError):
                continue
            urls = {x.broker_id: x.url for x in self.brokers}
            return {p["partition"]: urls.get(p["leader"]) for p in info["partitions"]}
        raise RuntimeError("no broker answers")


def produce_load(cluster: Cluster, *, acks: str, threads: int, seconds: float, records: int) -> dict:
    """``threads`` workers produce to the partitions' leaders round-robin for ``seconds``.

    Only acknowledged requests count towards records/s and latency; every other answer (non-200, or
    an error code in an offset entry) and every transport error is counted in ``failed`` (the first
    few are kept in ``failures``). A partition without a leader (-1) or a failed request makes the
    worker look the leaders up again before its next request to that partition.
    """
    payload = body(records)
    latencies: list[float] = []
    count = [0]
    failed = [0]
    failures: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def fail(what: str) -> None:
        with lock:
            failed[0] += 1
            if len(failures) < 5:
                failures.append(what)

    def resolve() -> dict[int, str | None]:
        while True:
            try:
                return cluster.leaders()
            except RuntimeError:  # no broker answered: try again until the run ends
                if time.monotonic() >= stop_at:
                    return {}
                time.sleep(0.1)

    def worker(i: int) -> None:
        try:
            leaders = resolve()
            n = max(len(leaders), 1)
            p = i % n
            with httpx.Client(timeout=60) as http:
                while time.monotonic() < stop_at:
                    url = leaders.get(p)
                    if url is None:  # no leader right now (-1) or not known: look again
                        time.sleep(0.05)
                        leaders = resolve()
                        continue
                    t0 = time.perf_counter()
                    try:
                        resp = http.post(f"{url}/topics/{cluster.topic}/partitions/{p}", params={"acks": acks},
                                         content=payload, headers={"Content-Type": media_types.BINARY_V2})
                    except httpx.TransportError as e:
                        fail(f"{type(e).__name__}: {e}")
                        leaders = resolve()
                        continue
                    dt = time.perf_counter() - t0
                    ok = resp.status_code == 200 and all(o.get("error_code") is None for o in resp.json()["offsets"])
                    if ok:
                        with lock:
                            latencies.append(dt)
                            count[0] += records
                    else:
                        fail(f"{resp.status_code}: {resp.text[:200]}")
                        leaders = resolve()
                    p = (p + 1) % n
        except BaseException as e:  # reported after the run
            with lock:
                errors.append(e)

    started = time.monotonic()
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - started
    if errors:
        raise RuntimeError(f"{len(errors)} produce worker(s) failed") from errors[0]
    lat = np.array(latencies) * 1000
    return {"records_s": count[0] / elapsed, "p50_ms": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
            "p99_ms": float(np.percentile(lat, 99)) if len(lat) else float("nan"), "requests": len(lat),
            "failed": failed[0], "failures": failures}


def failover(cluster: Cluster, victim_sig: int) -> float:
    """Seconds from signalling partition 0's leader to the first acknowledged produce on another broker."""
    payload = body(10)
    leader_url = cluster.leaders()[0]
    victim = next(b for b in cluster.brokers if b.url == leader_url)
    urls = [b.url for b in cluster.brokers if b is not victim]
    with httpx.Client(timeout=30) as http:
        t0 = time.monotonic()
        victim.signal(victim_sig)
        while time.monotonic() - t0 < 120:
            for url in urls:
                try:
                    resp = http.post(f"{url}/topics/{cluster.topic}/partitions/0", params={"acks": "all"},
                                     content=payload, headers={"Content-Type": media_types.BINARY_V2})
                except httpx.TransportError:
                    continue
                if resp.status_code == 200:
                    took = time.monotonic() - t0
                    if victim.process is not None:
                        victim.process.wait(60)
                    victim.start()
                    return took
            time.sleep(0.01)
    raise RuntimeError("no new leader within 120 s")


def wait_in_sync(cluster: Cluster, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = httpx.get(f"{cluster.brokers[0].url}/topics/{cluster.topic}", timeout=5).json()
        if all(all(r["in_sync"] for r in p["replicas"]) and p["leader"] >= 0 for p in info["partitions"]):
            return
        time.sleep(0.2)
    raise RuntimeError("ISR did not recover")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-repl-"))
    zk = ZooKeeperServer(data_dir=root / "zookeeper", client_port=free_port(), tick_time_ms=500)
    zk.start(timeout_s=60)
    env = {"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": str(args.session_timeout_ms),
           "LAKELOG_AUTO_LEADER_REBALANCE_ENABLE": "true", "LAKELOG_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS": "5"}
    brokers = [BrokerProcess(zookeeper_connect=zk.connect_string, log_dirs=root / f"logs-{i}", broker_id=i,
                             extra_env=env, log_file=root / f"broker-{i}.log", new_session=True) for i in range(3)]
    try:
        for b in brokers:
            b.start()
        topic = "bench-repl"
        cid = httpx.get(f"{brokers[0].url}/v3/clusters").json()["data"][0]["cluster_id"]
        httpx.post(f"{brokers[0].url}/v3/clusters/{cid}/topics", timeout=30, json={
            "topic_name": topic, "partitions_count": 3, "replication_factor": 3,
            "configs": [{"name": "min.insync.replicas", "value": "2"}]}).raise_for_status()
        cluster = Cluster(brokers, topic)
        wait_in_sync(cluster)
        print(f"3 brokers, topic {topic}: 3 partitions, replication factor 3, min.insync.replicas=2; "
              f"{os.cpu_count()} cores shared by all processes")
        print(f"{'scenario':<44} {'records/s':>12} {'p50 ms':>9} {'p99 ms':>9} {'requests':>9} {'failed':>7}")
        all_failures: list[str] = []
        runs = [(f"throughput, acks={acks}, 1,000 rec/request, {args.threads} threads",
                 dict(acks=acks, threads=args.threads, seconds=args.seconds, records=1000)) for acks in ("1", "all")]
        runs += [(f"latency, acks={acks}, 10 rec/request, 1 thread",
                  dict(acks=acks, threads=1, seconds=args.seconds / 2, records=10)) for acks in ("1", "all")]
        for name, kwargs in runs:
            r = produce_load(cluster, **kwargs)
            print(f"{name:<44} {r['records_s']:>12,.0f} {r['p50_ms']:>9.1f} {r['p99_ms']:>9.1f} {r['requests']:>9} "
                  f"{r['failed']:>7}")
            all_failures += [f"  {name}: {f}" for f in r["failures"]]
        print("requests = acknowledged requests (records/s and latency count only these); failed = other answers "
              "and transport errors" + (", e.g.:" if all_failures else ""))
        for line in all_failures:
            print(line)
        wait_in_sync(cluster)
        took = failover(cluster, signal.SIGKILL)
        print(f"failover after SIGKILL of the leader: first acks=all produce on the new leader after {took:.2f} s "
              f"(zookeeper.session.timeout.ms={args.session_timeout_ms})")
        wait_in_sync(cluster)
        took = failover(cluster, signal.SIGTERM)
        print(f"failover after SIGTERM (controlled shutdown): first acks=all produce on the new leader after {took:.2f} s")
    finally:
        for b in brokers:
            b.stop()
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
