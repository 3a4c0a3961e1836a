#!/usr/bin/env python
"""Kafka's own tools against Apache Kafka and against lakelog's Kafka listener, same machine, same run.

Usage::

    .venv/bin/python bench/kafka_protocol.py                     # about 4 minutes
    .venv/bin/python bench/kafka_protocol.py --records 5000000 --latency-messages 10000   # a bigger run
    .venv/bin/python bench/kafka_protocol.py --only codec        # the RecordBatch codec alone, no brokers
    .venv/bin/python bench/kafka_protocol.py --only produce --py-spy /tmp/flames   # where lakelog's time goes
    .venv/bin/python bench/kafka_protocol.py --only spark        # Spark's format("kafka"), 2,000,000 records
    .venv/bin/python bench/kafka_protocol.py --only spark --spark-records 100000   # a quick check
    .venv/bin/python bench/kafka_protocol.py --only transactions   # transactional ProducerPerformance

What it does: starts an embedded ZooKeeper and one lakelog broker child process with a Kafka listener
(``listeners=PLAINTEXT://127.0.0.1:{free port}``; ``_cluster.bench_cluster``) and one Apache Kafka broker
(``_kafka.KafkaBroker``: 4.1.1 in KRaft mode from Maven Central jars, cached in ``~/.cache/lakelog-bench``),
each with a ``--partitions`` topic (RF 1) and a one-partition topic for the latency tool; everything
stops by pid at the end, on Ctrl-C and on errors. Then, each phase first against Kafka and then against
lakelog:

- produce: ``org.apache.kafka.tools.ProducerPerformance`` (Kafka's Java producer, its defaults: no key,
  sticky partitioner, ``batch.size`` 16384, ``linger.ms`` 5), ``--records`` records of ``--record-size``
  bytes at full speed, ``acks=1`` then ``acks=all`` (idempotent, the Java client's default then); a
  ``--warmup-records`` run before, not shown. Records/s as the tool prints it.
- consume: ``org.apache.kafka.tools.ConsumerPerformance`` (a member of a new group: JoinGroup,
  SyncGroup, then fetches) reads ``--records`` records of the produce topic; its ``fetch.nMsg.sec``
  (records/s once the group is joined) is shown. Then an ``assign()`` consumer (confluent-kafka,
  librdkafka) reads as many from the start of the partitions: records/s from assign to the last record.
  It runs in this Python process, so Kafka's figure is bounded by the client as much as by the broker.
- latency: ``org.apache.kafka.tools.EndToEndLatency`` (one ``--record-size`` record sent with ``acks=1``
  and ``linger.ms`` 0, then polled by an assigned consumer with ``fetch.max.wait.ms`` 0, one at a time,
  ``--latency-messages`` times): p50 / p99 as it prints them, whole milliseconds, and its average; then
  the same loop with librdkafka in this process, timed in microseconds.
- spark (not part of the default run: a Spark session costs a JVM and its jars): both brokers get a
  ``--partitions`` topic of ``--spark-records`` records (``ProducerPerformance``, ``acks=1``, not timed),
  then Spark's own Kafka source (``spark.read.format("kafka")``, ``org.apache.spark:spark-sql-kafka-0-10``
  at the installed pyspark's version; ``local[2]``) reads all of it, ``startingOffsets`` earliest to
  ``endingOffsets`` latest, counting the records and summing the value lengths: records/s from the
  query's start to its result. A 10,000-record read of another topic on each broker warms Spark up first.
- transactions (not part of the default run): ``ProducerPerformance`` with ``--transactional-id`` and
  ``--transaction-duration-ms`` (``--transaction-duration-ms``, default 100: a transaction commits every
  100 ms, as Kafka's own transactional benchmarks run it) and ``acks=all``, ``--records`` records at full
  speed on a fresh topic of each broker: records/s, lakelog / Kafka (issue 40 names no target: the ratio
  is printed).

Each figure is printed as lakelog, Kafka and lakelog / Kafka, beside issue 39's targets (produce and
consume >= 0.5x Kafka's records/s, end-to-end p50 and p99 <= 2x Kafka's, Spark's read >= 1x), and each
broker's CPU seconds per million records and peak RSS during the phase (from ``/proc``; the Kafka broker
is one JVM process).

``--only codec`` (also part of the default run, first) times the listener's RecordBatch v2 codec
(:mod:`lakelog.kafka.records`) on batches of 150 (a Java producer's 16 KiB batch), ``--codec-records``
and 10x ``--codec-records`` records (10 B keys, ``--record-size`` values, with and without one header):
decoding a produce batch (uncompressed and each codec) and building a fetch batch, beside the listener's
code before this bench (``reference_decode``, ``reference_build`` in this file: aiokafka's Cython reader
and builder with a Python loop over the records). The ``bench/`` folder never asserts timings.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.table import Table

from _cluster import PySpy, bench_cluster, broker_env as parse_broker_env, make_console, process_cpu
from _kafka import KAFKA_VERSION, KafkaBroker
from lakelog.runtime.zookeeper_server import free_port

console = make_console()
PRODUCE_TARGET = 0.5  # lakelog records/s / Kafka's, at least
CONSUME_TARGET = 0.5
LATENCY_TARGET = 2.0  # lakelog p50 and p99 / Kafka's, at most
SPARK_TARGET = 1.0  # lakelog records/s / Kafka's for Spark's format("kafka") read, at least
PHASES = ("codec", "produce", "consume", "latency", "spark", "transactions")
DEFAULT_PHASES = ("codec", "produce", "consume", "latency")
SPARK_WARMUP_RECORDS = 10_000


# -- measuring a broker process -----------------------------------------------------------------

def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (``VmRSS``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Usage:
    """A broker's CPU seconds and peak RSS during one phase."""

    cpu_s: float = 0.0
    rss_peak_mib: float = 0.0

    def per_million(self, records: int) -> float:
        return self.cpu_s / records * 1e6 if records else 0.0


