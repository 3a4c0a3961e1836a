#!/usr/bin/env python
"""Produce and fetch throughput of one broker over HTTP: JSON, binary, Arrow produce; Arrow fetch.

Usage::

    python bench/produce_fetch.py                 # ~2 minutes
    python bench/produce_fetch.py --quick         # ~30 s smoke run
    python bench/produce_fetch.py --only idempotent --repeat 5   # idempotent vs plain JSON and Arrow rows, 5 pairs
    python bench/produce_fetch.py --sustain 60    # plus JSON and Arrow produce for 60 s each on one topic
    python bench/produce_fetch.py --records 500000 --threads 8 --seconds 5
    python bench/produce_fetch.py --py-spy /tmp/flames   # a py-spy flame graph of the broker per scenario
    python bench/produce_fetch.py --broker-env LINGER_MS=5   # any LAKELOG_* broker setting

What it does: starts an embedded ZooKeeper (a temp dir, a free port) and one broker child process
(``python -m lakelog.cli broker start``, its own session, stopped by pid at the end, on Ctrl-C and on
errors), creates one 6-partition topic per scenario, and drives it with ``--threads`` client threads,
each with its own keep-alive ``httpx.Client``, so several requests per partition are in flight and the
group committer can batch them. Request bodies are built before the clock starts; the timed loop only
sends them (and parses the replies: produce offsets, fetched Arrow streams).

Scenarios, each with 100-byte and 1 KiB values (keys ~10 bytes, values random letters):

- JSON produce: ``application/vnd.kafka.json.v2+json``, 1,000 records per request, spread round-robin
  over ``POST /topics/{t}/partitions/{p}`` (plus a keyed run to ``POST /topics/{t}``: murmur2 routing);
- binary produce: ``application/vnd.kafka.binary.v2+json`` (base64), 1,000 records per request;
- Arrow produce: ``application/vnd.apache.arrow.stream`` to ``/topics/{t}/partitions/{p}/records``,
  10,000 records per request;
- JSON produce idempotent, Arrow produce idempotent: the same pre-built bodies to the same routes with
  ``X-Lakelog-Producer-Id``, ``X-Lakelog-Producer-Epoch`` and ``X-Lakelog-Sequence``. Every client thread
  is its own producer: it gets a producer id from ``POST /v3/clusters/{c}/producers`` before the clock
  starts and numbers its requests 0, 1, 2, ... Each plain JSON and Arrow row runs ``--repeat`` times
  (default 2; ``--quick`` 1) alternating with its idempotent row (plain, idempotent, idempotent, plain,
  ...: a drift of the machine's load hits both alike), every run on a fresh topic; both rows show the
  runs pooled, and the idempotent row its ratio to the plain one: the median of the pairs' ratios
  (target >= 0.95x);
- Arrow fetch (``Accept: application/vnd.apache.arrow.stream``, large ``max_bytes``) of what the Arrow
  produce wrote: first the newest records (the broker's in-memory tail cache), then, after a broker
  restart, from the log start (Parquet files of the Delta tables).

Figures: records/s, MB/s of values (10^6 bytes), MB/s of HTTP bodies, records per append commit (how
well group commit batched), and CPU (100% = one core) of the broker, split into its event-loop thread,
its Python worker threads (``asyncio.to_thread``: appends, reads) and its native threads (delta-rs,
Arrow), of this client, and of the rest of the machine, since all share the machine's cores. A
comparison line gives the log layer alone: ``PartitionLog.append`` of 10,000-record batches in this
process, no HTTP. The ``bench/`` folder never asserts timings; targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import orjson
import pyarrow as pa
from rich.table import Table


from _cluster import Broker, PySpy, bench_cluster, broker_env as parse_broker_env, make_console
from _cluster import client_cpu as _client_cpu, machine_cpu as _machine_cpu
from lakelog.protocol.producer_headers import ProducerBatch

JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
ARROW_STREAM = "application/vnd.apache.arrow.stream"

PARTITIONS = 6
VALUE_SIZES = (100, 1024)

# Targets (records/s), for the 100-byte rows of each kind: produce from issue #11 (the two-tier log; before
# it 500,000 Arrow and 100,000 JSON), fetch from the first benchmark.
TARGETS = {
    "arrow-produce": 1_500_000,
    "json-produce": 150_000,
    "arrow-fetch": 1_000_000,
}
# Target of an idempotent row: its records/s over the plain row's (every value size).
IDEMPOTENT_TARGET = 0.95
# The rows that get an idempotent twin.
IDEMPOTENT_FORMATS = ("json", "arrow")

console = make_console()


# -- request bodies -----------------------------------------------------------------------------

_LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8)


def random_values(rng: np.random.Generator, n: int, size: int) -> list[bytes]:
    raw = _LETTERS[rng.integers(0, len(_LETTERS), size=n * size)].tobytes()
    return [raw[i * size:(i + 1) * size] for i in range(n)]


def keys_for(start: int, n: int) -> list[bytes]:
    return [b"key-%d" % i for i in range(start, start + n)]


@dataclass
class Body:
    content: bytes
    records: int
    value_bytes: int


def json_body(rng, n: int, size: int, start: int) -> Body:
    # The JSON text of each value is exactly ``size`` bytes: a string of size-2 letters plus quotes.
    values = [v.decode() for v in random_values(rng, n, size - 2)]
    keys = [k.decode() for k in keys_for(start, n)]
    content = orjson.dumps({"records": [{"key": k, "value": v} for k, v in zip(keys, values)]})
    return Body(content, n, n * size)


def binary_body(rng, n: int, size: int, start: int) -> Body:
    b64 = base64.b64encode
    content = orjson.dumps({"records": [{"key": b64(k).decode(), "value": b64(v).decode()}
                                        for k, v in zip(keys_for(start, n), random_values(rng, n, size))]})
    return Body(content, n, n * size)


def arrow_body(rng, n: int, size: int, start: int) -> Body:
    table = pa.table({"key": pa.array(keys_for(start, n), pa.binary()),
                      "value": pa.array(random_values(rng, n, size), pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return Body(sink.getvalue().to_pybytes(), n, n * size)


# -- load ---------------------------------------------------------------------------------------

@dataclass
class Result:
    name: str
    kind: str  # arrow-produce, json-produce, binary-produce, arrow-fetch
    value_size: int
    per_request: str
    records: int = 0
    value_bytes: int = 0
    wire_bytes: int = 0
    requests: int = 0
    seconds: float = 0.0
    broker_cpu: float = 0.0
    client_cpu: float = 0.0
    other_cpu: float = 0.0
    loop_cpu: float = 0.0
    worker_cpu: float = 0.0
    commits: int = 0
    files: float = 0.0  # active Parquet data files per partition table at the end of the window (sustained rows)
    note: str = ""
    tag: str = ""
    errors: list[str] = field(default_factory=list)
    idempotent: bool = False
    runs: int = 1  # runs pooled into this row (--repeat)
    pair_rates: list[tuple[float, float]] = field(default_factory=list)  # idempotent row: (plain, idempotent) per pair

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def ratio(self) -> float | None:
        """An idempotent row: the median over the pairs of its records/s over the plain run's."""
        ratios = [i / p for p, i in self.pair_rates if p > 0]
        return float(np.median(ratios)) if ratios else None


