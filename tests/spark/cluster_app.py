"""A lakelog Spark job for a Spark standalone cluster, started by ``spark-submit`` (the README's way):

    spark-submit --master spark://HOST:PORT --packages io.delta:delta-spark_4.2_2.13:4.4.0 \\
        --conf spark.pyspark.python=PYTHON tests/spark/cluster_app.py BOOTSTRAP INPUT OUTPUT WORKDIR

With the SparkSession of :func:`lakelog.spark.session` (which keeps ``spark-submit``'s master), it
produces three keyed records to each of INPUT's two partitions through the gateway BOOTSTRAP, then, all
reads with ``lakelog.read.mode=broker``:

- ``spark.read.format("lakelog")`` of INPUT (batch);
- ``spark.readStream.format("lakelog")`` of INPUT with ``trigger(availableNow=True)`` into a memory sink;
- ``df.write.format("lakelog")`` of the batch read's keys and values to OUTPUT (the sink);

and, to show where the work ran: one task's working directory and the file ``lakelog`` was imported from
in the executor's Python worker, and a Delta table written and read by the executors (Delta's jars
reached them; read back with delta-rs). Prints ``{"master", "produced", "batch", "stream", "executor", "delta_rows"}`` as JSON on
its last line (rows as ``[partition, offset, key, value]``), or exits 1 with the error.
"""

from __future__ import annotations

import json
import os
import sys


def produce(bootstrap: str, topic: str) -> list[list]:
    """Three records with keys in each of ``topic``'s two partitions; returns them as rows."""
    import pyarrow as pa

    from lakelog.client import LakelogClient

    rows = []
    with LakelogClient(bootstrap) as client:
        for p in range(2):
            keys, values = [f"k{p}-{i}" for i in range(3)], [f"v{p}-{i}" for i in range(3)]
            client.produce_arrow(topic, p, pa.table({"key": [k.encode() for k in keys],
                                                     "value": [v.encode() for v in values]}))
            rows += [[p, i, k, v] for i, (k, v) in enumerate(zip(keys, values))]
    return rows


def where_executors_run(_: int) -> list[str]:
    """Runs in an executor's Python worker: its working directory and where ``lakelog`` comes from."""
    import lakelog.spark.source

    return [os.getcwd(), lakelog.spark.source.__file__]


def main(argv: list[str]) -> int:
    bootstrap, source_topic, sink_topic, workdir = argv
    from deltalake import DeltaTable

    from lakelog.spark import session

    spark = session(app_name="lakelog-cluster-test", conf={"spark.sql.shuffle.partitions": "2"})
    try:
        produced = produce(bootstrap, source_topic)
        columns = ["partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"]

        def reader(stream):
            return (stream.format("lakelog").option("lakelog.bootstrap.servers", bootstrap)
                    .option("lakelog.read.mode", "broker").option("subscribe", source_topic)
                    .option("startingOffsets", "earliest"))

        batch_df = reader(spark.read).load()
        batch = sorted(list(r) for r in batch_df.selectExpr(*columns).collect())

        query = (reader(spark.readStream).load().selectExpr(*columns)
                 .writeStream.format("memory").queryName("cluster_stream").trigger(availableNow=True)
                 .option("checkpointLocation", os.path.join(workdir, "stream-checkpoint")).start())
        query.awaitTermination()
        stream = sorted(list(r) for r in spark.sql("SELECT * FROM cluster_stream").collect())

        # the sink always produces through the gateway (lakelog.read.mode is a read option)
        (batch_df.selectExpr("key", "value").write.format("lakelog").mode("append")
         .option("lakelog.bootstrap.servers", bootstrap).option("topic", sink_topic).save())

        executor = spark.sparkContext.parallelize([0], 1).map(where_executors_run).collect()[0]
        # the executor writes the files with Delta's classes (its commit protocol), so needs Delta's jars;
        # read back with delta-rs (a Spark read of a new table replays its log in a few more jobs)
        delta_path = os.path.join(workdir, "delta-probe")
        spark.range(3).write.format("delta").save(delta_path)
        delta_rows = DeltaTable(delta_path).to_pyarrow_table().num_rows
        out = {"master": spark.sparkContext.master, "produced": produced, "batch": batch, "stream": stream,
               "executor": executor, "delta_rows": delta_rows}
    except Exception as e:  # noqa: BLE001 - reported to the test
        print(f"cluster job failed: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
