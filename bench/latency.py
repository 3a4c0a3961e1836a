#!/usr/bin/env python
"""Latency of one broker over HTTP: ack latency, produce -> fetched, history flatness, lake freshness.

Usage::

    python bench/latency.py                          # every scenario (c: 100,000 requests, capped at 15 min)
    python bench/latency.py --quick                  # a < 60 s smoke run
    python bench/latency.py --only a,e,f --profile   # ack latency, CPU per request, gateway floor, py-spy breakdown
    python bench/latency.py --only d --spark         # lake freshness, also checked with Spark

What it does: starts an embedded ZooKeeper (a temp dir, a free port) and one broker child process
(``python -m lakelog.cli broker start``, its own session, stopped by pid at the end, on Ctrl-C and on
errors), creates one single-partition topic (RF 1) per scenario and produces 100-byte values with
``acks=1`` (``X-Lakelog-Acks``), one record per request, ``application/vnd.kafka.json.v2+json`` to
``POST /topics/{t}/partitions/0``:

- a. ack latency: sequential requests on one keep-alive ``httpx.Client``; p50 / p99 / p99.9 of the
  time from sending a request to its answer;
- b. produce -> fetched: producer threads send one record per request on a timer at a steady rate
  (200 records/s), a consumer thread long-polls ``GET /topics/{t}/partitions/0/records``; latency =
  time the consumer got the record - time the producer sent it (one clock: both are threads of this
  process); p50 / p99;
- c. history flatness: N sequential requests on one fresh topic; p99 of the first 1,000 and of the last
  1,000, and their ratio (does a request get slower as the partition's history grows?); then the live
  data files of the partition's Delta table (about one per flush, never one per request);
- d. lake freshness: one record every ~50 ms for ~20 s while a poller (``deltalake.DeltaTable``,
  ``update_incremental()`` every few ms, then a scan of the new data files' ``offset`` column) watches
  the partition's Delta table (``table_uri`` of ``GET /lakelog/v1/topics/{t}/logs``); latency = time the
  poller first saw the record's offset in the table - time the producer sent it; beside the topic's
  ``lake.commit.interval.ms``. ``--spark``: also a few samples read with ``spark.read.format("delta")``;
- e. the broker's CPU per request during (a), from ``/proc/{pid}`` (its event-loop thread, its Python
  worker threads, native threads);
- f. the gateway floor: (a) against the broker's own HTTP stack (the gateway app under the broker's
  uvicorn configuration) with a stub append that assigns offsets at once (``bench/_gateway_floor.py``):
  what HTTP parse, routing, body decode and the answer cost, whatever the log does.

``--profile``: a further run of (a) and of (f) under ``py-spy record`` (pip install py-spy, or the
``bench`` extra), whose samples are grouped into the stages of a produce request (HTTP parse, routing,
decode, append, response, ...), per thread, with the top self-time frames.

Figures are printed beside the issue's targets and Kafka's figures on this machine; nothing asserts a
timing. All processes (ZooKeeper, the broker, py-spy, Spark's JVM) share the machine's cores with this
client: the CPU columns show how busy the machine was ("other" = processes outside this bench).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import orjson
from rich.table import Table

from lakelog.runtime.zookeeper_server import free_port

from _cluster import Broker, PySpy, bench_cluster, broker_env, client_cpu, machine_cpu, make_console, py_spy_executable
from _gateway_floor import GatewayFloorProcess

JSON_V2 = "application/vnd.kafka.json.v2+json"
ACKS_HEADER = "X-Lakelog-Acks"

#: Kafka 3.9.1 on this machine (issue #11): ack p50 / p99 / p99.9, produce -> fetched p50 / p99 (ms).
KAFKA = {"ack_p50": 0.44, "ack_p99": 4.1, "ack_p999": 11.6, "e2e_p50": 1.6, "e2e_p99": 9.0}
#: The issue's targets (ms, or a ratio).
TARGETS = {"ack_p50": 3.0, "ack_p99": 15.0, "e2e_p99": 25.0, "history_ratio": 1.3, "lake_slack_ms": 500.0}
LAKE_COMMIT_INTERVAL_DEFAULT_MS = 1000  # TopicConfig's default of lake.commit.interval.ms

console = make_console()


# -- helpers ------------------------------------------------------------------------------------

def pct(values, q: float) -> float:
    """The q-th percentile (0-100) of ``values`` (nan when empty)."""
    a = np.asarray(values, dtype=float)
    return float(np.percentile(a, q)) if a.size else float("nan")


def value_text(size: int) -> str:
    """A JSON string whose JSON text (with its quotes) is exactly ``size`` bytes."""
    return "v" * max(0, size - 2)


def json_body(value: str, key: int | None = None) -> bytes:
    record = {"value": value} if key is None else {"key": key, "value": value}
    return orjson.dumps({"records": [record]})


def check_produce(resp: httpx.Response) -> int:
    """The offset of the request's one record (raises on an error answer or a failed record)."""
    if resp.status_code != 200:
        raise RuntimeError(f"produce: HTTP {resp.status_code}: {resp.text[:300]}")
    entry = orjson.loads(resp.content)["offsets"][0]
    if entry["error_code"] is not None:
        raise RuntimeError(f"produce: record failed: {entry}")
    return entry["offset"]