class Watch:
    """Measures ``pid``'s CPU (from ``/proc/{pid}/stat``) and samples its RSS every 100 ms while open."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.usage = Usage()
        self._stop = threading.Event()

    def __enter__(self) -> Usage:
        self._cpu = process_cpu(self.pid)
        self.usage.rss_peak_mib = rss_mib(self.pid)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self.usage

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.usage.rss_peak_mib = max(self.usage.rss_peak_mib, rss_mib(self.pid))
            except OSError:
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.usage.cpu_s = process_cpu(self.pid) - self._cpu


@dataclass
class Target:
    """One broker under test: its name, Kafka bootstrap address and pid."""

    name: str
    bootstrap: str
    pid: int
    results: dict = field(default_factory=dict)  # phase -> figures
    usage: dict = field(default_factory=dict)  # phase -> Usage


# -- Kafka's tools ------------------------------------------------------------------------------

_PRODUCER_RESULT = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max "
    r"latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
_E2E_AVG = re.compile(r"Avg latency: ([\d.]+) ms")
_E2E_PERCENTILES = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


def run_tool(kafka: KafkaBroker, main: str, *args: str, timeout_s: float = 900) -> str:
    """Run one of Kafka's tools to its end; its stdout. Raises RuntimeError with its output when it fails."""
    done = subprocess.run(kafka.tool_command(main, *args), capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{main.rsplit('.', 1)[-1]} {' '.join(args)} exited with {done.returncode}:\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")
    return done.stdout


def producer_performance(kafka: KafkaBroker, target: Target, topic: str, *, records: int, record_size: int,
                         acks: str, transactional_id: str | None = None, transaction_duration_ms: int = 0) -> dict:
    """``ProducerPerformance`` at full speed; its final line's figures. With ``transactional_id``: a
    transactional producer committing every ``transaction_duration_ms`` (the tool's own options)."""
    transactions = ("--transactional-id", transactional_id, "--transaction-duration-ms",
                    str(transaction_duration_ms)) if transactional_id else ()
    out = run_tool(kafka, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records",
                   str(records), "--record-size", str(record_size), "--throughput", "-1", *transactions,
                   "--producer-props", f"bootstrap.servers={target.bootstrap}", f"acks={acks}")
    found = _PRODUCER_RESULT.findall(out)
    if not found:
        raise RuntimeError(f"ProducerPerformance printed no result:\n{out[-2000:]}")
    sent, rate, mb, avg, peak, p50, p95, p99, p999 = found[-1]
    return {"records": int(sent), "rate": float(rate), "avg_ms": float(avg), "max_ms": float(peak),
            "p50_ms": int(p50), "p99_ms": int(p99), "p999_ms": int(p999)}


def consumer_performance(kafka: KafkaBroker, target: Target, topic: str, *, records: int) -> dict:
    """``ConsumerPerformance`` (a group member) reading ``records``; its ``fetch.nMsg.sec`` and ``nMsg.sec``."""
    out = run_tool(kafka, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", target.bootstrap,
                   "--topic", topic, "--messages", str(records), "--group", f"bench-{uuid.uuid4().hex[:8]}",
                   "--timeout", "60000")
    lines = [line for line in out.splitlines() if line.count(",") >= 9 and line[:1].isdigit()]
    if not lines:
        raise RuntimeError(f"ConsumerPerformance printed no result:\n{out[-2000:]}")
    fields = [f.strip() for f in lines[-1].split(",")]
    return {"records": int(float(fields[4])), "rate": float(fields[9]), "rate_with_join": float(fields[5])}


def end_to_end_latency(kafka: KafkaBroker, target: Target, topic: str, *, messages: int, record_size: int) -> dict:
    """``EndToEndLatency`` with ``acks=1``: its p50 / p99 / p99.9 (whole ms) and average (ms)."""
    args = (target.bootstrap, topic, str(messages), "1", str(record_size))
    try:
        out = run_tool(kafka, "org.apache.kafka.tools.EndToEndLatency", *args)
    except RuntimeError as e:  # before Kafka moved it to its tools module it was Scala, in kafka_2.13
        if "ClassNotFound" not in str(e) and "Could not find or load main class" not in str(e):
            raise
        out = run_tool(kafka, "kafka.tools.EndToEndLatency", *args)
    avg, percentiles = _E2E_AVG.search(out), _E2E_PERCENTILES.search(out)
    if avg is None or percentiles is None:
        raise RuntimeError(f"EndToEndLatency printed no result:\n{out[-2000:]}")
    p50, p99, p999 = (int(x) for x in percentiles.groups())
    return {"avg_ms": float(avg.group(1)), "p50_ms": p50, "p99_ms": p99, "p999_ms": p999}


# -- librdkafka in this process -----------------------------------------------------------------

def assign_consume(target: Target, topic: str, *, partitions: int, records: int) -> dict:
    """An ``assign()`` consumer (librdkafka) reading ``records`` from the start of every partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = 0
        deadline = started + 600
        while got < records and time.perf_counter() < deadline:
            messages = consumer.consume(num_messages=10_000, timeout=1.0)
            for m in messages:
                if m.error() is not None:
                    raise RuntimeError(f"consume from {target.name}: {m.error()}")
            got += len(messages)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if got < records:
        raise RuntimeError(f"{target.name}: only {got:,} of {records:,} records consumed in 600 s")
    return {"records": got, "rate": got / elapsed}


def librdkafka_latency(target: Target, topic: str, *, messages: int, record_size: int) -> dict:
    """EndToEndLatency's loop with librdkafka, in microseconds: send one record (``acks=1``, no linger),
    wait for its acknowledgement, poll an assigned consumer (``fetch.wait.max.ms`` 0) until it arrives."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "1", "linger.ms": 0,
                         "enable.idempotence": False})
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 0, "fetch.error.backoff.ms": 0})
    samples = []
    value = b"x" * record_size
    deadline = time.monotonic() + 600

    def roundtrip() -> float:
        started = time.perf_counter()
        producer.produce(topic, value, partition=0)
        producer.flush(30)
        while not consumer.consume(num_messages=1, timeout=1.0):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{target.name}: a produced record was not consumed")
        return time.perf_counter() - started

    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, high)])  # an offset, not OFFSET_END: resolved before producing
        roundtrip()  # warms both connections up; not timed
        samples = [roundtrip() for _ in range(messages)]
    finally:
        consumer.close()
        producer.flush(10)
    us = np.array(samples) * 1e6
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)),
            "avg_us": float(us.mean())}


