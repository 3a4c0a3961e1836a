"""``lakelog producers``: producer ids for idempotent and transactional producers (Kafka's InitProducerId)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, fail, gateway_client

producers_app = typer.Typer(help="Producer ids for idempotent and transactional producers.", no_args_is_help=True)


@producers_app.command("init")
def producers_init(
    transactional_id: Annotated[Optional[str], typer.Option(
        help="A transactional producer's transactional.id: its coordinator answers the producer id the id "
             "holds with the epoch + 1, fencing the previous instance.")] = None,
    transaction_timeout_ms: Annotated[Optional[int], typer.Option(
        help="With --transactional-id: transaction.timeout.ms, in (0, transaction.max.timeout.ms]. "
             "Default: 60000.")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Get a producer id (POST /v3/clusters/{c}/producers) and print the answer as JSON:
    {"producer_id": <long>, "producer_epoch": <int>}: a new id with epoch 0 for an idempotent producer;
    with --transactional-id, the id's producer id and its next epoch."""
    if transaction_timeout_ms is not None and transactional_id is None:
        fail("--transaction-timeout-ms needs --transactional-id (an idempotent producer has no transactions)")
    with gateway_client(bootstrap_server) as client:
        answer = client.init_producer_id(transactional_id=transactional_id,
                                         transaction_timeout_ms=transaction_timeout_ms)
    typer.echo(json.dumps(answer))