@dataclass
class Cpu:
    """CPU seconds over a run: the broker (event loop / Python workers / all), this client, the rest."""

    seconds: float = 0.0
    broker: float = 0.0
    loop: float = 0.0
    workers: float = 0.0
    client: float = 0.0
    other: float = 0.0

    @property
    def native(self) -> float:
        return max(0.0, self.broker - self.loop - self.workers)

    def share(self, x: float) -> str:
        return f"{x / self.seconds:.0%}" if self.seconds else ""


class CpuMeter:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def __enter__(self) -> Cpu:
        self.cpu = Cpu()
        self.b0, self.c0, self.m0 = self.broker.cpu_seconds(), client_cpu(), machine_cpu()
        self.l0, self.w0 = self.broker.cpu_split()
        self.t0 = time.perf_counter()
        return self.cpu

    def __exit__(self, *exc) -> None:
        c = self.cpu
        c.seconds = time.perf_counter() - self.t0
        c.broker = self.broker.cpu_seconds() - self.b0
        l1, w1 = self.broker.cpu_split()
        c.loop, c.workers = l1 - self.l0, w1 - self.w0
        c.client = client_cpu() - self.c0
        c.other = max(0.0, machine_cpu() - self.m0 - c.broker - c.client)


@dataclass
class Ctx:
    url: str
    cluster_id: str
    broker: Broker
    admin: httpx.Client
    args: argparse.Namespace

    def create_topic(self, name: str, configs: dict[str, str] | None = None) -> None:
        body = {"topic_name": name, "partitions_count": 1, "replication_factor": 1}
        if configs:
            body["configs"] = [{"name": k, "value": v} for k, v in configs.items()]
        resp = self.admin.post(f"/v3/clusters/{self.cluster_id}/topics", json=body)
        if resp.status_code != 201:
            raise RuntimeError(f"creating topic {name}: HTTP {resp.status_code} {resp.text[:300]}")

    def topic_config(self, name: str, key: str) -> str | None:
        resp = self.admin.get(f"/v3/clusters/{self.cluster_id}/topics/{name}")
        resp.raise_for_status()
        for entry in resp.json().get("configs_list") or []:
            if entry["name"] == key:
                return entry["value"]
        return None

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60.0)

    @property
    def produce_headers(self) -> dict[str, str]:
        return {"Content-Type": JSON_V2, ACKS_HEADER: self.args.acks}


# -- a, e, c: sequential one-record requests ----------------------------------------------------

@dataclass
class Sequential:
    latencies_ms: np.ndarray
    cpu: Cpu
    capped: bool = False

    @property
    def requests(self) -> int:
        return int(self.latencies_ms.size)


def sequential(ctx: Ctx, topic: str, requests: int, max_seconds: float, *, warmup: int = 100,
               progress: str | None = None) -> Sequential:
    """``requests`` one-record produces in a row on one keep-alive client (stops early after ``max_seconds``)."""
    body = json_body(value_text(ctx.args.value_bytes))
    path = f"/topics/{topic}/partitions/0"
    headers = ctx.produce_headers
    lat = np.empty(requests, dtype=float)
    n = 0
    with ctx.client() as client:
        for _ in range(warmup):
            check_produce(client.post(path, content=body, headers=headers))
        post, clock = client.post, time.perf_counter
        deadline = clock() + max_seconds
        status = console.status(progress) if progress else None
        if status:
            status.start()
        try:
            with CpuMeter(ctx.broker) as cpu:
                for n in range(requests):
                    t = clock()
                    resp = post(path, content=body, headers=headers)
                    lat[n] = clock() - t
                    if resp.status_code != 200 or b'"error_code":null' not in resp.content:
                        check_produce(resp)  # raises with the answer
                    if t > deadline:
                        break
                    if status and n % 1000 == 999:
                        status.update(f"{progress}: {n + 1:,} requests")
        finally:
            if status:
                status.stop()
    done = n + 1
    return Sequential(lat[:done] * 1000.0, cpu, capped=done < requests)


# -- b: produce -> fetched ----------------------------------------------------------------------

@dataclass
class EndToEnd:
    latencies_ms: np.ndarray
    sent: int
    received: int
    rate: float  # achieved send rate (records/s)
    late_p99_ms: float  # how far behind the timer the sends were (p99)
    cpu: Cpu