# -- Spark's Kafka source ---------------------------------------------------------------------------

def spark_session():
    """A ``local[2]`` SparkSession (:func:`lakelog.spark.session.session`) with Spark's Kafka source and sink
    (``org.apache.spark:spark-sql-kafka-0-10_2.13`` at the installed pyspark's version, from Maven Central
    once, then Spark's Ivy cache)."""
    import pyspark

    from lakelog.spark.session import SCALA_BINARY_VERSION, session

    return session(master="local[2]", app_name="lakelog-bench-kafka-protocol", conf={
        "spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2",
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{pyspark.__version__}"})


def spark_kafka_read(spark, target: Target, topic: str, *, records: int) -> dict:
    """``spark.read.format("kafka")`` of all of ``topic`` (earliest to latest), ``count(*)`` and the sum of the
    value lengths; records/s from the query's start to its result. Raises RuntimeError when the count is
    not ``records``."""
    started = time.perf_counter()
    row = (spark.read.format("kafka").option("kafka.bootstrap.servers", target.bootstrap).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
           .selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0])
    elapsed = time.perf_counter() - started
    if row["n"] != records:
        raise RuntimeError(f"{target.name}: Spark read {row['n']:,} records of {topic}, not {records:,}")
    return {"records": row["n"], "rate": row["n"] / elapsed, "seconds": round(elapsed, 2)}


# -- the RecordBatch codec ----------------------------------------------------------------------

def reference_decode(raw: bytes) -> pa.Table:
    """The per-record decode the listener used before: aiokafka's Cython reader, one Python object per
    record, then Arrow arrays from Python lists."""
    from aiokafka.record.default_records import DefaultRecordBatch

    from lakelog.log_tables.records import PRODUCE_SCHEMA
    from lakelog.log_tables.schema import HEADERS_TYPE

    batch = DefaultRecordBatch(raw)
    keys, values, headers, timestamps = [], [], [], []
    for record in batch:
        keys.append(record.key)
        values.append(record.value)
        headers.append([{"key": k, "value": v} for k, v in record.headers] if record.headers else [])
        timestamps.append(record.timestamp)
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                     "headers": pa.array(headers, HEADERS_TYPE), "timestamp": pa.array(timestamps, pa.int64())},
                    schema=PRODUCE_SCHEMA)


