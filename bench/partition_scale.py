#!/usr/bin/env python
"""Partition scale: what thousands of partitions cost one broker, idle and under a light produce.

Usage::

    python bench/partition_scale.py                      # 1,000 and 5,000 partitions (about 10 minutes)
    python bench/partition_scale.py --sizes 200 --idle-s 10 --requests 200   # a < 2 minute smoke run

For each size: a fresh embedded ZooKeeper and one broker child process (temp dir, stopped by pid,
``bench/_cluster.py``), then

1. the empty broker: a one-partition topic ``probe`` (RF 1) and ``--requests`` sequential one-record
   ``acks=1`` produce requests to it (100-byte values, one keep-alive connection): p50 / p99;
2. topic create: a topic ``wide`` (RF 1) with ``--sizes`` partitions, created with up to 1,000 and grown
   by 1,000 per ``PATCH`` (the per-call limit); the time until the last call answered;
3. one record produced to each partition (8 client threads), then ``--settle-s`` for the flushes;
4. idle: the broker's RSS, threads (``/proc/{pid}/status``) and asyncio tasks (``lakelog_asyncio_tasks``
   of ``GET /metrics``, read after the window) and its CPU over ``--idle-s`` seconds (``/proc/{pid}/stat``,
   100% = one core); ``GET /topics`` and ``GET /v3/clusters/{c}/topics/wide/partitions`` (median of 5);
   the produce p50 / p99 to ``probe`` again;
5. light produce: one client thread sends a one-record request to a random partition of ``wide`` every
   ``1 / --light-rate`` s while step 4's produce to ``probe`` is measured again, with the broker's CPU.

Then the issue's targets: idle CPU <= 5% of a core, produce p50 / p99 within 1.2x of the empty broker's,
the v3 partition list <= 200 ms. The broker shares the machine's cores with this client (and with
anything else running): the first line ``machine`` gives the load average at the start, the second what
a wakeup from a 1 s sleep costs on this machine (:func:`wake_cost_us`). ``bench/`` never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
from _cluster import bench_cluster, make_console, process_cpu

console = make_console()

ACKS_HEADER = "X-Lakelog-Acks"
JSON_V2 = "application/vnd.kafka.json.v2+json"
#: Partitions per create / grow call (the v3 API's per-call limit).
PARTITIONS_PER_CALL = 1000
#: The issue's targets at 5,000 partitions.
IDLE_CPU_TARGET = 0.05
PRODUCE_RATIO_TARGET = 1.2
PARTITION_LIST_TARGET_S = 0.2


def proc_status(pid: int) -> dict[str, str]:
    """``/proc/{pid}/status`` as a dict (``VmRSS``, ``Threads``, ...)."""
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def rss_mib(pid: int) -> float:
    return int(proc_status(pid)["VmRSS"].split()[0]) / 1024.0


def threads(pid: int) -> int:
    return int(proc_status(pid)["Threads"].strip())


def asyncio_tasks(client: httpx.Client) -> int | None:
    """The broker's ``lakelog_asyncio_tasks`` gauge, or None when its ``/metrics`` has none."""
    text = client.get("/metrics", timeout=600.0).text
    found = re.search(r"^lakelog_asyncio_tasks(?:\{[^}]*\})? ([0-9.e+]+)$", text, flags=re.M)
    return int(float(found.group(1))) if found else None


def cpu_over(pid: int, seconds: float) -> float:
    """The broker's CPU over the next ``seconds``, as a share of one core."""
    before, started = process_cpu(pid), time.monotonic()
    time.sleep(seconds)
    return (process_cpu(pid) - before) / (time.monotonic() - started)


