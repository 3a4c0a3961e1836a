"""Replication across three real broker processes: failover under SIGKILL, ISR shrink/expand under
SIGSTOP, a leader cut off from ZooKeeper, preferred and unclean leader election, controlled shutdown.

Every broker is a child process (``BrokerProcess``) on one real ZooKeeper (fresh chroot per test);
faults are real signals sent by pid. Timeouts are small so the suite stays fast:
``zookeeper.session.timeout.ms`` 3-4 s, ``replica.lag.time.max.ms`` 1.5 s.
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest
from deltalake import DeltaTable
from kazoo.client import KazooClient

from lakelog.protocol import media_types
from lakelog.protocol.partitioner import murmur2, to_positive
from lakelog.replication.metadata import BROKERS_PATH, CONTROLLER_PATH, ClusterMetadata
from tests.harness import CONDITION_WAIT_S, read_partition
from tests.harness import wait_for as wait_until

pytestmark = pytest.mark.cluster

FAST = {
    "LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "3000",
    "LAKELOG_REPLICA_LAG_TIME_MAX_MS": "1500",
    "LAKELOG_REPLICA_FETCH_WAIT_MAX_MS": "200",
    "LAKELOG_REQUEST_TIMEOUT_MS": "8000",
    "LAKELOG_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS": "1",
}


# -- helpers ---------------------------------------------------------------------------------------

class Zk:
    """A test-side ZooKeeper client reading lakelog's metadata."""

    def __init__(self, zk_connect: str) -> None:
        self.client = KazooClient(hosts=zk_connect)
        self.client.start(timeout=15)
        self.meta = ClusterMetadata(self.client)

    def state(self, topic: str, p: int = 0):
        return self.meta.partition_state(topic, p)

    def controller(self) -> int | None:
        try:
            return orjson.loads(self.client.get(CONTROLLER_PATH)[0])["broker_id"]
        except Exception:
            return None

    def live(self) -> set[int]:
        return {int(c) for c in self.client.get_children(BROKERS_PATH)}

    def close(self) -> None:
        self.client.stop()
        self.client.close()



def keys_by_partition(partitions: int, count: int = 2000) -> dict[int, list[bytes]]:
    """``count`` keys ``customer-{i}``, grouped by the partition murmur2 (Kafka's partitioner) maps each to."""
    keys: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for i in range(count):
        k = f"customer-{i}".encode()
        keys[to_positive(murmur2(k)) % partitions].append(k)
    return keys

def start_cluster(broker_factory, n: int = 3, env: dict | None = None) -> dict:
    return {i: broker_factory(broker_id=i, extra_env={**FAST, **(env or {})}) for i in range(n)}


def create_topic(url: str, topic: str, *, partitions: int = 1, rf: int = 3, configs: dict | None = None) -> dict:
    cluster = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    resp = httpx.post(f"{url}/v3/clusters/{cluster}/topics", json={
        "topic_name": topic, "partitions_count": partitions, "replication_factor": rf,
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}, timeout=30)
    return resp


def b64(x: bytes) -> str:
    return base64.b64encode(x).decode()


def produce(url: str, topic: str, p: int | None, values: list[bytes], *, acks: str = "all", keys=None,
            timestamp_ms: int | None = None, timeout: float = 20) -> httpx.Response:
    """Produce binary records to partition ``p`` (None: to the topic, the broker partitions them), with
    CreateTime ``timestamp_ms`` (None: the broker's now)."""
    keys = keys or [None] * len(values)
    stamp = {} if timestamp_ms is None else {"timestamp": timestamp_ms}
    body = orjson.dumps({"records": [{"key": None if k is None else b64(k), "value": b64(v), **stamp}
                                     for k, v in zip(keys, values)]})
    path = f"/topics/{topic}" if p is None else f"/topics/{topic}/partitions/{p}"
    return httpx.post(f"{url}{path}", params={"acks": acks}, content=body,
                      headers={"Content-Type": media_types.BINARY_V2}, timeout=timeout)


def table_rows(log_dir: Path, topic: str, p: int, below: int) -> list[tuple]:
    """(offset, key, value) of a replica's Delta table below ``below``, read straight from the table."""
    t = DeltaTable(str(log_dir / f"{topic}-{p}")).to_pyarrow_dataset().to_table(columns=["offset", "key", "value"])
    rows = sorted(zip(t["offset"].to_pylist(), t["key"].to_pylist(), t["value"].to_pylist()))
    return [r for r in rows if r[0] < below]


