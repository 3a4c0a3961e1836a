#!/usr/bin/env python
"""Transactional produce against idempotent produce on one broker: records/s and commit latency.

Usage::

    python bench/transactions.py                  # 3 pairs of 10 s phases, ~2 minutes
    python bench/transactions.py --repeat 5 --seconds 15
    python bench/transactions.py --producers 4    # 4 producers side by side, each as below
    python bench/transactions.py --kafka          # then the same rounds on Apache Kafka, Kafka's ratio beside
    python bench/transactions.py --py-spy /tmp/flames --py-spy-format raw   # where the broker's time goes

What it does: starts an embedded ZooKeeper and one broker child process (as ``produce_fetch.py``: a temp
dir, free ports, stopped by pid at the end, on Ctrl-C, SIGTERM and errors) and measures, in the same run,
two phases with the same client code:

- idempotent: a producer (an id from ``POST /v3/clusters/{c}/producers``) sends rounds of three Arrow
  produce requests (``POST /topics/{t}/partitions/{p}/records``), one per partition of a 3-partition
  topic, 334 + 333 + 333 = 1,000 records of ``--value-bytes`` each, with ``X-Lakelog-Producer-Id``,
  ``-Epoch`` and ``-Sequence`` (one number per request);
- transactional: a transactional producer (``{"transactional_id", "transaction_timeout_ms"}``) sends the
  same rounds with ``X-Lakelog-Transactional-Id`` as well, and after each round commits
  (``POST /v3/clusters/{c}/transactions/{id}/commit``, answered once the markers are written): one
  1,000-record transaction over the 3 partitions per round.

A round's three requests are sent concurrently and the round waits for all three answers, as Kafka's
producer does: it sends the batches of different partitions without waiting for each other (several
requests in flight per connection) and ``commitTransaction()`` flushes them, then ends the transaction;
the next transaction begins once the commit has returned (``--send sequential``: one request after the
other). A request answered 409 / 40920 (CONCURRENT_TRANSACTIONS: the partition leader's implicit
AddPartitionsToTxn met another change of the transactional id) is sent again, with the same sequence,
after ``--retry-backoff-ms``; the retries are counted. Every producer has one keep-alive
``httpx.Client`` (a pool of three connections) and three sender threads, in both phases. Request bodies
are built before the clock starts; each phase begins with ``--warmup-seconds`` of the same rounds on its
topic, not timed. Phases alternate (idempotent, transactional, transactional, idempotent, ...: a drift of
the machine's load hits both alike), every phase on a fresh topic; ``--repeat`` pairs.

With ``--kafka``, once lakelog's broker has stopped, the same pairs run against one Apache Kafka broker
(``_kafka_transactions.py``): one producer, Kafka's Java client, the same round (1,000 records over the 3
partitions, ``send()`` then ``flush()``, the partitions' batches in flight together) and in the
transactional phase ``beginTransaction()`` / ``commitTransaction()`` around it; its ratio is printed
beside lakelog's. Kafka's coordinator answers EndTxn once PrepareCommit is in its log and writes the
markers after (``TransactionCoordinator.endTransaction``, ``sendTxnMarkersCallback``); lakelog answers
once the markers are written.

Figures: records/s of each phase (the transactional one including its commits), the round (produce)
latency and the commit latency p50/p99 over every timed transaction, and the ratio transactional /
idempotent records/s (the median of the pairs' ratios) against the target 0.7x. The ``bench/`` folder
never asserts timings.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import orjson
from rich.table import Table

from _cluster import Broker, PySpy, bench_cluster, broker_env as parse_broker_env, make_console
from _cluster import client_cpu as _client_cpu, machine_cpu as _machine_cpu
from _kafka import KAFKA_VERSION
from _kafka_transactions import KafkaPhase, run_kafka_phases
from produce_fetch import ARROW_STREAM, Body, arrow_body, init_producer
from lakelog.protocol.producer_headers import ProducerBatch

PARTITIONS = 3
#: Target: transactional records/s over idempotent records/s.
TARGET_RATIO = 0.7
#: The coordinator's CONCURRENT_TRANSACTIONS answer (409): retriable.
CONCURRENT_TRANSACTIONS = 40920

console = make_console()
_retries_lock = threading.Lock()  # the sender threads count their retries in the round's samples


# -- producers ----------------------------------------------------------------------------------

def split(records: int, parts: int) -> list[int]:
    """``records`` over ``parts`` requests, the first ones one larger: 1,000 over 3 = 334, 333, 333."""
    return [records // parts + (1 if i < records % parts else 0) for i in range(parts)]


@dataclass
class Samples:
    """What one phase measured."""

    rounds: int = 0
    records: int = 0
    round_ms: list[float] = field(default_factory=list)  # the round's produce requests, first sent to last answer
    commit_ms: list[float] = field(default_factory=list)  # the commit request (transactional phase)
    retries: int = 0  # answers 409 / 40920 sent again
    errors: list[str] = field(default_factory=list)


class Producer:
    """One producer over HTTP: an idempotent or transactional producer id, its sequence, a keep-alive
    client and one sender thread per partition (the round's requests in flight together)."""

    def __init__(self, url: str, cluster_id: str, topic: str, bodies: list[list[Body]], *,
                 transactional_id: str | None, timeout_ms: int, concurrent: bool, retry_backoff_s: float) -> None:
        self.url, self.cluster_id, self.topic, self.bodies = url, cluster_id, topic, bodies
        self.transactional_id, self.concurrent, self.retry_backoff_s = transactional_id, concurrent, retry_backoff_s
        self.http = httpx.Client(base_url=url, timeout=120.0,
                                 limits=httpx.Limits(max_connections=PARTITIONS + 1,
                                                     max_keepalive_connections=PARTITIONS + 1))
        self.senders = ThreadPoolExecutor(PARTITIONS, thread_name_prefix="sender")
        if transactional_id is None:
            self.producer_id, self.epoch = init_producer(self.http, cluster_id)
        else:
            answer = self._send("InitProducerId", lambda: self.http.post(f"/v3/clusters/{cluster_id}/producers", json={
                "transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms}), Samples())
            self.producer_id, self.epoch = answer["producer_id"], answer["producer_epoch"]
        self.sequence = itertools.count(0)
        self.rounds = itertools.count(0)

    def close(self) -> None:
        self.senders.shutdown(wait=True)
        self.http.close()

    def _send(self, what: str, call, samples: Samples) -> dict:
        """``call()`` until answered other than 409 / 40920 (retriable; counted); a non-200 raises."""
        deadline = time.monotonic() + 30
        while True:
            resp = call()
            if (resp.status_code == 409 and time.monotonic() < deadline
                    and orjson.loads(resp.content).get("error_code") == CONCURRENT_TRANSACTIONS):
                with _retries_lock:
                    samples.retries += 1
                time.sleep(self.retry_backoff_s)
                continue
            if resp.status_code != 200:
                raise RuntimeError(f"{what}: HTTP {resp.status_code}: {resp.text[:300]}")
            return orjson.loads(resp.content)

    def _produce(self, partition: int, body: Body, samples: Samples) -> None:
        batch = ProducerBatch(self.producer_id, self.epoch, next(self.sequence), self.transactional_id)
        headers = {"Content-Type": ARROW_STREAM, **batch.headers()}  # a retry repeats the request's number
        answer = self._send(f"produce to partition {partition}", lambda: self.http.post(
            f"/topics/{self.topic}/partitions/{partition}/records", content=body.content, headers=headers), samples)
        if answer.get("record_count") != body.records:
            raise RuntimeError(f"produce to partition {partition} answered {answer}")

    def round(self, samples: Samples) -> None:
        """One round: a request per partition, in flight together; then, when transactional, the commit."""
        k = next(self.rounds)
        bodies = self.bodies[k % len(self.bodies)]
        t0 = time.perf_counter()
        if self.concurrent:
            futures = [self.senders.submit(self._produce, p, bodies[p], samples) for p in range(PARTITIONS)]
            for f in futures:
                f.result()
        else:
            for p in range(PARTITIONS):
                self._produce(p, bodies[p], samples)
        t1 = time.perf_counter()
        if self.transactional_id is not None:
            answer = self._send("commit", lambda: self.http.post(
                f"/v3/clusters/{self.cluster_id}/transactions/{self.transactional_id}/commit",
                json={"producer_id": self.producer_id, "producer_epoch": self.epoch}), samples)
            if answer.get("state") != "CompleteCommit":
                raise RuntimeError(f"commit answered {answer.get('state')}, not CompleteCommit")
            samples.commit_ms.append((time.perf_counter() - t1) * 1000)
        samples.round_ms.append((t1 - t0) * 1000)
        samples.rounds += 1
        samples.records += sum(b.records for b in bodies)


# -- phases -------------------------------------------------------------------------------------

@dataclass
class Phase:
    kind: str  # idempotent, transactional
    pair: int
    topic: str
    seconds: float = 0.0
    samples: Samples = field(default_factory=Samples)
    broker_cpu: float = 0.0
    client_cpu: float = 0.0
    other_cpu: float = 0.0
    lso_ok: bool | None = None  # transactional: the last stable offset reached the log end on every partition

    @property
    def records(self) -> int:
        return self.samples.records

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def create_topic(admin: httpx.Client, cluster_id: str, name: str) -> None:
    resp = admin.post(f"/v3/clusters/{cluster_id}/topics",
                      json={"topic_name": name, "partitions_count": PARTITIONS, "replication_factor": 1})
    if resp.status_code != 201:
        raise RuntimeError(f"creating topic {name}: HTTP {resp.status_code} {resp.text[:300]}")


def stable_to_the_end(admin: httpx.Client, topic: str) -> bool:
    """Every partition's last stable offset equals its end offset (no transaction left open)."""
    for p in range(PARTITIONS):
        d = admin.get(f"/topics/{topic}/partitions/{p}/offsets").json()
        if d.get("last_stable_offset") != d.get("end_offset"):
            return False
    return True


def run_phase(kind: str, pair: int, *, args, broker: Broker, admin: httpx.Client, cluster_id: str,
              bodies: list[list[Body]], spy: PySpy) -> Phase:
    """One phase on a fresh topic: ``args.producers`` producers, each in its own thread doing rounds,
    ``args.warmup_seconds`` untimed, then ``args.seconds`` timed (a round under way at the end finishes
    and counts)."""
    topic = f"bench-tx-{kind}-{pair}"
    create_topic(admin, cluster_id, topic)
    phase = Phase(kind, pair, topic)
    producers = [Producer(broker.url, cluster_id, topic, bodies, timeout_ms=args.transaction_timeout_ms,
                          concurrent=args.send == "concurrent", retry_backoff_s=args.retry_backoff_ms / 1000,
                          transactional_id=f"bench-tx-{pair}-{i}" if kind == "transactional" else None)
                 for i in range(args.producers)]
    warm = Samples()
    timed = [Samples() for _ in producers]
    start = threading.Barrier(len(producers) + 1)
    measuring, stop = threading.Event(), threading.Event()

    def work(i: int) -> None:
        producer, samples = producers[i], timed[i]
        try:
            producer.round(warm)  # the first round (transaction): the producer's state on each partition
            start.wait()
            while not measuring.is_set():
                producer.round(warm)
            while not stop.is_set():
                producer.round(samples)
        except Exception as e:  # reported in the table; the other producers stop too
            samples.errors.append(f"{type(e).__name__}: {e}")
            stop.set()
            measuring.set()
            start.abort()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(producers))]
    try:
        for t in threads:
            t.start()
        try:
            start.wait()
        except threading.BrokenBarrierError:
            pass
        time.sleep(args.warmup_seconds)
        spy.start(f"{kind}-{pair}")
        b0, c0, m0 = broker.cpu_seconds(), _client_cpu(), _machine_cpu()
        t0 = time.perf_counter()
        measuring.set()
        stop.wait(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        phase.seconds = time.perf_counter() - t0
        phase.broker_cpu = broker.cpu_seconds() - b0
        phase.client_cpu = _client_cpu() - c0
        phase.other_cpu = max(0.0, _machine_cpu() - m0 - phase.broker_cpu - phase.client_cpu)
        spy.stop()
    finally:
        stop.set()
        measuring.set()
        for p in producers:
            p.close()
    for s in timed:
        phase.samples.rounds += s.rounds
        phase.samples.records += s.records
        phase.samples.round_ms += s.round_ms
        phase.samples.commit_ms += s.commit_ms
        phase.samples.retries += s.retries
        phase.samples.errors += s.errors
    phase.samples.errors += warm.errors
    if kind == "transactional":
        phase.lso_ok = stable_to_the_end(admin, topic)
    return phase


def append_reference(admin: httpx.Client, cluster_id: str, requests: int) -> list[float]:
    """Milliseconds of ``requests`` one-record Arrow produce requests (acks=all) sent one after the other to
    a fresh 1-partition topic: what one append costs here, HTTP included. The coordinator's writes to
    ``__transaction_state`` and the markers are appends of the same kind (without the HTTP)."""
    topic = "bench-tx-append"
    resp = admin.post(f"/v3/clusters/{cluster_id}/topics",
                      json={"topic_name": topic, "partitions_count": 1, "replication_factor": 1})
    if resp.status_code != 201:
        raise RuntimeError(f"creating topic {topic}: HTTP {resp.status_code} {resp.text[:300]}")
    body = arrow_body(np.random.default_rng(0), 1, 100, 0).content
    headers = {"Content-Type": ARROW_STREAM}
    out = []
    for i in range(requests + 20):  # the first 20: warm-up
        t0 = time.perf_counter()
        resp = admin.post(f"/topics/{topic}/partitions/0/records", content=body, headers=headers)
        if resp.status_code != 200:
            raise RuntimeError(f"produce to {topic}: HTTP {resp.status_code} {resp.text[:300]}")
        if i >= 20:
            out.append((time.perf_counter() - t0) * 1000)
    return out


# -- report -------------------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def verdict(ok: bool) -> str:
    return f"[{'green' if ok else 'red'}]{'met' if ok else 'MISSED'}[/]"


def report(phases: list[Phase], args, load: tuple[float, float, float], broker_pid: int,
           append_ms: list[float], kafka: list[KafkaPhase]) -> None:
    table = Table(title=f"idempotent vs transactional produce, one broker: {args.producers} producer(s) sending {args.send}ly, "
                        f"{args.records_per_transaction:,} records per round over {PARTITIONS} partitions "
                        f"({' + '.join(map(str, split(args.records_per_transaction, PARTITIONS)))}), "
                        f"{args.value_bytes} B values", show_lines=False)
    for col in ("phase", "pair", "rounds", "records", "s", "records/s", "round p50 / p99 ms",
                "commit p50 / p99 ms", "409 retries", "CPU broker/client/other", "LSO = LEO"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for ph in phases:
        s, secs = ph.samples, ph.seconds or float("inf")
        other = f"{ph.other_cpu / secs:.0%}"
        table.add_row(
            ph.kind + (f"\n[red]{s.errors[0][:200]}[/]" if s.errors else ""), str(ph.pair + 1), f"{s.rounds:,}",
            f"{s.records:,}", f"{ph.seconds:.1f}", f"{ph.rate:,.0f}",
            f"{pct(s.round_ms, 50):.1f} / {pct(s.round_ms, 99):.1f}",
            f"{pct(s.commit_ms, 50):.1f} / {pct(s.commit_ms, 99):.1f}" if s.commit_ms else "",
            str(s.retries),
            f"{ph.broker_cpu / secs:.0%} / {ph.client_cpu / secs:.0%} / "
            + (f"[yellow]{other}[/]" if ph.other_cpu / secs > 0.15 else other),
            "" if ph.lso_ok is None else ("yes" if ph.lso_ok else "[red]no[/]"))
    console.print(table)

    idem = [p for p in phases if p.kind == "idempotent"]
    tx = [p for p in phases if p.kind == "transactional"]
    ratios = pair_ratios(phases)
    ratio = float(np.median(ratios)) if ratios else 0.0
    failed = any(p.samples.errors for p in phases)
    idem_rate, tx_rate = pooled_rate(idem), pooled_rate(tx)
    commits = [ms for p in tx for ms in p.samples.commit_ms]
    tx_rounds = [ms for p in tx for ms in p.samples.round_ms]
    idem_rounds = [ms for p in idem for ms in p.samples.round_ms]
    summary = Table(title="summary", show_lines=False)
    for col in ("", "value"):
        summary.add_column(col, justify="left" if col == "" else "right")
    summary.add_row("idempotent records/s (all pairs pooled)", f"{idem_rate:,.0f}")
    summary.add_row("transactional records/s, commits included (all pairs pooled)", f"{tx_rate:,.0f}")
    summary.add_row("transactions/s", f"{sum(p.samples.rounds for p in tx) / (sum(p.seconds for p in tx) or 1):,.1f}")
    summary.add_row("ratio per pair (transactional / idempotent)", ", ".join(f"{r:.2f}x" for r in ratios))
    summary.add_row(f"median ratio, target ≥ {TARGET_RATIO}x",
                    f"{ratio:.2f}x {verdict(ratio >= TARGET_RATIO and not failed)}")
    summary.add_row(f"commit latency p50 / p99 ms ({len(commits):,} commits)",
                    f"{pct(commits, 50):.1f} / {pct(commits, 99):.1f}")
    summary.add_row(f"round ({args.send}) p50 / p99 ms, idempotent",
                    f"{pct(idem_rounds, 50):.1f} / {pct(idem_rounds, 99):.1f}")
    summary.add_row(f"round ({args.send}) p50 / p99 ms, transactional",
                    f"{pct(tx_rounds, 50):.1f} / {pct(tx_rounds, 99):.1f}")
    if append_ms:
        summary.add_row(f"one 1-record acks=all produce request, p50 / p99 ms ({len(append_ms)} sent one at a time)",
                        f"{pct(append_ms, 50):.1f} / {pct(append_ms, 99):.1f}")
    if kafka:
        kafka_ratio = kafka_summary(kafka, summary, records=args.records_per_transaction)
        if kafka_ratio:
            summary.add_row("lakelog's median ratio / Kafka's", f"{ratio / kafka_ratio:.2f}x")
    console.print(summary)
    console.print(
        f"Measured: one broker (pid {broker_pid}, RF 1, acks=all; __transaction_state on the same broker) and "
        f"this client on a machine with {os.cpu_count()} CPU core(s), load average at the start "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min). Each phase: {args.producers} "
        f"producer(s) on a fresh {PARTITIONS}-partition topic, {args.warmup_seconds:g} s warm-up then "
        f"{args.seconds:g} s timed; a round = one Arrow request per partition, "
        + ("the three in flight together" if args.send == "concurrent" else "one after the other")
        + f" (409 / 40920 answers sent again after {args.retry_backoff_ms:g} ms), then (transactional) POST .../transactions/{{id}}/commit, answered in state CompleteCommit once the "
        f"markers are written. Round = first request sent to last answer; commit = the commit request; "
        f"409 retries = answers 40920 (CONCURRENT_TRANSACTIONS) sent again; LSO = LEO: after the phase every "
        f"partition's last stable offset reached its end offset. CPU 100% = one core; other = the rest of "
        f"the machine (above ~15%, figures are lower than the machine can do).")


def kafka_summary(kafka: list[KafkaPhase], summary: Table, *, records: int) -> float:
    """Print the Kafka phases' table (``records`` per round); add Kafka's rows to ``summary``; return Kafka's
    median ratio (0: none)."""
    table = Table(title=f"the same rounds on Apache Kafka {KAFKA_VERSION} (one KRaft node, RF 1, acks=all), one "
                        f"producer (Kafka's Java client): send() x {records:,}, flush(), then (transactional) "
                        "commitTransaction()")
    for col in ("phase", "pair", "rounds", "records", "s", "records/s", "round p50 / p99 ms", "commit p50 / p99 ms",
                "batches retried"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for ph in kafka:
        table.add_row(ph.kind, str(ph.pair + 1), f"{ph.rounds:,}", f"{ph.records:,}", f"{ph.seconds:.1f}",
                      f"{ph.rate:,.0f}", f"{pct(ph.round_ms, 50):.1f} / {pct(ph.round_ms, 99):.1f}",
                      f"{pct(ph.commit_ms, 50):.1f} / {pct(ph.commit_ms, 99):.1f}" if ph.commit_ms else "",
                      f"{ph.retries:,}")
    console.print(table)
    ratios = pair_ratios(kafka)
    ratio = float(np.median(ratios)) if ratios else 0.0
    summary.add_row(f"Kafka {KAFKA_VERSION}: idempotent / transactional records/s (all pairs pooled)",
                    f"{pooled_rate([p for p in kafka if p.kind == 'idempotent']):,.0f} / "
                    f"{pooled_rate([p for p in kafka if p.kind == 'transactional']):,.0f}")
    summary.add_row(f"Kafka {KAFKA_VERSION}: ratio per pair (transactional / idempotent)",
                    ", ".join(f"{r:.2f}x" for r in ratios))
    summary.add_row(f"Kafka {KAFKA_VERSION}: median ratio", f"{ratio:.2f}x")
    return ratio


def pooled_rate(phases: list[Phase] | list[KafkaPhase]) -> float:
    """Records/s of ``phases`` together (their records over their seconds)."""
    return sum(p.records for p in phases) / (sum(p.seconds for p in phases) or float("inf"))


def pair_ratios(phases: list[Phase] | list[KafkaPhase]) -> list[float]:
    """Transactional / idempotent records/s of each pair that has both phases, in pair order."""
    rates: dict[int, dict[str, float]] = {}
    for p in phases:
        rates.setdefault(p.pair, {})[p.kind] = p.rate
    return [r["transactional"] / r["idempotent"] for _, r in sorted(rates.items())
            if r.get("idempotent") and "transactional" in r]


# -- main ---------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="Timed seconds per phase (a round under way at the end finishes and counts). Default: 10.")
    parser.add_argument("--warmup-seconds", type=float, default=2.0,
                        help="Untimed seconds of the same rounds at the start of each phase. Default: 2.")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="Idempotent/transactional pairs, alternating (idempotent, transactional, "
                             "transactional, idempotent, ...), every phase on a fresh topic. Default: 3.")
    parser.add_argument("--records-per-transaction", type=int, default=1000,
                        help="Records per round (a transaction in the transactional phase), split over the "
                             f"{PARTITIONS} partitions' requests. Default: 1000.")
    parser.add_argument("--value-bytes", type=int, default=100, help="Bytes per record value. Default: 100.")
    parser.add_argument("--producers", type=int, default=1,
                        help="Producers running side by side in both phases, each with its own producer id "
                             "(transactional: its own transactional id), keep-alive client and 3 sender "
                             "threads. Default: 1.")
    parser.add_argument("--send", choices=["concurrent", "sequential"], default="concurrent",
                        help="How a round's three requests (one per partition) go out, in both phases: concurrent "
                             "(three in flight together, then the round waits for all: what Kafka's producer does, "
                             "sending the batches of different partitions without waiting for each other before "
                             "commitTransaction() flushes them) or sequential (one after the other, each waiting "
                             "for its answer). Default: concurrent.")
    parser.add_argument("--retry-backoff-ms", type=float, default=20.0,
                        help="Wait before sending again a request answered 409 / 40920 (CONCURRENT_TRANSACTIONS: "
                             "another change of the transactional id is being written; in the transactional phase "
                             "a partition's implicit AddPartitionsToTxn can meet another's). Default: 20 (Kafka's "
                             "producer's backoff for AddPartitionsToTxn after CONCURRENT_TRANSACTIONS).")
    parser.add_argument("--transaction-timeout-ms", type=int, default=60_000,
                        help="transaction_timeout_ms of the transactional producers. Default: 60000.")
    parser.add_argument("--append-requests", type=int, default=300,
                        help="After the pairs, this many one-record produce requests (acks=all) one at a time to "
                             "a 1-partition topic: the cost of one append, for reading the commit latency (0: "
                             "none). Default: 300.")
    parser.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="A broker setting as LAKELOG_NAME=VALUE (repeatable). Default: none.")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="Record a py-spy profile of the broker per phase into DIR (slows the broker). "
                             "Default: off.")
    parser.add_argument("--py-spy-format", default="flamegraph", choices=["flamegraph", "raw", "speedscope"],
                        help="py-spy output: flamegraph (.svg), raw collapsed stacks (.txt), speedscope (.json). "
                             "Default: flamegraph.")
    parser.add_argument("--py-spy-native", action="store_true", help="py-spy --native: C/Rust frames too. Default: off.")
    parser.add_argument("--py-spy-gil", action="store_true", help="py-spy --gil: only the thread holding the GIL. "
                                                                  "Default: off.")
    parser.add_argument("--kafka", action="store_true",
                        help=f"After lakelog's pairs, the same pairs of rounds (one producer) on Apache Kafka "
                             f"{KAFKA_VERSION} (one KRaft node started here, jars from Maven Central, cached) with "
                             "Kafka's Java producer "
                             "(bench/java/TransactionRounds.java, compiled with javac), and Kafka's own ratio "
                             "beside lakelog's. Default: off.")
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (tables, logs). Default: off.")
    args = parser.parse_args()
    args.repeat = max(1, args.repeat)
    args.producers = max(1, args.producers)

    load = os.getloadavg()
    console.print(f"load average at the start: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min), "
                  f"{os.cpu_count()} CPU core(s)")
    rng = np.random.default_rng(args.value_bytes)
    sizes = split(args.records_per_transaction, PARTITIONS)
    # A few distinct rounds of bodies, built before the clock starts, the same bytes in both phases.
    bodies = [[arrow_body(rng, n, args.value_bytes, (r * PARTITIONS + p) * n) for p, n in enumerate(sizes)]
              for r in range(4)]
    phases: list[Phase] = []
    append_ms: list[float] = []
    t_start = time.monotonic()
    with bench_cluster(console, prefix="lakelog-bench-tx-", env=parse_broker_env(args.broker_env),
                       keep=args.keep) as run:
        broker = run.broker
        admin = httpx.Client(base_url=broker.url, timeout=120.0)
        cluster_id = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        spy = PySpy(args.py_spy, broker.pid, args.py_spy_format, args.py_spy_native, args.py_spy_gil)
        for pair in range(args.repeat):
            order = ("idempotent", "transactional") if pair % 2 == 0 else ("transactional", "idempotent")
            for kind in order:
                with console.status(f"{kind}, pair {pair + 1}/{args.repeat}"):
                    ph = run_phase(kind, pair, args=args, broker=broker, admin=admin, cluster_id=cluster_id,
                                   bodies=bodies, spy=spy)
                phases.append(ph)
                s = ph.samples
                console.print(f"  {kind:<14} pair {pair + 1}/{args.repeat}  {ph.rate:>10,.0f} records/s"
                              + (f"  commit p50 {pct(s.commit_ms, 50):.1f} ms" if s.commit_ms else "")
                              + (f"  [red]{s.errors[0][:200]}[/]" if s.errors else ""))
            i, t = phases[-2:] if order[0] == "idempotent" else phases[-1:-3:-1]
            if i.rate:
                console.print(f"  {'':<14} transactional / idempotent = {t.rate / i.rate:.2f}x")
        if args.append_requests:
            with console.status("one-record produce requests, one at a time"):
                append_ms = append_reference(admin, cluster_id, args.append_requests)
        admin.close()
    kafka: list[KafkaPhase] = []
    kafka_failed = False
    if args.kafka and phases and run.return_code == 0:  # after lakelog's broker stopped: not side by side
        try:  # a Kafka failure still prints lakelog's figures
            with tempfile.TemporaryDirectory(prefix="lakelog-bench-tx-kafka-") as tmp, console.status("Kafka") as shown:
                kafka = run_kafka_phases(Path(tmp), repeat=args.repeat, warmup_seconds=args.warmup_seconds,
                                         seconds=args.seconds, records=args.records_per_transaction,
                                         value_bytes=args.value_bytes, partitions=PARTITIONS, status=shown.update)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            console.print(f"[red]Kafka's side failed: {e}[/]")
            kafka_failed = True
        for ph in kafka:
            console.print(f"  Kafka {ph.kind:<14} pair {ph.pair + 1}/{args.repeat}  {ph.rate:>10,.0f} records/s")
    if phases:
        report(phases, args, load, run.broker_pid, append_ms, kafka)
    console.print(f"total {time.monotonic() - t_start:.0f} s")
    return run.return_code or (1 if kafka_failed or any(p.samples.errors for p in phases) else 0)


if __name__ == "__main__":
    sys.exit(main())
