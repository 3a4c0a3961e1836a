"""Exactly-once streaming pipeline: flights topic -> delays per carrier and day, in a Delta table.

    python jobs/flight_delays.py --bootstrap-server localhost:8082 --output data/flight_delays \\
        --checkpoint data/checkpoints/flight_delays [--group flight-delays] [--available-now]

Reads topic ``flights`` with ``spark.readStream.format("lakelog")`` (group ``flight-delays``: the
source commits the group's offsets as each micro-batch commits, so ``lakelog groups describe``
shows the job's lag), takes each flight's typed value (``valueFormat=schema`` on the demo's schema'd
topic; JSON values are parsed otherwise), aggregates each micro-batch per
carrier and day (flights, delay sums and counts) and appends the result to the Delta table at
``--output`` through ``foreachBatch`` with Delta's idempotent writes: ``txnAppId`` = :data:`APP_ID`,
``txnVersion`` = the batch id. A batch replayed after a crash is skipped by Delta, so the table
holds each record's contribution exactly once. The output table and the checkpoint belong
together: batch ids restart at 0 with a new checkpoint, and Delta would skip them all, so
:func:`start` refuses an output table that already has this pipeline's writes without its checkpoint. The view ``flight_delays`` (see :func:`delays_view`)
sums the per-batch rows into means per carrier and day.
"""

from __future__ import annotations

import argparse
import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

FLIGHT_SCHEMA = ("year INT, month INT, day INT, dep_delay DOUBLE, arr_delay DOUBLE, carrier STRING, "
                 "origin STRING, dest STRING, distance DOUBLE")

#: Stable id of this pipeline's writes in the output table (Delta ``txnAppId``).
APP_ID = "lakelog-flight-delays"

log = logging.getLogger("flight_delays")


def parse(records: DataFrame) -> DataFrame:
    """Kafka-shaped records -> one typed row per flight: ``value`` is the typed flight already when read with
    ``valueFormat=schema`` (a schema'd topic), else JSON bytes."""
    if isinstance(records.schema["value"].dataType, StructType):
        flights = records.select("value.*")
    else:
        flights = records.select(F.from_json(F.col("value").cast("string"), FLIGHT_SCHEMA).alias("f")).select("f.*")
    return flights.withColumn("date", F.make_date("year", "month", "day"))


def aggregate(flights: DataFrame) -> DataFrame:
    """Per carrier and day: flights, and sum/count of departure and arrival delays (nulls excluded)."""
    return flights.groupBy("carrier", "date").agg(
        F.count(F.lit(1)).alias("flights"),
        F.sum("dep_delay").alias("dep_delay_sum"), F.count("dep_delay").alias("dep_delay_count"),
        F.sum("arr_delay").alias("arr_delay_sum"), F.count("arr_delay").alias("arr_delay_count"),
    )


def write_batch(output: str):
    """foreachBatch function: append the batch's aggregate once, whatever the replays."""
    def write(batch: DataFrame, batch_id: int) -> None:
        (aggregate(parse(batch)).withColumn("batch_id", F.lit(batch_id))
         .write.format("delta").mode("append")
         .option("txnAppId", APP_ID).option("txnVersion", batch_id)
         .save(output))
    return write


def delays_view(spark: SparkSession, output: str) -> DataFrame:
    """The pipeline's result: per carrier and day, flights and mean delays (minutes)."""
    return (spark.read.format("delta").load(output).groupBy("carrier", "date").agg(
        F.sum("flights").alias("flights"),
        F.sum("dep_delay_sum").alias("dep_delay_sum"), F.sum("dep_delay_count").alias("dep_delay_count"),
        F.sum("arr_delay_sum").alias("arr_delay_sum"), F.sum("arr_delay_count").alias("arr_delay_count"))
        .withColumn("mean_dep_delay", F.col("dep_delay_sum") / F.col("dep_delay_count"))
        .withColumn("mean_arr_delay", F.col("arr_delay_sum") / F.col("arr_delay_count")))


def start(spark: SparkSession, *, bootstrap_servers: str, output: str, checkpoint: str, topic: str = "flights",
          group_id: str = "flight-delays", max_offsets_per_trigger: int | None = None,
          available_now: bool = False, trigger_interval: str = "2 seconds",
          source_options: dict[str, str] | None = None):
    """Start the streaming query; returns the :class:`StreamingQuery`.

    Args:
        source_options: more options of the lakelog source, e.g. ``lakelog.auth.username``,
            ``lakelog.auth.password`` and ``lakelog.ssl.cafile`` for a secure cluster. Default: None.
    """
    from pathlib import Path

    from lakelog.spark.source import register

    # Spark writes a batch's offsets to the checkpoint before it runs the batch, so output without any
    # planned batch in the checkpoint means the checkpoint is not this output's (a crash after the
    # write but before the batch's commit still has its offsets: Spark replays it, Delta skips it).
    planned = Path(checkpoint) / "offsets"
    if (Path(output) / "_delta_log").exists() and not (planned.exists() and any(planned.iterdir())):
        raise ValueError(f"{output} already holds this pipeline's output but {checkpoint} has no planned "
                         "batch: a new checkpoint restarts batch ids at 0 and Delta would skip them as "
                         "replays. Remove the output too, or use its checkpoint.")
    register(spark)
    reader = (spark.readStream.format("lakelog")
              .option("lakelog.bootstrap.servers", bootstrap_servers)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("group.id", group_id))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    for key, value in (source_options or {}).items():
        reader = reader.option(key, value)
    writer = (reader.load().writeStream.foreachBatch(write_batch(output))
              .option("checkpointLocation", checkpoint).queryName("flight_delays"))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=trigger_interval)
    return writer.start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default="localhost:8082")
    parser.add_argument("--topic", default="flights")
    parser.add_argument("--group", default="flight-delays")
    parser.add_argument("--output", default="data/flight_delays")
    parser.add_argument("--checkpoint", default="data/checkpoints/flight_delays")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--master", default=None, help="spark.master (default: lakelog's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from lakelog.spark import session

    spark = session(master=args.master, app_name="lakelog-flight-delays",
                    conf={"spark.sql.shuffle.partitions": "4"})
    query = start(spark, bootstrap_servers=args.bootstrap_server, output=args.output, checkpoint=args.checkpoint,
                  topic=args.topic, group_id=args.group, max_offsets_per_trigger=args.max_offsets_per_trigger,
                  available_now=args.available_now)
    log.info("query %s started (checkpoint %s)", query.id, args.checkpoint)
    query.awaitTermination()


if __name__ == "__main__":
    main()
