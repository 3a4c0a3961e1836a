"""A lakelog Spark job for a Spark standalone cluster that reads a topic of an S3 lake directly:

    spark-submit --master spark://HOST:PORT --conf spark.pyspark.python=PYTHON tests/spark/s3_lake_app.py \\
        BOOTSTRAP TOPIC OPTIONS_JSON

``spark.read.format("lakelog")`` of TOPIC with ``lakelog.read.mode=direct`` and the read options of
OPTIONS_JSON (the ``lakelog.lake.storage.*`` ones), so the executors open the partitions' ``s3://`` tables
with delta-rs. Prints ``{"master", "rows", "executor"}`` as JSON on its last line (rows as
``[partition, offset, value]``; executor: a task's working directory), or exits 1 with the error.
"""

from __future__ import annotations

import json
import os
import sys


def where_executors_run(_: int) -> str:
    return os.getcwd()


def main(argv: list[str]) -> int:
    bootstrap, topic, options = argv
    from lakelog.spark import session

    spark = session(app_name="lakelog-s3-lake-test")
    try:
        df = (spark.read.format("lakelog").option("lakelog.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("lakelog.read.mode", "direct").options(**json.loads(options)).load())
        rows = sorted(list(r) for r in df.selectExpr("partition", "offset", "CAST(value AS STRING)").collect())
        executor = spark.sparkContext.parallelize([0], 1).map(where_executors_run).collect()[0]
        out = {"master": spark.sparkContext.master, "rows": rows, "executor": executor}
    except Exception as e:  # noqa: BLE001 - reported to the test
        print(f"s3 lake job failed: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
