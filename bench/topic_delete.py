#!/usr/bin/env python
"""Topic administration at scale: grow a topic to many partitions, then delete it; print both times.

Usage::

    python bench/topic_delete.py                  # 1,000 partitions
    python bench/topic_delete.py --partitions 3000

One broker (ZooKeeper and broker child processes in a temp dir, stopped by pid). The topic is created
with one partition, grown with ``PATCH .../topics/{t}`` (in steps of at most 1,000 partitions, the
per-call limit) and, after ``--settle-s`` seconds for the broker to open the new logs, deleted with
``DELETE /v3/clusters/{c}/topics/{t}``, which answers once the znodes are gone and the broker dropped
its logs. ``bench/`` never asserts.
"""

from __future__ import annotations

import argparse
import sys
import time

from _cluster import bench_cluster, make_console

from lakelog.client import LakelogClient

console = make_console()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000, help="Partitions to grow to. Default: 1,000.")
    parser.add_argument("--settle-s", type=float, default=10.0,
                        help="Seconds between growing and deleting (the broker opens the logs). Default: 10.")
    args = parser.parse_args()
    with bench_cluster(console, prefix="lakelog-topic-delete-", env={}, keep=False) as run:
        client = LakelogClient(run.broker.url, timeout_s=600.0)
        client.create_topic("wide", partitions=1)
        started = time.perf_counter()
        count = 1
        while count < args.partitions:
            count = min(args.partitions, count + 1000)
            client.admin.add_partitions("wide", partitions_count=count)
        grown = time.perf_counter() - started
        time.sleep(args.settle_s)
        started = time.perf_counter()
        client.admin.delete_topic("wide")
        deleted = time.perf_counter() - started
        console.print(f"{args.partitions:,} partitions: grown in {grown:.2f} s, deleted in {deleted:.2f} s")
    return run.return_code


if __name__ == "__main__":
    sys.exit(main())
