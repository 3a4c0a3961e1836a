#!/usr/bin/env python
"""Broker CPU per produce request, this checkout against another, alternating: a cost figure that the
machine's load moves much less than records/s.

Usage::

    python bench/produce_cpu.py                                  # this checkout, ~2 minutes
    python bench/produce_cpu.py --baseline ../old/platform --rounds 3   # and another checkout, alternating
    python bench/produce_cpu.py --only binary --rounds 4

``bench/produce_fetch.py`` prints records/s, and on a 2-core machine shared by the client and the broker
single runs of one checkout spread by 10-30%: two checkouts within 5% of each other cannot be told apart
that way. This bench sends ``produce_fetch.py``'s request bodies, built by its own functions (JSON and
binary: 1,000 records a request, Arrow: 10,000; keys ~10 bytes, values random letters and digits) from 4 client threads, each with
its own keep-alive ``httpx.Client``, to a fresh 6-partition topic per scenario, and reads the broker
process's CPU time and its children's (``/proc``, every thread: event loop, workers, delta-rs) over the requests and the
flush that follows them. It prints, per scenario, the broker's CPU per request (ms) and per record (µs)
and the requests per second.

With ``--baseline PATH`` (the ``platform/`` folder of another checkout: its ``lakelog`` package, put
first on the broker's ``PYTHONPATH`` as ``bench/request_calls.py`` does) every round runs a broker of
this checkout and one of the baseline, alternating (this, baseline, baseline, this, ...: a drift of the
machine's load hits both alike), each on a fresh ZooKeeper; the last table gives every round and the ratio
of the means (this / baseline: below 1 is cheaper). ZooKeeper and the brokers are stopped by pid.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
from rich.table import Table

from _cluster import make_console, package_broker, process_tree_cpu
from produce_fetch import ARROW_STREAM, BINARY_V2, JSON_V2, arrow_body, binary_body, json_body

PARTITIONS = 6
THREADS = 4


@dataclass(frozen=True)
class Scenario:
    """One request body sent ``requests`` times: ``kind`` json / binary / arrow, ``keyed`` to the topic route."""

    name: str
    kind: str
    value_bytes: int
    requests: int
    keyed: bool = False

    @property
    def records_per_request(self) -> int:
        return 10_000 if self.kind == "arrow" else 1_000


SCENARIOS = (Scenario("json produce, 100 B", "json", 100, 400),
             Scenario("json produce keyed, 100 B", "json", 100, 400, keyed=True),
             Scenario("binary produce, 100 B", "binary", 100, 400),
             Scenario("binary produce, 1 KiB", "binary", 1024, 400),
             Scenario("arrow produce, 100 B", "arrow", 100, 120),
             Scenario("arrow produce, 1 KiB", "arrow", 1024, 60))


def request_body(scenario: Scenario) -> tuple[str, bytes]:
    """``(content type, body)``: ``produce_fetch.py``'s own body of the scenario's kind and size."""
    build, content_type = {"json": (json_body, JSON_V2), "binary": (binary_body, BINARY_V2),
                           "arrow": (arrow_body, ARROW_STREAM)}[scenario.kind]
    body = build(np.random.default_rng(1), scenario.records_per_request, scenario.value_bytes, 0)
    return content_type, body.content


def route(scenario: Scenario, topic: str, partition: int) -> str:
    if scenario.keyed:
        return f"/topics/{topic}"
    return f"/topics/{topic}/partitions/{partition}" + ("/records" if scenario.kind == "arrow" else "")


def run_broker(package: Path | None, tmp: Path, scenarios: list[Scenario], bodies: dict) -> dict[str, tuple[float, float]]:
    """``{scenario name: (broker CPU seconds per request, requests per second)}`` for one broker run from
    ``package`` (None: the installed lakelog)."""
    result = {}
    with package_broker(package, tmp) as broker, httpx.Client(base_url=broker.url, timeout=60) as admin:
        cluster = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        for n, scenario in enumerate(scenarios):
            topic = f"cpu-{n}"
            admin.post(f"/v3/clusters/{cluster}/topics", json={
                "topic_name": topic, "partitions_count": PARTITIONS, "replication_factor": 1}).raise_for_status()
            content_type, body = bodies[scenario.name]

            def send(first: int, count: int) -> None:
                with httpx.Client(base_url=broker.url, timeout=60) as client:
                    for i in range(count):
                        client.post(route(scenario, topic, (first + i) % PARTITIONS), content=body,
                                    headers={"content-type": content_type}).raise_for_status()

            send(0, PARTITIONS)  # warm up: the topic's logs, the first appends
            time.sleep(2.0)  # their flush
            cpu0, t0 = process_tree_cpu(broker.pid), time.perf_counter()
            per_thread = scenario.requests // THREADS
            threads = [threading.Thread(target=send, args=(k, per_thread)) for k in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall_s = time.perf_counter() - t0
            time.sleep(2.5)  # the flush of what was written (lake.commit.interval.ms 1 s)
            requests = per_thread * THREADS
            result[scenario.name] = ((process_tree_cpu(broker.pid) - cpu0) / requests, requests / wall_s)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=None,
                        help="The platform/ folder of another checkout, run alternating with this one.")
    parser.add_argument("--rounds", type=int, default=1, help="Broker runs per checkout. Default: 1.")
    parser.add_argument("--only", default="", help="Comma-separated kinds: json, binary, arrow. Default: all.")
    args = parser.parse_args()
    console = make_console()
    kinds = {k.strip() for k in args.only.split(",") if k.strip()}
    scenarios = [s for s in SCENARIOS if not kinds or s.kind in kinds]
    bodies = {s.name: request_body(s) for s in scenarios}
    sides = ["this"] + (["baseline"] if args.baseline is not None else [])
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    tmp = Path(tempfile.mkdtemp(prefix="lakelog-produce-cpu-"))
    started = time.monotonic()
    try:
        for r in range(args.rounds):
            for side in (sides if r % 2 == 0 else sides[::-1]):
                run_dir = tmp / f"{side}-{r}"
                run_dir.mkdir()
                with console.status(f"round {r + 1}/{args.rounds}: {side}"):
                    got = run_broker(args.baseline if side == "baseline" else None, run_dir, scenarios, bodies)
                runs[side].append(got)
                console.print(f"round {r + 1} {side}: " + "; ".join(
                    f"{name} {cpu * 1e3:.2f} ms" for name, (cpu, _) in got.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table = Table(title=f"broker CPU per produce request ({THREADS} client threads, {PARTITIONS} partitions, "
                        f"RF 1, acks=1; the requests' flush counted)")
    table.add_column("scenario")
    table.add_column("request")
    for side in sides:
        table.add_column(f"{side}: ms CPU / request (each round)", justify="right")
        table.add_column(f"{side}: µs / record, req/s (mean)", justify="right")
    if args.baseline is not None:
        table.add_column("this / baseline (mean CPU)", justify="right")
    for s in scenarios:
        row = [s.name, f"{s.records_per_request:,} records"]
        means = {}
        for side in sides:
            cpus = [run[s.name][0] for run in runs[side]]
            rates = [run[s.name][1] for run in runs[side]]
            means[side] = statistics.mean(cpus)
            row += [" / ".join(f"{c * 1e3:.2f}" for c in cpus),
                    f"{means[side] / s.records_per_request * 1e6:.2f} µs, {statistics.mean(rates):.0f}"]
        if args.baseline is not None:
            row.append(f"{means['this'] / means['baseline']:.2f}×")
        table.add_row(*row)
    console.print(table)
    console.print(f"machine: {os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
                  f"at the end; total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