def wake_cost_us(samples: int = 7) -> tuple[float, float]:
    """CPU microseconds (median of ``samples``) of a small fixed piece of Python work run back to back, and
    run right after a 1 s sleep. On a virtual machine whose vCPU is slow to come back from idle, the
    second is many times the first, and an idle process pays it at every wakeup (``/proc`` counts it as
    the process's CPU): the idle CPU of step 4 depends on it as much as on the broker."""
    def work() -> float:
        started = time.process_time()
        total = 0
        for i in range(2000):
            total += i * i
        return (time.process_time() - started) * 1e6

    work()
    back_to_back = sorted(work() for _ in range(samples))[samples // 2]
    after_idle = []
    for _ in range(samples):
        time.sleep(1.0)
        after_idle.append(work())
    return back_to_back, sorted(after_idle)[samples // 2]


def produce_latencies(client: httpx.Client, topic: str, partition: int, requests: int) -> tuple[float, float]:
    """p50, p99 in seconds of ``requests`` sequential one-record acks=1 produce requests."""
    body = json.dumps({"records": [{"value": {"v": "x" * 92}}]}).encode()
    headers = {"Content-Type": JSON_V2, ACKS_HEADER: "1"}
    path = f"/topics/{topic}/partitions/{partition}"
    for _ in range(10):  # warm the connection and the route
        client.post(path, content=body, headers=headers).raise_for_status()
    took = []
    for _ in range(requests):
        started = time.perf_counter()
        client.post(path, content=body, headers=headers).raise_for_status()
        took.append(time.perf_counter() - started)
    return float(np.percentile(took, 50)), float(np.percentile(took, 99))


def median_latency(client: httpx.Client, path: str, samples: int = 5) -> float:
    took = []
    for _ in range(samples):
        started = time.perf_counter()
        client.get(path, timeout=600.0).raise_for_status()
        took.append(time.perf_counter() - started)
    return float(np.median(took))


def create_wide(client: httpx.Client, cluster: str, partitions: int) -> float:
    """Create topic ``wide`` with ``partitions`` partitions; seconds until the last call answered."""
    started = time.perf_counter()
    count = min(partitions, PARTITIONS_PER_CALL)
    client.post(f"/v3/clusters/{cluster}/topics", timeout=900.0, json={
        "topic_name": "wide", "partitions_count": count, "replication_factor": 1}).raise_for_status()
    while count < partitions:
        count = min(partitions, count + PARTITIONS_PER_CALL)
        client.patch(f"/v3/clusters/{cluster}/topics/wide", timeout=900.0,
                     json={"partitions_count": count}).raise_for_status()
    return time.perf_counter() - started


def produce_to_each(url: str, partitions: int) -> float:
    """One record to each partition of ``wide`` (8 threads); returns the seconds it took."""
    body = json.dumps({"records": [{"value": {"v": "y"}}]}).encode()
    headers = {"Content-Type": JSON_V2, ACKS_HEADER: "1"}
    local = threading.local()

    def send(p: int) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=url, timeout=120.0)
        local.client.post(f"/topics/wide/partitions/{p}", content=body, headers=headers).raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, range(partitions)))
    return time.perf_counter() - started