def end_to_end(ctx: Ctx, topic: str, rate: float, seconds: float, producers: int) -> EndToEnd:
    value = value_text(ctx.args.value_bytes)
    path = f"/topics/{topic}/partitions/0"
    headers = ctx.produce_headers
    # warm-up, and the offset the consumer starts from
    with ctx.client() as client:
        for i in range(20):
            check_produce(client.post(path, content=json_body(value, key=-1), headers=headers))
        start = client.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"]
    total = max(1, int(rate * seconds))
    sent_at = np.full(total, np.nan)
    due_at = np.full(total, np.nan)
    got_at = np.full(total, np.nan)
    bodies = [json_body(value, key=i) for i in range(total)]
    stop = threading.Event()
    errors: list[str] = []
    received = [0]

    def consume() -> None:
        offset = start
        with ctx.client() as client:
            while not stop.is_set():
                try:
                    resp = client.get(f"/topics/{topic}/partitions/0/records", headers={"Accept": JSON_V2},
                                      params={"offset": offset, "max_wait_ms": 500})
                    now = time.perf_counter()
                    if resp.status_code != 200:
                        raise RuntimeError(f"fetch: HTTP {resp.status_code}: {resp.text[:300]}")
                    for rec in orjson.loads(resp.content):
                        k = rec["key"]
                        if isinstance(k, int) and 0 <= k < total and np.isnan(got_at[k]):
                            got_at[k] = now
                            received[0] += 1
                        offset = rec["offset"] + 1
                except Exception as e:
                    errors.append(f"consumer: {type(e).__name__}: {e}")
                    stop.set()

    counter = itertools.count()
    t0 = time.perf_counter() + 0.3

    def produce() -> None:
        with ctx.client() as client:
            while not stop.is_set():
                i = next(counter)
                if i >= total:
                    return
                due = t0 + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                due_at[i] = due
                sent_at[i] = time.perf_counter()
                try:
                    check_produce(client.post(path, content=bodies[i], headers=headers))
                except Exception as e:
                    errors.append(f"producer: {type(e).__name__}: {e}")
                    stop.set()

    consumer = threading.Thread(target=consume, daemon=True)
    threads = [threading.Thread(target=produce, daemon=True) for _ in range(producers)]
    consumer.start()
    with CpuMeter(ctx.broker) as cpu:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sent_until = time.perf_counter()
        deadline = sent_until + 10.0
        while received[0] < total and time.perf_counter() < deadline and not stop.is_set():
            time.sleep(0.01)
    stop.set()
    consumer.join(5)
    if errors:
        raise RuntimeError(errors[0])
    ok = ~np.isnan(got_at) & ~np.isnan(sent_at)
    sent = int((~np.isnan(sent_at)).sum())
    return EndToEnd(latencies_ms=(got_at[ok] - sent_at[ok]) * 1000.0, sent=sent, received=int(ok.sum()),
                    rate=sent / max(1e-9, np.nanmax(sent_at) - t0) if sent > 1 else 0.0,
                    late_p99_ms=pct((sent_at - due_at)[~np.isnan(sent_at)] * 1000.0, 99), cpu=cpu)


def delta_table_files(ctx: Ctx, topic: str) -> tuple[int, int]:
    """(live data files, version) of partition 0's Delta table of ``topic``."""
    from deltalake import DeltaTable

    resp = ctx.admin.get(f"/lakelog/v1/topics/{topic}/logs")
    resp.raise_for_status()
    table = DeltaTable(resp.json()[0]["table_uri"])
    return len(table.file_uris()), table.version()


# -- d: lake freshness --------------------------------------------------------------------------

@dataclass
class Freshness:
    latencies_ms: np.ndarray
    produced: int
    seen: int
    interval_ms: int
    interval_source: str
    commits_seen: int
    poll_ms: float  # mean time of one update_incremental() poll
    table_uri: str
    spark: list[str] = field(default_factory=list)


def _local_path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


class LakePoller:
    """Watches a Delta table with delta-rs: ``update_incremental()`` every ``poll_s``; on a new version,
    the ``offset`` column of the data files it added is scanned for the table's max offset.
    ``observations`` = (time seen, max offset in the table) per new version."""

    def __init__(self, table_uri: str, poll_s: float) -> None:
        from deltalake import DeltaTable

        self.table = DeltaTable(table_uri)
        self.poll_s = poll_s
        self.version = self.table.version()
        self.files: set[str] = set()
        self.max_offset = self._scan_new()
        self.observations: list[tuple[float, int]] = []
        self.polls = 0
        self.poll_time = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: str | None = None

    def _scan_new(self) -> int:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        best = getattr(self, "max_offset", -1)
        for uri in self.table.file_uris():
            if uri in self.files:
                continue
            self.files.add(uri)
            col = pq.read_table(_local_path(uri), columns=["offset"])["offset"]
            if len(col):
                best = max(best, pc.max(col).as_py())
        return best

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                t = time.perf_counter()
                self.table.update_incremental()
                v = self.table.version()
                if v != self.version:
                    self.version = v
                    self.max_offset = self._scan_new()
                    self.observations.append((time.perf_counter(), self.max_offset))
                self.polls += 1
                self.poll_time += time.perf_counter() - t
                time.sleep(self.poll_s)
        except Exception as e:  # reported by the caller
            self.error = f"{type(e).__name__}: {e}"

    def first_seen(self, offset: int) -> float:
        for t, m in self.observations:
            if m >= offset:
                return t
        return float("nan")


