"""A Spark session that never imports lakelog: plain PySpark with Delta (delta-spark's pip helper) and a
Hive metastore, reading one table of it.

    python metastore_reader.py CONF_JSON TABLE

CONF_JSON: the metastore's Spark settings (``{"spark.sql.catalogImplementation": "hive", ...}``). Prints
``{"tables": [...], "rows": [[topic, partition, offset, value], ...], "columns": [...]}`` as JSON on its
last line: the tables of TABLE's schema and TABLE's rows.
"""

from __future__ import annotations

import json
import sys


def main(conf_json: str, table: str) -> int:
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").appName("metastore-reader")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    for key, value in json.loads(conf_json).items():
        builder = builder.config(key, value)
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    try:
        schema = table.split(".")[0]
        tables = sorted(t.name for t in spark.catalog.listTables(schema))
        df = spark.table(table)
        rows = [[r["topic"], r["partition"], r["offset"], bytes(r["value"]).decode()] for r in df.collect()]
        print(json.dumps({"tables": tables, "rows": rows, "columns": df.columns}))
    finally:
        spark.stop()
    assert "lakelog" not in sys.modules, "the reader imported lakelog"
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