def pooled(runs: list[Result]) -> Result:
    """One row of several runs of a scenario: their records, bytes, seconds, CPU and commits summed."""
    first = runs[0]
    out = Result(first.name, first.kind, first.value_size, first.per_request, tag=first.tag,
                 idempotent=first.idempotent, runs=len(runs))
    for r in runs:
        for name in ("records", "value_bytes", "wire_bytes", "requests", "seconds", "broker_cpu", "client_cpu",
                     "other_cpu", "loop_cpu", "worker_cpu", "commits"):
            setattr(out, name, getattr(out, name) + getattr(r, name))
        out.errors.extend(r.errors)
    return out


class Load:
    """Runs ``job(client, worker_index) -> (records, value_bytes, wire_bytes)`` in ``threads`` threads, each with
    its own keep-alive client, until ``max_records`` records or ``max_seconds`` seconds. ``client_options``:
    more ``httpx.Client`` arguments for those clients (``auth``, ``verify``, ``cert``). Default: none."""

    def __init__(self, url: str, threads: int, max_records: int, max_seconds: float, *,
                 client_options: dict | None = None) -> None:
        self.url, self.threads, self.max_records, self.max_seconds = url, threads, max_records, max_seconds
        self.client_options = client_options or {}

    def run(self, result: Result, broker: Broker, job, spy: PySpy) -> Result:
        lock = threading.Lock()
        stop = threading.Event()
        clients = [httpx.Client(base_url=self.url, timeout=120.0, **self.client_options) for _ in range(self.threads)]
        started = threading.Barrier(self.threads + 1)

        def worker(i: int) -> None:
            started.wait()
            client = clients[i]
            try:
                while not stop.is_set():
                    n, vb, wb = job(client, i)
                    with lock:
                        result.records += n
                        result.value_bytes += vb
                        result.wire_bytes += wb
                        result.requests += 1
                        if result.records >= self.max_records:
                            stop.set()
            except Exception as e:  # reported in the table; the other workers stop too
                with lock:
                    result.errors.append(f"{type(e).__name__}: {e}")
                stop.set()

        workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(self.threads)]
        for w in workers:
            w.start()
        spy.start(result.tag or f"{result.kind}-{result.value_size}")
        b0, c0, m0, (l0, w0) = broker.cpu_seconds(), _client_cpu(), _machine_cpu(), broker.cpu_split()
        t0 = time.perf_counter()
        started.wait()
        try:
            while not stop.wait(0.05):
                if time.perf_counter() - t0 >= self.max_seconds:
                    stop.set()
            for w in workers:
                w.join()  # in-flight requests finish; they are counted
        finally:
            stop.set()
            result.seconds = time.perf_counter() - t0
            result.broker_cpu = broker.cpu_seconds() - b0
            l1, w1 = broker.cpu_split()
            result.loop_cpu, result.worker_cpu = l1 - l0, w1 - w0
            result.client_cpu = _client_cpu() - c0
            # everything else on the machine (other processes, py-spy): figures are noisy when high
            result.other_cpu = max(0.0, _machine_cpu() - m0 - result.broker_cpu - result.client_cpu)
            spy.stop()
            for c in clients:
                c.close()
        return result


