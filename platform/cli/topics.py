"""``lakelog topics``: create, list, describe, alter and delete topics through a gateway."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail, gateway_client, parse_configs

topics_app = typer.Typer(help="Create, list, describe, alter and delete topics.", no_args_is_help=True)


@topics_app.command("create")
def topics_create(
    topic: str,
    partitions: Annotated[Optional[int], typer.Option(help="Number of partitions. Default: num.partitions.")] = None,
    replication_factor: Annotated[Optional[int], typer.Option(help="Replicas per partition.")] = None,
    config: Annotated[Optional[list[str]], typer.Option("--config", help="Topic config key=value (repeatable).")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Create a topic."""
    with gateway_client(bootstrap_server) as client:
        data = client.create_topic(topic, partitions=partitions, replication_factor=replication_factor,
                                   configs=parse_configs(config))
    console.print(f"Created topic {topic} ({data['partitions_count']} partitions, replication factor "
                  f"{data['replication_factor']}).")


@topics_app.command("list")
def topics_list(bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """List topic names."""
    with gateway_client(bootstrap_server) as client:
        for name in client.admin.list_topics():
            console.print(name)


@topics_app.command("describe")
def topics_describe(topic: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Partitions with leader, replicas, ISR, leader epoch, log start offset, lake end offset (the end of
    the Delta table), log end offset, high watermark and last stable offset (the first offset of an open
    transaction: read_committed consumers read below it); then each replica's broker with its gateway and
    its Kafka endpoints (``PLAINTEXT://host:port``)."""
    with gateway_client(bootstrap_server) as client:
        info = client.admin.describe_topic(topic)
        brokers = {b["broker_id"]: b for b in client.admin.brokers()}
    configs = ", ".join(f"{k}={v}" for k, v in sorted(info["configs"].items()))
    console.print(f"Topic: {topic}\tPartitionCount: {len(info['partitions'])}\tConfigs: {configs}")
    table = Table("Partition", "Leader", "Replicas", "Isr", "LeaderEpoch", "LogStartOffset", "LakeEndOffset",
                  "LogEndOffset", "HighWatermark", "LastStableOffset")
    for p in info["partitions"]:
        table.add_row(str(p["partition"]), str(p["leader"]), ",".join(str(r["broker"]) for r in p["replicas"]),
                      ",".join(str(r["broker"]) for r in p["replicas"] if r["in_sync"]), str(p["leader_epoch"]),
                      str(p.get("log_start_offset")), str(p.get("lake_end_offset")), str(p.get("log_end_offset")),
                      str(p.get("high_watermark")), str(p.get("last_stable_offset")))
    console.print(table)
    replicas = sorted({r["broker"] for p in info["partitions"] for r in p["replicas"]})
    endpoints = Table("Broker", "Gateway", "Kafka endpoints")
    for broker_id in replicas:
        b = brokers.get(broker_id)
        endpoints.add_row(str(broker_id), "not live" if b is None else f"http://{b['host']}:{b['port']}",
                          "" if b is None else ",".join(b.get("endpoints") or []) or "none")
    console.print(endpoints)


@topics_app.command("alter")
def topics_alter(
    topic: str,
    config: Annotated[Optional[list[str]], typer.Option("--config", help="Set a topic config key=value (repeatable).")] = None,
    delete_config: Annotated[Optional[list[str]], typer.Option(
        "--delete-config", help="Delete a topic config, back to its default: the broker's setting where it "
                                "has one (log.retention.ms for retention.ms), else the built-in one (repeatable).")] = None,
    partitions: Annotated[Optional[int], typer.Option(
        help="The new number of partitions; only more than now (keyed records may move partitions).")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Change a topic on the running cluster: set and delete configs (as kafka-configs --alter) in one
    all-or-nothing change, add partitions (as kafka-topics --alter --partitions). Brokers apply it
    without a restart."""
    configs = parse_configs(config)
    deleted = [k.strip() for k in delete_config or []]
    if not configs and not deleted and partitions is None:
        fail("nothing to alter: give --config key=value, --delete-config key or --partitions N")
    with gateway_client(bootstrap_server) as client:
        if configs or deleted:
            client.admin.alter_topic_configs(topic, set=configs, delete=deleted)
            changes = [f"{k}={v}" for k, v in configs.items()] + [f"-{k}" for k in deleted]
            console.print(f"Altered configs of topic {topic}: {', '.join(changes)}.")
        if partitions is not None:
            data = client.admin.add_partitions(topic, partitions_count=partitions)
            console.print(f"Topic {topic} has {data['partitions_count']} partitions now.")


@topics_app.command("delete")
def topics_delete(topic: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Delete a topic and its partition logs."""
    with gateway_client(bootstrap_server) as client:
        client.admin.delete_topic(topic)
    console.print(f"Deleted topic {topic}.")
