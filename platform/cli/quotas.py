"""``lakelog quotas``: Kafka's client quotas, as ``kafka-configs --entity-type users|clients``.

::

    lakelog quotas alter --user alice --producer-byte-rate 1048576 --consumer-byte-rate 2097152
    lakelog quotas alter --user alice --client-id etl --request-percentage 50
    lakelog quotas alter --client-id '<default>' --producer-byte-rate 10485760
    lakelog quotas alter --user alice --delete-config request_percentage
    lakelog quotas describe [--user alice] [--client-id etl]

``<default>`` names the default user or client id. The most specific quota applies (Kafka's order:
user and client id, user and default client id, user, default user and client id, default user and
default client id, default user, client id, default client id). Brokers answer requests over a quota
429 with ``Retry-After`` (42902); lakelog clients wait and retry.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail, gateway_client

quotas_app = typer.Typer(help="Client quotas per user and/or client id (kafka-configs --entity-type users|clients).",
                         no_args_is_help=True)

UserOpt = Annotated[str | None, typer.Option("--user", help="User name (the principal User:NAME), or <default>.")]
ClientIdOpt = Annotated[str | None, typer.Option("--client-id", help="Client id (client.id), or <default>.")]


def _entity(user: str | None, client_id: str | None) -> dict[str, str]:
    entity = {}
    if user is not None:
        entity["user"] = user
    if client_id is not None:
        entity["client-id"] = client_id
    if not entity:
        fail("name the entity: --user NAME, --client-id ID or both (<default> for the default)")
    return entity


def _describe_entity(entity: dict) -> str:
    parts = []
    for key in ("user", "client-id"):
        if key in entity:
            parts.append(f"{key}={'<default>' if entity[key] is None else entity[key]}")
    return ", ".join(parts)


def _value(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


@quotas_app.command("alter")
def quotas_alter(user: UserOpt = None, client_id: ClientIdOpt = None,
                 producer_byte_rate: Annotated[float | None, typer.Option(
                     help="producer_byte_rate: bytes/s of produce requests.")] = None,
                 consumer_byte_rate: Annotated[float | None, typer.Option(
                     help="consumer_byte_rate: bytes/s of fetched records.")] = None,
                 request_percentage: Annotated[float | None, typer.Option(
                     help="request_percentage: percent of one request handler's time.")] = None,
                 delete_config: Annotated[list[str] | None, typer.Option(
                     "--delete-config", help="A quota to delete (repeatable).")] = None,
                 bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Set and delete quotas of a user, a client id, or a user's client id."""
    entity = _entity(user, client_id)
    sets = {k: v for k, v in (("producer_byte_rate", producer_byte_rate), ("consumer_byte_rate", consumer_byte_rate),
                              ("request_percentage", request_percentage)) if v is not None}
    if not sets and not delete_config:
        fail("give a quota to set (--producer-byte-rate, --consumer-byte-rate, --request-percentage) or "
             "--delete-config NAME")
    with gateway_client(bootstrap_server) as client:
        values = client.security.alter_client_quotas(entity, set=sets, remove=delete_config or [])
    shown = ", ".join(f"{k}={_value(v)}" for k, v in sorted(values.items())) or "no quotas"
    console.print(f"Quotas of {_describe_entity({k: (None if v == '<default>' else v) for k, v in entity.items()})}: "
                  f"{shown}", markup=False, highlight=False)


@quotas_app.command("describe")
def quotas_describe(user: UserOpt = None, client_id: ClientIdOpt = None,
                    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """The entities with quotas (those of --user / --client-id when given), one per line."""
    with gateway_client(bootstrap_server) as client:
        entries = client.security.describe_client_quotas(user=user, client_id=client_id)
    for entry in entries:
        values = ", ".join(f"{k}={_value(v)}" for k, v in sorted(entry["values"].items()))
        console.print(f"Quota configs for {_describe_entity(entry['entity'])} are {values}", markup=False,
                      highlight=False)
