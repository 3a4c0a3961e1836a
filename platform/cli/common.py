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


def _auth_of(user: str | None, password: str | None, token: str | None, *, names: tuple[str, str, str]):
    """``(user, password)``, a :class:`~lakelog.client.BearerToken` or None; ends the command when they do not fit."""
    from lakelog.client import BearerToken

    if token is not None:
        if user is not None or password is not None:
            fail(f"give either {names[2]} or {names[0]} and {names[1]}, not both")
        try:
            return BearerToken(token)
        except ValueError as e:
            fail(f"{names[2]}: {e}")
    if not user and not password:
        return None
    if not user or password is None:
        fail(f"set both {names[0]} and {names[1]} (or neither)")
    return user, password


#: Environment variables with the commands' TLS files (PEM; Kafka's client ``ssl.cafile``, ``ssl.certfile``,
#: ``ssl.keyfile``): the CA the brokers' certificates are verified against, and a client certificate with its
#: key for brokers that ask for one (``ssl.client.auth``, ``authentication.methods=mtls``). Any of them set:
#: ``--bootstrap-server host:port`` means ``https://host:port``.
TLS_ENVS = {"ssl_cafile": "LAKELOG_SSL_CAFILE", "ssl_certfile": "LAKELOG_SSL_CERTFILE",
            "ssl_keyfile": "LAKELOG_SSL_KEYFILE"}


def tls_options() -> dict[str, str]:
    """The :class:`LakelogClient` TLS keyword arguments (``ssl_cafile``, ...) set in :data:`TLS_ENVS`."""
    return {arg: os.environ[env] for arg, env in TLS_ENVS.items() if os.environ.get(env)}


def command_config(path: Path) -> dict:
    """The :class:`LakelogClient` keyword arguments of a ``--command-config`` file (:data:`COMMAND_CONFIG_KEYS`);
    ends the command on an unreadable file, an unknown key or credentials that do not fit."""
    from lakelog.config import read_properties
    from lakelog.errors import ConfigError

    try:
        values = read_properties(path)
    except ConfigError as e:
        fail(str(e))
    unknown = sorted(set(values) - set(COMMAND_CONFIG_KEYS))
    if unknown:
        fail(f"--command-config {path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(COMMAND_CONFIG_KEYS)})")
    tls = {f"ssl_{k[4:]}": v for k, v in values.items() if k.startswith("ssl.") and v}  # ssl.cafile -> ssl_cafile
    return {"auth": _auth_of(values.get("sasl.username"), values.get("sasl.password"),
                             values.get("sasl.oauthbearer.token"),
                             names=("sasl.username", "sasl.password", "sasl.oauthbearer.token")), **tls}


def client_settings(*, command_config_file: Path | None = None) -> dict:
    """The :class:`LakelogClient` keyword arguments of this invocation's security settings, highest precedence
    first: the ``--command-config`` file (``command_config_file``, else the CLI's ``--command-config`` or
    ``LAKELOG_COMMAND_CONFIG``) when given, alone; else :data:`TOKEN_ENV` or :data:`USERNAME_ENV` and
    :data:`PASSWORD_ENV` (not both kinds) and the TLS files of :data:`TLS_ENVS`."""
    path = command_config_file or _command_config or (Path(os.environ["LAKELOG_COMMAND_CONFIG"])
                                                       if os.environ.get("LAKELOG_COMMAND_CONFIG") else None)
    if path is not None:
        return command_config(path)
    return {"auth": credentials(), **tls_options()}


def credentials():
    """The environment's credentials: ``(user, password)`` from :data:`USERNAME_ENV` and :data:`PASSWORD_ENV`,
    a :class:`~lakelog.client.BearerToken` from :data:`TOKEN_ENV`, or None when none is set."""
    return _auth_of(os.environ.get(USERNAME_ENV), os.environ.get(PASSWORD_ENV), os.environ.get(TOKEN_ENV),
                    names=(USERNAME_ENV, PASSWORD_ENV, TOKEN_ENV))


@contextlib.contextmanager
def gateway_client(bootstrap: str, **kwargs):
    """A :class:`LakelogClient` (with the security settings of :func:`client_settings`; ``kwargs`` go to it
    too); a gateway error, an unreachable gateway or an unreadable TLS file ends the command with its message."""
    from lakelog.client import GatewayError, LakelogClient

    try:
        with LakelogClient(bootstrap, **client_settings(), **kwargs) as client:
            yield client
    except (GatewayError, ConnectionError, ValueError) as e:
        fail(str(e))
