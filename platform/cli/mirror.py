"""``lakelog mirror``: Apache Kafka's MirrorMaker 2 between two clusters (:mod:`lakelog.runtime.mirror_maker`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from lakelog.cli.common import console, fail
from lakelog.cli.processes import _stop_on_signals

mirror_app = typer.Typer(help="Mirror topics and consumer group offsets between clusters with Kafka's MirrorMaker 2.",
                         no_args_is_help=True)


@mirror_app.command("start")
def mirror_start(
    source_bootstrap: Annotated[str, typer.Option(
        "--source-bootstrap", help="host:port of the source cluster's Kafka listeners (Apache Kafka or lakelog).")],
    target_bootstrap: Annotated[str, typer.Option(
        "--target-bootstrap", help="host:port of the target cluster's Kafka listeners.")],
    source_alias: Annotated[str, typer.Option(
        "--source-alias", help="The source's cluster alias: the prefix of mirrored topic names.")] = "source",
    target_alias: Annotated[str, typer.Option("--target-alias", help="The target's cluster alias.")] = "target",
    topics: Annotated[str, typer.Option(help="Regular expression (Java) of the topics to mirror.")] = ".*",
    groups: Annotated[str, typer.Option(
        help="Regular expression of the consumer groups whose offsets are translated to the target.")] = ".*",
    identity_names: Annotated[bool, typer.Option(
        "--identity-names", help="Keep topic names unchanged on the target (IdentityReplicationPolicy) instead "
                                 "of prefixing them with the source alias.")] = False,
    replication_factor: Annotated[int, typer.Option(
        "--replication-factor", help="Of the mirrored topics and MirrorMaker's internal topics.")] = 1,
    interval_s: Annotated[int, typer.Option(
        "--interval-s", help="Seconds between topic/group refreshes, checkpoints and group offset syncs.")] = 5,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="key=value: any other MirrorMaker 2 property (repeatable), e.g. "
                         "source->target.sync.topic.configs.enabled=false.")] = None,
    print_config: Annotated[bool, typer.Option(
        "--print-config", help="Print the generated mm2.properties and exit.")] = False,
    log_file: Annotated[Optional[Path], typer.Option(
        "--log-file", help="MirrorMaker's log. Default: mirror-maker.log in a temp dir, printed.")] = None,
) -> None:
    """Run Kafka's MirrorMaker 2 (dedicated mode) for one flow SOURCE -> TARGET in the foreground until
    Ctrl-C / SIGTERM: topics copied with their partitions and configs, consumer group offsets translated so
    that a consumer moved to the target resumes where it left off. Kafka's jars are fetched from Maven
    Central once (needs mvn and Java 17+)."""
    from lakelog.runtime.mirror_maker import MirrorMaker, mirror_maker_properties

    if any("=" not in item for item in config or []):
        fail("--config: expected key=value, e.g. --config offset.lag.max=10")
    try:
        text = mirror_maker_properties(
            source_alias=source_alias, source_bootstrap=source_bootstrap, target_alias=target_alias,
            target_bootstrap=target_bootstrap, topics=topics, groups=groups, replication_factor=replication_factor,
            replication_policy="identity" if identity_names else "default", interval_s=interval_s,
            overrides=dict(item.split("=", 1) for item in config or []))
    except ValueError as e:
        fail(str(e))
    if print_config:
        console.print(text, end="", markup=False, highlight=False)
        return
    work = Path(tempfile.mkdtemp(prefix="lakelog-mirror-"))
    properties = work / "mm2.properties"
    properties.write_text(text)
    log = log_file or work / "mirror-maker.log"
    maker = MirrorMaker(properties, target_alias=target_alias, log_file=log)
    with _stop_on_signals():
        try:
            try:
                maker.start()
            except RuntimeError as e:
                fail(str(e))
            console.print(f"MirrorMaker 2 mirroring {source_alias} ({source_bootstrap}) -> {target_alias} "
                          f"({target_bootstrap}), pid {maker.pid}; log {log}; Ctrl-C stops it.")
            code = maker.wait()
            if code:
                fail(f"MirrorMaker exited with {code}:\n{maker.log_tail()}")
        finally:
            maker.stop()