class AppendCommits:
    """Append commits (group commits) in a topic's partition tables, read from their ``_delta_log``.

    Only ``WRITE``/``Append`` commits count: the table creation, compaction (``lakelog.operation`` =
    ``compact``), truncation and retention commits carry no produced records. Log files already read
    are remembered, so a count reads only the new ones.
    """

    def __init__(self, log_dirs: Path, topic: str) -> None:
        self.log_dirs, self.topic = log_dirs, topic
        self._seen: dict[Path, bool] = {}  # log file -> is an append commit

    @staticmethod
    def _is_append(path: Path) -> bool:
        for line in path.read_bytes().splitlines():
            action = orjson.loads(line)
            info = action.get("commitInfo")
            if info is not None:
                return (info.get("operation") == "WRITE" and "lakelog.operation" not in info
                        and (info.get("operationParameters") or {}).get("mode") == "Append")
        return False

    def count(self) -> int:
        for p in range(PARTITIONS):
            for f in (self.log_dirs / f"{self.topic}-{p}" / "_delta_log").glob("*.json"):
                if f.name.split(".")[0].isdigit() and f not in self._seen:
                    self._seen[f] = self._is_append(f)
        return sum(self._seen.values())


def data_files_per_partition(log_dirs: Path, topic: str) -> float:
    """Active data files (Parquet) of the topic's partition tables now, averaged over the partitions."""
    from deltalake import DeltaTable

    return sum(len(DeltaTable(str(log_dirs / f"{topic}-{p}")).file_uris()) for p in range(PARTITIONS)) / PARTITIONS


def check_produce(resp: httpx.Response) -> None:
    if resp.status_code != 200:
        raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:300]}")


def check_json_offsets(resp: httpx.Response) -> None:
    check_produce(resp)
    offsets = orjson.loads(resp.content)["offsets"]
    for entry in (offsets[0], offsets[-1]):
        if entry["error_code"] is not None:
            raise RuntimeError(f"record failed: {entry}")


# -- scenarios ----------------------------------------------------------------------------------

def create_topic(client: httpx.Client, cluster_id: str, name: str) -> None:
    resp = client.post(f"/v3/clusters/{cluster_id}/topics",
                       json={"topic_name": name, "partitions_count": PARTITIONS, "replication_factor": 1})
    if resp.status_code != 201:
        raise RuntimeError(f"creating topic {name}: HTTP {resp.status_code} {resp.text[:300]}")


def init_producer(admin: httpx.Client, cluster_id: str) -> tuple[int, int]:
    """A new idempotent producer: ``(producer_id, producer_epoch)`` from ``POST /v3/clusters/{c}/producers``."""
    resp = admin.post(f"/v3/clusters/{cluster_id}/producers", json={})
    if resp.status_code != 200:
        raise RuntimeError(f"getting a producer id: HTTP {resp.status_code} {resp.text[:300]}")
    body = resp.json()
    return body["producer_id"], body["producer_epoch"]


