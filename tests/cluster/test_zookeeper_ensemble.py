"""Brokers on a 3-node ZooKeeper ensemble ride through the loss of ZooKeeper nodes.

Three brokers (RF 3, ``min.insync.replicas=2``) under a steady ``acks=all`` produce, the ensemble of the
``zookeeper_ensemble`` fixture losing (SIGKILL) and getting back, in turn: one node; the node the
controller's session is connected to; two nodes at once (no quorum). What must hold:

- a single node's loss changes nothing a broker did with ZooKeeper: no registration is written again (its
  ephemeral owner is the same session), no controller election (same controller epoch), no leader
  election (every partition's leader epoch unchanged), no session expired (the brokers' metrics);
- without a quorum, the brokers go on serving what they lead (acks=all while the ISR is unchanged, acks=1,
  fetch), refuse a topic creation with the retriable 503 / 50304, and say so in ``/ready`` and the
  ``lakelog_zookeeper_connected`` gauge; they heal by themselves when the quorum returns;
- every acknowledged record is read back, once, in order, and every replica holds the same records.
"""

from __future__ import annotations

import base64
import re
import threading
import time

import httpx
import pytest

from lakelog.errors import ZooKeeperUnavailableError
from lakelog.replication.metadata import BROKERS_PATH, CONTROLLER_EPOCH_PATH
from tests.cluster.test_replication import (FAST, keys_by_partition, PartitionProducer, create_topic, partition_info, produce,
                                            start_cluster, table_rows, wait_full_isr)
from tests.harness import CONDITION_WAIT_S, connected_ports, new_chroot, read_partition, wait_for

pytestmark = pytest.mark.cluster