def partition_info(url: str, topic: str, p: int) -> dict:
    return httpx.get(f"{url}/topics/{topic}/partitions/{p}", timeout=10).json()


def wait_full_isr(zk: Zk, topic: str, partitions: int, n: int, timeout_s: float = CONDITION_WAIT_S) -> None:
    wait_until(lambda: all(len(zk.state(topic, p).isr) == n and zk.state(topic, p).leader >= 0
                           for p in range(partitions)), timeout_s, f"ISR of {topic} back to {n}")


def wait_znode_gone(zk: Zk, broker_id: int, timeout_s: float = CONDITION_WAIT_S) -> None:
    wait_until(lambda: broker_id not in zk.live(), timeout_s, f"broker {broker_id}'s session to expire")


# -- the failover test -----------------------------------------------------------------------------

class PartitionProducer(threading.Thread):
    """Sends keyed batches with acks=all to one partition's leader, one batch in flight.

    On a failed attempt the batch may or may not be in the log (the leader died after committing it):
    before resending, the producer asks the current leader, once its high watermark equals its log end
    offset (nothing undecided), whether the batch sits at the next offset — what Kafka's idempotent
    producer decides with sequence numbers. Records found that way are not counted as acknowledged.
    """

    def __init__(self, urls: dict[int, str], zk_connect: str, topic: str, p: int, keys: list[bytes],
                 batch: int, stop: threading.Event) -> None:
        super().__init__(name=f"producer-{p}", daemon=True)
        self.urls, self.topic, self.p, self.keys, self.batch, self.stop_event = urls, topic, p, keys, batch, stop
        self.zk = Zk(zk_connect)
        self.acked: dict[bytes, int] = {}       # value -> acknowledged offset
        self.landed_unacked: set[bytes] = set()
        self.sent: list[bytes] = []
        self.next_offset = 0
        self.failures = 0
        self.error: BaseException | None = None

    def leader_url(self) -> str:
        return wait_until(lambda: self.urls.get(self.zk.state(self.topic, self.p).leader), what="a leader")

    def run(self) -> None:
        try:
            n = 0
            while not self.stop_event.is_set():
                values = [f"p{self.p}-{n + i:07d}".encode() for i in range(self.batch)]
                keys = [self.keys[(n + i) % len(self.keys)] for i in range(self.batch)]
                n += self.batch
                self.sent += values
                self.send(values, keys)
        except BaseException as e:
            self.error = e
        finally:
            self.zk.close()

    def send(self, values: list[bytes], keys: list[bytes]) -> None:
        deadline = time.monotonic() + CONDITION_WAIT_S
        while True:
            assert time.monotonic() < deadline, f"batch {values[0]!r} not acknowledged"
            try:
                resp = produce(self.leader_url(), self.topic, self.p, values, keys=keys, acks="all")
            except httpx.TransportError:
                resp = None
            if resp is not None and resp.status_code == 200:
                entries = resp.json()["offsets"]
                if all(e["error_code"] is None for e in entries):
                    assert entries[0]["offset"] == self.next_offset, (entries[0], self.next_offset)
                    for v, e in zip(values, entries):
                        self.acked[v] = e["offset"]
                    self.next_offset += len(values)
                    return
            self.failures += 1
            time.sleep(0.1)
            if self.landed(values):
                self.landed_unacked.update(values)
                self.next_offset += len(values)
                return

    def landed(self, values: list[bytes]) -> bool:
        def decided():
            try:
                info = partition_info(self.leader_url(), self.topic, self.p)
            except httpx.TransportError:
                return None
            if info.get("leader") is None or info.get("high_watermark") is None:
                return None
            return info if info["high_watermark"] == info["log_end_offset"] else None

        try:
            info = wait_until(decided, what="the leader's HW to reach its LEO", interval_s=0.2)
            if info["high_watermark"] <= self.next_offset:
                return False
            resp = httpx.get(f"{self.leader_url()}/topics/{self.topic}/partitions/{self.p}/records",
                             params={"offset": self.next_offset, "max_wait_ms": 0, "max_bytes": 1},
                             headers={"Accept": media_types.BINARY_V2}, timeout=10)
            if resp.status_code != 200:
                return False
            page = resp.json()
            return bool(page) and base64.b64decode(page[0]["value"]) == values[0]
        except (httpx.TransportError, AssertionError):
            return False