def produce_scenario(kind: str, size: int, *, url: str, admin: httpx.Client, cluster_id: str, load: Load,
                     broker: Broker, spy: PySpy, keyed: bool = False, windows: int = 0, idempotent: bool = False,
                     repetition: int = 0) -> Result | list[Result]:
    """One produce row; with ``windows`` > 0, that many consecutive runs on the same topic (sustained
    load: the tables keep growing), one row each. ``idempotent``: every client thread is a producer of
    its own and sends the producer headers, numbering its requests 0, 1, 2, ...; ``repetition`` > 0: a
    topic of its own for a repeated run (the first plain run's topic is the one the fetch rows read)."""
    fmt = kind.split("-")[0]
    per_request = 10_000 if fmt == "arrow" else 1_000
    build, ctype = {"json": (json_body, JSON_V2), "binary": (binary_body, BINARY_V2),
                    "arrow": (arrow_body, ARROW_STREAM)}[fmt]
    topic = (f"bench-{'sustained-' if windows else ''}{fmt}{'-keyed' if keyed else ''}"
             f"{'-idempotent' if idempotent else ''}-{size}{f'-r{repetition}' if repetition else ''}")
    create_topic(admin, cluster_id, topic)
    rng = np.random.default_rng(size)
    # A few distinct bodies, built before the clock starts, cycled by every worker (the same bytes for the
    # plain and the idempotent rows: the same seed).
    bodies = [build(rng, per_request, size, i * per_request) for i in range(4)]
    check = check_json_offsets if fmt in ("json", "binary") else check_produce
    headers = {"Content-Type": ctype}
    name = f"{fmt} produce" + (" keyed" if keyed else "") + (" idempotent" if idempotent else "")
    tag = f"{kind}-{size}" + ("-keyed" if keyed else "") + ("-idempotent" if idempotent else "")
    result = Result(name, kind, size, per_request=f"{per_request // 1000}k rec/req",
                    tag=tag + (f"-r{repetition}" if repetition else ""), idempotent=idempotent)
    # warm-up (not timed): one small request per partition
    warm = build(rng, 10, size, 0)
    for p in range(PARTITIONS):
        path = f"/topics/{topic}" if keyed else (f"/topics/{topic}/partitions/{p}/records" if fmt == "arrow"
                                                 else f"/topics/{topic}/partitions/{p}")
        check(admin.post(path, content=warm.content, headers=headers))

    counters = [itertools.count(i) for i in range(load.threads)]
    # idempotent: a producer per client thread (its id before the clock starts), its requests numbered 0, 1, 2, ...
    producers = [init_producer(admin, cluster_id) for _ in range(load.threads)] if idempotent else []
    sequences = [itertools.count(0) for _ in range(load.threads)]

    def job(client: httpx.Client, i: int):
        k = next(counters[i])
        body = bodies[k % len(bodies)]
        if keyed:
            path = f"/topics/{topic}"
        else:
            p = (i + k) % PARTITIONS  # every worker walks all partitions: concurrent requests per partition
            path = f"/topics/{topic}/partitions/{p}/records" if fmt == "arrow" else f"/topics/{topic}/partitions/{p}"
        if idempotent:
            producer_id, epoch = producers[i]
            request_headers = {**headers, **ProducerBatch(producer_id, epoch, next(sequences[i])).headers()}
        else:
            request_headers = headers
        check(client.post(path, content=body.content, headers=request_headers))
        return body.records, body.value_bytes, len(body.content)

    appends = AppendCommits(broker.log_dirs, topic)
    if not windows:
        before = appends.count()
        load.run(result, broker, job, spy)
        result.commits = appends.count() - before
        return result
    results, started = [], time.monotonic()
    for w in range(windows):
        r = Result(result.name, kind, size, result.per_request, tag=f"{result.tag}-sustained-{w}")
        before = appends.count()
        load.run(r, broker, job, spy)
        r.commits = appends.count() - before
        r.note = f"until {time.monotonic() - started:.0f} s"
        r.name = f"{result.name}, {r.note}"
        r.files = data_files_per_partition(broker.log_dirs, topic)
        results.append(r)
        console.print(f"  {r.name:<28} {r.rate:>12,.0f} records/s, {r.files:,.1f} data files per partition")
    return results


def produce_pairs(kind: str, size: int, repeat: int, scenario: dict) -> list[Result]:
    """A plain produce row and its idempotent twin, ``repeat`` pairs alternating (plain, idempotent,
    idempotent, plain, ...: a drift of the machine's load hits both alike), each run on a fresh topic.
    Returns the two rows, each pooling its runs; the idempotent one keeps the pairs' records/s."""
    runs: dict[bool, list[Result]] = {False: [], True: []}
    for rep in range(repeat):
        for idempotent in ((False, True) if rep % 2 == 0 else (True, False)):
            label = f"{kind} {size} B{' idempotent' if idempotent else ''}, pair {rep + 1}/{repeat}"
            with console.status(label):
                r = produce_scenario(kind, size, idempotent=idempotent, repetition=rep, **scenario)
            runs[idempotent].append(r)
            console.print(f"  {r.name:<25} {r.value_size:>5} B  {r.rate:>12,.0f} records/s  (pair {rep + 1}/{repeat})"
                          + (f"  [red]{r.errors[0][:200]}[/]" if r.errors else ""))
        plain, idem = runs[False][-1], runs[True][-1]
        if plain.rate:
            console.print(f"  {'':<25} {'':>7}  idempotent / plain = {idem.rate / plain.rate:.2f}x")
    plain, idem = pooled(runs[False]), pooled(runs[True])
    idem.pair_rates = [(p.rate, i.rate) for p, i in zip(runs[False], runs[True])]
    return [plain, idem]


