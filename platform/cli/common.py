"""What every ``lakelog`` command module shares: the consoles, ``--bootstrap-server``, errors, the client.

Layer 5, as the rest of :mod:`lakelog.cli`; the command modules import from here, never from
:mod:`lakelog.cli.main`, which gathers them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

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
#: with ``authentication.methods`` holding ``basic``). Both or neither.
USERNAME_ENV, PASSWORD_ENV = "LAKELOG_USERNAME", "LAKELOG_PASSWORD"
#: Environment variable with a bearer token (a JWT; brokers with ``oauthbearer``), instead of a user and password.
TOKEN_ENV = "LAKELOG_TOKEN"
#: Keys of a ``--command-config`` file (librdkafka's names): the credentials, and the TLS files of the client.
COMMAND_CONFIG_KEYS = ("sasl.username", "sasl.password", "sasl.oauthbearer.token",
                       "ssl.cafile", "ssl.certfile", "ssl.keyfile")

CommandConfigOpt = Annotated[Optional[Path], typer.Option(
    "--command-config", envvar="LAKELOG_COMMAND_CONFIG", dir_okay=False,
    help="A .properties file with the client's security settings, as Kafka tools' --command-config: "
         "sasl.username and sasl.password (HTTP Basic) or sasl.oauthbearer.token (a bearer token), and ssl.cafile, "
         "ssl.certfile, ssl.keyfile (TLS, a client certificate for mtls). When given, it alone holds them: "
         "LAKELOG_USERNAME, LAKELOG_PASSWORD, LAKELOG_TOKEN and LAKELOG_SSL_* are then ignored.")]

#: The ``--command-config`` file of this invocation (set by the app's callback; None: the environment's credentials).
_command_config: Path | None = None


def set_command_config(path: Path | None) -> None:
    """Use ``path`` (a ``--command-config`` file) for the credentials of every command of this invocation."""
    global _command_config
    _command_config = path


#: Environment variables with the commands' TLS files (PEM; Kafka's client ``ssl.cafile``, ``ssl.certfile``,
#: ``ssl.keyfile``): the CA the brokers' certificates are verified against, and a client certificate with its
#: key for brokers that ask for one (``ssl.client.auth``, ``authentication.methods=mtls``). Any of them set:
#: ``--bootstrap-server host:port`` means ``https://host:port``.
TLS_ENVS = {"ssl_cafile": "LAKELOG_SSL_CAFILE", "ssl_certfile": "LAKELOG_SSL_CERTFILE",
            "ssl_keyfile": "LAKELOG_SSL_KEYFILE"}


def connection_settings(*, command_config_file: Path | None = None, **flags):
    """This invocation's :class:`~lakelog.client.ClientSettings` (:meth:`ClientSettings.load
    <lakelog.client.ClientSettings.load>`), highest precedence first: ``flags`` (Kafka names, e.g.
    ``{"bootstrap.servers": ...}``; None: not given); the ``--command-config`` file (``command_config_file``,
    else the CLI's ``--command-config`` or ``LAKELOG_COMMAND_CONFIG``) when given, alone, with the keys of
    :data:`COMMAND_CONFIG_KEYS`; else :data:`TOKEN_ENV` or :data:`USERNAME_ENV` and :data:`PASSWORD_ENV` (not
    both kinds) and the TLS files of :data:`TLS_ENVS`. Ends the command on an unreadable file, an unknown key or
    credentials that do not fit."""
    from lakelog.client import ClientSettings

    path = command_config_file or _command_config or (Path(os.environ["LAKELOG_COMMAND_CONFIG"])
                                                       if os.environ.get("LAKELOG_COMMAND_CONFIG") else None)
    try:
        return ClientSettings.load(command_config=path, command_config_keys=COMMAND_CONFIG_KEYS, **flags)
    except ValueError as e:
        fail(str(e))


def client_settings(*, command_config_file: Path | None = None) -> dict:
    """The :class:`LakelogClient` keyword arguments of this invocation's security settings (``auth``, the TLS
    files; see :func:`connection_settings`)."""
    return connection_settings(command_config_file=command_config_file).client_kwargs()


@contextlib.contextmanager
def gateway_client(bootstrap: str, **kwargs):
    """A :class:`LakelogClient` of ``--bootstrap-server`` and this invocation's settings
    (:func:`connection_settings`; ``kwargs``: LakelogClient keyword arguments that win); a gateway error, an
    unreachable gateway or an unreadable TLS file ends the command with its message."""
    from lakelog.client import GatewayError

    settings = connection_settings(**{"bootstrap.servers": bootstrap})
    try:
        with settings.client(**kwargs) as client:
            yield client
    except (GatewayError, ConnectionError, ValueError) as e:
        fail(str(e))
