"""Spark read throughput: ``format("lakelog")`` (batch and streaming) beside raw ``format("delta")``.

    .venv/bin/python bench/spark_read.py [--records 2000000] [--value-bytes 100]

Starts its own ZooKeeper and broker, produces ``--records`` records of ``--value-bytes`` into a
6-partition topic through Arrow produce, then times, in one ``local[2]`` SparkSession:

- ``spark.read.format("delta")`` over the six partition tables (the upper bound: Delta's own reader);
- ``spark.read.format("lakelog")`` (batch, the Python data source reading the same tables);
- ``spark.readStream.format("delta")`` over the same tables and ``spark.readStream.format("lakelog")``,
  both with ``trigger(availableNow=True)`` into the same ``foreachBatch`` sink.

Each read aggregates every row (``count`` and ``sum(length(value))``) so all values are materialised.
Prints records/s and the lakelog/Delta time ratio, batch against batch and stream against stream\n(target: the lakelog source within 1.5x of Delta).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from rich.console import Console
from rich.table import Table

console = Console(width=120)
PARTITIONS = 6


def produce(url: str, topic: str, records: int, value_bytes: int) -> None:
    from lakelog.client import LakelogClient

    value = pa.array([os.urandom(value_bytes)] * 10_000, pa.binary())
    keys = pa.array([b"k%d" % i for i in range(10_000)], pa.binary())
    with LakelogClient(url) as client:
        client.create_topic(topic, partitions=PARTITIONS)
        sent = 0
        while sent < records:
            n = min(10_000, records - sent)
            client.produce_arrow(topic, (sent // 10_000) % PARTITIONS,
                                 pa.table({"key": keys.slice(0, n), "value": value.slice(0, n)}))
            sent += n
        # every reader below reads the Delta tables: wait until the flushers committed every tail
        while any(log["lake_end_offset"] < log["high_watermark"] for log in client.topic_logs(topic)):
            time.sleep(0.2)


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per reader (best is shown). Default: 3.")
    args = parser.parse_args()

    from lakelog.client import LakelogClient
    from lakelog.broker_process import BrokerProcess
    from lakelog.replication.zookeeper_server import ZooKeeperServer, free_port
    from lakelog.spark import session
    from lakelog.spark.source import register

    data_dir = Path(tempfile.mkdtemp(prefix="lakelog-spark-bench-"))
    zk = ZooKeeperServer(data_dir=data_dir / "zk", client_port=free_port())
    broker = None
    spark = None
    try:
        zk.start()
        broker = BrokerProcess(zookeeper_connect=zk.connect_string, log_dirs=data_dir / "logs",
                               log_file=data_dir / "broker.log", new_session=True).start()
        url = broker.url
        topic = "bench"
        elapsed, _ = timed(lambda: produce(url, topic, args.records, args.value_bytes))
        console.print(f"produced {args.records:,} x {args.value_bytes} B in {elapsed:.1f} s (Arrow produce)")
        with LakelogClient(url) as client:
            uris = [p["table_uri"] for p in client.topic_logs(topic)]
        spark = session(master="local[2]", app_name="lakelog-spark-read-bench",
                        conf={"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2"})
        register(spark)
        agg = ["count(*) AS n", "sum(length(value)) AS bytes"]

        def delta_read():
            df = None
            for uri in uris:
                part = spark.read.format("delta").load(uri)
                df = part if df is None else df.unionByName(part)
            return df.selectExpr(*agg).collect()[0]

        def lakelog_read():
            return (spark.read.format("lakelog").option("lakelog.bootstrap.servers", url)
                    .option("subscribe", topic).load().selectExpr(*agg).collect()[0])

        def stream(df):
            totals = {"n": 0}

            def count(batch, batch_id):
                totals["n"] += batch.selectExpr(*agg).collect()[0]["n"]

            with tempfile.TemporaryDirectory() as checkpoint:
                q = (df.writeStream.foreachBatch(count).option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
                q.awaitTermination()
            return {"n": totals["n"]}

        def delta_stream():
            df = None
            for uri in uris:
                part = spark.readStream.format("delta").load(uri)
                df = part if df is None else df.unionByName(part)
            return stream(df)

        def lakelog_stream():
            return stream(spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", url)
                          .option("subscribe", topic).option("startingOffsets", "earliest").load())

        rows = []
        readers = (("delta batch (raw tables)", delta_read), ("lakelog batch", lakelog_read),
                   ("delta stream (raw tables, availableNow)", delta_stream),
                   ("lakelog stream (availableNow)", lakelog_stream))
        for name, fn in readers:
            best = None
            for _ in range(args.repeat):
                elapsed, result = timed(fn)
                assert result["n"] == args.records, (name, result)
                best = elapsed if best is None else min(best, elapsed)
            rows.append((name, best))
            console.print(f"  {name:<32} {args.records / best:>12,.0f} records/s ({best:.2f} s)")
        base = dict(rows)
        table = Table("reader", "seconds", "records/s", "MB/s values", "time vs delta", "target",
                      title=f"Spark reads of {args.records:,} x {args.value_bytes} B records, 6 partitions, local[2]")
        for name, secs in rows:
            # batch against Delta's batch read; stream against Delta's stream with the same sink
            kind = "stream" if "stream" in name else "batch"
            ratio = secs / base[next(n for n in base if n.startswith(f"delta {kind}"))]
            target = "" if name.startswith("delta") else ("met" if ratio <= 1.5 else "MISSED") + " (<= 1.5x)"
            table.add_row(name, f"{secs:.2f}", f"{args.records / secs:,.0f}",
                          f"{args.records * args.value_bytes / secs / 1e6:,.1f}", f"{ratio:.2f}x", target)
        console.print(table)
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
        zk.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