def partition_offsets(client: httpx.Client, topic: str) -> list[tuple[int, int]]:
    out = []
    for p in range(PARTITIONS):
        r = client.get(f"/topics/{topic}/partitions/{p}/offsets")
        r.raise_for_status()
        d = r.json()
        out.append((d["beginning_offset"], d["end_offset"]))
    return out


def fetch_scenario(size: int, *, source: str, url: str, admin: httpx.Client, load: Load, broker: Broker,
                   spy: PySpy, max_bytes: int, tail_bytes: int) -> Result:
    """Arrow fetch of the Arrow-produced topic: ``source`` "cache" reads the newest ``tail_bytes`` of each
    partition (held in memory by the broker), "disk" reads from the log start (after a restart)."""
    topic = f"bench-arrow-{size}"
    ranges = []
    for lso, hw in partition_offsets(admin, topic):
        if source == "cache":
            # ~row bytes in the broker's Arrow tail cache: value + key + offset/timestamp/epoch/nulls
            window = max(1, tail_bytes // (size + 64))
            lso = max(lso, hw - window)
        ranges.append((lso, hw))
    total = sum(hw - lso for lso, hw in ranges)
    result = Result("arrow fetch " + ("(cache)" if source == "cache" else "(Parquet)"), "arrow-fetch", size,
                    f"max_bytes {max_bytes >> 20} MiB", note=f"{total:,} rec in range",
                    tag=f"arrow-fetch-{size}-{source}")
    if total == 0:
        result.errors.append("nothing to fetch (Arrow produce wrote nothing)")
        return result
    headers = {"Accept": ARROW_STREAM}
    # warm-up (not timed): one record per partition (opens the logs after a restart)
    for p, (lso, hw) in enumerate(ranges):
        admin.get(f"/topics/{topic}/partitions/{p}/records", headers=headers,
                  params={"offset": lso, "max_bytes": 1, "max_wait_ms": 0}).raise_for_status()
    positions = [ranges[i % PARTITIONS][0] for i in range(load.threads)]

    def job(client: httpx.Client, i: int):
        p = i % PARTITIONS
        lso, hw = ranges[p]
        if hw <= lso:
            time.sleep(0.01)
            return 0, 0, 0
        offset = positions[i]
        r = client.get(f"/topics/{topic}/partitions/{p}/records", headers=headers,
                       params={"offset": offset, "max_bytes": max_bytes, "max_wait_ms": 0})
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:300]}")
        table = pa.ipc.open_stream(r.content).read_all()
        n = table.num_rows
        if n == 0:
            raise RuntimeError(f"empty fetch at {topic}-{p} offset {offset} (hw {hw})")
        offset += n
        positions[i] = lso if offset >= hw else offset
        vb = sum(c.buffers()[2].size if c.buffers()[2] is not None else 0 for c in table["value"].chunks)
        return n, vb, len(r.content)

    return load.run(result, broker, job, spy)


def log_layer_reference(tmp: Path, size: int, batch_records: int, seconds: float) -> tuple[float, float]:
    """``PartitionLog.append`` alone, in this process: (records/s, ms per commit)."""
    from lakelog.config import TopicConfig
    from lakelog.log_tables.partition_log import PartitionLog
    from lakelog.log_tables.records import normalize_produce_batch

    # a Delta commit per append (no segment tail): what the printed line says it measures
    plog = PartitionLog.open(topic="reference", partition=0, table_uri=tmp / "reference-0",
                             config=TopicConfig.parse({"lake.commit.interval.ms": "0"}))
    rng = np.random.default_rng(7)
    batch = normalize_produce_batch(pa.table({"key": pa.array(keys_for(0, batch_records), pa.binary()),
                                              "value": pa.array(random_values(rng, batch_records, size), pa.binary())}))
    plog.append(batch)  # warm-up
    n, commits, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        n += plog.append(batch).count
        commits += 1
    elapsed = time.perf_counter() - t0
    plog.close()
    return n / elapsed, elapsed / commits * 1000


# -- report -------------------------------------------------------------------------------------

def target_cell(r: Result) -> str:
    if r.idempotent:
        if r.ratio is None:
            return ""
        ok = r.ratio >= IDEMPOTENT_TARGET and not r.errors
        return f"[{'green' if ok else 'red'}]≥ {IDEMPOTENT_TARGET}x plain: {'met' if ok else 'MISSED'} {r.ratio:.2f}x[/]"
    target = TARGETS.get(r.kind) if r.value_size == 100 and "keyed" not in r.name else None
    if target is None:
        return ""
    ok = r.rate >= target and not r.errors
    return f"[{'green' if ok else 'red'}]≥ {target // 1000:,}k: {'met' if ok else 'MISSED'} {r.rate / target:.0%}[/]"