def reference_build(rows: pa.Table) -> bytes:
    """The per-record fetch batch the listener built before: aiokafka's builder, one ``append`` per row."""
    import struct

    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    from lakelog.log_tables.schema import timestamps_us

    offsets = rows["offset"].to_pylist()
    timestamps = pc.divide(timestamps_us(rows["timestamp"]), 1000).to_pylist()
    keys, values, headers = rows["key"].to_pylist(), rows["value"].to_pylist(), rows["headers"].to_pylist()
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    for offset, ts, key, value, hdrs in zip(offsets, timestamps, keys, values, headers):
        builder.append(offset - offsets[0], ts, key, value, [(h["key"], h["value"]) for h in hdrs] if hdrs else [])
    out = builder.build()
    struct.pack_into(">q", out, 0, offsets[0])
    return bytes(out)


def best_seconds(fn, *, min_s: float = 0.5, repeat: int = 9) -> float:
    """The best time of one call of ``fn``: ``repeat`` rounds of as many calls as fill ``min_s``."""
    fn()
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        if time.perf_counter() - started >= min_s / repeat or calls >= 1 << 14:
            break
        calls *= 2
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def codec_bench(*, records: int, record_size: int) -> Table:
    """Decode and build times of this checkout's codec and the per-record reference, µs per batch: at 150
    records (a Java producer's 16 KiB batch), ``records`` and 10x ``records``."""
    from lakelog.kafka.records import build_batch, decode_batches

    rng = np.random.default_rng(0)
    table = Table(title=f"RecordBatch v2 codec, 10 B keys and {record_size} B values: µs per batch (records/s)")
    for column in ("batch", "records", "wire bytes", "per-record reference", "lakelog.kafka.records", "speed-up"):
        table.add_column(column, justify="left" if column == "batch" else "right")
    for n, with_headers, codecs in ((150, False, (0,)), (records, False, range(5)), (records, True, (0,)),
                                    (10 * records, False, (0,))):
        values = [bytes(rng.integers(65, 91, record_size, dtype=np.uint8)) for _ in range(n)]
        suffix = ", 1 header" if with_headers else ""
        for codec in codecs:
            raw = _batch(values, with_headers, codec)
            ours = best_seconds(lambda: decode_batches(raw, max_uncompressed_bytes=1 << 27))
            reference = best_seconds(lambda: reference_decode(raw)) if codec == 0 else None
            name = ("none", "gzip", "snappy", "lz4", "zstd")[codec]
            table.add_row(f"decode, {name}{suffix}", f"{n:,}", f"{len(raw):,}", _cell(reference, n), _cell(ours, n),
                          f"{reference / ours:.2f}x" if reference else "")
        (decoded,) = decode_batches(_batch(values, with_headers, 0), max_uncompressed_bytes=1 << 27)
        rows = decoded.records.append_column("offset", pa.array(np.arange(n, dtype=np.int64) + 1000))
        rows = rows.set_column(rows.schema.get_field_index("timestamp"), "timestamp",
                               pc.multiply(rows["timestamp"], 1000).cast(pa.timestamp("us", tz="UTC")))
        ours = best_seconds(lambda: build_batch(rows))
        reference = best_seconds(lambda: reference_build(rows))
        table.add_row(f"build (fetch){suffix}", f"{n:,}", f"{len(build_batch(rows)):,}", _cell(reference, n),
                      _cell(ours, n), f"{reference / ours:.2f}x")
    return table


