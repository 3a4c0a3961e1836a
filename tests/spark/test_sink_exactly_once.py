"""Issue 15's third done-when: a ``writeStream.format("lakelog")`` query killed three times ends with each
input record exactly once in its output (read_committed).

:mod:`tests.spark.sink_query_app` copies an input topic of 900 records to an output topic in micro-batches
of at most 100 records; the test SIGKILLs its process three times at random points while it writes
micro-batches (after 0 or 1 completed micro-batches of the run and a random wait), starts it again from the
same checkpoint each time, and lets the last run finish. Kills between a batch's task writes and its driver commit leave open transactions (aborted by the
next run's InitProducerId of the same transactional ids); kills between the driver's commits and Spark's
commit log make Spark re-run a batch whose transactions committed (its tasks write nothing).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.processes import spawn
from tests.harness import wait_for
from tests.spark.test_sink_transactions import read_values

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 3
PER_PARTITION = 300
MAX_OFFSETS_PER_TRIGGER = 100


class Query:
    """The query's process, started from the same checkpoint each time, killed by pid."""

    def __init__(self, command: list[str], log_file: Path) -> None:
        self.command, self.log_file = command, log_file
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_file, "ab") as log:
            self.process = spawn(self.command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def tail(self) -> str:
        return self.log_file.read_text(errors="replace")[-4000:]


def written(client, topic: str) -> int:
    """Records and markers in the topic's partitions (its high watermarks): grows with every task's write."""
    return sum(client.partition_offsets(topic, p)["end_offset"] for p in range(PARTITIONS))


def completed_batches(checkpoint: Path) -> int:
    """Micro-batches in the query's commit log (Spark writes it after the sink's commit)."""
    commits = checkpoint / "commits"
    return sum(1 for f in commits.iterdir() if f.name.isdigit()) if commits.exists() else 0


def test_a_sink_query_killed_three_times_writes_each_input_record_exactly_once(client, topic_name, tmp_path):
    source_topic, sink_topic = f"{topic_name}-in", f"{topic_name}-out"
    client.create_topic(source_topic, partitions=PARTITIONS)
    client.create_topic(sink_topic, partitions=PARTITIONS)
    expected = []
    for p in range(PARTITIONS):
        values = [f"r-{p}-{i}".encode() for i in range(PER_PARTITION)]
        client.produce_arrow(source_topic, p, pa.table({"key": [b"k%d" % i for i in range(PER_PARTITION)],
                                                        "value": values}))
        expected += values
    checkpoint = tmp_path / "checkpoint"
    query = Query([sys.executable, "-m", "tests.spark.sink_query_app", client.urls[0], source_topic, sink_topic,
                   str(checkpoint), str(MAX_OFFSETS_PER_TRIGGER)], tmp_path / "query.log")
    rng = random.Random()
    try:
        for kill in range(3):
            before, batches = written(client, sink_topic), completed_batches(checkpoint) + rng.randint(0, 1)
            query.start()
            # a Spark start takes long on a loaded machine: wait for this run's first writes, then a random moment
            deadline = time.monotonic() + 180
            while written(client, sink_topic) <= before and time.monotonic() < deadline:
                assert query.alive(), f"the query ended before kill {kill + 1}:\n{query.tail()}"
                time.sleep(0.05)
            assert written(client, sink_topic) > before, f"no write in 180 s before kill {kill + 1}:\n{query.tail()}"
            while completed_batches(checkpoint) < batches and time.monotonic() < deadline:
                assert query.alive(), f"the query ended before kill {kill + 1}:\n{query.tail()}"
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 2.0))
            assert query.alive(), f"the query ended before kill {kill + 1} (make the input larger):\n{query.tail()}"
            query.kill()
        query.start()
        assert query.process.wait(240) == 0, query.tail()
    finally:
        query.kill()
    # no transaction stays open (the last run committed its own; others were aborted on re-initialization)
    wait_for(lambda: all(o["last_stable_offset"] == o["end_offset"] for o in
                         (client.partition_offsets(sink_topic, p) for p in range(PARTITIONS))),
             what="the output's last stable offsets at its high watermarks")
    committed = Counter(read_values(client, sink_topic, PARTITIONS, "read_committed"))
    assert sum(committed.values()) == len(expected)
    assert committed == Counter(expected)  # each input record exactly once
    everything = read_values(client, sink_topic, PARTITIONS, "read_uncommitted")
    print(f"output log: {len(everything)} records, {len(everything) - len(expected)} of aborted attempts; "
          f"{completed_batches(checkpoint)} micro-batches")
