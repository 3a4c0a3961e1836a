"""``lakelog transactions``: the cluster's transactional ids and their open transactions, in the style of
Kafka's ``kafka-transactions.sh list`` and ``describe``.

::

    lakelog transactions list [--state Ongoing --state PrepareCommit]
    lakelog transactions describe orders-etl-1
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, gateway_client

transactions_app = typer.Typer(help="Transactional ids: state, producer, open transactions with their partitions "
                                    "and age.", no_args_is_help=True)


def _partitions(t: dict) -> str:
    return ",".join(f"{p['topic_name']}-{p['partition_id']}" for p in t["partitions"]) or "-"


def _age(t: dict) -> str:
    return "-" if t["transaction_duration_ms"] is None else str(t["transaction_duration_ms"])


def _coordinator(t: dict) -> str:
    return "-" if t["coordinator_id"] is None else str(t["coordinator_id"])


@transactions_app.command("list")
def transactions_list(
    state: Annotated[Optional[list[str]], typer.Option(
        help="Only ids in this state (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
             "CompleteAbort); repeat for several.")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Every transactional id of the cluster: coordinator, producer id and epoch, state, the partitions of
    its open transaction and its age in ms (GET /v3/clusters/{c}/transactions)."""
    with gateway_client(bootstrap_server) as client:
        found = client.transactions.list_transactions(states=state)
    table = Table("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "EPOCH", "STATE", "PARTITIONS", "AGE-MS")
    for t in found:
        table.add_row(t["transactional_id"], _coordinator(t), str(t["producer_id"]), str(t["producer_epoch"]),
                      t["state"], _partitions(t), _age(t))
    console.print(table)


@transactions_app.command("describe")
def transactions_describe(transactional_id: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """One transactional id as its coordinator holds it (GET /v3/clusters/{c}/transactions/{id}), as
    kafka-transactions.sh describe shows it; exit code 1 when the id is unknown."""
    with gateway_client(bootstrap_server) as client:
        t = client.transactions.describe_transaction(transactional_id)
    table = Table("COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "TIMEOUT-MS", "START-TIME-MS",
                  "AGE-MS", "PARTITIONS")
    table.add_row(_coordinator(t), t["transactional_id"], str(t["producer_id"]), str(t["producer_epoch"]), t["state"],
                  str(t["transaction_timeout_ms"]),
                  "-" if t["transaction_start_time_ms"] is None else str(t["transaction_start_time_ms"]), _age(t),
                  _partitions(t))
    console.print(table)
