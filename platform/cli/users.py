"""``lakelog users``: users' SCRAM-SHA-512 credentials, as Kafka's
``kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users``.

::

    echo -n "$PASSWORD" | lakelog users add alice --password-stdin
    lakelog users list
    lakelog users delete alice

Passwords are read from stdin, never from the command line (which other users of the machine can see),
and the gateway keeps only the salted SCRAM credential in ZooKeeper.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail, gateway_client

users_app = typer.Typer(help="Users' SCRAM-SHA-512 credentials (kafka-configs --entity-type users).",
                        no_args_is_help=True)


@users_app.command("add")
def users_add(name: str,
              password_stdin: Annotated[bool, typer.Option("--password-stdin",
                                                           help="Read the password from stdin (required).")] = False,
              iterations: Annotated[int, typer.Option(help="PBKDF2 iterations, 4096-16384.")] = 4096,
              bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Create the user NAME or set a new password (principal User:NAME)."""
    if not password_stdin:
        fail("give the password on stdin with --password-stdin (never on the command line)")
    password = sys.stdin.read().rstrip("\r\n")
    if not password:
        fail("no password on stdin")
    with gateway_client(bootstrap_server) as client:
        client.security.upsert_user(name, password, iterations=iterations)
    console.print(f"Set the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of User:{name}")


@users_app.command("list")
def users_list(bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """The users that have a credential, one per line."""
    with gateway_client(bootstrap_server) as client:
        for name in client.security.list_users():
            console.print(name, markup=False, highlight=False)


@users_app.command("delete")
def users_delete(name: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Remove the user NAME's credential; exit code 1 when there is no such user."""
    with gateway_client(bootstrap_server) as client:
        client.security.delete_user(name)
    console.print(f"Deleted User:{name}")
