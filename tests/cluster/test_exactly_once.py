"""Exactly-once: the flight_delays pipeline, killed with SIGKILL three times while records are
produced, ends with an output equal to the aggregate of everything produced, and its group's
committed offsets equal the log end offsets."""

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


def test_pipeline_is_exactly_once_across_kills(client, topic_name, tmp_path):
    client.create_topic(topic_name, partitions=3)
    group = f"eo-{uuid.uuid4().hex[:8]}"
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    pipeline = Pipeline(url=str(client.http.base_url), topic=topic_name, group=group, output=output,
                        checkpoint=checkpoint, log_file=tmp_path / "pipeline.log")

    produced: list[dict] = []
    done = threading.Event()

    def produce() -> None:
        rng = random.Random(7)
        for _ in range(60):
            batch = [_flight(rng) for _ in range(500)]
            client.produce_json(topic_name, [{"key": f["carrier"], "value": f} for f in batch])
            produced.extend(batch)
            time.sleep(0.25)
        done.set()

    producer = threading.Thread(target=produce, daemon=True)
    try:
        pipeline.start()
        producer.start()
        rng = random.Random(11)
        for _ in range(3):
            # let it commit at least one more batch, then kill it at a random point
            target = _versions(output) + 1
            deadline = time.monotonic() + 120
            while _versions(output) < target and time.monotonic() < deadline:
                assert pipeline.alive(), (tmp_path / "pipeline.log").read_text()[-3000:]
                time.sleep(0.2)
            assert _versions(output) >= target, (
                f"the pipeline committed no batch in 120 s (output version {_versions(output)}, wanted {target}):\n"
                + (tmp_path / "pipeline.log").read_text()[-3000:])
            time.sleep(rng.uniform(0.0, 2.0))
            pipeline.kill()
            pipeline.start()
        assert done.wait(120)
        # catch up: the group's committed offsets reach the log end offsets
        ends = {p: client.partition_offsets(topic_name, p)["end_offset"] for p in range(3)}
        deadline = time.monotonic() + 180
        committed: dict[int, int] = {}
        while time.monotonic() < deadline:
            committed = {o["partition"]: o["offset"] for o in client.committed_offsets(group, topic_name)}
            if committed == ends:
                break
            assert pipeline.alive(), (tmp_path / "pipeline.log").read_text()[-3000:]
            time.sleep(1)
        assert committed == ends
        time.sleep(1)  # the foreachBatch write precedes the source commit; nothing is pending
    finally:
        pipeline.kill()

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
    assert len(produced) == 30_000
    assert dict(got) == dict(expected)
    # every micro-batch landed once: batch ids in the output are distinct per (carrier, date)
    seen = set()
    for r in rows:
        key = (r["carrier"], r["date"], r["batch_id"])
        assert key not in seen
        seen.add(key)
