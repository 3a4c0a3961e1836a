"""Spark job: OPTIMIZE, VACUUM or compact a topic's partition tables, each under the partition's committer lease.

    spark-submit jobs/maintenance.py optimize --topic orders --bootstrap-server localhost:8082 --zookeeper-connect localhost:2181
    spark-submit jobs/maintenance.py optimize --topic orders --zorder-by key
    python jobs/maintenance.py vacuum --topic orders --partition 0
    spark-submit jobs/maintenance.py compact --topic customers      # cleanup.policy=compact: latest per key

(``lakelog job optimize|vacuum|compact`` is the same thing; see :mod:`lakelog.spark.maintenance` for what each does.)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from lakelog.cli.common import client_settings
from lakelog.spark.maintenance import run_from_gateway


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["optimize", "vacuum", "compact"])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, action="append", help="a partition (repeatable); default: all")
    parser.add_argument("--zorder-by", choices=["key", "timestamp"], help="optimize: Delta's ZORDER BY this column")
    parser.add_argument("--target-file-mib", type=int, default=64, help="optimize, compact: MiB per written file")
    parser.add_argument("--bootstrap-server", default="localhost:8082", help="gateway(s): host:port[,host:port]")
    parser.add_argument("--zookeeper-connect", default=os.environ.get("LAKELOG_ZOOKEEPER_CONNECT", "127.0.0.1:2181"),
                        help="the cluster's zookeeper.connect (host:port[/chroot]); env LAKELOG_ZOOKEEPER_CONNECT")
    parser.add_argument("--command-config", help="a .properties file with the client's credentials and TLS files "
                                                 "(lakelog --command-config); else LAKELOG_USERNAME/PASSWORD, "
                                                 "LAKELOG_TOKEN, LAKELOG_SSL_*")
    args = parser.parse_args(argv)
    options = client_settings(command_config_file=Path(args.command_config) if args.command_config else None)
    for r in run_from_gateway(args.kind, bootstrap_server=args.bootstrap_server, client_options=options,
                              zookeeper_connect=args.zookeeper_connect, topic=args.topic, partitions=args.partition,
                              zorder_by=args.zorder_by, target_file_bytes=args.target_file_mib * 1024 * 1024):
        print(r.describe())


if __name__ == "__main__":
    main()