def report(results: list[Result], args, cores: int, broker_pid: int, reference: list[str]) -> None:
    table = Table(title="lakelog produce/fetch over HTTP, one broker", show_lines=False)
    for col, just in (("scenario", "left"), ("value", "right"), ("request", "left"), ("records", "right"),
                      ("s", "right"), ("records/s", "right"), ("MB/s values", "right"), ("MB/s HTTP", "right"),
                      ("rec/commit", "right"), ("broker CPU loop/py/native", "right"), ("CPU broker/client/other", "right"), ("target", "left")):
        table.add_column(col, justify=just)
    for r in results:
        secs = r.seconds or float("inf")
        other = f"{r.other_cpu / secs:.0%}"
        table.add_row(
            r.name + (f" ({r.runs} runs)" if r.runs > 1 else "") + (f"\n[red]{r.errors[0][:200]}[/]" if r.errors else ""),
            f"{r.value_size} B" if r.value_size < 1024 else "1 KiB",
            r.per_request, f"{r.records:,}", f"{r.seconds:.1f}", f"{r.rate:,.0f}",
            f"{r.value_bytes / secs / 1e6:,.1f}", f"{r.wire_bytes / secs / 1e6:,.1f}",
            f"{r.records / r.commits:,.0f}" if r.commits else "",
            f"{r.loop_cpu / secs:.0%} / {r.worker_cpu / secs:.0%} / "
            f"{max(0.0, r.broker_cpu - r.loop_cpu - r.worker_cpu) / secs:.0%}",
            f"{r.broker_cpu / secs:.0%} / {r.client_cpu / secs:.0%} / "
            + (f"[yellow]{other}[/]" if r.other_cpu / secs > 0.15 else other),
            target_cell(r))
    console.print(table)
    console.print(
        f"Measured: one broker (pid {broker_pid}, uvicorn + uvloop, one process) and this client "
        f"({args.threads} threads, one keep-alive httpx connection each, bodies pre-built) on the same "
        f"machine with {cores} CPU core(s). Each scenario ran until {args.records:,} records or {args.seconds:g} s "
        f"on its own 6-partition topic, acks=1 after the append to the segment tail (RF 1; the flusher commits to Delta). Produce: JSON and binary to "
        f"POST /topics/{{t}}/partitions/{{p}} (keyed: POST /topics/{{t}}, murmur2), Arrow to "
        f"POST /topics/{{t}}/partitions/{{p}}/records, partitions round-robin per client thread. Fetch: GET "
        f"/topics/{{t}}/partitions/{{p}}/records of the Arrow-produced topic; 'tail cache' = newest records (in "
        f"broker memory), 'Parquet' = from the log start after a broker restart.\n"
        + (f"Idempotent rows: the same bodies and routes with X-Lakelog-Producer-Id/-Epoch/-Sequence, each client "
           f"thread a producer of its own (an id from POST /v3/clusters/{{c}}/producers before the clock starts) "
           f"numbering its requests 0, 1, 2, ...; each plain JSON and Arrow row ran {args.repeat} time(s) "
           f"alternating with its idempotent row (plain, idempotent, idempotent, plain, ...), every run on a fresh "
           f"topic, and both rows pool their runs ('N runs'); the idempotent row's ratio is the median of the "
           f"pairs' records/s ratios (each pair: idempotent / plain). Targets: records/s for the 100 B rows, "
           f"≥ {IDEMPOTENT_TARGET}x plain for the idempotent rows (every size).\n"
           if any(r.idempotent for r in results) else "")
        + "MB/s = 10^6 bytes/s of record values; MB/s HTTP = request (produce) or response (fetch) bodies; "
        "rec/commit = records per append commit (group commit batching; compaction commits not counted; tables start empty); CPU 100% = one "
        "core; broker loop = its event-loop thread (HTTP, decode, encode), py = its asyncio.to_thread workers "
        "(appends, reads: Python parts and native calls made from them), native = delta-rs/Arrow threads; other = the rest of the machine (other processes, py-spy) during the run: above ~15% the "
        "figures are lower than the machine can do.")
    for line in reference:
        console.print(line)


