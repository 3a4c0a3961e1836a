#!/usr/bin/env python
"""HTTP consumer groups: records/s of a group of 1 and of 3 REST Proxy v2 consumers, rebalance time, and
offset commits through the group coordinator.

Usage::

    .venv/bin/python bench/consumer_group.py                  # 1,000,000 records, ~1 minute
    .venv/bin/python bench/consumer_group.py --records 200000 --rebalances 3 --commit-seconds 3   # quick run

What it does: starts an embedded ZooKeeper (a temp dir, a free port) and one broker child process
(``python -m lakelog.cli broker start``, stopped by pid at the end and on errors), creates a
6-partition topic and fills it with ``--records`` records of 100-byte values through the Arrow produce
route (``POST /topics/{t}/partitions/{p}/records``). Then:

- **consume, group of N** (N = 1 and 3): N consumer instances (``POST /consumers/{group}``, binary
  format, ``auto.offset.reset=earliest``, ``auto.commit.enable=false``), one client thread each with
  its own keep-alive ``httpx.Client``, subscribe and loop ``GET .../records`` then ``POST .../offsets``
  (empty body: commit what was fetched, after "processing" = decoding the JSON) until the group has
  read every record. records/s counts from the subscriptions to the last record, so it includes the
  group's first rebalance; MB/s is of values (10^6 bytes).
- **rebalance after a member leaves**: a group of 3 polling members (caught up, long-polling); one is
  deleted (``DELETE /consumers/{group}/instances/{i}``); the time until the two others own all 6
  partitions (their ``GET .../assignments``, polled every 2 ms) is the rebalance time. Repeated
  ``--rebalances`` times (a third member joins again in between); min / median / max.
- **offset commits through the coordinator**: ``POST /consumers/{group}/offsets`` (each commit is an
  ``acks=all`` append to the group's ``__consumer_offsets`` partition on its coordinator): one client
  committing one partition per request, the same with all 6 partitions per request (batched), and 8
  clients (8 groups) committing concurrently; ``--commit-seconds`` each; commits/s, offsets/s and the
  latency percentiles of a commit as the client sees it.

The ``bench/`` folder never asserts timings; figures are printed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from lakelog.client import HttpConsumer, LakelogClient
from lakelog.runtime.broker_process import BrokerProcess
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port

PARTITIONS = 6
VALUE_BYTES = 100
console = Console()


def fill_topic(client: LakelogClient, topic: str, records: int) -> None:
    """``records`` records of 100 random letters spread evenly over the partitions (Arrow produce)."""
    rng = np.random.default_rng(7)
    batch = 50_000
    per_partition = records // PARTITIONS
    for p in range(PARTITIONS):
        left = per_partition + (1 if p < records % PARTITIONS else 0)
        while left > 0:
            n = min(batch, left)
            letters = rng.integers(97, 123, size=n * VALUE_BYTES, dtype=np.uint8).tobytes()
            values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
                np.arange(0, (n + 1) * VALUE_BYTES, VALUE_BYTES, dtype=np.int32).tobytes()), pa.py_buffer(letters)])
            keys = pa.array([f"key-{i % 1000}".encode() for i in range(n)], pa.binary())
            client.produce_arrow(topic, p, pa.table({"key": keys, "value": values}))
            left -= n


def consume_group(client: LakelogClient, topic: str, group: str, members: int, total: int) -> tuple[float, int]:
    """Run ``members`` consumer threads until the group read ``total`` records; (seconds, records)."""
    consumers = [client.groups.create_consumer(group, name=f"m{i}", auto_offset_reset="earliest", auto_commit=False,
                                        request_timeout_ms=200) for i in range(members)]
    counts = [0] * members
    done = threading.Event()
    errors: list[BaseException] = []

    def run(i: int, c: HttpConsumer) -> None:
        try:
            while not done.is_set():
                resp = c._call("GET", "/records", params={"timeout": 200},
                               headers={"Accept": "application/vnd.kafka.binary.v2+json"})
                records = orjson.loads(resp.content)  # "processing"
                if records:
                    counts[i] += len(records)
                    c.commit()
                    if sum(counts) >= total:
                        done.set()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            done.set()

    started = time.perf_counter()
    for c in consumers:
        c.subscribe([topic])
    threads = [threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    done.wait(600)
    elapsed = time.perf_counter() - started
    for t in threads:
        t.join(30)
    for c in consumers:
        c.close()
    if errors:
        raise errors[0]
    return elapsed, sum(counts)


def rebalance_times(client: LakelogClient, topic: str, group: str, rounds: int) -> list[float]:
    """Seconds from deleting one of 3 members to the other two owning all partitions, per round."""
    stop = threading.Event()
    pollers: dict[str, threading.Thread] = {}
    members: dict[str, HttpConsumer] = {}

    def poll(c: HttpConsumer, mine: threading.Event) -> None:
        while not stop.is_set() and not mine.is_set():
            try:
                c.poll(timeout_ms=500)
            except Exception:  # noqa: BLE001 - deleted under our feet
                return

    def add(name: str) -> threading.Event:
        c = client.groups.create_consumer(group, name=name, auto_offset_reset="latest", auto_commit=False)
        c.subscribe([topic])
        members[name] = c
        flag = threading.Event()
        pollers[name] = threading.Thread(target=poll, args=(c, flag), daemon=True)
        pollers[name].start()
        return flag

    def owned(names: list[str]) -> int:
        tps = [tp for n in names for tp in members[n].assignment()]
        return len(set(tps)) if len(tps) == len(set(tps)) else -1

    def wait_until(names: list[str], timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while owned(names) != PARTITIONS or any(len(members[n].assignment()) != PARTITIONS // len(names) for n in names):
            if time.monotonic() > deadline:
                raise RuntimeError("the group did not settle")
            time.sleep(0.002)

    flags = {n: add(n) for n in ("a", "b")}
    times = []
    for r in range(rounds):
        name = f"leaver-{r}"
        flags[name] = add(name)
        wait_until(["a", "b", name])
        time.sleep(0.5)
        flags[name].set()
        started = time.perf_counter()
        members[name].close()
        deadline = time.monotonic() + 30
        while not (owned(["a", "b"]) == PARTITIONS):
            if time.monotonic() > deadline:
                raise RuntimeError("no rebalance after the member left")
            time.sleep(0.002)
        times.append(time.perf_counter() - started)
        del members[name]
    stop.set()
    for n in ("a", "b"):
        members[n].close()
    return times


def offset_commits(url: str, topic: str, *, clients: int, partitions_per_commit: int,
                   seconds: float) -> tuple[int, float, list[float]]:
    """``clients`` threads (one group each) committing ``partitions_per_commit`` offsets per request for
    ``seconds``; returns (commits, elapsed s, per-commit latencies in ms)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    deadline = time.perf_counter() + seconds

    def run(i: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            n = 0
            while time.perf_counter() < deadline:
                n += 1
                body = {"offsets": [{"topic": topic, "partition": p, "offset": n}
                                    for p in range(partitions_per_commit)]}
                t = time.perf_counter()
                resp = http.post(f"/consumers/bench-commits-{clients}-{partitions_per_commit}-{i}/offsets", json=body)
                latencies[i].append((time.perf_counter() - t) * 1000)
                if resp.status_code != 200:
                    raise RuntimeError(f"commit answered {resp.status_code}: {resp.text[:300]}")

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(run, i) for i in range(clients)]:
            f.result()
    elapsed = time.perf_counter() - started
    flat = [x for per in latencies for x in per]
    return len(flat), elapsed, flat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="Records to pre-produce (100-byte values).")
    parser.add_argument("--rebalances", type=int, default=5, help="Rebalance rounds to time.")
    parser.add_argument("--commit-seconds", type=float, default=8.0, help="Seconds per offset-commit scenario.")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="lakelog-bench-cg-"))
    zk = ZooKeeperServer(data_dir=tmp / "zookeeper", client_port=free_port())
    broker = None
    try:
        zk.start()
        broker = BrokerProcess(zookeeper_connect=zk.connect_string, log_dirs=tmp / "logs",
                               log_file=tmp / "broker.log", new_session=True).start()
        url = broker.url
        with LakelogClient(url, timeout_s=120) as client:
            topic = "bench-consumer-group"
            client.create_topic(topic, partitions=PARTITIONS)
            t0 = time.perf_counter()
            fill_topic(client, topic, args.records)
            console.print(f"produced {args.records:,} records of {VALUE_BYTES} bytes to {PARTITIONS} partitions "
                          f"in {time.perf_counter() - t0:.1f} s (Arrow produce)")
            table = Table("scenario", "records", "seconds", "records/s", "MB/s (values)",
                          title=f"HTTP consumer groups, {PARTITIONS}-partition topic, {VALUE_BYTES}-byte values")
            for members in (1, 3):
                seconds, n = consume_group(client, topic, f"bench-{members}", members, args.records)
                table.add_row(f"consume, group of {members}", f"{n:,}", f"{seconds:.2f}", f"{n / seconds:,.0f}",
                              f"{n * VALUE_BYTES / seconds / 1e6:.1f}")
            console.print(table)
            times = rebalance_times(client, topic, "bench-rebalance", args.rebalances)
            rt = Table("scenario", "rounds", "min ms", "median ms", "max ms", title="Rebalance after a member leaves")
            rt.add_row("3 -> 2 members (DELETE to the others owning all 6 partitions)", str(len(times)),
                       f"{min(times) * 1000:.0f}", f"{statistics.median(times) * 1000:.0f}", f"{max(times) * 1000:.0f}")
            console.print(rt)
            # the first commit creates __consumer_offsets: not timed
            client.commit_offsets("bench-warm-up", [{"topic": topic, "partition": 0, "offset": 0}])
            ct = Table("scenario", "commits", "commits/s", "offsets/s", "p50 ms", "p99 ms", "max ms",
                       title="Offset commits through the group coordinator (acks=all appends to __consumer_offsets)")
            for clients, per_commit, name in ((1, 1, "1 client, 1 partition per commit"),
                                              (1, PARTITIONS, f"1 client, {PARTITIONS} partitions per commit (batched)"),
                                              (8, 1, "8 clients (8 groups), 1 partition per commit")):
                n, elapsed, lat = offset_commits(url, topic, clients=clients, partitions_per_commit=per_commit,
                                                 seconds=args.commit_seconds)
                p50, p99 = np.percentile(lat, [50, 99])
                ct.add_row(name, f"{n:,}", f"{n / elapsed:,.0f}", f"{n * per_commit / elapsed:,.0f}",
                           f"{p50:.2f}", f"{p99:.2f}", f"{max(lat):.2f}")
            console.print(ct)
    finally:
        if broker is not None:
            broker.stop()
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