def lake_freshness(ctx: Ctx, topic: str, seconds: float, interval_s: float) -> Freshness:
    args = ctx.args
    configs = {} if args.lake_commit_interval_ms is None else {
        "lake.commit.interval.ms": str(args.lake_commit_interval_ms)}
    ctx.create_topic(topic, configs)
    configured = ctx.topic_config(topic, "lake.commit.interval.ms")
    interval_ms = int(configured) if configured is not None else LAKE_COMMIT_INTERVAL_DEFAULT_MS
    source = "topic config" if configured is not None else "default"
    resp = ctx.admin.get(f"/lakelog/v1/topics/{topic}/logs")
    resp.raise_for_status()
    table_uri = resp.json()[0]["table_uri"]
    value = value_text(args.value_bytes)
    path = f"/topics/{topic}/partitions/0"
    headers = ctx.produce_headers
    with ctx.client() as client:
        check_produce(client.post(path, content=json_body(value), headers=headers))  # the table has a version
        poller = LakePoller(table_uri, args.lake_poll_ms / 1000.0)
        poller.thread.start()
        sends: list[tuple[int, float]] = []
        total = max(1, int(seconds / interval_s))
        t0 = time.perf_counter()
        for i in range(total):
            delay = t0 + i * interval_s - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            t = time.perf_counter()
            sends.append((check_produce(client.post(path, content=json_body(value), headers=headers)), t))
        last = sends[-1][0]
        deadline = time.perf_counter() + interval_ms / 1000.0 + 10.0
        while poller.max_offset < last and time.perf_counter() < deadline and poller.error is None:
            time.sleep(0.01)
        poller.stop.set()
        poller.thread.join(5)
        if poller.error:
            raise RuntimeError(f"lake poller: {poller.error}")
        lat = np.array([(poller.first_seen(o) - t) * 1000.0 for o, t in sends])
        result = Freshness(latencies_ms=lat[~np.isnan(lat)], produced=len(sends), seen=int((~np.isnan(lat)).sum()),
                           interval_ms=interval_ms, interval_source=source, commits_seen=len(poller.observations),
                           poll_ms=poller.poll_time / max(1, poller.polls) * 1000.0, table_uri=table_uri)
        if args.spark:
            result.spark = spark_check(client, path, headers, value, table_uri, poller, args.spark_samples)
    return result


def spark_check(client: httpx.Client, path: str, headers: dict, value: str, table_uri: str,
                poller: LakePoller, samples: int) -> list[str]:
    """Spark reads the same commits: the max offset at delta-rs's last version read with ``versionAsOf``,
    then ``samples`` records produced one at a time and polled with ``spark.read.format("delta")``."""
    from pyspark.sql import functions as F

    from lakelog.spark import session

    t = time.perf_counter()
    spark = session(master="local[1]", app_name="lakelog-bench-latency",
                    conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})
    lines = [f"Spark session up in {time.perf_counter() - t:.1f} s (local[1])."]
    try:
        version = poller.table.version()
        spark_max = (spark.read.format("delta").option("versionAsOf", version).load(table_uri)
                     .agg(F.max("offset")).collect()[0][0])
        same = "the same" if spark_max == poller.max_offset else "[red]a different[/]"
        lines.append(f"At Delta version {version}: delta-rs max offset {poller.max_offset}, Spark {spark_max}: "
                     f"{same} commit contents.")
        for _ in range(3):  # warm-up: the first queries of a fresh JVM are several times slower
            spark.read.format("delta").load(table_uri).where(F.col("offset") == -1).count()
        lat, query_s = [], []
        for _ in range(samples):
            t_send = time.perf_counter()
            offset = check_produce(client.post(path, content=json_body(value), headers=headers))
            while time.perf_counter() - t_send < 30:
                q = time.perf_counter()
                n = spark.read.format("delta").load(table_uri).where(F.col("offset") == offset).count()
                query_s.append(time.perf_counter() - q)
                if n:
                    lat.append((time.perf_counter() - t_send) * 1000.0)
                    break
        if lat:
            lines.append(f"Spark spark.read.format('delta'), {len(lat)} samples: produce -> visible "
                         f"p50 {pct(lat, 50):,.0f} ms, max {max(lat):,.0f} ms (one Spark query takes "
                         f"{pct(np.array(query_s) * 1000, 50):,.0f} ms: that is the resolution).")
    finally:
        spark.stop()
    return lines


# -- --profile: py-spy breakdown ----------------------------------------------------------------

#: (stage, regex on a frame "function (file:line)"); first match walking from the leaf to the root wins.
STAGES: list[tuple[str, re.Pattern]] = [(s, re.compile(p)) for s, p in [
    ("append: Delta commit (delta-rs)", r"\(deltalake/"),
    ("append: small-file merges", r"\((lakelog/)?log_tables/file_merges\.py"),
    ("append: replication, log (Python)", r"\((lakelog/)?(replication|log_tables|producers)/"),
    ("response (encode, socket write)", r"^(produce_response_body|_produce_response_entries|kafka_json)\b|"
                                        r"starlette/responses\.py|^RequestResponseCycle\.send |"
                                        r"^_HeadWithBody\.|fastapi/.*serialize_response"),
    ("decode body", r"ingest_api/(codecs|columnar_json)\.py|^read_body |pydantic|orjson"),
    ("route handler (records_api)", r"ingest_api/records_api\.py|ingest_api/deps\.py"),
    ("routing (FastAPI/Starlette)", r"fastapi/|starlette/|ingest_api/error_handlers\.py"),
    ("HTTP parse (uvicorn/httptools)", r"uvicorn/protocols/http|httptools|http_guard\.py|h11"),
    ("ZooKeeper client (kazoo)", r"kazoo/"),
    ("event loop / asyncio", r"asyncio/|uvloop|uvicorn/"),
]]


#: Leaf frames of threads waiting, not working (py-spy's idle detection misses some of them); the
#: second line: native leaves (``--profile-native``).
IDLE = re.compile(r"^(_worker \(concurrent/futures/thread\.py|Condition\.wait |Event\.wait |select \(selectors|"
                  r"_wait_for_tstate_lock |"
                  r"(epoll_pwait|epoll_wait|__futex_abstimed_wait_common\w*|futex_wait|pthread_cond_(timed)?wait|"
                  r"sem_(timed)?wait|__?poll|select|nanosleep|clock_nanosleep|do_futex_wait\S*|syscall) \(|"
                  r"0x[0-9a-f]+ \(libc)")  # an unnamed libc leaf (--profile-native): in practice a futex wait
