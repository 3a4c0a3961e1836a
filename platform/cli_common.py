"""What every ``lakelog`` command module shares: the consoles, ``--bootstrap-server``, errors, the client.

Layer 5, as :mod:`lakelog.cli`; the ``cli_*`` modules import from here, never from :mod:`lakelog.cli`
(which ``python -m lakelog.cli`` runs as ``__main__``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated

import typer
from rich.console import Console

# Piped output keeps whole rows (rich would wrap at 80 columns when stdout is not a terminal).
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True)

BootstrapOpt = Annotated[str, typer.Option("--bootstrap-server", "-b", envvar="LAKELOG_BOOTSTRAP_SERVER",
                                           help="Gateway(s): host:port[,host:port].")]
DEFAULT_BOOTSTRAP = "localhost:8082"


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` on stderr and end the command with exit code ``code``."""
    err_console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def parse_configs(items: list[str] | None) -> dict[str, str]:
    """``["retention.ms=86400000", ...]`` (repeated ``--config``) -> ``{"retention.ms": "86400000"}``."""
    configs = {}
    for item in items or []:
        if "=" not in item:
            fail(f"--config {item!r}: expected key=value, e.g. --config retention.ms=86400000")
        k, v = item.split("=", 1)
        configs[k.strip()] = v.strip()
    return configs


#: Environment variables with the user and password the commands authenticate with (HTTP Basic; brokers
#: with ``authentication.methods=basic``). Both or neither.
USERNAME_ENV, PASSWORD_ENV = "LAKELOG_USERNAME", "LAKELOG_PASSWORD"


def credentials() -> tuple[str, str] | None:
    """``(user, password)`` from :data:`USERNAME_ENV` and :data:`PASSWORD_ENV`, or None when neither is set."""
    user, password = os.environ.get(USERNAME_ENV), os.environ.get(PASSWORD_ENV)
    if not user and not password:
        return None
    if not user or password is None:
        fail(f"set both {USERNAME_ENV} and {PASSWORD_ENV} (or neither)")
    return user, password


@contextlib.contextmanager
def gateway_client(bootstrap: str):
    """A :class:`LakelogClient` (with the credentials of :func:`credentials`); a gateway error or an
    unreachable gateway ends the command with its message."""
    from lakelog.client import GatewayError, LakelogClient

    try:
        with LakelogClient(bootstrap, auth=credentials()) as client:
            yield client
    except (GatewayError, ConnectionError) as e:
        fail(str(e))
