"""Spark read throughput: ``format("lakelog")`` beside Spark's Kafka source and raw ``format("delta")``.

    .venv/bin/python bench/spark_read.py [--records 2000000] [--value-bytes 100] [--distinct-values]
                                         [--repeat 3] [--warmup 1] [--kafka-version 4.1.1]

Starts its own ZooKeeper and lakelog broker and a single-node Apache Kafka broker (KRaft, combined
broker and controller, :mod:`_kafka`: Kafka's jars come from Maven Central through ``mvn`` once and are
cached in ``~/.cache/lakelog-bench``), all on ports free at start, data in one temp dir, stopped by pid
at the end. Produces the same ``--records`` records into a 6-partition topic of each: keys ``k0`` to
``k9999``, one random ``--value-bytes`` value (``--distinct-values``: each record its own, SHA-512 bytes
of its index), 10,000-record chunks round-robin over the partitions (lakelog: Arrow produce, one request
per chunk; Kafka: Spark's Kafka sink with a ``partition`` column, ``batch.size`` 512 KiB, ``linger.ms``
20, no compression), and checks that both topics hold the same records. The lakelog readers find
every record in the Delta tables (producing waits for the flushers), so they fetch nothing over HTTP.
Then times, in one ``local[2]`` SparkSession with Delta and
``org.apache.spark:spark-sql-kafka-0-10_2.13`` at the pyspark version:

- ``spark.read.format("delta")`` over lakelog's six partition tables (Delta's own reader: the bound);
- ``spark.read.format("kafka")`` (``startingOffsets`` earliest, ``endingOffsets`` latest);
- ``spark.read.format("lakelog")`` (the Python data source over the same tables);
- the same three as ``readStream`` with ``trigger(availableNow=True)`` into the same ``foreachBatch``
  sink (``startingOffsets`` earliest for Kafka and lakelog).

Each read aggregates every row (``count(*)``, ``sum(length(value))``), so every value is materialised.
The readers take turns, ``--warmup`` untimed rounds (default 1) and then ``--repeat`` timed ones; the
best time of each is shown. Targets (issue 16): lakelog at least 2x the Kafka source's records/s in
the same mode, and within 1.3x of Delta's time. The load average is printed before, after each run and
at the end: the figures are only comparable on a quiet machine. For each stream it prints Spark's
``durationMs`` of its micro-batches and the time outside them (query start and stop), and then the
imports of the Python process PySpark starts for each streaming query of a Python data source, timed in
fresh processes (:func:`runner_imports`): pyspark's runner module with Spark's ``PYTHONPATH`` (from
``pyspark.zip``) and from site-packages, then ``lakelog.spark.source``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from rich.table import Table

from _cluster import make_console
from _kafka import KAFKA_VERSION, KafkaBroker

console = make_console()
PARTITIONS = 6
CHUNK = 10_000
KAFKA_SPEED_TARGET = 2.0  # lakelog records/s / Kafka source records/s, same mode
DELTA_TIME_TARGET = 1.3  # lakelog seconds / Delta seconds, same mode


def distinct_value(i: int, value_bytes: int) -> bytes:
    """Record ``i``'s value with ``--distinct-values``: SHA-512 of ``"{i}/0"``, ``"{i}/1"``, ... concatenated, cut
    to ``value_bytes`` (the same bytes as :func:`kafka_value_sql`)."""
    return b"".join(hashlib.sha512(b"%d/%d" % (i, j)).digest() for j in range(-(-value_bytes // 64)))[:value_bytes]


def kafka_value_sql(value: bytes | None, value_bytes: int) -> str:
    """The Spark SQL of a record's value for the Kafka sink: the one value, or :func:`distinct_value` of ``id``."""
    if value is not None:
        return f"unhex('{value.hex()}')"
    hashes = ", ".join(f"sha2(concat(cast(id AS string), '/{j}'), 512)" for j in range(-(-value_bytes // 64)))
    return f"substring(unhex(concat({hashes})), 1, {value_bytes})"


def produce(url: str, topic: str, records: int, value: bytes | None, value_bytes: int) -> None:
    """``records`` records: keys ``k0``..``k9999`` per 10,000-record chunk, chunk ``c`` to partition ``c % 6``;
    every value ``value``, or with None record ``i``'s value :func:`distinct_value`."""
    from lakelog.client import LakelogClient

    same = pa.array([value] * CHUNK, pa.binary()) if value is not None else None
    keys = pa.array([b"k%d" % i for i in range(CHUNK)], pa.binary())
    with LakelogClient(url) as client:
        client.create_topic(topic, partitions=PARTITIONS)
        sent = 0
        while sent < records:
            n = min(CHUNK, records - sent)
            values = same.slice(0, n) if same is not None else pa.array(
                [distinct_value(i, value_bytes) for i in range(sent, sent + n)], pa.binary())
            client.produce_arrow(topic, (sent // CHUNK) % PARTITIONS,
                                 pa.table({"key": keys.slice(0, n), "value": values}))
            sent += n
        # every reader below reads the Delta tables: wait until the flushers committed every tail
        while any(log["lake_end_offset"] < log["high_watermark"] for log in client.topic_logs(topic)):
            time.sleep(0.2)


def produce_kafka(spark, bootstrap: str, topic: str, records: int, value: bytes | None, value_bytes: int) -> None:
    """The same records as :func:`produce` (keys, values, partition of each chunk), through Spark's Kafka sink."""
    (spark.range(records, numPartitions=2)
     .selectExpr(f"cast(concat('k', cast(id % {CHUNK} AS string)) AS binary) AS key",
                 f"{kafka_value_sql(value, value_bytes)} AS value",
                 f"cast((id div {CHUNK}) % {PARTITIONS} AS int) AS partition")
     .write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("kafka.batch.size", str(512 * 1024)).option("kafka.linger.ms", "20")
     .option("kafka.compression.type", "none").save())


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


#: What a streaming query's Python process imports before it can answer Spark: PySpark's runner module (it
#: starts one Python process per query of a Python data source, ``python_streaming_source_runner``), then
#: the data source's module (unpickling the source imports it).
_RUNNER_IMPORTS = """
import time
t0 = time.perf_counter()
import pyspark.sql.streaming.python_streaming_source_runner
t1 = time.perf_counter()
import lakelog.spark.source
t2 = time.perf_counter()
import pyspark
print(t1 - t0, t2 - t1, pyspark.__file__)
"""


def runner_imports(*, runs: int = 3) -> dict[str, tuple[float, float, str]]:
    """Time the imports of a streaming query's Python process, best of ``runs`` fresh processes, in two setups:

    - ``spark``: ``PYTHONPATH`` as Spark sets it for the processes it starts (``PythonUtils.sparkPythonPath``:
      ``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j zip first; ``SPARK_HOME`` of a pip install is the
      ``pyspark`` package folder), so pyspark is imported from the zip, which holds no bytecode: Python
      compiles every module it imports from it, in every such process;
    - ``site-packages``: the same imports from the installed package (cached bytecode).

    Returns: setup -> (seconds importing the runner module, seconds importing ``lakelog.spark.source``,
    the ``pyspark/__init__.py`` the process imported).
    """
    import subprocess
    import sys

    import pyspark

    home = Path(pyspark.__file__).parent
    lib = home / "python" / "lib"
    zips = [str(lib / "pyspark.zip"), *map(str, sorted(lib.glob("py4j-*.zip")))]
    out = {}
    for setup, path in (("spark", zips), ("site-packages", [])):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if path:
            env["PYTHONPATH"] = os.pathsep.join(path)
        best = None
        for _ in range(runs):
            fields = subprocess.run([sys.executable, "-c", _RUNNER_IMPORTS], env=env, check=True, capture_output=True,
                                    text=True).stdout.split()
            sample = (float(fields[0]), float(fields[1]), fields[2])
            best = sample if best is None or sample[0] + sample[1] < best[0] + best[1] else best
        out[setup] = best
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--distinct-values", action="store_true",
                        help="every record its own value (SHA-512 bytes of its index, incompressible) instead of "
                             "one random value for all (which Parquet stores once per page, as a dictionary)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per reader (best is shown). Default: 3.")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed rounds first (the JVM loads and compiles each reader's classes, Python "
                             "workers start and import). Default: 1.")
    parser.add_argument("--kafka-version", default=KAFKA_VERSION, help=f"Apache Kafka broker. Default: {KAFKA_VERSION}.")
    args = parser.parse_args()

    import pyspark
    from pyspark.sql import functions as F

    from lakelog.client import LakelogClient
    from lakelog.runtime.broker_process import BrokerProcess
    from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port
    from lakelog.spark import session
    from lakelog.spark.source import register

    console.print(f"load average at start (1, 5, 15 min; {os.cpu_count()} CPUs): {load()}")
    data_dir = Path(tempfile.mkdtemp(prefix="lakelog-spark-bench-"))
    zk = ZooKeeperServer(data_dir=data_dir / "zk", client_port=free_port())
    kafka = KafkaBroker(data_dir / "kafka", version=args.kafka_version)
    broker = None
    spark = None
    try:
        zk.start()
        broker = BrokerProcess(zookeeper_connect=zk.connect_string, log_dirs=data_dir / "logs",
                               log_file=data_dir / "broker.log", new_session=True).start()
        url = broker.url
        topic = "bench"
        value = None if args.distinct_values else os.urandom(args.value_bytes)
        values = "distinct values" if args.distinct_values else "one value"
        elapsed, _ = timed(lambda: produce(url, topic, args.records, value, args.value_bytes))
        console.print(f"lakelog: produced {args.records:,} x {args.value_bytes} B ({values}) in {elapsed:.1f} s "
                      "(Arrow produce)")
        with LakelogClient(url) as client:
            uris = [p["table_uri"] for p in client.topic_logs(topic)]
        elapsed, _ = timed(kafka.start)
        kafka.create_topic(topic, PARTITIONS)
        console.print(f"Kafka {args.kafka_version} (KRaft) on {kafka.bootstrap}, pid {kafka.pid}, up in {elapsed:.1f} s")

        kafka_package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
        spark = session(master="local[2]", app_name="lakelog-spark-read-bench",
                        conf={"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2",
                              "spark.jars.packages": kafka_package,
                              # close the Kafka sink's cached producer soon after producing (not at JVM exit,
                              # after the broker stopped, with connection warnings)
                              "spark.kafka.producer.cache.timeout": "5s",
                              "spark.kafka.producer.cache.evictorThreadRunInterval": "5s"})
        register(spark)
        elapsed, _ = timed(lambda: produce_kafka(spark, kafka.bootstrap, topic, args.records, value, args.value_bytes))
        console.print(f"Kafka: produced {args.records:,} x {args.value_bytes} B in {elapsed:.1f} s (Spark's Kafka sink)")
        agg = ["count(*) AS n", "sum(length(value)) AS bytes"]

        def delta_read():
            df = None
            for uri in uris:
                part = spark.read.format("delta").load(uri)
                df = part if df is None else df.unionByName(part)
            return df.selectExpr(*agg).collect()[0]

        def kafka_read():
            return (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                    .option("subscribe", topic).option("startingOffsets", "earliest")
                    .option("endingOffsets", "latest").load().selectExpr(*agg).collect()[0])

        def lakelog_read():
            return (spark.read.format("lakelog").option("lakelog.bootstrap.servers", url)
                    .option("subscribe", topic).load().selectExpr(*agg).collect()[0])

        def stream(df):
            totals = {"n": 0, "bytes": 0}

            def count(batch, batch_id):
                row = batch.selectExpr(*agg).collect()[0]
                totals["n"] += row["n"]
                totals["bytes"] += row["bytes"] or 0

            with tempfile.TemporaryDirectory() as checkpoint:
                q = (df.writeStream.foreachBatch(count).option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
                q.awaitTermination()
                totals["progress"] = q.recentProgress
            return totals

        def delta_stream():
            df = None
            for uri in uris:
                part = spark.readStream.format("delta").load(uri)
                df = part if df is None else df.unionByName(part)
            return stream(df)

        def kafka_stream():
            return stream(spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                          .option("subscribe", topic).option("startingOffsets", "earliest").load())

        def lakelog_stream():
            return stream(spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", url)
                          .option("subscribe", topic).option("startingOffsets", "earliest").load())

        # both topics hold the same records: per partition the same count and sums of the keys' and values' CRC32s
        def digest(df):
            return [tuple(r) for r in df.groupBy("partition").agg(
                F.count("*"), F.sum(F.crc32("key")), F.sum(F.crc32("value"))).orderBy("partition").collect()]

        ours = digest(spark.read.format("lakelog").option("lakelog.bootstrap.servers", url).option("subscribe", topic)
                      .load())
        theirs = digest(spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                        .option("subscribe", topic).option("startingOffsets", "earliest").load())
        assert ours == theirs, ("the topics differ", ours, theirs)
        console.print("the lakelog and Kafka topics hold the same records (count and key/value CRC32 sums per partition)")

        # (name, mode, kind, fn)
        readers = [
            ('spark.read.format("delta"), the 6 partition tables', "batch", "delta", delta_read),
            ('spark.read.format("kafka")', "batch", "kafka", kafka_read),
            ('spark.read.format("lakelog")', "batch", "lakelog", lakelog_read),
            ('readStream.format("delta"), availableNow', "stream", "delta", delta_stream),
            ('readStream.format("kafka"), availableNow', "stream", "kafka", kafka_stream),
            ('readStream.format("lakelog"), availableNow', "stream", "lakelog", lakelog_stream),
        ]
        best: dict[str, float] = {}
        progress: dict[str, list] = {}  # a stream's micro-batches in its best run
        # the readers take turns: a change of the machine's load hits all
        for round_ in range(-args.warmup, args.repeat):
            for name, _, _, fn in readers:
                elapsed, result = timed(fn)
                assert result["n"] == args.records, (name, result)
                assert result["bytes"] == args.records * args.value_bytes, (name, result)
                label = "warm-up" if round_ < 0 else f"round {round_ + 1}"
                console.print(f"  {label:>7}: {name:<52} {elapsed:6.2f} s  (load {load()})")
                if round_ >= 0 and elapsed < best.get(name, float("inf")):
                    best[name] = elapsed
                    if "progress" in result:
                        progress[name] = result["progress"]
        console.print(f"load average at end: {load()}")

        secs = {(mode, kind): best[name] for name, mode, kind, _ in readers}
        table = Table("reader", "seconds", "records/s", "MB/s values", "speed vs Kafka", "time vs Delta", "target",
                      "result", title=f"Spark reads of {args.records:,} x {args.value_bytes} B records ({values}), "
                      f"{PARTITIONS} partitions, local[2], best of {args.repeat}; load average {load()}")
        for name, mode, kind, _ in readers:
            s = best[name]
            speed = secs[(mode, "kafka")] / s
            time_ratio = s / secs[(mode, "delta")]
            target = result = ""
            if kind == "lakelog":
                target = f">= {KAFKA_SPEED_TARGET:.1f}x Kafka, <= {DELTA_TIME_TARGET:.1f}x Delta"
                result = ", ".join(["met" if speed >= KAFKA_SPEED_TARGET else "MISSED",
                                    "met" if time_ratio <= DELTA_TIME_TARGET else "MISSED"])
            table.add_row(name, f"{s:.2f}", f"{args.records / s:,.0f}",
                          f"{args.records * args.value_bytes / s / 1e6:,.1f}", f"{speed:.2f}x",
                          f"{time_ratio:.2f}x", target, result)
        console.print(table)
        console.print("speed vs Kafka = Kafka source's seconds / this reader's (same mode; higher is faster); "
                      "time vs Delta = this reader's seconds / Delta's (same mode; lower is faster)")
        # where a stream's time went: Spark's StreamingQueryProgress.durationMs of its best run, summed over
        # its micro-batches (addBatch = the foreachBatch sink, i.e. the read; the rest is planning/checkpoint)
        for name, batches in progress.items():
            spent: dict[str, int] = {}
            for p in batches:
                for key, ms in (p.durationMs or {}).items():
                    spent[key] = spent.get(key, 0) + ms
            rows = [p.numInputRows for p in batches]
            outside = best[name] * 1000 - spent.get("triggerExecution", 0)
            console.print(f"{name}: {len(batches)} micro-batch(es) of {rows} rows; ms: "
                          + ", ".join(f"{k} {v}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1]))
                          + f"; outside the triggers (query start and stop) {outside:,.0f}")
        # the lakelog stream's time outside its triggers: PySpark's per-query Python process and its imports
        imports = runner_imports()
        spark_setup, site = imports["spark"], imports["site-packages"]
        origin = "pyspark.zip: no bytecode, compiled in every process" if ".zip" in spark_setup[2] else spark_setup[2]
        console.print(
            "a Python data source's streaming query starts a Python process (PySpark's "
            "python_streaming_source_runner); its imports, best of 3 fresh processes: "
            f"pyspark's runner {spark_setup[0]:.2f} s with Spark's PYTHONPATH (from {origin}) vs {site[0]:.2f} s "
            f"from site-packages; lakelog.spark.source {spark_setup[1]:.2f} s. Spark's Kafka source starts no "
            "Python process.")
    finally:
        if spark is not None:
            spark.stop()
        kafka.stop()
        if broker is not None:
            broker.stop()
        zk.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