def report_pairs(results: list[Result], args) -> None:
    """The idempotent rows against their plain rows, pair by pair."""
    table = Table(title=f"idempotent vs plain produce: {args.repeat} pair(s) per row, alternating "
                        f"(plain, idempotent, idempotent, plain, ...), each run {args.seconds:g} s or "
                        f"{args.records:,} records on a fresh topic", show_lines=False)
    for col in ("row", "value", "plain records/s per pair", "idempotent records/s per pair", "ratio per pair",
                "median ratio", "target"):
        table.add_column(col, justify="left" if col in ("row", "target") else "right")
    for r in results:
        if not r.idempotent or r.ratio is None:
            continue
        table.add_row(r.name, f"{r.value_size} B" if r.value_size < 1024 else "1 KiB",
                      ", ".join(f"{p:,.0f}" for p, _ in r.pair_rates),
                      ", ".join(f"{i:,.0f}" for _, i in r.pair_rates),
                      ", ".join(f"{i / p:.2f}x" if p else "-" for p, i in r.pair_rates),
                      f"{r.ratio:.2f}x",
                      f"[{'green' if r.ratio >= IDEMPOTENT_TARGET and not r.errors else 'red'}]≥ {IDEMPOTENT_TARGET}x: "
                      f"{'met' if r.ratio >= IDEMPOTENT_TARGET and not r.errors else 'MISSED'}[/]")
    console.print(table)


