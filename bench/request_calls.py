#!/usr/bin/env python
"""Python function calls per request on a broker's event loop: a cost figure that load does not move.

Usage::

    python bench/request_calls.py                              # this checkout
    python bench/request_calls.py --baseline ../old/platform   # and another checkout's package, same run

Timing figures (``bench/latency.py``, ``bench/produce_fetch.py``) need a quiet machine; this one does
not. It starts an embedded ZooKeeper and one broker child process (``python -m lakelog.cli broker
start``, stopped by pid) whose main thread (the asyncio event loop: HTTP parse, routing, the request
layer, the answer) runs under ``cProfile`` for a window of requests, then counts the Python calls
``cProfile`` saw (functions, builtins, C methods) per request:

- produce: ``POST /topics/{t}/partitions/0``, one 100-byte value per request,
  ``application/vnd.kafka.json.v2+json``, ``X-Lakelog-Acks: 1``, one keep-alive client;
- fetch: ``GET /topics/{t}/partitions/0/records`` of one record (``max_bytes=1``), JSON.

With ``--baseline PATH`` (the ``platform/`` folder of another checkout: its ``lakelog`` package), the
broker runs once more from there with the same driver, and the ratio is printed, with the functions whose
calls per request changed most. Appends and reads that run on ``asyncio.to_thread`` workers are not in
the count (they are the log's, not the front door's).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
import pstats

import httpx

from _cluster import package_broker

HERE = Path(__file__).resolve().parent
SCENARIOS = ("produce", "fetch")


def _window(pid: int, send) -> None:
    os.kill(pid, signal.SIGUSR1)
    time.sleep(0.3)
    send()
    os.kill(pid, signal.SIGUSR2)


def _wait_for(path: Path, timeout_s: float = 60.0) -> None:
    t0 = time.monotonic()
    while not path.exists() and time.monotonic() - t0 < timeout_s:
        time.sleep(0.1)
    time.sleep(0.5)  # dump_stats writes it at once; let it finish


def run(package: Path | None, tmp: Path, requests: int) -> dict[str, Counter]:
    """Calls per function of each scenario's window (a Counter keyed by ``file:function``, summed over
    ``requests`` requests), for the broker run from ``package`` (None: the installed lakelog)."""
    out = tmp / "profile"
    with package_broker(package, tmp, extra_path=[str(HERE / "_profiled")],
                        extra_env={"LAKELOG_BENCH_PROFILE_OUT": str(out)}) as broker, \
            httpx.Client(base_url=broker.url, timeout=30) as http:
        cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        http.post(f"/v3/clusters/{cluster}/topics",
                  json={"topic_name": "t", "partitions_count": 1, "replication_factor": 1}).raise_for_status()
        body = json.dumps({"records": [{"value": "x" * 100}]})
        headers = {"content-type": "application/vnd.kafka.json.v2+json", "x-lakelog-acks": "1"}

        def produce() -> None:
            for _ in range(requests):
                http.post("/topics/t/partitions/0", content=body, headers=headers).raise_for_status()

        def fetch() -> None:
            for i in range(requests):
                http.get("/topics/t/partitions/0/records", params={"offset": i, "max_bytes": 1},
                         headers={"accept": "application/vnd.kafka.json.v2+json"}).raise_for_status()

        produce()  # warm up: imports, caches, the first flush
        fetch()
        result = {}
        for n, (name, send) in enumerate(zip(SCENARIOS, (produce, fetch))):
            _window(broker.pid, send)
            _wait_for(Path(f"{out}.{n}"))
            result[name] = _calls(Path(f"{out}.{n}"))
        return result


def _calls(path: Path) -> Counter:
    calls: Counter = Counter()
    for (file, _line, function), (_cc, ncalls, *_rest) in pstats.Stats(str(path)).stats.items():
        file = re.sub(r".*/(platform|lakelog)/", "lakelog/", file)  # a checkout's platform/ is the lakelog package
        file = re.sub(r".*/(site-packages|python3\.\d+)/", r"\1/", file)
        function = re.sub(r" at 0x[0-9a-f]+", "", function)
        calls[f"{file}:{function}"] += ncalls
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1_000, help="Requests per scenario window. Default: 1,000.")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="Another checkout's platform/ folder (its lakelog package), measured in the same run.")
    parser.add_argument("--top", type=int, default=15, help="Functions listed per scenario with --baseline.")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakelog-request-calls-"))
    try:
        (tmp / "this").mkdir()
        this = run(None, tmp / "this", args.requests)
        base = None
        if args.baseline is not None:
            (tmp / "baseline").mkdir()
            base = run(args.baseline, tmp / "baseline", args.requests)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = args.requests
    print(f"Python calls per request on the broker's event loop ({n:,} requests per scenario):")
    for name in SCENARIOS:
        now = sum(this[name].values()) / n
        if base is None:
            print(f"  {name:8s} {now:8.1f}")
            continue
        was = sum(base[name].values()) / n
        print(f"  {name:8s} {now:8.1f}   baseline {was:8.1f}   ratio {now / was:.3f}")
    if base is not None:
        for name in SCENARIOS:
            diff = Counter({k: this[name][k] - base[name][k] for k in set(this[name]) | set(base[name])})
            print(f"\n{name}: functions whose calls per request changed most (this - baseline)")
            for key, d in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:args.top]:
                if d:
                    print(f"  {d / n:+8.2f}  {key}")


if __name__ == "__main__":
    main()
