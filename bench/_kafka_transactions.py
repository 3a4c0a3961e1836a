"""Kafka's side of ``bench/transactions.py``: the same rounds sent to Apache Kafka by Kafka's own Java producer.

Bench-only. :func:`run_kafka_phases` starts one Kafka broker (:class:`_kafka.KafkaBroker`: KRaft, one
node, ``transaction.state.log.replication.factor=1``), compiles ``bench/java/TransactionRounds.java``
against the broker's jars with the JDK's ``javac`` into the run's temp dir, and runs one JVM per phase,
alternating idempotent and transactional phases as the lakelog pairs do, every phase on a fresh
3-partition topic. A round is the lakelog bench's round: 1,000 records over 3 partitions (334 + 333 +
333), ``send()`` then ``flush()`` (the round waits for every acknowledgement), and in a transactional
phase ``beginTransaction()`` before and ``commitTransaction()`` after (see the Java file's comment).
The broker is stopped by its pid at the end, also on errors.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _kafka import KAFKA_VERSION, KafkaBroker
from lakelog.runtime.zookeeper_server import find_java

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "TransactionRounds.java"
#: Seconds of an untimed transactional phase before the pairs (see :func:`run_kafka_phases`).
WARMUP_PHASE_S = 8.0


@dataclass(frozen=True)
class KafkaPhase:
    """One phase of Kafka rounds as ``TransactionRounds`` printed it: each timed round's and commit's
    milliseconds (no commits when idempotent); ``retries``: batches the producer sent again, its
    ``record-retry-total``."""

    kind: str  # idempotent, transactional
    pair: int
    rounds: int
    records: int
    seconds: float
    retries: int
    round_ms: list[float]
    commit_ms: list[float]

    @property
    def rate(self) -> float:
        """Records per second."""
        return self.records / self.seconds if self.seconds else 0.0


def javac() -> str:
    """The JDK's ``javac`` (beside the ``java`` the broker runs on, else on ``PATH``).

    Raises:
        RuntimeError: no ``javac`` (a JRE without a JDK).
    """
    beside = Path(os.path.realpath(find_java())).parent / "javac"
    found = str(beside) if beside.exists() else shutil.which("javac")
    if found is None:
        raise RuntimeError("javac not found: --kafka compiles bench/java/TransactionRounds.java; install a JDK 17")
    return found


def parse_phase(lines: list[str], *, pair: int) -> KafkaPhase:
    """The three lines ``TransactionRounds`` prints for one phase: ``kind rounds records seconds retries``,
    the rounds' milliseconds, the commits' milliseconds.

    Raises:
        ValueError: not such lines.
    """
    head = lines[0].split() if len(lines) == 3 else []
    if len(head) != 5 or head[0] not in ("idempotent", "transactional"):
        raise ValueError(f"TransactionRounds printed {lines!r:.300}")
    return KafkaPhase(head[0], pair, int(head[1]), int(head[2]), float(head[3]), int(head[4]),
                      [float(v) for v in lines[1].split()], [float(v) for v in lines[2].split()])


def run_kafka_phases(data_dir: Path, *, repeat: int, warmup_seconds: float, seconds: float, records: int,
                     value_bytes: int, partitions: int, version: str = KAFKA_VERSION,
                     status: Callable[[str], None] = lambda _: None) -> list[KafkaPhase]:
    """``repeat`` idempotent/transactional pairs against one Kafka broker under ``data_dir``, after an untimed
    transactional phase of :data:`WARMUP_PHASE_S` (the broker's first transactions create its
    ``__transaction_state`` topic and warm its JIT; lakelog's broker needs no such phase: its pair 1 is
    within the spread of the others).

    Args:
        data_dir: a fresh directory for the broker's data, its log and the compiled class.
        repeat: pairs, alternating as the lakelog bench's (idempotent, transactional, transactional, ...).
        warmup_seconds, seconds: untimed, then timed seconds of each phase.
        records: records per round; value_bytes: bytes per value; partitions: of each phase's topic.
        version: Kafka's version (jars from Maven Central, cached). Default: :data:`_kafka.KAFKA_VERSION`.
        status: called with a line before each step (for a progress display).

    Returns:
        The phases in the order run.

    Raises:
        RuntimeError: the broker, ``javac`` or a phase failed (the message has the output's end).
    """
    broker = KafkaBroker(data_dir / "kafka", version=version)
    status(f"starting Kafka {version}")
    broker.start()
    try:
        classes = data_dir / "classes"
        classes.mkdir(parents=True, exist_ok=True)
        built = subprocess.run([javac(), "-cp", str(broker.libs / "*"), "-d", str(classes), str(JAVA_SOURCE)],
                               capture_output=True, text=True, timeout=300)
        if built.returncode != 0:
            raise RuntimeError(f"javac {JAVA_SOURCE.name} exited with {built.returncode}:\n{built.stderr[-2000:]}")

        def phase(kind: str, topic: str, pair: int, warmup_s: float, timed_s: float) -> KafkaPhase:
            broker.create_topic(topic, partitions)
            cmd = [find_java(), "-Xmx512m", "-cp", f"{broker.libs / '*'}{os.pathsep}{classes}",
                   f"-Dlog4j2.configurationFile={(broker.data_dir / 'log4j2.properties').as_uri()}",
                   "TransactionRounds", broker.bootstrap, kind, topic, f"{warmup_s:g}", f"{timed_s:g}",
                   str(records), str(value_bytes), str(partitions)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=warmup_s + timed_s + 120)
            if done.returncode != 0:
                raise RuntimeError(f"TransactionRounds {kind} exited with {done.returncode}:\n"
                                   f"{(done.stdout + done.stderr)[-2000:]}")
            return parse_phase(done.stdout.splitlines()[-3:], pair=pair)

        # Untimed: the broker's first transactions create __transaction_state (50 partitions) and warm its
        # JIT; a first timed transactional phase without this ran at 0.19x against 0.52x-0.55x after it.
        status(f"Kafka {version}: warming up (transactional, {WARMUP_PHASE_S:g} s)")
        phase("transactional", "bench-tx-kafka-warmup", -1, WARMUP_PHASE_S, 0.001)
        phases = []
        for pair in range(repeat):
            order = ("idempotent", "transactional") if pair % 2 == 0 else ("transactional", "idempotent")
            for kind in order:
                status(f"Kafka {kind}, pair {pair + 1}/{repeat}")
                phases.append(phase(kind, f"bench-tx-kafka-{kind}-{pair}", pair, warmup_seconds, seconds))
        return phases
    finally:
        broker.stop()
