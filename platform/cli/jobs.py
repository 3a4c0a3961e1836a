"""``lakelog job optimize|vacuum|compact``: Spark maintenance jobs on a topic's tables, under committer leases.

The same jobs run with ``spark-submit jobs/maintenance.py``; what they do is in :mod:`lakelog.spark.maintenance`.
"""

from __future__ import annotations

import enum
from typing import Annotated, Optional

import typer

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail

job_app = typer.Typer(help="Spark maintenance jobs on topic tables (OPTIMIZE, VACUUM, log compaction), each under the partition's "
                           "committer lease, which the brokers honour.", no_args_is_help=True)


class ZOrderBy(str, enum.Enum):
    """Columns ``--zorder-by`` takes."""
    key = "key"
    timestamp = "timestamp"


TopicOpt = Annotated[str, typer.Option("--topic", "-t", help="The topic.")]
PartitionOpt = Annotated[Optional[list[int]], typer.Option("--partition", "-p", help="A partition (repeatable). "
                                                                                      "Default: all.")]
ZooKeeperOpt = Annotated[str, typer.Option("--zookeeper-connect", envvar="LAKELOG_ZOOKEEPER_CONNECT",
                                           help="The cluster's zookeeper.connect: host:port\\[/chroot] "
                                                "(the committer leases live there).")]
DEFAULT_ZOOKEEPER = "127.0.0.1:2181"
LeaseWaitOpt = Annotated[float, typer.Option(help="Seconds to wait for a lease another job holds.")]


def _run(kind: str, **kwargs) -> None:
    from lakelog.cli.common import client_settings
    from lakelog.errors import LakelogError
    from lakelog.spark.maintenance import run_from_gateway

    try:
        results = run_from_gateway(kind, client_options=client_settings(), **kwargs)
    except (LakelogError, ValueError) as e:
        fail(str(e))
    for r in results:
        console.print(r.describe())


@job_app.command("optimize")
def job_optimize(
    topic: TopicOpt,
    partition: PartitionOpt = None,
    zorder_by: Annotated[Optional[ZOrderBy], typer.Option(help="Delta's OPTIMIZE ZORDER BY this column instead "
                                                              "of merging small files in offset order.")] = None,
    target_file_mib: Annotated[int, typer.Option(min=1, help="MiB per merged file.")] = 64,
    lease_wait_s: LeaseWaitOpt = 300.0,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
    zookeeper_connect: ZooKeeperOpt = DEFAULT_ZOOKEEPER,
) -> None:
    """Merge each partition table's runs of small files in offset order (or ZORDER BY key or timestamp)."""
    _run("optimize", bootstrap_server=bootstrap_server, zookeeper_connect=zookeeper_connect, topic=topic,
         partitions=partition, zorder_by=None if zorder_by is None else zorder_by.value,
         target_file_bytes=target_file_mib * 1024 * 1024, lease_wait_s=lease_wait_s)


@job_app.command("vacuum")
def job_vacuum(
    topic: TopicOpt,
    partition: PartitionOpt = None,
    lease_wait_s: LeaseWaitOpt = 300.0,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
    zookeeper_connect: ZooKeeperOpt = DEFAULT_ZOOKEEPER,
) -> None:
    """Delete the files each partition table removed longer ago than its lake.vacuum.retention.ms."""
    _run("vacuum", bootstrap_server=bootstrap_server, zookeeper_connect=zookeeper_connect, topic=topic,
         partitions=partition, lease_wait_s=lease_wait_s)


@job_app.command("compact")
def job_compact(
    topic: TopicOpt,
    partition: PartitionOpt = None,
    target_file_mib: Annotated[int, typer.Option(min=1, help="MiB per written file.")] = 64,
    lease_wait_s: LeaseWaitOpt = 300.0,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
    zookeeper_connect: ZooKeeperOpt = DEFAULT_ZOOKEEPER,
) -> None:
    """Log compaction by Spark: keep the latest record per key of each partition (cleanup.policy=compact)."""
    _run("compact", bootstrap_server=bootstrap_server, zookeeper_connect=zookeeper_connect, topic=topic,
         partitions=partition, target_file_bytes=target_file_mib * 1024 * 1024, lease_wait_s=lease_wait_s)
