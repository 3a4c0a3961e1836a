"""``lakelog metastore sync``: every topic as a view ``lakelog.<topic>`` in a Hive metastore.

::

    lakelog metastore sync --data-dir data                       # Spark's embedded metastore (Derby) under data/
    lakelog metastore sync --metastore-uris thrift://hms:9083    # an external Hive metastore

Run it after topics are created, given partitions or deleted (a cron or the deployment's hook): the
views follow the cluster (:func:`lakelog.spark.metastore.sync_metastore`). A Spark session with the same
metastore then reads ``spark.table("lakelog.orders")`` without lakelog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail, gateway_client

metastore_app = typer.Typer(help="Register topics in a Hive metastore (Spark's embedded one or an external one).",
                            no_args_is_help=True)


@metastore_app.command("sync")
def sync(
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
    data_dir: Annotated[Optional[Path], typer.Option(
        help="Data dir of Spark's embedded metastore (Derby in DATA_DIR/metastore).")] = None,
    metastore_uris: Annotated[Optional[str], typer.Option(
        "--metastore-uris", envvar="LAKELOG_HIVE_METASTORE_URIS",
        help="hive.metastore.uris of an external Hive metastore (thrift://host:9083); wins over --data-dir.")] = None,
) -> None:
    """Make the metastore's lakelog schema match the cluster's topics: a view per topic, none of a deleted one."""
    from lakelog.spark import session
    from lakelog.spark.metastore import metastore_conf, sync_metastore

    if data_dir is None and not metastore_uris:
        fail("give --data-dir (Spark's embedded metastore under it) or --metastore-uris (an external one)")
    spark = session(app_name="lakelog-metastore-sync",
                    conf=metastore_conf(data_dir=data_dir, metastore_uris=metastore_uris))
    try:
        with gateway_client(bootstrap_server) as client:
            done = sync_metastore(spark, client)
    finally:
        spark.stop()
    console.print(f"registered {len(done.registered)} topics: {', '.join(done.registered) or '-'}; "
                  f"dropped {len(done.dropped)}: {', '.join(done.dropped) or '-'}")
    for topic in done.skipped:
        console.print(f"[yellow]skipped {topic}: another topic has its view name[/yellow]")