def test_failover_under_sigkill_keeps_every_acknowledged_record(broker_factory, zk_connect, zk, tmp_path):
    started = time.monotonic()
    topic, partitions = "orders", 3
    brokers = start_cluster(broker_factory)
    urls = {i: b.url for i, b in brokers.items()}
    resp = create_topic(brokers[0].url, topic, partitions=partitions, rf=3, configs={"min.insync.replicas": "2"})
    assert resp.status_code == 201, resp.text
    wait_full_isr(zk, topic, partitions, 3)

    # keys that murmur2 (Kafka's partitioner) maps to each partition
    keys = keys_by_partition(partitions)
    stop = threading.Event()
    producers = [PartitionProducer(urls, zk_connect, topic, p, keys[p], 100, stop) for p in range(partitions)]
    for pr in producers:
        pr.start()

    def total_acked() -> int:
        return sum(len(pr.acked) for pr in producers)

    def progress(n: int) -> None:
        target = total_acked() + n
        wait_until(lambda: total_acked() >= target or any(pr.error for pr in producers), what="producer progress")
        for pr in producers:
            assert pr.error is None, pr.error

    # kill the leader of partition 0 three times, then the controller
    victims = []
    for round_ in range(4):
        progress(800)
        victim = zk.controller() if round_ == 3 else zk.state(topic, 0).leader
        assert victim in brokers
        victims.append(victim)
        brokers[victim].kill()
        wait_znode_gone(zk, victim)
        wait_until(lambda: zk.state(topic, 0).leader not in (victim, -1), what="a new leader")
        if round_ == 3:
            wait_until(lambda: zk.controller() not in (None, victim), what="a new controller")
        progress(300)  # produce goes on with 2 of 3 in sync
        brokers[victim].start()
        wait_full_isr(zk, topic, partitions, 3)

    wait_until(lambda: total_acked() >= 20_000, what="20,000 acknowledged records")
    stop.set()
    for pr in producers:
        pr.join(90)
        assert not pr.is_alive()
        assert pr.error is None, pr.error
    assert sum(pr.failures for pr in producers) > 0, "no produce failed: the kills did not hit the stream"
    wait_full_isr(zk, topic, partitions, 3)
    # auto leader rebalance (every 1 s) moves leaderships back to the preferred replicas: let it settle,
    # so the leader read below is still the leader when it is asked
    preferred = {p: r[0] for p, r in zk.meta.topic(topic).replicas.items()}
    wait_until(lambda: all(zk.state(topic, p).leader == preferred[p] for p in range(partitions)),
               what="the preferred replicas to lead again")

    for pr in producers:
        p = pr.p
        leader = zk.state(topic, p).leader
        wait_until(lambda: (lambda i: i["high_watermark"] == i["log_end_offset"])(partition_info(urls[leader], topic, p)),
                   what="HW = LEO")
        records = read_partition(urls[leader], topic, p)
        values = [base64.b64decode(r["value"]) for r in records]
        # dense offsets; every acknowledged record exactly once, at its acknowledged offset, in send order
        assert [r["offset"] for r in records] == list(range(len(records)))
        assert len(values) == len(set(values)), f"duplicates in partition {p}"
        for v, off in pr.acked.items():
            assert values[off] == v, f"acknowledged {v!r} lost or moved in partition {p}"
        assert set(values) <= set(pr.sent)
        assert values == [v for v in pr.sent if v in set(values)], f"order broken in partition {p}"
        for r in records:
            assert to_positive(murmur2(base64.b64decode(r["key"]))) % partitions == p
        # every replica agrees up to the high watermark
        hw = partition_info(urls[leader], topic, p)["high_watermark"]
        assert hw == len(records)
        expected = table_rows(tmp_path / f"logs-{leader}", topic, p, hw)
        for b in brokers:
            wait_until(lambda: len(table_rows(tmp_path / f"logs-{b}", topic, p, hw)) == hw,
                       what=f"replica {b} of partition {p} to catch up")
            assert table_rows(tmp_path / f"logs-{b}", topic, p, hw) == expected, f"replica {b} of {p} differs"
    acked = total_acked()
    print(f"\n{acked} acknowledged, {sum(len(pr.landed_unacked) for pr in producers)} landed unacknowledged, "
          f"{sum(pr.failures for pr in producers)} failed attempts, victims {victims}, "
          f"{time.monotonic() - started:.1f} s")


# -- ISR shrink and expand -------------------------------------------------------------------------