class LightProduce:
    """One thread sending a one-record request to a random partition of ``wide`` every 1/``rate`` s."""

    def __init__(self, url: str, partitions: int, rate: float) -> None:
        self.url, self.partitions, self.period_s = url, partitions, 1.0 / rate
        self.stopped = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = json.dumps({"records": [{"value": {"v": "z" * 92}}]}).encode()
        headers = {"Content-Type": JSON_V2, ACKS_HEADER: "1"}
        with httpx.Client(base_url=self.url, timeout=120.0) as client:
            next_at = time.monotonic()
            while not self.stopped.is_set():
                p = random.randrange(self.partitions)
                client.post(f"/topics/wide/partitions/{p}", content=body, headers=headers).raise_for_status()
                self.sent += 1
                next_at += self.period_s
                self.stopped.wait(max(0.0, next_at - time.monotonic()))

    def __enter__(self) -> "LightProduce":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def run_size(partitions: int, args: argparse.Namespace) -> int:
    env = dict(pair.split("=", 1) for pair in args.broker_env)
    with bench_cluster(console, prefix="lakelog-partition-scale-", env=env, keep=False) as run:
        pid = run.broker.pid
        with httpx.Client(base_url=run.broker.url, timeout=120.0) as client:
            cluster = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
            client.post(f"/v3/clusters/{cluster}/topics", json={
                "topic_name": "probe", "partitions_count": 1, "replication_factor": 1}).raise_for_status()
            time.sleep(1.0)
            empty_p50, empty_p99 = produce_latencies(client, "probe", 0, args.requests)
            empty_rss, empty_threads = rss_mib(pid), threads(pid)
            empty_cpu = cpu_over(pid, min(args.idle_s, 10.0))
            empty_tasks = asyncio_tasks(client)
            console.print(f"[bold]{partitions:,} partitions[/]  empty broker: produce p50 {ms(empty_p50)} / p99 "
                          f"{ms(empty_p99)}, RSS {empty_rss:.0f} MiB, threads {empty_threads}, asyncio tasks "
                          f"{empty_tasks}, idle CPU {empty_cpu:.1%} of a core")
            created = create_wide(client, cluster, partitions)
            console.print(f"  topic create ({partitions:,} partitions): {created:.1f} s")
            filled = produce_to_each(run.broker.url, partitions)
            console.print(f"  one record to each partition: {filled:.1f} s; settling {args.settle_s:.0f} s")
            time.sleep(args.settle_s)
            idle_cpu = cpu_over(pid, args.idle_s)
            rss, nthreads = rss_mib(pid), threads(pid)
            tasks = asyncio_tasks(client)
            topics_s = median_latency(client, "/topics")
            plist_s = median_latency(client, f"/v3/clusters/{cluster}/topics/wide/partitions")
            idle_p50, idle_p99 = produce_latencies(client, "probe", 0, args.requests)
            console.print(f"  idle: RSS {rss:.0f} MiB, threads {nthreads}, asyncio tasks {tasks}, CPU "
                          f"{idle_cpu:.1%} of a core over {args.idle_s:.0f} s")
            console.print(f"  idle: GET /topics {ms(topics_s)}, v3 partition list {ms(plist_s)}, produce p50 "
                          f"{ms(idle_p50)} / p99 {ms(idle_p99)}")
            with LightProduce(run.broker.url, partitions, args.light_rate) as light:
                before = process_cpu(pid)
                started = time.monotonic()
                light_p50, light_p99 = produce_latencies(client, "probe", 0, args.requests)
                light_cpu = (process_cpu(pid) - before) / (time.monotonic() - started)
                light_tasks = asyncio_tasks(client)
            console.print(f"  light produce ({args.light_rate:.0f} req/s to random partitions, {light.sent} sent): "
                          f"produce p50 {ms(light_p50)} / p99 {ms(light_p99)}, CPU {light_cpu:.1%} of a core, "
                          f"RSS {rss_mib(pid):.0f} MiB, threads {threads(pid)}, asyncio tasks {light_tasks}")

            def verdict(ok: bool) -> str:
                return "[green]met[/]" if ok else "[red]missed[/]"
            console.print(f"  targets: idle CPU {idle_cpu:.1%} <= 5%: {verdict(idle_cpu <= IDLE_CPU_TARGET)}; "
                          f"produce idle p50 {idle_p50 / empty_p50:.2f}x / p99 {idle_p99 / empty_p99:.2f}x, "
                          f"light p50 {light_p50 / empty_p50:.2f}x / p99 {light_p99 / empty_p99:.2f}x of the "
                          f"empty broker's <= 1.2x: "
                          f"{verdict(max(idle_p50 / empty_p50, idle_p99 / empty_p99) <= PRODUCE_RATIO_TARGET)} "
                          f"(idle), {verdict(max(light_p50 / empty_p50, light_p99 / empty_p99) <= PRODUCE_RATIO_TARGET)}"
                          f" (light); v3 partition list {ms(plist_s)} <= 200 ms: "
                          f"{verdict(plist_s <= PARTITION_LIST_TARGET_S)}")
    return run.return_code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000", help="Partition counts, comma-separated. Default: 1000,5000.")
    parser.add_argument("--idle-s", type=float, default=30.0, help="Idle CPU window in seconds. Default: 30.")
    parser.add_argument("--settle-s", type=float, default=10.0,
                        help="Seconds after the one-record-per-partition produce before the idle window. Default: 10.")
    parser.add_argument("--requests", type=int, default=1000, help="Produce requests per p50/p99. Default: 1,000.")
    parser.add_argument("--light-rate", type=float, default=50.0,
                        help="Requests per second of the light produce. Default: 50.")
    parser.add_argument("--broker-env", action="append", default=[], metavar="KEY=VALUE",
                        help="Extra environment of the broker (e.g. LAKELOG_LAKE_COMMIT_INTERVAL_MS=1000).")
    args = parser.parse_args()
    load = os.getloadavg()
    console.print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
                  f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    back_to_back_us, after_idle_us = wake_cost_us()
    console.print(f"machine: the same ~2,000-step Python loop takes {back_to_back_us:.0f} us of CPU back to back and "
                  f"{after_idle_us:.0f} us right after a 1 s sleep ({after_idle_us / back_to_back_us:.1f}x): an idle "
                  f"broker pays that ratio at each wakeup, so read the idle CPU figures with it")
    code = 0
    for size in (int(s) for s in args.sizes.split(",")):
        code = run_size(size, args) or code
    return code


if __name__ == "__main__":
    sys.exit(main())
