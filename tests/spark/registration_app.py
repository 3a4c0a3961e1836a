"""Reads a topic with ``spark.read.format("lakelog")`` in a fresh process and prints the rows as JSON:

    python tests/spark/registration_app.py session|plain URL TOPIC

``session``: the SparkSession is :func:`lakelog.spark.session`'s, nothing else is called.
``plain``: a plain ``SparkSession.builder`` session in a process that never imports lakelog, so
``format("lakelog")`` resolves only through Spark's automatic registration of Python data sources.
Prints ``{"rows": [[partition, offset, value], ...]}`` on the last line, or exits 1 with the error.
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
    try:
        df = (spark.read.format("lakelog").option("lakelog.bootstrap.servers", url).option("subscribe", topic)
              .load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value"))
        rows = sorted([r.partition, r.offset, r.value] for r in df.collect())
    except Exception as e:  # noqa: BLE001 - reported to the test
        print(f"read failed: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps({"rows": rows, "loaded_lakelog": "lakelog" in sys.modules}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