TOPIC, PARTITIONS = "orders", 3
SESSION_TIMEOUT_MS = 6000
# A session outlives a node's loss: kazoo reconnects to another node well within it.
ENV = {**FAST, "LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS)}


@pytest.fixture
def zk_connect(zookeeper_ensemble) -> str:
    """This module's brokers and test clients use the ensemble (every node's address, a fresh chroot)."""
    return new_chroot(zookeeper_ensemble.connect_string)


class SteadyProducer(PartitionProducer):
    """:class:`PartitionProducer` that asks the brokers, not ZooKeeper, who leads, and only after a failed
    attempt: it goes on producing while the ensemble has no quorum."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._leader: str | None = None
        self._failures_seen = -1

    def leader_url(self) -> str:
        if self._leader is not None and self._failures_seen == self.failures:
            return self._leader

        def ask() -> str | None:
            for url in self.urls.values():
                try:
                    resp = httpx.get(f"{url}/topics/{self.topic}/partitions/{self.p}", timeout=5)
                except httpx.TransportError:
                    continue
                if resp.status_code == 200 and resp.json().get("leader") in self.urls:
                    return self.urls[resp.json()["leader"]]
            return self._leader  # no broker can tell (no quorum): the one that led

        self._leader = wait_for(ask, what="a leader", interval_s=0.2)
        self._failures_seen = self.failures
        return self._leader


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(rf"^{name}(?:_total)? ([0-9.e+-]+)$", text, re.MULTILINE)
    assert match is not None, f"{name} not in the metrics of {url}"
    return float(match.group(1))


def ready(url: str) -> httpx.Response:
    return httpx.get(f"{url}/ready", timeout=10)


def test_brokers_ride_through_the_loss_of_zookeeper_nodes(zookeeper_ensemble, broker_factory, zk_connect, zk,
                                                         tmp_path):
    started = time.monotonic()
    ensemble = zookeeper_ensemble
    client_ports = {node.client_port for node in ensemble.servers}
    brokers = start_cluster(broker_factory, env=ENV)
    urls = {i: b.url for i, b in brokers.items()}
    resp = create_topic(urls[0], TOPIC, partitions=PARTITIONS, rf=3, configs={"min.insync.replicas": "2"})
    assert resp.status_code == 201, resp.text
    wait_full_isr(zk, TOPIC, PARTITIONS, 3)
    cluster_id = httpx.get(f"{urls[0]}/v3/clusters").json()["data"][0]["cluster_id"]
    # a topic of its own for the acks=1 records (the producers count the offsets of theirs)
    assert create_topic(urls[0], "acks-one", partitions=1, rf=3).status_code == 201
    wait_full_isr(zk, "acks-one", 1, 3)
    acks_one_leader = urls[zk.state("acks-one", 0).leader]

    keys = keys_by_partition(PARTITIONS)
    stop = threading.Event()
    producers = [SteadyProducer(urls, zk_connect, TOPIC, p, keys[p], 50, stop) for p in range(PARTITIONS)]
    for pr in producers:
        pr.start()

    def total_acked() -> int:
        return sum(len(pr.acked) for pr in producers)

    def progress(n: int) -> None:
        target = total_acked() + n
        wait_for(lambda: total_acked() >= target or any(pr.error for pr in producers), what="producer progress")
        for pr in producers:
            assert pr.error is None, pr.error

    def read_footprint() -> dict:
        return {"leader_epochs": {p: zk.state(TOPIC, p).leader_epoch for p in range(PARTITIONS)},
                "controller_epoch": zk.client.get(CONTROLLER_EPOCH_PATH)[0],
                "registrations": {b: zk.client.exists(f"{BROKERS_PATH}/{b}").ephemeralOwner for b in brokers}}

    def zookeeper_footprint() -> dict:
        """What an election or a re-registration would change: leader epochs, the controller epoch, the
        session that owns each broker's registration. Read by this test's own ZooKeeper client, which may
        itself be reconnecting after a node's loss (it then answers ZooKeeperUnavailableError: retried)."""
        def attempt() -> dict | None:
            try:
                return read_footprint()
            except ZooKeeperUnavailableError:
                return None
        return wait_for(attempt, what="this test's ZooKeeper client to read the footprint")

    progress(300)
    before = zookeeper_footprint()

    # 1. one node (a follower of the ensemble, not the one the controller is connected to)
    controller = zk.controller()
    controller_port = wait_for(lambda: connected_ports(brokers[controller].pid, client_ports),
                               what="the controller's ZooKeeper connection")[0]
    leader_node = ensemble.leader()
    victim = next(node for node in ensemble.servers if node.client_port != controller_port and node is not leader_node)
    victim.kill()
    progress(300)
    victim.start()
    progress(100)
    assert zookeeper_footprint() == before, "a single node's loss changed a leader, the controller or a registration"

    # 2. the node the controller's session is connected to
    controller_port = connected_ports(brokers[controller].pid, client_ports)[0]
    victim = ensemble.node_at(controller_port)
    victim.kill()
    # within its session timeout, or the session would be gone (the footprint check below would fail too)
    wait_for(lambda: [p for p in connected_ports(brokers[controller].pid, client_ports) if p != controller_port],
             SESSION_TIMEOUT_MS / 1000, "the controller to reconnect to another node")
    progress(300)
    victim.start()
    progress(100)
    assert zookeeper_footprint() == before, "a single node's loss changed a leader, the controller or a registration"
    for url in urls.values():
        assert metric(url, "lakelog_zookeeper_expires") == 0
    assert metric(urls[controller], "lakelog_zookeeper_disconnects") >= 1

    # 3. two nodes at once: no quorum
    lost = [node for node in ensemble.servers if node.client_port != controller_port][:2]
    for node in lost:
        node.kill()
    outage = time.monotonic()
    for url in urls.values():
        wait_for(lambda: ready(url).status_code == 503 and "not connected to ZooKeeper" in ready(url).text,
                 what=f"{url}/ready to report the lost quorum")
        assert metric(url, "lakelog_zookeeper_connected") == 0
    progress(300)  # acks=all goes on: the ISR is unchanged
    one = produce(acks_one_leader, "acks-one", 0, [b"acks-1-without-quorum"], acks="1")
    assert one.status_code == 200 and one.json()["offsets"][0]["error_code"] is None, one.text
    refused = httpx.post(f"{urls[1]}/v3/clusters/{cluster_id}/topics", timeout=30,
                         json={"topic_name": "created-without-quorum", "partitions_count": 1, "replication_factor": 3})
    assert refused.status_code == 503 and refused.json()["error_code"] == 50304, refused.text
    leader_of_0 = producers[0].leader_url()
    acked_before_read = len(producers[0].acked)  # the producer goes on acknowledging while the fetch reads
    assert len(read_partition(leader_of_0, TOPIC, 0)) >= acked_before_read  # fetch goes on too
    assert [base64.b64decode(r["value"]) for r in read_partition(acks_one_leader, "acks-one", 0)] == [
        b"acks-1-without-quorum"]
    # keep the quorum away longer than a session timeout: the sessions must outlive it
    wait_for(lambda: time.monotonic() - outage > SESSION_TIMEOUT_MS / 1000 + 1,
             what="an outage longer than the session timeout")
    progress(100)
    for node in lost:
        node.start(timeout_s=CONDITION_WAIT_S)
    for url in urls.values():
        wait_for(lambda: ready(url).status_code == 200, what=f"{url}/ready once the quorum is back")
        assert metric(url, "lakelog_zookeeper_connected") == 1
    created = create_topic(urls[1], "created-after-quorum", partitions=1, rf=3)
    assert created.status_code == 201, created.text
    progress(300)
    healed = zookeeper_footprint()

    stop.set()
    for pr in producers:
        pr.join(CONDITION_WAIT_S)
        assert not pr.is_alive()
        assert pr.error is None, pr.error
    wait_full_isr(zk, TOPIC, PARTITIONS, 3)
    for pr in producers:
        p = pr.p
        leader = zk.state(TOPIC, p).leader
        wait_for(lambda: (lambda i: i["high_watermark"] == i["log_end_offset"])(partition_info(urls[leader], TOPIC, p)),
                 what="HW = LEO")
        records = read_partition(urls[leader], TOPIC, p)
        values = [base64.b64decode(r["value"]) for r in records]
        assert [r["offset"] for r in records] == list(range(len(records)))
        assert len(values) == len(set(values)), f"duplicates in partition {p}"
        for v, off in pr.acked.items():
            assert values[off] == v, f"acknowledged {v!r} lost or moved in partition {p}"
        sent = [v for v in pr.sent if v in set(values)]
        assert [v for v in values if v in set(pr.sent)] == sent, f"order broken in partition {p}"
        hw = partition_info(urls[leader], TOPIC, p)["high_watermark"]
        assert hw == len(records)
        expected = table_rows(tmp_path / f"logs-{leader}", TOPIC, p, hw)
        for b in brokers:
            wait_for(lambda: len(table_rows(tmp_path / f"logs-{b}", TOPIC, p, hw)) == hw,
                     what=f"replica {b} of partition {p} to catch up")
            assert table_rows(tmp_path / f"logs-{b}", TOPIC, p, hw) == expected, f"replica {b} of {p} differs"
    print(f"\n{total_acked()} acknowledged, {sum(pr.failures for pr in producers)} failed attempts, "
          f"footprint after the quorum's loss {'unchanged' if healed == before else 'changed'}: "
          f"{healed}; {time.monotonic() - started:.1f} s")
