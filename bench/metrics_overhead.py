#!/usr/bin/env python
"""The cost of metrics: produce records/s of one broker with ``metrics.enabled`` true against false.

Usage::

    python bench/metrics_overhead.py                  # 3 pairs per row, ~3 minutes
    python bench/metrics_overhead.py --repeat 5 --seconds 10

What it does: starts an embedded ZooKeeper and one broker child process (``produce_fetch.py``'s setup: a
temp dir, free ports, stopped by pid at the end, on Ctrl-C, SIGTERM and errors). For each row (JSON
produce, 1,000 records of 100 B per request; Arrow produce, 10,000 records per request) it runs pairs of
phases with the same client code (``produce_fetch.py``'s scenario: 8 keep-alive client threads, pre-built
bodies, a fresh 6-partition topic per phase), the broker restarted between phases with
``LAKELOG_METRICS_ENABLED`` false or true; phases alternate (off, on, on, off, ...: a drift of the
machine's load hits both alike). During every "on" phase a scraper thread reads ``GET /metrics`` every
``--scrape-interval-s`` (default 5 s; Prometheus' examples scrape every 15 s), as a Prometheus server
would, and its scrape time is reported.

Figures: records/s of each phase, the ratio on / off per pair and its median against the target 0.97x,
the scrape time p50 / max and the scrape size. The ``bench/`` folder never asserts timings.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import httpx
import numpy as np

from _cluster import PySpy, bench_cluster, broker_env as parse_broker_env, make_console, on_off_table
from produce_fetch import Load, Result, produce_scenario

#: Target: records/s with metrics on over records/s with them off.
TARGET_RATIO = 0.97
ROWS = (("json-produce", "JSON produce, 1,000 × 100 B per request"),
        ("arrow-produce", "Arrow produce, 10,000 × 100 B per request"))

console = make_console()


class Scraper(threading.Thread):
    """``GET /metrics`` at once, then every ``interval_s`` until stopped; keeps each scrape's seconds and bytes."""

    def __init__(self, url: str, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.url, self.interval_s = url, interval_s
        self.stop_event = threading.Event()
        self.seconds: list[float] = []
        self.sizes: list[int] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while True:
                t0 = time.perf_counter()
                resp = client.get("/metrics")
                self.seconds.append(time.perf_counter() - t0)
                self.sizes.append(len(resp.content))
                if self.stop_event.wait(self.interval_s):
                    return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=7.0, help="Seconds per phase. Default: 7.")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="Off/on pairs per row. Default: 3.")
    parser.add_argument("--threads", type=int, default=8, help="Concurrent client connections. Default: 8.")
    parser.add_argument("--scrape-interval-s", type=float, default=5.0,
                        help="Seconds between two scrapes of GET /metrics while metrics are on. Default: 5.")
    parser.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="A broker setting as LAKELOG_NAME=VALUE (repeatable). Default: none.")
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (tables, logs). Default: off.")
    args = parser.parse_args()
    rows: dict[str, dict[bool, list[Result]]] = {kind: {False: [], True: []} for kind, _ in ROWS}
    scrapes, sizes = [], []
    t_start = time.monotonic()
    with bench_cluster(console, prefix="lakelog-bench-metrics-", env=parse_broker_env(args.broker_env),
                       keep=args.keep) as run:
        broker = run.broker
        spy = PySpy(None, broker.pid)
        phase = 0
        for kind, label in ROWS:
            for rep in range(args.repeat):
                for enabled in ((False, True) if rep % 2 == 0 else (True, False)):
                    broker.stop()
                    broker.extra_env["LAKELOG_METRICS_ENABLED"] = "true" if enabled else "false"
                    broker.start()
                    phase += 1
                    with httpx.Client(base_url=broker.url, timeout=120.0) as admin:
                        cluster_id = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
                        scraper = Scraper(broker.url, args.scrape_interval_s) if enabled else None
                        if scraper is not None:
                            scraper.start()
                        try:
                            r = produce_scenario(kind, 100, url=broker.url, admin=admin, cluster_id=cluster_id,
                                                 load=Load(broker.url, args.threads, 10**12, args.seconds),
                                                 broker=broker, spy=spy, repetition=phase)
                        finally:
                            if scraper is not None:
                                scraper.stop_event.set()
                                scraper.join()
                                scrapes += scraper.seconds
                                sizes += scraper.sizes
                    rows[kind][enabled].append(r)
                    console.print(f"  {label:<44} metrics {'on ' if enabled else 'off'}  pair {rep + 1}/{args.repeat}"
                                  f"  {r.rate:>12,.0f} records/s" + (f"  [red]{r.errors[0][:200]}[/]" if r.errors else ""))
    if run.return_code:
        return run.return_code
    console.print(on_off_table(f"produce records/s, metrics on vs off (one broker, {args.threads} client threads, "
                               f"{args.seconds:g} s per phase)", ROWS, rows, target_ratio=TARGET_RATIO))
    if scrapes:
        console.print(f"GET /metrics during the 'on' phases: {len(scrapes)} scrapes, p50 / max "
                      f"{np.median(scrapes) * 1000:.1f} / {max(scrapes) * 1000:.1f} ms, "
                      f"{int(np.median(sizes)):,} bytes each (p50)")
    console.print(f"total {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