def report_sustained(results: list[Result]) -> None:
    table = Table(title="sustained produce, 100 B values: one topic, consecutive 5 s windows", show_lines=False)
    for col in ("scenario", "records/s", "rec/commit", "data files per partition", "broker CPU loop/py/native",
                "CPU broker/client/other"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for r in results:
        secs = r.seconds or float("inf")
        table.add_row(r.name + (f" [red]{r.errors[0][:120]}[/]" if r.errors else ""), f"{r.rate:,.0f}",
                      f"{r.records / r.commits:,.0f}" if r.commits else "", f"{r.files:,.1f}",
                      f"{r.loop_cpu / secs:.0%} / {r.worker_cpu / secs:.0%} / "
                      f"{max(0.0, r.broker_cpu - r.loop_cpu - r.worker_cpu) / secs:.0%}",
                      f"{r.broker_cpu / secs:.0%} / {r.client_cpu / secs:.0%} / {r.other_cpu / secs:.0%}")
    console.print(table)
    console.print("rec/commit = records per append commit in the window (compaction and other maintenance commits "
                  "are not counted); data files per partition = active Parquet files of each partition table at "
                  "the end of the window (the Delta table's file list), averaged over the partitions. Each append "
                  "commit adds a data file and delta-rs re-reads the table's active files on every commit, so the "
                  "cost of a commit grows with the files in the table until compaction merges them.")


def run_fetches(args, results: list[Result], broker: Broker, admin: httpx.Client, load: Load) -> httpx.Client:
    """Arrow fetch rows: the tail cache first, then (after a broker restart) Parquet from the log start."""
    tail_bytes = 12 << 20  # well inside the default 32 MiB tail cache per partition
    for source in ("cache", "disk"):
        if source == "disk":
            with console.status("restarting the broker (empty tail cache: fetches read Parquet)"):
                admin.close()
                broker.stop()
                took = broker.start().startup_s
                admin = httpx.Client(base_url=broker.url, timeout=120.0)
            console.print(f"broker restarted (pid {broker.pid}, up in {took:.1f} s)")
        spy = PySpy(args.py_spy, broker.pid, args.py_spy_format, args.py_spy_native, args.py_spy_gil)
        for size in VALUE_SIZES:
            with console.status(f"arrow fetch {size} B ({source})"):
                r = fetch_scenario(size, source=source, url=broker.url, admin=admin, load=load, broker=broker,
                                   spy=spy, max_bytes=args.fetch_max_bytes, tail_bytes=tail_bytes)
            results.append(r)
            console.print(f"  {'arrow fetch (' + source + ')':<20} {size:>5} B  {r.rate:>12,.0f} records/s"
                          + (f"  [red]{r.errors[0][:200]}[/]" if r.errors else ""))
    return admin


# -- main ---------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=None,
                        help="Stop a scenario after this many records (default 5,000,000; --quick 2,000,000).")
    parser.add_argument("--seconds", type=float, default=None,
                        help="Stop a scenario after this many seconds (default 7; --quick 1).")
    parser.add_argument("--threads", type=int, default=8, help="Concurrent client connections. Default: 8.")
    parser.add_argument("--quick", action="store_true", help="A ~30 s smoke run (1 s per scenario).")
    parser.add_argument("--fetch-max-bytes", type=int, default=32 << 20, help="max_bytes of a fetch. Default: 32 MiB.")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="Record a py-spy flame graph of the broker per scenario into DIR (slows the broker).")
    parser.add_argument("--py-spy-format", default="flamegraph", choices=["flamegraph", "raw", "speedscope"],
                        help="py-spy output: flamegraph (.svg), raw collapsed stacks (.txt), speedscope (.json).")
    parser.add_argument("--py-spy-native", action="store_true", help="py-spy --native: C/Rust frames too.")
    parser.add_argument("--py-spy-gil", action="store_true", help="py-spy --gil: only the thread holding the GIL.")
    parser.add_argument("--only", default=None, metavar="KINDS",
                        help="Comma-separated subset: json,binary,arrow,fetch,idempotent (profiling runs). "
                             "'idempotent' adds the idempotent twins of the JSON and Arrow rows that run; "
                             "alone it means json,arrow,idempotent.")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="Plain/idempotent pairs per JSON and Arrow row, alternating (plain, idempotent, "
                             "idempotent, plain, ...), each run on a fresh topic (default 2; --quick 1).")
    parser.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="A broker setting as LAKELOG_NAME=VALUE (repeatable), e.g. LINGER_MS=5.")
    parser.add_argument("--sustain", type=float, default=0, metavar="SECONDS",
                        help="Also run JSON and Arrow produce (100 B) for SECONDS each on one topic, in 5 s windows, "
                             "to show throughput as the Delta tables grow. Default: off.")
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (tables, logs).")
    args = parser.parse_args()
    if args.records is None:
        args.records = 2_000_000 if args.quick else 5_000_000
    if args.seconds is None:
        args.seconds = 1.0 if args.quick else 7.0
    if args.repeat is None:
        args.repeat = 1 if args.quick else 2
    args.repeat = max(1, args.repeat)
    cores = os.cpu_count() or 1

    results: list[Result] = []
    sustained: list[Result] = []
    reference: list[str] = []
    t_start = time.monotonic()
    with bench_cluster(console, prefix="lakelog-bench-", env=parse_broker_env(args.broker_env), keep=args.keep) as run:
        tmp, broker = run.tmp, run.broker
        admin = httpx.Client(base_url=broker.url, timeout=120.0)
        cluster_id = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        load = Load(broker.url, args.threads, args.records, args.seconds)
        spy = PySpy(args.py_spy, broker.pid, args.py_spy_format, args.py_spy_native, args.py_spy_gil)

        only = set((args.only or "json,binary,arrow,fetch,idempotent").split(","))
        idempotent_only = only == {"idempotent"}
        if idempotent_only:
            only |= set(IDEMPOTENT_FORMATS)  # the plain rows the ratios need
        if "fetch" in only:
            only.add("arrow")  # fetch reads what Arrow produce wrote
        plan = [("json-produce", s, False) for s in VALUE_SIZES]
        if not args.quick and not idempotent_only:
            plan.append(("json-produce", 100, True))
        plan += [("binary-produce", s, False) for s in VALUE_SIZES]
        plan += [("arrow-produce", s, False) for s in VALUE_SIZES]
        plan = [step for step in plan if step[0].split("-")[0] in only]
        for kind, size, keyed in plan:
            scenario = dict(url=broker.url, admin=admin, cluster_id=cluster_id, load=load, broker=broker, spy=spy)
            if "idempotent" in only and not keyed and kind.split("-")[0] in IDEMPOTENT_FORMATS:
                results.extend(produce_pairs(kind, size, args.repeat, scenario))
                continue
            with console.status(f"{kind} {size} B{' keyed' if keyed else ''}"):
                r = produce_scenario(kind, size, keyed=keyed, **scenario)
            results.append(r)
            console.print(f"  {r.name:<25} {r.value_size:>5} B  {r.rate:>12,.0f} records/s"
                          + (f"  [red]{r.errors[0][:200]}[/]" if r.errors else ""))

        if args.sustain > 0:
            window = Load(broker.url, args.threads, 10**12, 5.0)
            for kind in ("json-produce", "arrow-produce"):
                if kind.split("-")[0] in only:
                    with console.status(f"sustained {kind}"):
                        sustained.extend(produce_scenario(
                            kind, 100, url=broker.url, admin=admin, cluster_id=cluster_id, load=window,
                            broker=broker, spy=spy, windows=max(1, round(args.sustain / 5))))
        if "fetch" in only:
            admin = run_fetches(args, results, broker, admin, load)
        admin.close()

        with console.status("log layer reference (in-process PartitionLog.append)"):
            for size in (VALUE_SIZES if args.only is None else ()):
                rate, ms = log_layer_reference(tmp / "reference", size, 10_000, 0.7 if args.quick else 2.0)
                reference.append(
                    f"Comparison, no HTTP: PartitionLog.append (offsets + one delta-rs commit) of 10,000 × "
                    f"{size} B records in this process, one thread, broker idle: {rate:,.0f} records/s, "
                    f"{ms:.1f} ms per commit (one partition).")
    if results:
        report(results, args, cores, run.broker_pid, reference)
    if any(r.idempotent for r in results):
        report_pairs(results, args)
    if sustained:
        report_sustained(sustained)
    console.print(f"total {time.monotonic() - t_start:.0f} s")
    return run.return_code


if __name__ == "__main__":
    sys.exit(main())