def _batch(values: list[bytes], with_headers: bool, codec: int) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=7,
                                        producer_epoch=0, base_sequence=0, batch_size=2**31 - 1)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000 + i // 10, b"key-%06d" % i, value,
                       [("trace", b"%d" % i)] if with_headers else [])
    return bytes(builder.build())


def _cell(seconds: float | None, records: int) -> str:
    return "" if seconds is None else f"{seconds * 1e6:,.0f} µs ({records / seconds:,.0f}/s)"


# -- the report ---------------------------------------------------------------------------------

def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs else "n/a"


def report(lakelog: Target, kafka: Target) -> Table:
    table = Table(title="lakelog's Kafka listener beside Apache Kafka (one broker each, same machine, same run)")
    for column in ("figure", "lakelog", "Kafka", "lakelog / Kafka", "target", "result"):
        table.add_column(column, justify="left" if column in ("figure", "target") else "right")

    def throughput(key: str, label: str, target: float | None) -> None:
        ours, theirs = lakelog.results.get(key), kafka.results.get(key)
        if ours is None or theirs is None:
            return
        ratio = ours["rate"] / theirs["rate"] if theirs["rate"] else 0.0
        table.add_row(label, f"{ours['rate']:,.0f}", f"{theirs['rate']:,.0f}", f"{ratio:.2f}x",
                      "" if target is None else f">= {target}x",
                      "" if target is None else "met" if ratio >= target else "MISSED")

    def latency(key: str, label: str, unit: str) -> None:
        ours, theirs = lakelog.results.get(key), kafka.results.get(key)
        if ours is None or theirs is None:
            return
        for p in ("p50", "p99"):
            a, b = ours[f"{p}_{unit}"], theirs[f"{p}_{unit}"]
            result = ("met" if a <= LATENCY_TARGET * b else "MISSED") if b else "n/a (Kafka's is 0)"
            table.add_row(f"{label} {p} ({unit})", f"{a:,.2f}" if unit == "us" else str(a),
                          f"{b:,.2f}" if unit == "us" else str(b), _ratio(a, b), f"<= {LATENCY_TARGET}x", result)

    throughput("produce acks=1", "ProducerPerformance acks=1, records/s", PRODUCE_TARGET)
    throughput("produce acks=all", "ProducerPerformance acks=all, records/s", PRODUCE_TARGET)
    throughput("consume group", "ConsumerPerformance (group), fetch records/s", CONSUME_TARGET)
    throughput("consume assign", "assign() consumer (librdkafka), records/s", CONSUME_TARGET)
    throughput("spark read", 'Spark format("kafka") batch read, records/s', SPARK_TARGET)
    throughput("produce transactional", "ProducerPerformance transactional (acks=all), records/s", None)
    latency("latency", "EndToEndLatency", "ms")
    if "latency" in lakelog.results and "latency" in kafka.results:
        a, b = lakelog.results["latency"]["avg_ms"], kafka.results["latency"]["avg_ms"]
        table.add_row("EndToEndLatency average (ms)", f"{a:.4f}", f"{b:.4f}", _ratio(a, b), "", "")
    latency("latency librdkafka", "librdkafka produce -> consume", "us")
    for phase, usage in lakelog.usage.items():
        theirs = kafka.usage.get(phase)
        if theirs is None:
            continue
        n = lakelog.results[phase]["records"] if "records" in lakelog.results[phase] else 0
        m = kafka.results[phase]["records"] if "records" in kafka.results[phase] else 0
        if n and m:
            a, b = usage.per_million(n), theirs.per_million(m)
            table.add_row(f"broker CPU s per million records, {phase}", f"{a:.2f}", f"{b:.2f}", _ratio(a, b), "", "")
        table.add_row(f"broker RSS peak MiB, {phase}", f"{usage.rss_peak_mib:,.0f}", f"{theirs.rss_peak_mib:,.0f}",
                      _ratio(usage.rss_peak_mib, theirs.rss_peak_mib), "", "")
    return table


