"""Exactly-once: the flight_delays pipeline against 3 brokers (RF 3), killed with SIGKILL three times
while records are produced, with the broker of its group's coordinator and a partition leader's broker
SIGKILLed once each too, ends with an output equal to the aggregate of everything produced; its group's
committed offsets equal the log end offsets and `lakelog groups describe` on every broker shows lag 0."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakelog.processes import spawn

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
CARRIERS = ["AA", "B6", "DL", "EV", "UA", "WN"]


def _flight(rng: random.Random) -> dict:
    dep = rng.choice([None, *range(-10, 120)])
    arr = None if dep is None else dep + rng.randint(-20, 20)
    return {"year": 2013, "month": rng.randint(1, 2), "day": rng.randint(1, 28), "carrier": rng.choice(CARRIERS),
            "dep_delay": dep, "arr_delay": arr, "origin": "JFK", "dest": "LAX", "distance": 2475}


class Pipeline:
    """jobs/flight_delays.py in a child process, killed and restarted by pid."""

    def __init__(self, *, url: str, topic: str, group: str, output: Path, checkpoint: Path, log_file: Path):
        self.cmd = [sys.executable, str(REPO / "jobs" / "flight_delays.py"), "--bootstrap-server", url,
                    "--topic", topic, "--group", group, "--output", str(output), "--checkpoint", str(checkpoint),
                    "--master", "local[2]", "--max-offsets-per-trigger", "1500"]
        self.log_file = log_file
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_file, "ab") as log:
            self.process = spawn(self.cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)  # dies with the test

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _versions(path: Path) -> int:
    return DeltaTable(str(path)).version() if DeltaTable.is_deltatable(str(path)) else -1


def check_output(produced: list[dict], output: Path, *, expected_records: int) -> None:
    """The pipeline's output equals the aggregate of everything produced, and every micro-batch landed once."""
    expected: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0, 0, 0.0, 0])
    for f in produced:
        acc = expected[(f["carrier"], f"2013-{f['month']:02d}-{f['day']:02d}")]
        acc[0] += 1
        if f["dep_delay"] is not None:
            acc[1] += f["dep_delay"]
            acc[2] += 1
        if f["arr_delay"] is not None:
            acc[3] += f["arr_delay"]
            acc[4] += 1
    rows = DeltaTable(str(output)).to_pyarrow_table().to_pylist()
    got: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0, 0, 0.0, 0])
    for r in rows:
        acc = got[(r["carrier"], r["date"].isoformat())]
        acc[0] += r["flights"]
        acc[1] += r["dep_delay_sum"] or 0.0
        acc[2] += r["dep_delay_count"]
        acc[3] += r["arr_delay_sum"] or 0.0
        acc[4] += r["arr_delay_count"]
    assert len(produced) == expected_records
    assert dict(got) == dict(expected)
    # every micro-batch landed once: batch ids in the output are distinct per (carrier, date)
    seen = set()
    for r in rows:
        key = (r["carrier"], r["date"], r["batch_id"])
        assert key not in seen
        seen.add(key)


def test_pipeline_is_exactly_once_on_three_brokers_across_pipeline_coordinator_and_leader_kills(
        broker_factory, zk_connect, tmp_path):
    from lakelog.client import LakelogClient
    from lakelog.consumer_groups.offset_records import OFFSETS_TOPIC, partition_for
    from tests.cluster.test_replication import Zk, start_cluster, wait_full_isr, wait_znode_gone

    offsets_partitions = 6
    brokers = start_cluster(broker_factory, env={"LAKELOG_OFFSETS_TOPIC_NUM_PARTITIONS": str(offsets_partitions)})
    urls = [b.url for b in brokers.values()]
    zk = Zk(zk_connect)
    topic, group = "flights", f"eo3-{uuid.uuid4().hex[:8]}"
    client = LakelogClient(urls)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    pipeline = Pipeline(url=",".join(urls), topic=topic, group=group, output=output, checkpoint=checkpoint,
                        log_file=tmp_path / "pipeline.log")
    produced: list[dict] = []
    done = threading.Event()

    def produce() -> None:  # an idempotent client: retried through the broker kills, nothing twice
        rng = random.Random(7)
        with LakelogClient(urls) as producer_client:
            for _ in range(40):
                batch = [_flight(rng) for _ in range(500)]
                producer_client.produce_json(topic, [{"key": f["carrier"], "value": f} for f in batch])
                produced.extend(batch)
                time.sleep(0.25)
        done.set()

    def wait_batch(what: str) -> None:
        target = _versions(output) + 1
        deadline = time.monotonic() + 240  # a Spark start and a replayed batch take minutes on a loaded CI
        while _versions(output) < target and time.monotonic() < deadline:
            assert pipeline.alive(), (tmp_path / "pipeline.log").read_text()[-3000:]
            time.sleep(0.2)
        assert _versions(output) >= target, (f"no batch committed in 240 s ({what}):\n"
                                             + (tmp_path / "pipeline.log").read_text()[-3000:])

    def kill_broker(broker_id: int) -> None:
        brokers[broker_id].kill()
        wait_znode_gone(zk, broker_id)
        time.sleep(2)
        brokers[broker_id].start()
        wait_full_isr(zk, topic, 3, 3)

    try:
        client.create_topic(topic, partitions=3, replication_factor=3)
        wait_full_isr(zk, topic, 3, 3)
        producer = threading.Thread(target=produce, daemon=True)
        pipeline.start()
        producer.start()
        rng = random.Random(11)
        for round_ in range(3):
            wait_batch(f"round {round_}")
            if round_ == 0:  # the group's coordinator (the pipeline's first offset commit created the topic)
                deadline = time.monotonic() + 240
                while not client.committed_offsets(group, topic) and time.monotonic() < deadline:
                    assert pipeline.alive(), (tmp_path / "pipeline.log").read_text()[-3000:]
                    time.sleep(0.5)
                assert client.committed_offsets(group, topic), "the pipeline committed no offsets in 240 s"
                coordinator = zk.state(OFFSETS_TOPIC, partition_for(group, offsets_partitions)).leader
            time.sleep(rng.uniform(0.0, 2.0))
            pipeline.kill()
            pipeline.start()
            if round_ == 0:
                wait_batch("before killing the coordinator")
                kill_broker(coordinator)
            elif round_ == 1:  # a partition leader of the topic
                wait_batch("before killing a leader")
                kill_broker(zk.state(topic, 1).leader)
        assert done.wait(180)
        ends = {p: client.partition_offsets(topic, p)["end_offset"] for p in range(3)}
        deadline = time.monotonic() + 180
        committed: dict[int, int] = {}
        while time.monotonic() < deadline:
            committed = {o["partition"]: o["offset"] for o in client.committed_offsets(group, topic)}
            if committed == ends:
                break
            assert pipeline.alive(), (tmp_path / "pipeline.log").read_text()[-3000:]
            time.sleep(1)
        assert committed == ends
        time.sleep(1)
    finally:
        pipeline.kill()
        client.close()
    # every broker describes the group with lag 0 (its offsets come from the coordinator)
    for url in urls:
        out = subprocess.run([sys.executable, "-m", "lakelog.cli", "groups", "describe", group,
                              "--bootstrap-server", url], capture_output=True, text=True, timeout=60, cwd=REPO)
        assert out.returncode == 0, out.stderr
        assert "Total lag: 0" in out.stdout, out.stdout
    check_output(produced, output, expected_records=20_000)
    zk.close()
