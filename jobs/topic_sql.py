"""Spark job: run a SQL query over topic history and print (or save) the result.

Every topic of the cluster is registered as a view with the columns of Spark's Kafka source, read
from the partition Delta tables below each partition's high watermark.

    spark-submit jobs/topic_sql.py --bootstrap-server localhost:8082 "SELECT partition, count(*) FROM orders GROUP BY partition"
    python jobs/topic_sql.py --output data/out/counts "SELECT ..."     # writes a Delta table instead

(``lakelog sql`` is the interactive form of the same thing.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lakelog.cli.common import client_settings
from lakelog.client import LakelogClient
from lakelog.spark import session
from lakelog.spark.sql import register_topics_from_gateway


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("query", help="Spark SQL; topics are tables")
    parser.add_argument("--bootstrap-server", default="localhost:8082", help="gateway(s): host:port[,host:port]")
    parser.add_argument("--output", help="save the result as a Delta table at this path (overwrite)")
    parser.add_argument("--max-rows", type=int, default=100, help="rows to print when not saving")
    parser.add_argument("--command-config", help="a .properties file with the client's credentials and TLS files "
                                                 "(lakelog --command-config); else LAKELOG_USERNAME/PASSWORD, "
                                                 "LAKELOG_TOKEN, LAKELOG_SSL_*")
    args = parser.parse_args(argv)
    options = client_settings(command_config_file=Path(args.command_config) if args.command_config else None)
    spark = session(app_name="lakelog-topic-sql")
    try:
        with LakelogClient(args.bootstrap_server, **options) as client:
            register_topics_from_gateway(spark, client)
        df = spark.sql(args.query)
        if args.output:
            df.write.format("delta").mode("overwrite").save(args.output)
            print(f"wrote {spark.read.format('delta').load(args.output).count()} rows to {args.output}")
        else:
            df.show(args.max_rows, truncate=False)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
