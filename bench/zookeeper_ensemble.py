#!/usr/bin/env python
"""ZooKeeper ensemble benchmark: produce throughput and latency on three brokers while ZooKeeper nodes are
lost, against the same run with every node up.

Usage::

    python bench/zookeeper_ensemble.py                 # about 2 minutes
    python bench/zookeeper_ensemble.py --seconds 20 --threads 6

What it does: starts a 3-node ZooKeeper ensemble (:class:`lakelog.runtime.zookeeper_ensemble.ZooKeeperEnsemble`,
temp dir, ports chosen free, ZooKeeper's default 2 s tick) and three broker child processes on it
(``zookeeper.connect`` = every node and a chroot; the brokers' default 18 s session timeout), creates a
topic with 3 partitions, replication factor 3, ``min.insync.replicas=2``, warms up (5 s of produce, not
printed) and runs the same ``acks=all`` load (``--threads`` client threads, binary-JSON requests of 100 records of 100 bytes, round-robin to the
partitions' leaders, for ``--seconds``) in each phase:

1. all nodes up;
2. one node down (SIGKILL of a node the controller is not connected to), restarted after the phase;
3. the node the controller's session is connected to down (SIGKILL), restarted after the phase;
4. two nodes down at once (no quorum: the brokers serve what they lead, with the ISR unchanged),
   restarted after the phase;
5. all nodes up again.

Each row: records/s, p50 and p99 request latency of the acknowledged requests, failed requests, and the
leader elections during the phase (the sum of the partitions' leader epoch increases, read from the
brokers). After phase 4 it prints how long the brokers took to be ready again (``GET /ready``) once both
nodes serve. All processes share the machine's cores. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import orjson
from kazoo.client import KazooClient

from replication import Cluster, produce_load, wait_in_sync

from lakelog.processes import connected_ports
from lakelog.runtime.broker_process import BrokerProcess
from lakelog.runtime.zookeeper_ensemble import ZooKeeperEnsemble

TOPIC = "bench-ensemble"
CHROOT = "/lakelog"


class EnsembleCluster(Cluster):
    """:class:`Cluster` whose leader lookup falls back on the last answer while no broker can give one (no
    quorum: a broker's partition views need ZooKeeper)."""

    known: dict[int, str] = {}

    def leaders(self) -> dict[int, str]:
        for b in self.brokers:
            try:
                info = httpx.get(f"{b.url}/topics/{self.topic}", timeout=5).json()
                urls = {x.broker_id: x.url for x in self.brokers}
                self.known = {p["partition"]: urls.get(p["leader"]) for p in info["partitions"]}
                return self.known
            except (httpx.TransportError, ValueError, KeyError):
                continue
        if self.known:
            return self.known
        raise RuntimeError("no broker answers")

    def leader_epochs(self) -> dict[int, int]:
        """Every partition's leader epoch, as broker 0's partition view gives it (needs a quorum)."""
        info = httpx.get(f"{self.brokers[0].url}/topics/{self.topic}", timeout=30).json()
        epochs = {}
        for p in info["partitions"]:
            epochs[p["partition"]] = httpx.get(f"{self.brokers[0].url}/topics/{self.topic}/partitions/{p['partition']}",
                                               timeout=30).json()["leader_epoch"]
        return epochs


def controller_port(zookeeper_connect: str, brokers: list[BrokerProcess], ports: set[int]) -> int:
    """The client port of the ZooKeeper node the controller's session is connected to (from ``/proc``)."""
    client = KazooClient(hosts=zookeeper_connect)
    client.start(timeout=30)
    try:
        controller = orjson.loads(client.get("/lakelog/controller")[0])["broker_id"]
    finally:
        client.stop()
        client.close()
    pid = next(b.pid for b in brokers if b.broker_id == controller)
    found = connected_ports(pid, ports)
    if not found:
        raise RuntimeError(f"the controller (broker {controller}) has no ZooKeeper connection")
    return found[0]


def wait_ready(brokers: list[BrokerProcess], timeout_s: float = 120) -> float:
    """Seconds until every broker answers ``GET /ready`` with 200."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if all(httpx.get(f"{b.url}/ready", timeout=5).status_code == 200 for b in brokers):
                return time.monotonic() - t0
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"brokers not ready within {timeout_s} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10, help="length of each phase (s)")
    ap.add_argument("--threads", type=int, default=4, help="producing client threads")
    ap.add_argument("--records", type=int, default=100, help="records per request")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-ensemble-"))
    ensemble = ZooKeeperEnsemble(data_dir=root / "zookeeper", nodes=3)
    brokers: list[BrokerProcess] = []
    try:
        ensemble.start(timeout_s=120)
        root_client = KazooClient(hosts=ensemble.connect_string)
        root_client.start(timeout=30)
        chroot = f"{CHROOT}-{uuid.uuid4().hex[:8]}"
        root_client.ensure_path(chroot)
        root_client.stop()
        root_client.close()
        zookeeper_connect = ensemble.connect_string + chroot
        brokers = [BrokerProcess(zookeeper_connect=zookeeper_connect, log_dirs=root / f"logs-{i}", broker_id=i,
                                 log_file=root / f"broker-{i}.log", new_session=True) for i in range(3)]
        for b in brokers:
            b.start()
        cid = httpx.get(f"{brokers[0].url}/v3/clusters").json()["data"][0]["cluster_id"]
        httpx.post(f"{brokers[0].url}/v3/clusters/{cid}/topics", timeout=30, json={
            "topic_name": TOPIC, "partitions_count": 3, "replication_factor": 3,
            "configs": [{"name": "min.insync.replicas", "value": "2"}]}).raise_for_status()
        cluster = EnsembleCluster(brokers, TOPIC)
        wait_in_sync(cluster)
        ports = {node.client_port for node in ensemble.servers}
        print(f"3 ZooKeeper nodes (tick 2000 ms), 3 brokers (zookeeper.session.timeout.ms 18000), topic {TOPIC}: "
              f"3 partitions, replication factor 3, min.insync.replicas=2; acks=all, {args.records} records of "
              f"100 B per request, {args.threads} threads, {args.seconds:g} s per phase; "
              f"{os.cpu_count()} cores shared by all processes")
        print(f"{'phase':<46} {'records/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'requests':>9} {'failed':>7} "
              f"{'elections':>9}")

        def phase(name: str, down: list) -> None:
            epochs = cluster.leader_epochs()
            for node in down:
                node.kill()
            r = produce_load(cluster, acks="all", threads=args.threads, seconds=args.seconds, records=args.records)
            restarted = time.monotonic()
            for node in down:
                node.start(timeout_s=120)
            ready_s = wait_ready(brokers)
            elections = sum(e - epochs[p] for p, e in cluster.leader_epochs().items())
            print(f"{name:<46} {r['records_s']:>10,.0f} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f} {r['requests']:>9} "
                  f"{r['failed']:>7} {elections:>9}")
            for failure in r["failures"][:3]:
                print(f"    e.g. {failure}")
            if len(down) > 1:
                print(f"    brokers ready {time.monotonic() - restarted:.1f} s after the nodes' restart began "
                      f"({ready_s:.1f} s after both served)")

        # warm-up (not printed): connections, the brokers' first appends and Delta commits
        produce_load(cluster, acks="all", threads=args.threads, seconds=min(args.seconds, 5), records=args.records)
        phase("all nodes up", [])
        at = controller_port(zookeeper_connect, brokers, ports)
        phase("one node down (not the controller's)",
              [next(n for n in ensemble.servers if n.client_port != at)])
        at = controller_port(zookeeper_connect, brokers, ports)
        phase("the controller's node down", [ensemble.node_at(at)])
        at = controller_port(zookeeper_connect, brokers, ports)
        phase("two nodes down (no quorum)", [n for n in ensemble.servers if n.client_port != at][:2])
        phase("all nodes up again", [])
    finally:
        for b in brokers:
            b.stop()
        ensemble.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