LOOP_C = "event loop in uvloop's C code (mostly epoll wait; --profile-native)"


def classify(stack: list[str]) -> str:
    if IDLE.search(stack[-1]):
        return "waiting (idle thread, not CPU)"
    if stack[-1].startswith("Runner.run (asyncio/runners.py"):
        return LOOP_C  # py-spy without --native cannot tell epoll_wait from work inside uvloop
    for frame in reversed(stack):
        for stage, rx in STAGES:
            if rx.search(frame):
                return stage
    return "other"


def thread_kind(name: str, stack: list[str]) -> str:
    """loop (the main thread), workers (the asyncio default executor: to_thread), other threads."""
    if name == "MainThread":
        return "loop"
    if name.startswith(("uvloop", "asyncio", "ThreadPoolExecutor")) or any(
            "concurrent/futures/thread.py" in f for f in stack[:6]):
        return "workers"
    return "other threads"


@dataclass
class Profile:
    name: str
    rate: int
    requests: int
    seconds: float
    stages: dict[str, Counter]  # stage -> thread kind -> samples
    leaves: Counter  # (leaf frame, stage) -> samples
    samples: int
    cpu: Cpu
    latencies_ms: np.ndarray
    file: Path


def parse_collapsed(path: Path) -> tuple[dict[str, Counter], Counter, int]:
    """py-spy's raw (collapsed) stacks, ``thread (tid): name;frame;...;leaf count`` per line, by stage and thread."""
    stages: dict[str, Counter] = defaultdict(Counter)
    leaves: Counter = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack_text, _, count = line.rpartition(" ")
        if not stack_text or not count.isdigit():
            continue
        n = int(count)
        frames = stack_text.split(";")
        name = ""
        if frames[0].startswith("thread ("):
            name = frames[0].partition("): ")[2]
            frames = frames[1:]
        frames = [f for f in frames if not f.startswith("process ")]
        if not frames:
            continue
        stage = classify(frames)
        stages[stage][thread_kind(name, frames)] += n
        leaves[(frames[-1], stage)] += n
        total += n
    return stages, leaves, total


def profile_run(ctx: Ctx, topic: str, out_dir: Path, name: str, requests: int) -> Profile:
    """(a) again, on ``ctx``'s process, under ``py-spy record`` (raw collapsed stacks)."""
    args = ctx.args
    spy = PySpy(out_dir, ctx.broker.pid, fmt="raw", rate=args.profile_rate, native=args.profile_native)
    body = json_body(value_text(args.value_bytes))
    with ctx.client() as client:  # warm-up before py-spy attaches
        for _ in range(100):
            check_produce(client.post(f"/topics/{topic}/partitions/0", content=body, headers=ctx.produce_headers))
    spy.start(name)
    time.sleep(0.5)  # py-spy attaches
    try:
        run = sequential(ctx, topic, requests, args.a_max_seconds, warmup=0,
                         progress=f"profiling {name} under py-spy")
    finally:
        spy.stop()
    assert spy.output is not None
    stages, leaves, total = parse_collapsed(spy.output)
    return Profile(name, args.profile_rate, run.requests, run.cpu.seconds, stages, leaves, total, run.cpu,
                   run.latencies_ms, spy.output)


