"""``lakelog metastore sync``: every topic as a view ``lakelog.<topic>`` in a Hive metastore.

::

    lakelog metastore sync --data-dir data                       # Spark's embedded metastore (Derby) under data/
    lakelog metastore sync --metastore-uris thrift://hms:9083    # an external Hive metastore

Run it after topics are created, given partitions or deleted (a cron or the deployment's hook), or once
with ``--follow``, which watches the cluster's topics and syncs after each change: the views follow the
cluster (:func:`lakelog.spark.metastore.sync_metastore`). A Spark session with the same metastore then
reads ``spark.table("lakelog.orders")`` without lakelog.
"""

from __future__ import annotations

import subprocess
import sys
import time
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
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep running: sync now and again after every topic created, given partitions or "
                         "deleted (checked every --interval-s), until Ctrl-C / SIGTERM.")] = False,
    interval_s: Annotated[float, typer.Option(
        "--interval-s", min=0.1, help="With --follow: seconds between two looks at the cluster's topics.")] = 5.0,
) -> None:
    """Make the metastore's lakelog schema match the cluster's topics: a view per topic, none of a deleted one.

    On an S3 lake (lake.uri) set the broker's LAKELOG_LAKE_STORAGE_* variables: the sync then reads the
    tables through Hadoop's S3A filesystem (the hadoop-aws jar, fetched from Maven Central once) and their
    typed columns through delta-rs."""
    from lakelog.spark import session
    from lakelog.spark.metastore import lake_storage_s3a_conf, metastore_conf, sync_metastore
    from lakelog.spark.source.lake_storage import lake_storage_option, lake_storage_options_from_env

    if data_dir is None and not metastore_uris:
        fail("give --data-dir (Spark's embedded metastore under it) or --metastore-uris (an external one)")
    if follow:
        _follow(bootstrap_server, data_dir=data_dir, metastore_uris=metastore_uris, interval_s=interval_s)
        return
    storage = lake_storage_option({k.lower(): v for k, v in lake_storage_options_from_env().items()}).options
    conf = metastore_conf(data_dir=data_dir, metastore_uris=metastore_uris)
    if storage:
        conf.update(lake_storage_s3a_conf(storage))
    spark = session(app_name="lakelog-metastore-sync", conf=conf)
    try:
        with gateway_client(bootstrap_server) as client:
            done = sync_metastore(spark, client, storage_options=storage or None)
    finally:
        spark.stop()
    console.print(f"registered {len(done.registered)} topics: {', '.join(done.registered) or '-'}; "
                  f"dropped {len(done.dropped)}: {', '.join(done.dropped) or '-'}")
    for topic in done.skipped:
        console.print(f"[yellow]skipped {topic}: another topic has its view name[/yellow]")


def _topic_shapes(bootstrap_server: str) -> dict[str, int]:
    """``{topic: partition count}`` of the cluster (what the views depend on)."""
    with gateway_client(bootstrap_server) as client:
        return {topic: len(client.admin.describe_topic(topic)["partitions"]) for topic in client.admin.list_topics()}


def _follow(bootstrap_server: str, *, data_dir: Optional[Path], metastore_uris: Optional[str],
            interval_s: float) -> None:
    """``--follow``: a sync at start and after each change of the topics' names or partition counts.

    Each sync is a ``lakelog metastore sync`` child process (its own Spark JVM, stopped by its exit): an
    embedded Derby metastore admits one JVM at a time, so no JVM holds it between syncs and other
    sessions read it meanwhile. A failed sync is reported and tried again at the next look.
    """
    from lakelog.cli.processes import _stop_on_signals

    command = [sys.executable, "-m", "lakelog.cli", "metastore", "sync", "-b", bootstrap_server]
    command += ["--metastore-uris", metastore_uris] if metastore_uris else ["--data-dir", str(data_dir)]
    synced: dict[str, int] | None = None
    with _stop_on_signals():
        while True:
            try:
                shapes = _topic_shapes(bootstrap_server)
            except typer.Exit:
                shapes = synced  # the cluster unreachable for now: look again later
            if shapes is not None and shapes != synced:
                done = subprocess.run(command, capture_output=True, text=True)
                console.print(done.stdout.strip() or done.stderr.strip()[-2000:], markup=False, highlight=False)
                if done.returncode == 0:
                    synced = shapes
            time.sleep(interval_s)