def test_paused_follower_leaves_and_rejoins_the_isr_and_min_insync_replicas_is_enforced(broker_factory, zk):
    topic = "isr"
    brokers = start_cluster(broker_factory, env={"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "15000"})
    assert create_topic(brokers[0].url, topic, rf=3, configs={"min.insync.replicas": "2"}).status_code == 201
    wait_full_isr(zk, topic, 1, 3)
    state = zk.state(topic)
    leader = brokers[state.leader]
    f1, f2 = [brokers[b] for b in state.isr if b != state.leader]
    assert produce(leader.url, topic, 0, [b"a"] * 10).status_code == 200

    f1.pause()
    try:
        # acks=all goes on with 2 of 3 in sync (once the paused follower left the ISR)
        resp = produce(leader.url, topic, 0, [b"b"] * 10)
        assert resp.status_code == 200, resp.text
        assert f1.broker_id not in zk.state(topic).isr
        info = partition_info(leader.url, topic, 0)
        assert {r["broker"]: r["in_sync"] for r in info["replicas"]}[f1.broker_id] is False
        f2.pause()
        try:
            wait_until(lambda: zk.state(topic).isr == [leader.broker_id], what="ISR = [leader]")
            hw_before = partition_info(leader.url, topic, 0)["log_end_offset"]
            resp = produce(leader.url, topic, 0, [b"c"] * 10)
            assert resp.status_code == 503 and resp.json()["error_code"] == 50310, resp.text
            assert partition_info(leader.url, topic, 0)["log_end_offset"] == hw_before, "a refused batch was written"
            # acks=1 does not need the ISR
            assert produce(leader.url, topic, 0, [b"d"] * 10, acks="1").status_code == 200
        finally:
            f2.resume()
    finally:
        f1.resume()
    wait_full_isr(zk, topic, 1, 3)
    assert produce(leader.url, topic, 0, [b"e"] * 10).status_code == 200
    info = partition_info(leader.url, topic, 0)
    assert info["high_watermark"] == info["log_end_offset"] == 40
    assert all(r["in_sync"] for r in info["replicas"])


# -- a leader cut off from ZooKeeper ---------------------------------------------------------------

def test_leader_whose_session_expires_is_fenced_and_truncated(broker_factory, zk, tmp_path):
    topic = "zombie"
    brokers = start_cluster(broker_factory, env={"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "4000",
                                                 "LAKELOG_REPLICA_LAG_TIME_MAX_MS": "10000",
                                                 "LAKELOG_REQUEST_TIMEOUT_MS": "5000",
                                                 "LAKELOG_AUTO_LEADER_REBALANCE_ENABLE": "false"})
    assert create_topic(brokers[0].url, topic, rf=3, configs={"min.insync.replicas": "2"}).status_code == 201
    wait_full_isr(zk, topic, 1, 3)
    state = zk.state(topic)
    old = brokers[state.leader]
    followers = [brokers[b] for b in state.isr if b != state.leader]
    assert produce(old.url, topic, 0, [f"a{i}".encode() for i in range(20)]).status_code == 200  # 0..19

    # an un-replicated tail: followers frozen, acks=1 on the leader
    for f in followers:
        f.pause()
    time.sleep(1.0)  # fetches in flight (long-polls of 200 ms) are answered before the tail is written
    assert produce(old.url, topic, 0, [f"tail{i}".encode() for i in range(5)], acks="1").status_code == 200
    old.pause()  # longer than its session timeout
    for f in followers:
        f.resume()
    try:
        wait_until(lambda: zk.state(topic).leader in {f.broker_id for f in followers}, what="a new leader")
        new = brokers[zk.state(topic).leader]
        acked = [f"c{i}".encode() for i in range(10)]
        resp = produce(new.url, topic, 0, acked)
        assert resp.status_code == 200, resp.text
        assert resp.json()["offsets"][0]["offset"] == 20  # the old leader's tail was never committed
    finally:
        old.resume()
    # the deposed leader accepts no write; it comes back as a follower and drops its tail
    # while its expired ZooKeeper session is being replaced it answers 503 / 50304 (retriable, nothing
    # written), as a client then does, the request is sent again
    deadline = time.monotonic() + CONDITION_WAIT_S
    while True:
        resp = produce(old.url, topic, 0, [b"zombie"], timeout=30)
        if (resp.status_code, resp.json().get("error_code")) != (503, 50304) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # refused as a non-leader (42101), by epoch fencing (42102), or while it has no leader (40404)
    assert (resp.status_code, resp.json().get("error_code")) in {(421, 42101), (421, 42102), (404, 40404)}, \
        (resp.status_code, resp.text)
    wait_full_isr(zk, topic, 1, 3)
    assert zk.state(topic).leader == new.broker_id
    wait_until(lambda: table_rows(tmp_path / f"logs-{old.broker_id}", topic, 0, 10**9)
               == table_rows(tmp_path / f"logs-{new.broker_id}", topic, 0, 10**9), what="the old leader to truncate")
    values = [base64.b64decode(r["value"]) for r in read_partition(new.url, topic, 0)]
    assert values == [f"a{i}".encode() for i in range(20)] + acked
    assert not any(v.startswith(b"tail") or v == b"zombie" for v in values)


# -- preferred leader election and controlled shutdown --------------------------------------------

def test_controlled_shutdown_moves_leadership_and_the_preferred_leader_returns(broker_factory, zk):
    topic = "preferred"
    brokers = start_cluster(broker_factory, env={"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "30000"})
    assert create_topic(brokers[0].url, topic, partitions=3, rf=3).status_code == 201
    wait_full_isr(zk, topic, 3, 3)
    meta = zk.meta.topic(topic)
    # leaders balanced: each broker is the preferred (first) replica of one partition
    assert sorted(r[0] for r in meta.replicas.values()) == [0, 1, 2]
    preferred = meta.replicas[0][0]
    epoch = zk.state(topic, 0).leader_epoch
    assert produce(brokers[preferred].url, topic, 0, [b"x"] * 5).status_code == 200
    # SIGTERM: leadership moves before the broker exits (its 30 s session has not expired). A watcher
    # polls ZooKeeper while stop() runs and records whether the broker process was still running when
    # the new leader showed up.
    stopping = threading.Event()
    seen: dict[str, bool] = {}

    def watch_leadership() -> None:
        while not stopping.is_set():
            if zk.state(topic, 0).leader not in (preferred, -1):
                seen["moved_while_running"] = brokers[preferred].running()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=watch_leadership, name="leadership-watcher", daemon=True)
    watcher.start()
    try:
        exit_code = brokers[preferred].stop()
    finally:
        stopping.set()
        watcher.join(10)
    assert not watcher.is_alive()
    assert exit_code is not None, "the broker did not exit on SIGTERM and was killed"
    assert seen.get("moved_while_running") is True, f"leadership did not move before the broker exited: {seen}"
    state = zk.state(topic, 0)
    assert state.leader not in (preferred, -1) and state.leader_epoch > epoch
    assert preferred not in state.isr
    other = brokers[state.leader]
    assert produce(other.url, topic, 0, [b"y"] * 5).status_code == 200
    # back: it catches up, rejoins the ISR and the controller makes it leader again
    brokers[preferred].start()
    wait_until(lambda: zk.state(topic, 0).leader == preferred, what="the preferred leader to lead again")
    resp = produce(brokers[preferred].url, topic, 0, [b"z"] * 5)
    assert resp.status_code == 200 and resp.json()["offsets"][0]["offset"] == 10


def test_replication_factor_above_live_brokers_is_refused(broker_factory):
    brokers = start_cluster(broker_factory, n=2)
    resp = create_topic(brokers[0].url, "too-many", rf=3)
    assert resp.status_code == 400 and resp.json()["error_code"] == 40006, resp.text


# -- unclean leader election -----------------------------------------------------------------------

def test_unclean_leader_election_only_when_enabled(broker_factory, zk):
    brokers = start_cluster(broker_factory, n=2, env={"LAKELOG_AUTO_LEADER_REBALANCE_ENABLE": "false"})
    topics = {"clean": "false", "unclean": "true"}
    for t, flag in topics.items():
        resp = create_topic(brokers[0].url, t, rf=2, configs={"unclean.leader.election.enable": flag})
        assert resp.status_code == 201, resp.text
        wait_full_isr(zk, t, 1, 2)
    # make broker 0 the leader of both, broker 1 the follower
    for t in topics:
        if zk.state(t).leader != 0:
            st = zk.state(t)
            zk.meta.set_partition_state(t, 0, type(st)(0, st.leader_epoch + 1, st.isr, st.controller_epoch, st.version))
        wait_until(lambda: partition_info(brokers[0].url, t, 0).get("high_watermark") is not None, what="leader 0")
        assert produce(brokers[0].url, t, 0, [b"replicated"] * 3).status_code == 200
    brokers[1].kill()
    wait_znode_gone(zk, 1)
    for t in topics:
        wait_until(lambda: zk.state(t).isr == [0], what="ISR = [0]")
        assert produce(brokers[0].url, t, 0, [b"only-on-0"] * 4, acks="1").status_code == 200
    brokers[0].kill()
    wait_znode_gone(zk, 0)
    brokers[1].start()
    # clean: no leader (1 is not in the ISR); unclean: 1 leads and the records only 0 had are gone
    wait_until(lambda: zk.state("unclean").leader == 1, what="unclean election")
    assert zk.state("clean").leader == -1
    resp = produce(brokers[1].url, "clean", 0, [b"refused"])
    assert resp.status_code in (404, 421) and resp.json()["error_code"] == 40404, resp.text
    resp = produce(brokers[1].url, "unclean", 0, [b"after"])
    assert resp.status_code == 200 and resp.json()["offsets"][0]["offset"] == 3, resp.text
    # broker 0 returns: it leads "clean" again with everything, and follows "unclean", losing its tail
    brokers[0].start()
    wait_until(lambda: zk.state("clean").leader == 0, what="clean leader back")
    assert [base64.b64decode(r["value"]) for r in read_partition(brokers[0].url, "clean", 0)] == \
        [b"replicated"] * 3 + [b"only-on-0"] * 4
    wait_full_isr(zk, "unclean", 1, 2)
    assert [base64.b64decode(r["value"]) for r in read_partition(brokers[1].url, "unclean", 0)] == \
        [b"replicated"] * 3 + [b"after"]


# -- metadata from any broker ----------------------------------------------------------------------

def test_any_broker_reports_every_partitions_log_for_direct_readers(broker_factory, zk):
    """``GET /lakelog/v1/topics/{t}/logs`` (what Spark and SQL plan with) answers for partitions led
    elsewhere by asking their leaders; the client follows 421 to produce to each leader."""
    from lakelog.client import LakelogClient

    brokers = start_cluster(broker_factory, n=3)
    assert create_topic(brokers[0].url, "spread", partitions=3, rf=2).status_code == 201
    wait_full_isr(zk, "spread", 3, 2)
    leaders = {p: zk.state("spread", p).leader for p in range(3)}
    assert len(set(leaders.values())) > 1  # leaders are spread over the brokers
    with LakelogClient(",".join(b.url for b in brokers.values())) as client:
        for p in range(3):
            client.produce_binary("spread", [(None, b"%d-%d" % (p, i)) for i in range(p + 1)], partition=p)
    for b in brokers.values():
        logs = httpx.get(f"{b.url}/lakelog/v1/topics/spread/logs", timeout=30).json()
        assert [(x["partition"], x["high_watermark"]) for x in logs] == [(0, 1), (1, 2), (2, 3)]
        for x in logs:
            assert Path(x["table_uri"]).parent.name == f"logs-{leaders[x['partition']]}"
    one = httpx.get(f"{brokers[0].url}/lakelog/v1/topics/spread/logs", params={"partition": 2}, timeout=30).json()
    assert [x["partition"] for x in one] == [2]


def test_a_topic_level_produce_to_any_broker_reaches_every_leader(broker_factory, zk):
    """``POST /topics/{t}`` with keyed records on one broker: shares for partitions led elsewhere are
    forwarded to their leaders (REST Proxy produces to every leader too); every record is acknowledged."""
    brokers = start_cluster(broker_factory, n=3)
    assert create_topic(brokers[0].url, "keyed", partitions=6, rf=2).status_code == 201
    wait_full_isr(zk, "keyed", 6, 2)
    assert len({zk.state("keyed", p).leader for p in range(6)}) == 3
    keys = [b"key-%d" % i for i in range(300)]
    resp = httpx.post(
        f"{brokers[1].url}/topics/keyed", params={"acks": "all"}, timeout=30,
        headers={"Content-Type": media_types.BINARY_V2},
        content=orjson.dumps({"records": [{"key": b64(k), "value": b64(b"v" + k)} for k in keys]}))
    assert resp.status_code == 200, resp.text
    offsets = resp.json()["offsets"]
    assert all(o["error_code"] is None for o in offsets), offsets[:3]
    for k, o in zip(keys, offsets):
        assert o["partition"] == to_positive(murmur2(k)) % 6
    by_partition: dict[int, list[int]] = {}
    for o in offsets:
        by_partition.setdefault(o["partition"], []).append(o["offset"])
    for p, offs in by_partition.items():
        assert offs == list(range(len(offs)))  # dense, in request order, on each leader
        leader = brokers[zk.state("keyed", p).leader]
        assert [bytes(base64.b64decode(r["value"])) for r in read_partition(leader.url, "keyed", p)] == \
            [b"v" + k for k in keys if to_positive(murmur2(k)) % 6 == p]