def report_profile(p: Profile) -> None:
    per_req = 1000.0 / p.rate / max(1, p.requests)  # ms of thread time per sample, per request
    table = Table(title=f"{p.name}: where a one-record produce goes, py-spy ({p.rate} Hz, {p.requests:,} "
                        f"requests in {p.seconds:.1f} s, {p.samples:,} samples of non-idle threads)")
    for col in ("stage", "event loop ms/req", "to_thread workers ms/req", "other threads ms/req", "total ms/req",
                "share"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for stage in sorted(p.stages, key=lambda s: -sum(p.stages[s].values())):
        c = p.stages[stage]
        n = sum(c.values())
        table.add_row(stage, f"{c['loop'] * per_req:.3f}", f"{c['workers'] * per_req:.3f}",
                      f"{c['other threads'] * per_req:.3f}", f"{n * per_req:.3f}", f"{n / max(1, p.samples):.0%}")
    busy = {k: v for k, v in p.stages.items() if not k.startswith("waiting")}
    table.add_row("[bold]all but waiting[/]", f"{sum(c['loop'] for c in busy.values()) * per_req:.3f}",
                  f"{sum(c['workers'] for c in busy.values()) * per_req:.3f}",
                  f"{sum(c['other threads'] for c in busy.values()) * per_req:.3f}",
                  f"{sum(sum(c.values()) for c in busy.values()) * per_req:.3f}",
                  f"{sum(sum(c.values()) for c in busy.values()) / max(1, p.samples):.0%}")
    console.print(table)
    top = Table(title=f"{p.name}: top self-time frames (leaf of each sample)")
    for col in ("frame", "stage", "ms/req", "share"):
        top.add_column(col, justify="left" if col in ("frame", "stage") else "right")
    for (frame, stage), n in p.leaves.most_common(15):
        top.add_row(frame[:110], stage, f"{n * per_req:.3f}", f"{n / max(1, p.samples):.1%}")
    console.print(top)
    console.print(
        f"{p.name}, during the profile: ack p50 {pct(p.latencies_ms, 50):.2f} ms, p99 {pct(p.latencies_ms, 99):.2f} ms; broker "
        f"CPU {p.cpu.broker / max(1, p.requests) * 1000:.3f} ms/request (event loop "
        f"{p.cpu.loop / max(1, p.requests) * 1000:.3f}, workers {p.cpu.workers / max(1, p.requests) * 1000:.3f}, "
        f"native {p.cpu.native / max(1, p.requests) * 1000:.3f}). ms/req = samples / rate / requests: the time "
        f"threads spent running (or blocked in a native call, e.g. a delta-rs commit or a file write) per request, "
        f"idle threads are not sampled. A stage is the innermost frame of a sample that names one (the append "
        f"stages win over the handler that awaits them). Raw collapsed stacks: {p.file}")


# -- report -------------------------------------------------------------------------------------

@dataclass
class Row:
    scenario: str
    figure: str
    value: float | None
    unit: str = "ms"
    target: float | None = None
    kafka: float | None = None
    note: str = ""


def fmt(v: float | None, unit: str) -> str:
    if v is None or v != v:
        return "—"
    if unit == "×":
        return f"{v:.2f}"
    if unit == "files":
        return f"{v:,.0f}"
    return f"{v:,.3f}" if abs(v) < 1 else (f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}")


def report(rows: list[Row], args, broker_pid: int) -> None:
    table = Table(title=f"lakelog latency, one broker, RF 1, acks={args.acks}, {args.value_bytes}-byte values, "
                        f"one record per request", show_lines=False)
    for col in ("scenario", "figure", "lakelog", "target", "Kafka (issue #11 figures)", "lakelog/Kafka", "notes"):
        table.add_column(col, justify="left" if col in ("scenario", "figure", "notes", "target") else "right")
    last = None
    for r in rows:
        unit = "" if r.unit == "×" else f" {r.unit}"
        if r.target is not None and r.value is not None and r.value == r.value:
            ok = r.value <= r.target
            target = f"[{'green' if ok else 'red'}]≤ {fmt(r.target, r.unit)}{unit}: {'met' if ok else 'MISSED'}[/]"
        else:
            target = ""
        ratio = (f"{r.value / r.kafka:,.1f}×" if r.kafka and r.value is not None and r.value == r.value else "")
        table.add_row(r.scenario if r.scenario != last else "", r.figure,
                      (fmt(r.value, r.unit) + unit) if r.value is not None else "—", target,
                      f"{fmt(r.kafka, r.unit)}{unit}" if r.kafka is not None else "", ratio, r.note)
        last = r.scenario
    console.print(table)
    console.print(
        f"Measured on one machine: one broker (pid {broker_pid}, uvicorn + uvloop) and this client share "
        f"{os.cpu_count()} core(s). Requests: POST /topics/{{t}}/partitions/0, {JSON_V2}, one {args.value_bytes}-byte "
        f"value per request, {ACKS_HEADER}: {args.acks}, one keep-alive httpx client per thread; each scenario on "
        f"its own fresh single-partition topic. CPU 100% = one core; 'other' = the rest of the machine (other "
        f"processes): above ~15% the figures are noisier than the code. Kafka's figures are the issue's (Kafka "
        f"3.9.1 on this machine); lakelog/Kafka = how many times slower.")


# -- main ---------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="A short smoke run (< 60 s).")
    parser.add_argument("--only", default=None, metavar="a,b,c,d,e,f",
                        help="A subset of the scenarios (e is measured during a, so it implies a).")
    parser.add_argument("--requests", type=int, default=None,
                        help="(a) sequential requests (default 5,000; --quick 300), stopped after --a-max-seconds.")
    parser.add_argument("--a-max-seconds", type=float, default=120.0,
                        help="(a) stops after this many seconds even before --requests. Default: 120.")
    parser.add_argument("--rate", type=float, default=200.0, help="(b) records per second. Default: 200.")
    parser.add_argument("--e2e-seconds", type=float, default=None, help="(b) seconds (default 30; --quick 5).")
    parser.add_argument("--producers", type=int, default=8,
                        help="(b) producer threads sharing the timer (enough to hold the rate while an ack is "
                             "slower than 1/rate). Default: 8.")
    parser.add_argument("--history-requests", type=int, default=None,
                        help="(c) sequential requests (default 100,000 per the issue; --quick 2,500).")
    parser.add_argument("--history-max-seconds", type=float, default=900.0,
                        help="(c) stops after this many seconds even before --history-requests (the last 1,000 "
                             "are then the last done; the row says so). Default: 900.")
    parser.add_argument("--lake-seconds", type=float, default=None, help="(d) seconds (default 20; --quick 5).")
    parser.add_argument("--lake-interval-ms", type=float, default=50.0, help="(d) ms between records. Default: 50.")
    parser.add_argument("--lake-poll-ms", type=float, default=2.0, help="(d) ms between delta-rs polls. Default: 2.")
    parser.add_argument("--lake-commit-interval-ms", type=int, default=None,
                        help="(d) create the topic with this lake.commit.interval.ms (default: the topic default).")
    parser.add_argument("--spark", action="store_true",
                        help="(d) also check with spark.read.format('delta') (starts a local Spark; ~30 s more).")
    parser.add_argument("--spark-samples", type=int, default=5, help="(d) Spark samples. Default: 5.")
    parser.add_argument("--profile", action="store_true",
                        help="A further run of (a) under py-spy: time per stage of a request (needs py-spy).")
    parser.add_argument("--profile-requests", type=int, default=None,
                        help="Requests of the profiled run (default 3,000; --quick 500).")
    parser.add_argument("--profile-rate", type=int, default=500, help="py-spy samples per second. Default: 500.")
    parser.add_argument("--profile-native", action="store_true",
                        help="py-spy --native: C/Rust frames too (pauses the process for each sample).")
    parser.add_argument("--acks", default="1", choices=["0", "1", "all"], help="Producer acks. Default: 1.")
    parser.add_argument("--value-bytes", type=int, default=100, help="Value size (JSON text bytes). Default: 100.")
    parser.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="A broker setting as LAKELOG_NAME=VALUE (repeatable).")
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (tables, logs, py-spy output).")
    args = parser.parse_args()
    q = args.quick
    args.requests = args.requests or (300 if q else 5_000)
    args.e2e_seconds = args.e2e_seconds or (4.0 if q else 30.0)
    args.history_requests = args.history_requests or (2_500 if q else 100_000)
    args.lake_seconds = args.lake_seconds or (4.0 if q else 20.0)
    args.profile_requests = args.profile_requests or (500 if q else 3_000)
    if q:
        args.a_max_seconds = min(args.a_max_seconds, 8.0)
        args.history_max_seconds = min(args.history_max_seconds, 10.0)
    only = set((args.only or "a,b,c,d,e,f").replace(" ", "").split(","))
    unknown = only - set("abcdef")
    if unknown:
        parser.error(f"--only: unknown scenarios {sorted(unknown)} (use a,b,c,d,e,f)")
    if "e" in only:
        only.add("a")
    if args.profile and py_spy_executable() is None:
        parser.error("--profile needs py-spy: pip install -e '.[bench]' (or pip install py-spy)")

    rows: list[Row] = []
    notes: list[str] = []
    profiles: list[Profile] = []
    t_start = time.monotonic()
    with bench_cluster(console, prefix="lakelog-latency-", env=broker_env(args.broker_env), keep=args.keep) as run:
        tmp, broker = run.tmp, run.broker
        admin = httpx.Client(base_url=broker.url, timeout=60.0)
        cluster_id = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        ctx = Ctx(broker.url, cluster_id, broker, admin, args)

        if "a" in only:
            ctx.create_topic("latency-a")
            a = sequential(ctx, "latency-a", args.requests, args.a_max_seconds, progress="(a) ack latency")
            lat, c = a.latencies_ms, a.cpu
            note = (f"{a.requests:,} requests in {c.seconds:.1f} s"
                    + (" (time cap)" if a.capped else "")
                    + f"; CPU broker/client/other {c.share(c.broker)} / {c.share(c.client)} / {c.share(c.other)}")
            scen = "a. ack latency (sequential)"
            rows += [Row(scen, "p50", pct(lat, 50), target=TARGETS["ack_p50"], kafka=KAFKA["ack_p50"], note=note),
                     Row(scen, "p99", pct(lat, 99), target=TARGETS["ack_p99"], kafka=KAFKA["ack_p99"]),
                     Row(scen, "p99.9", pct(lat, 99.9), kafka=KAFKA["ack_p999"],
                         note="" if a.requests >= 1000 else "(< 1,000 samples: p99.9 is the max)")]
            console.print(f"  (a) ack p50 {pct(lat, 50):.2f} ms, p99 {pct(lat, 99):.2f} ms, p99.9 "
                          f"{pct(lat, 99.9):.2f} ms ({a.requests:,} requests)")
            if "e" in only:
                per = 1000.0 / max(1, a.requests)
                scen = "e. broker CPU per request (a)"
                rows += [Row(scen, "all threads", c.broker * per, unit="ms CPU",
                             note=f"event loop {c.loop * per:.3f} / to_thread workers {c.workers * per:.3f} / "
                                  f"native {c.native * per:.3f} ms; broker busy {c.share(c.broker)} of a core")]
                console.print(f"  (e) broker CPU {c.broker * per:.3f} ms/request")

        if "b" in only:
            ctx.create_topic("latency-b")
            with console.status(f"(b) produce -> fetched at {args.rate:g} records/s for {args.e2e_seconds:g} s"):
                b = end_to_end(ctx, "latency-b", args.rate, args.e2e_seconds, args.producers)
            c = b.cpu
            scen = f"b. produce → fetched ({args.rate:g} rec/s)"
            note = (f"{b.received:,}/{b.sent:,} received, sent at {b.rate:,.0f}/s (p99 {b.late_p99_ms:.1f} ms behind "
                    f"the timer); CPU broker/client/other {c.share(c.broker)} / {c.share(c.client)} / {c.share(c.other)}")
            rows += [Row(scen, "p50", pct(b.latencies_ms, 50), kafka=KAFKA["e2e_p50"], note=note),
                     Row(scen, "p99", pct(b.latencies_ms, 99), target=TARGETS["e2e_p99"], kafka=KAFKA["e2e_p99"])]
            console.print(f"  (b) produce -> fetched p50 {pct(b.latencies_ms, 50):.2f} ms, p99 "
                          f"{pct(b.latencies_ms, 99):.2f} ms ({b.received:,} records)")

        if "c" in only:
            ctx.create_topic("latency-c")
            h = sequential(ctx, "latency-c", args.history_requests, args.history_max_seconds,
                           progress=f"(c) history: {args.history_requests:,} requests")
            window = min(1000, max(1, h.requests // 2))
            first, last = pct(h.latencies_ms[:window], 99), pct(h.latencies_ms[-window:], 99)
            scen = f"c. history ({h.requests:,} requests)"
            note = (f"{h.requests:,} of {args.history_requests:,} requests in {h.cpu.seconds:.0f} s"
                    + (f" ([yellow]stopped by --history-max-seconds {args.history_max_seconds:g}[/])" if h.capped else ""))
            rows += [Row(scen, f"p99 first {window:,}", first,
                         note=f"p50 {pct(h.latencies_ms[:window], 50):.2f} ms; " + note),
                     Row(scen, f"p99 last {window:,}", last, note=f"p50 {pct(h.latencies_ms[-window:], 50):.2f} ms"),
                     Row(scen, "ratio last/first", last / first if first else None, unit="×",
                         target=TARGETS["history_ratio"])]
            console.print(f"  (c) p99 first {window:,} {first:.2f} ms, last {window:,} {last:.2f} ms "
                          f"({h.requests:,} requests)")
            # the files the partition's table ends with: about one per flush (lake.commit.interval.ms), never
            # one per request; the broker merges the oldest small ones past log.segment.files.max
            time.sleep(LAKE_COMMIT_INTERVAL_DEFAULT_MS / 1000.0 * 1.5)  # the last flush lands
            files, version = delta_table_files(ctx, "latency-c")
            rows.append(Row(scen, "Delta data files", files, unit="files", target=max(1.0, h.cpu.seconds),
                            note=f"the table after {h.cpu.seconds:.0f} s of one-record requests: version {version:,}, "
                                 f"target ≤ ~1 file per second (lake.commit.interval.ms 1000) + merged ones"))
            console.print(f"  (c) {files:,} Delta data files after {h.requests:,} requests in {h.cpu.seconds:.0f} s "
                          f"(table version {version:,})")

        if "d" in only:
            with console.status(f"(d) lake freshness for {args.lake_seconds:g} s"
                                + (" (then Spark)" if args.spark else "")):
                d = lake_freshness(ctx, "latency-d", args.lake_seconds, args.lake_interval_ms / 1000.0)
            scen = "d. lake freshness (produce → in Delta)"
            target = d.interval_ms + TARGETS["lake_slack_ms"]
            rows += [Row(scen, "p50", pct(d.latencies_ms, 50),
                         note=f"lake.commit.interval.ms = {d.interval_ms} ({d.interval_source}); {d.seen}/{d.produced} "
                              f"records seen in {d.commits_seen} new table versions"),
                     Row(scen, "p99", pct(d.latencies_ms, 99), target=target,
                         note=f"target = lake.commit.interval.ms + 500; delta-rs poll every {args.lake_poll_ms:g} ms "
                              f"(update_incremental {d.poll_ms:.2f} ms)")]
            notes += d.spark
            console.print(f"  (d) produce -> in Delta p50 {pct(d.latencies_ms, 50):.1f} ms, p99 "
                          f"{pct(d.latencies_ms, 99):.1f} ms (lake.commit.interval.ms {d.interval_ms})")

        if "f" in only or (args.profile and "a" in only):
            floor = GatewayFloorProcess(free_port(), tmp / "gateway-floor.log").start()
            fctx = Ctx(floor.url, "", floor, admin, args)  # type: ignore[arg-type]
            try:
                if "f" in only:
                    f = sequential(fctx, "floor", args.requests, args.a_max_seconds, progress="(f) gateway floor")
                    lat, c = f.latencies_ms, f.cpu
                    per = 1000.0 / max(1, f.requests)
                    scen = "f. gateway floor (stub append)"
                    rows += [Row(scen, "p50", pct(lat, 50),
                                 note=f"the broker's HTTP stack alone (bench/_gateway_floor.py): {f.requests:,} "
                                      f"requests in {c.seconds:.1f} s"),
                             Row(scen, "p99", pct(lat, 99)),
                             Row(scen, "CPU per request", c.broker * per, unit="ms CPU",
                                 note=f"event loop {c.loop * per:.3f} ms; CPU gateway/client/other "
                                      f"{c.share(c.broker)} / {c.share(c.client)} / {c.share(c.other)}")]
                    console.print(f"  (f) gateway floor p50 {pct(lat, 50):.3f} ms, p99 {pct(lat, 99):.3f} ms, "
                                  f"CPU {c.broker * per:.3f} ms/request")
                if args.profile and "a" in only:
                    ctx.create_topic("latency-profile")
                    profiles.append(profile_run(ctx, "latency-profile", tmp / "py-spy", "broker (a)",
                                                args.profile_requests))
                if args.profile and "f" in only:
                    profiles.append(profile_run(fctx, "floor", tmp / "py-spy", "gateway floor (f)",
                                                args.profile_requests))
            finally:
                floor.stop()
        admin.close()
    if rows:
        report(rows, args, run.broker_pid)
    for line in notes:
        console.print(line)
    for profile in profiles:
        report_profile(profile)
    console.print(f"total {time.monotonic() - t_start:.0f} s")
    return run.return_code


if __name__ == "__main__":
    sys.exit(main())
