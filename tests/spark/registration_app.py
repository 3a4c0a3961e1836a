"""Reads a topic with ``spark.read.format("lakelog")`` in a fresh process and prints the rows as JSON:

    python tests/spark/registration_app.py session|plain URL TOPIC

``session``: the SparkSession is :func:`lakelog.spark.session`'s, nothing else is called.
``plain``: a plain ``SparkSession.builder`` session in a process that never imports lakelog, so
``format("lakelog")`` resolves only through Spark's automatic registration of Python data sources
(without filter pushdown); then :func:`lakelog.spark.register` is called and the filtered read repeated
(with pushdown).
Prints ``{"rows": [[partition, offset, value], ...], "filtered": [...], "loaded_lakelog": bool,
"pushdown": conf value, ...}`` on the last line, or exits 1 with the error.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    mode, url, topic = argv
    if mode == "session":
        from lakelog.spark import session

        spark = session(master="local[1]", app_name="lakelog-registration-test",
                        conf={"spark.driver.memory": "512m", "spark.ui.enabled": "false"})
    else:
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[1]").appName("lakelog-registration-test")
                 .config("spark.driver.memory", "512m").config("spark.ui.enabled", "false").getOrCreate())
    def read(where: str = "true") -> list:
        df = (spark.read.format("lakelog").option("lakelog.bootstrap.servers", url).option("subscribe", topic)
              .load().where(where).selectExpr("partition", "offset", "CAST(value AS STRING) AS value"))
        return sorted([r.partition, r.offset, r.value] for r in df.collect())

    out = {}
    try:
        out["rows"] = read()
        out["filtered"] = read("partition = 1 AND offset >= 1 AND timestamp > TIMESTAMP '2000-01-01 00:00:00 UTC'")
        out["pushdown"] = spark.conf.get("spark.sql.python.filterPushdown.enabled", None)
        out["loaded_lakelog"] = "lakelog" in sys.modules
        if mode == "plain":
            from lakelog.spark import register

            register(spark)
            register(spark)  # once per session
            out["registered_filtered"] = read("partition = 1 AND offset >= 1")
            out["registered_pushdown"] = spark.conf.get("spark.sql.python.filterPushdown.enabled")
    except Exception as e:  # noqa: BLE001 - reported to the test
        print(f"read failed: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
