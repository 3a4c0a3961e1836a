"""``lakelog producers``: producer ids for idempotent producers (Kafka's InitProducerId)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from lakelog.cli_common import DEFAULT_BOOTSTRAP, BootstrapOpt, gateway_client

producers_app = typer.Typer(help="Producer ids for idempotent producers.", no_args_is_help=True)


@producers_app.command("init")
def producers_init(
    transactional_id: Annotated[Optional[str], typer.Option(
        help="A transactional producer's id: refused for now (40010, transactions are not supported yet).")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Get a new producer id, unique in the cluster (POST /v3/clusters/{c}/producers) and print the answer
    as JSON: {"producer_id": <long>, "producer_epoch": 0}."""
    with gateway_client(bootstrap_server) as client:
        answer = client.init_producer_id(transactional_id=transactional_id)
    typer.echo(json.dumps(answer))
