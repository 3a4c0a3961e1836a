"""A streaming query copying one lakelog topic to another with the exactly-once sink, as a process a test can
SIGKILL at any point and start again from the same checkpoint:

    python -m tests.spark.sink_query_app URL INPUT OUTPUT CHECKPOINT MAX_OFFSETS_PER_TRIGGER

``spark.readStream.format("lakelog")`` reads INPUT (read_committed) from the earliest offsets in micro-batches
of at most MAX_OFFSETS_PER_TRIGGER records, ``writeStream.format("lakelog")`` writes each record's key and
value to OUTPUT (the partition its key hashes to). The process exits 0 once a micro-batch ending at INPUT's
end offsets (as they were at its start) has completed: everything INPUT held is written and committed. (A
processing-time trigger, so that the query keeps running between the kills the test makes.)
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    url, source_topic, sink_topic, checkpoint, max_offsets = argv
    from pyspark.sql import SparkSession

    from lakelog.client import LakelogClient
    from lakelog.spark import source

    # a plain session (no Delta: the source reads the partition tables with delta-rs), so a restart is quick
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("lakelog-sink-kill-test")
             .config("spark.driver.memory", "512m").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false").config("spark.default.parallelism", "2").getOrCreate())
    source.register(spark)
    with LakelogClient(url) as client:
        partitions = len(client.admin.describe_topic(source_topic)["partitions"])
        target = {source_topic: {str(p): client.partition_offsets(source_topic, p)["end_offset"]
                                 for p in range(partitions)}}
    query = (spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", url)
             .option("subscribe", source_topic).option("startingOffsets", "earliest")
             .option("isolation.level", "read_committed").option("maxOffsetsPerTrigger", max_offsets).load()
             .selectExpr("key", "value")
             .writeStream.format("lakelog").option("lakelog.bootstrap.servers", url).option("topic", sink_topic)
             .option("transaction.timeout.ms", "15000")
             .option("checkpointLocation", checkpoint).start())
    while query.isActive:
        progress = query.lastProgress
        end = progress and progress["sources"][0]["endOffset"]
        if (json.loads(end) if isinstance(end, str) else end) == target:
            break
        time.sleep(0.1)
    failure = query.exception()
    query.stop()
    spark.stop()
    if failure is not None:
        print(f"query failed: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