def detail(targets: list[Target]) -> Table:
    table = Table(title="ProducerPerformance's own latency figures (ms; the producer's send to acknowledgement)")
    for column in ("broker", "acks", "records/s", "avg", "p50", "p99", "p99.9", "max"):
        table.add_column(column, justify="left" if column == "broker" else "right")
    for target in targets:
        for acks in ("1", "all"):
            r = target.results.get(f"produce acks={acks}")
            if r:
                table.add_row(target.name, acks, f"{r['rate']:,.0f}", f"{r['avg_ms']:.2f}", str(r["p50_ms"]),
                              str(r["p99_ms"]), str(r["p999_ms"]), f"{r['max_ms']:.0f}")
    return table


# -- main ---------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000,
                        help="records per ProducerPerformance run and per consume. Default: 1,000,000.")
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record value. Default: 100.")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the produce topic. Default: 6.")
    parser.add_argument("--warmup-records", type=int, default=200_000,
                        help="a ProducerPerformance run before the timed ones, per broker. Default: 200,000.")
    parser.add_argument("--latency-messages", type=int, default=3_000,
                        help="records sent one at a time by each latency loop. Default: 3,000.")
    parser.add_argument("--codec-records", type=int, default=1_000, help="records per codec batch. Default: 1,000.")
    parser.add_argument("--spark-records", type=int, default=2_000_000,
                        help="records of the topic Spark reads (phase spark). Default: 2,000,000.")
    parser.add_argument("--transaction-duration-ms", type=int, default=100,
                        help="with --only transactions: ms between a transactional producer's commits. Default: 100.")
    parser.add_argument("--only", default=",".join(DEFAULT_PHASES),
                        help=f"comma-separated phases of {', '.join(PHASES)}. Default: {', '.join(DEFAULT_PHASES)}.")
    parser.add_argument("--kafka-version", default=KAFKA_VERSION, help=f"Apache Kafka broker. Default: {KAFKA_VERSION}.")
    parser.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a LAKELOG_* setting of the lakelog broker (repeatable)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="record the lakelog broker with py-spy (raw collapsed stacks) during its phases")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data)")
    args = parser.parse_args()
    only = {p.strip() for p in args.only.split(",") if p.strip()}
    unknown = only - set(PHASES)
    if unknown:
        parser.error(f"--only: unknown phase(s) {', '.join(sorted(unknown))}; choose from {', '.join(PHASES)}")

    console.print(f"load average at start (1, 5, 15 min; {os.cpu_count()} CPUs): "
                  + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if "codec" in only:
        console.print(codec_bench(records=args.codec_records, record_size=args.record_size))
    if not only - {"codec"}:
        return
    port = free_port()
    env = {"LAKELOG_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}", **parse_broker_env(args.broker_env)}
    with bench_cluster(console, prefix="lakelog-bench-kafka-protocol-", env=env, keep=args.keep) as run:
        kafka_broker = KafkaBroker(run.tmp / "kafka", version=args.kafka_version)
        try:
            with console.status(f"starting Kafka {args.kafka_version}"):
                kafka_broker.start()
            console.print(f"Kafka {args.kafka_version} (KRaft) on {kafka_broker.bootstrap}, pid {kafka_broker.pid}; "
                          f"lakelog's Kafka listener on 127.0.0.1:{port}")
            run_phases(args, only, run, kafka_broker, port)
        finally:
            kafka_broker.stop()
    sys.exit(run.return_code)


def run_phases(args, only: set[str], run, kafka_broker: KafkaBroker, port: int) -> None:
    from lakelog.client import LakelogClient

    topic, latency_topic = "bench", "bench-latency"
    with LakelogClient(run.broker.url) as client:
        client.create_topic(topic, partitions=args.partitions, replication_factor=1)
        client.create_topic(latency_topic, partitions=1, replication_factor=1)
    kafka_broker.create_topic(topic, args.partitions)
    kafka_broker.create_topic(latency_topic, 1)
    kafka = Target("Kafka", kafka_broker.bootstrap, kafka_broker.pid)
    lakelog = Target("lakelog", f"127.0.0.1:{port}", run.broker_pid)
    spy = PySpy(args.py_spy, run.broker_pid, fmt="raw")

    def phase(key: str, fn, *, usage: bool = True) -> None:
        for target in (kafka, lakelog):
            with console.status(f"{key}: {target.name}"):
                if target is lakelog:
                    spy.start(key.replace(" ", "-").replace("=", "-"))
                try:
                    with Watch(target.pid) as used:
                        target.results[key] = fn(target)
                finally:
                    spy.stop()
            if usage:
                target.usage[key] = used
            console.print(f"  {key:<22} {target.name:<8} {target.results[key]}  (load "
                          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ")")

    produced = 0
    if "produce" in only or "consume" in only:
        phase("warm-up", lambda t: producer_performance(kafka_broker, t, topic, records=args.warmup_records,
                                                       record_size=args.record_size, acks="1"), usage=False)
        produced += args.warmup_records
    if "produce" in only:
        for acks in ("1", "all"):
            phase(f"produce acks={acks}", lambda t, acks=acks: producer_performance(
                kafka_broker, t, topic, records=args.records, record_size=args.record_size, acks=acks))
            produced += args.records
    if "consume" in only:
        records = min(args.records, produced)
        phase("consume group", lambda t: consumer_performance(kafka_broker, t, topic, records=records))
        phase("consume assign", lambda t: assign_consume(t, topic, partitions=args.partitions, records=records))
    if "latency" in only:
        phase("latency", lambda t: end_to_end_latency(kafka_broker, t, latency_topic, messages=args.latency_messages,
                                                      record_size=args.record_size), usage=False)
        phase("latency librdkafka", lambda t: librdkafka_latency(t, latency_topic, messages=args.latency_messages,
                                                                 record_size=args.record_size), usage=False)
    if "spark" in only:
        spark_phase(args, phase, kafka_broker, run, (kafka, lakelog))
    if "transactions" in only:
        transactional = "bench-transactional"
        with LakelogClient(run.broker.url) as client:
            client.create_topic(transactional, partitions=args.partitions, replication_factor=1)
        kafka_broker.create_topic(transactional, args.partitions)
        phase("produce transactional", lambda t: producer_performance(
            kafka_broker, t, transactional, records=args.records, record_size=args.record_size, acks="all",
            transactional_id=f"bench-{t.name}-{uuid.uuid4().hex[:6]}",
            transaction_duration_ms=args.transaction_duration_ms))
    console.print(report(lakelog, kafka))
    if "produce" in only:
        console.print(detail([lakelog, kafka]))
    console.print("load average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def spark_phase(args, phase, kafka_broker: KafkaBroker, run, targets: tuple[Target, Target]) -> None:
    """Fill a ``--spark-records`` topic and a warm-up topic on both brokers, then time Spark's reads."""
    from lakelog.client import LakelogClient

    topic, warmup = "bench-spark", "bench-spark-warmup"
    with LakelogClient(run.broker.url) as client:
        client.create_topic(topic, partitions=args.partitions, replication_factor=1)
        client.create_topic(warmup, partitions=args.partitions, replication_factor=1)
    kafka_broker.create_topic(topic, args.partitions)
    kafka_broker.create_topic(warmup, args.partitions)
    for target in targets:
        with console.status(f"spark: filling {target.name}'s topics"):
            for name, records in ((warmup, SPARK_WARMUP_RECORDS), (topic, args.spark_records)):
                producer_performance(kafka_broker, target, name, records=records, record_size=args.record_size,
                                     acks="1")
        console.print(f"  spark: {target.name}'s {topic} holds {args.spark_records:,} records")
    with console.status("starting Spark"):
        spark = spark_session()
    try:
        for target in targets:
            spark_kafka_read(spark, target, warmup, records=SPARK_WARMUP_RECORDS)
        phase("spark read", lambda t: spark_kafka_read(spark, t, topic, records=args.spark_records))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
