"""The ``lakelog`` commands that run servers in the foreground: ``up``, ``cluster up``,
``zookeeper start`` and ``broker start``; SIGINT and SIGTERM stop every child they started.
"""

from __future__ import annotations

import contextlib
import enum
import signal
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from lakelog.cli.common import console, err_console, fail


class LogFormatOption(str, enum.Enum):
    """``--log-format`` of the processes that serve."""

    text = "text"
    json = "json"


LOG_FORMAT_HELP = ("text: 'time level logger: message' lines; json: one JSON object per line (time, level, logger, "
                   "message, broker_id, topic and partition where relevant) for log shippers.")

zookeeper_app = typer.Typer(help="The embedded ZooKeeper server.", no_args_is_help=True)
broker_app = typer.Typer(help="Broker processes.", no_args_is_help=True)
cluster_app = typer.Typer(help="A local multi-broker cluster.", no_args_is_help=True)


# -- servers -------------------------------------------------------------------------------------

@zookeeper_app.command("start")
def zookeeper_start(
    data_dir: Annotated[Path, typer.Option(help="Where ZooKeeper keeps its data.")] = Path("data/zookeeper"),
    port: Annotated[int, typer.Option(help="Client port.")] = 2181,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
) -> None:
    """Run a standalone ZooKeeper server in the foreground (the jars shipped in the pyspark wheel);
    Ctrl-C or SIGTERM stops it."""
    from lakelog.runtime.zookeeper_server import ZooKeeperServer

    server = ZooKeeperServer(data_dir=data_dir.resolve(), client_port=port, host=host)
    with _stop_on_signals():
        try:
            server.start()
            console.print(f"ZooKeeper serving at {server.connect_string} (pid {server.pid}); Ctrl-C stops it.")
            _wait_forever()
        finally:
            server.stop()


class _StopRequested(BaseException):
    """Raised in the main thread by SIGINT or SIGTERM inside :func:`_stop_on_signals` (a BaseException,
    as KeyboardInterrupt, so no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stop_on_signals():
    """Run a foreground command whose children must stop on SIGINT and SIGTERM.

    Inside the block the first SIGINT or SIGTERM raises :class:`_StopRequested` in the main thread, so
    the block's ``finally`` clauses stop every child process it started (later signals are ignored while
    they do); the block then ends quietly and the command exits 0. uvicorn (``run_broker``) installs its
    own handlers while it serves and raises the signal again once it has shut down, which lands here.
    Whatever else ends this process (SIGKILL) takes the children with it through their death signal
    (:func:`lakelog.processes.spawn`).
    """
    stopping: list[int] = []

    def handler(signum, frame):
        if stopping:
            return  # already stopping: let the clean-up finish
        stopping.append(signum)
        raise _StopRequested(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except _StopRequested as stop:
        err_console.print(f"{signal.Signals(stop.signum).name}: stopped.")
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _wait_forever() -> None:
    """Sleep until a signal handler raises (see :func:`_stop_on_signals`)."""
    while True:
        time.sleep(3600)


@broker_app.command("start")
def broker_start(
    broker_id: Annotated[Optional[int], typer.Option("--broker-id", help="broker.id")] = None,
    port: Annotated[Optional[int], typer.Option(help="HTTP port of the gateway.")] = None,
    host: Annotated[Optional[str], typer.Option(help="Interface to listen on and advertise.")] = None,
    log_dirs: Annotated[Optional[Path], typer.Option("--log-dirs", help="log.dirs: where partition tables live.")] = None,
    zookeeper_connect: Annotated[Optional[str], typer.Option("--zookeeper-connect", help="host:port\\[/chroot]")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="A broker .properties file.")] = None,
    override: Annotated[Optional[list[str]], typer.Option(
        "--override", help="key=value: any broker setting by its dotted name, over LAKELOG_* and --config "
                           "(as kafka-server-start --override); repeatable.")] = None,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "info",
    log_format: Annotated[LogFormatOption, typer.Option(help=LOG_FORMAT_HELP)] = LogFormatOption.text,
) -> None:
    """Run one broker in the foreground until Ctrl-C / SIGTERM."""
    from lakelog.config import BrokerSettings, settings_from_properties
    from lakelog.errors import LakelogError
    from lakelog.runtime.server import configure_logging, run_broker

    if any("=" not in item for item in override or []):
        fail("--override: expected key=value, e.g. --override lake.vacuum.retention.ms=5000")
    try:
        overrides = settings_from_properties(dict(item.split("=", 1) for item in override or []))
        flags = dict(broker_id=broker_id, port=port, host=host, log_dirs=log_dirs, zookeeper_connect=zookeeper_connect)
        settings = BrokerSettings.load(config_file=config,
                                       **{**overrides, **{k: v for k, v in flags.items() if v is not None}})
    except LakelogError as e:
        fail(str(e))
    configure_logging(log_level, log_format=log_format.value, broker_id=settings.broker_id)
    run_broker(settings, log_level=log_level, log_format=log_format.value)


def up(
    data_dir: Annotated[Path, typer.Option(help="Data dir: ZooKeeper under zookeeper/, logs under logs/.")] = Path("data"),
    port: Annotated[int, typer.Option(help="HTTP port of the broker.")] = 8082,
    zookeeper_port: Annotated[int, typer.Option(help="ZooKeeper client port.")] = 2181,
    kafka_port: Annotated[int, typer.Option(
        "--kafka-port", help="Port of the broker's Kafka listener (listeners=PLAINTEXT://127.0.0.1:PORT; 0: a free "
                             "port, logged).")] = 9092,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "info",
    log_format: Annotated[LogFormatOption, typer.Option(help=LOG_FORMAT_HELP)] = LogFormatOption.text,
) -> None:
    """Embedded ZooKeeper + one broker in the foreground; Ctrl-C or SIGTERM stops both cleanly."""
    from lakelog.config import BrokerSettings
    from lakelog.runtime.zookeeper_server import ZooKeeperServer
    from lakelog.runtime.server import configure_logging, run_broker

    configure_logging(log_level, log_format=log_format.value)
    data_dir = data_dir.resolve()
    zk = ZooKeeperServer(data_dir=data_dir / "zookeeper", client_port=zookeeper_port)
    with _stop_on_signals():
        try:
            zk.start()  # stops a ZooKeeper an earlier, killed `lakelog up` on this data dir left behind
            err_console.print(f"ZooKeeper at {zk.connect_string} (pid {zk.pid}); broker at http://127.0.0.1:{port}, "
                              f"Kafka listener at 127.0.0.1:{kafka_port}")
            settings = BrokerSettings.load(port=port, log_dirs=data_dir / "logs", zookeeper_connect=zk.connect_string,
                                           listeners=f"PLAINTEXT://127.0.0.1:{kafka_port}")
            _wait_for_previous_registrations(zk.connect_string, [settings.broker_id])
            configure_logging(log_level, log_format=log_format.value, broker_id=settings.broker_id)
            run_broker(settings, log_level=log_level, log_format=log_format.value)  # returns after SIGINT/SIGTERM
        finally:
            zk.stop()


def _wait_for_previous_registrations(zookeeper_connect: str, broker_ids: list[int], *,
                                     timeout_s: float = 45.0) -> None:
    """Wait until no earlier broker holds any of ``broker_ids`` in the ZooKeeper just started.

    A killed ``lakelog up`` / ``lakelog cluster up`` leaves its brokers' ephemeral registrations in
    ZooKeeper's data; the restarted ZooKeeper keeps them until those sessions expire
    (``zookeeper.session.timeout.ms`` after the restart, at most 40 s with the embedded server's 2 s
    tick). As Kafka, a registration is never deleted on a broker's behalf: this waits for them
    (``timeout_s`` seconds at most), so the brokers then start instead of failing with "broker.id is
    already registered". Returns at once when there is none.
    """
    from kazoo.client import KazooClient

    from lakelog.replication.metadata import BROKERS_PATH

    client = KazooClient(hosts=zookeeper_connect, timeout=10.0)
    client.start(timeout=15.0)
    try:
        def registered() -> list[int]:
            return [i for i in broker_ids if client.exists(f"{BROKERS_PATH}/{i}") is not None]

        still = registered()
        if not still:
            return
        err_console.print(f"broker.id {', '.join(map(str, still))} still registered by an earlier run (killed?); "
                          f"waiting up to {timeout_s:g} s for its ZooKeeper session to expire.")
        deadline = time.monotonic() + timeout_s
        while registered() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        client.stop()
        client.close()


@cluster_app.command("up")
def cluster_up(
    brokers: Annotated[int, typer.Option("--brokers", help="Number of brokers.")] = 3,
    data_dir: Annotated[Path, typer.Option(help="ZooKeeper under zookeeper/, broker N's logs under broker-N/.")] = Path("data/cluster"),
    port: Annotated[int, typer.Option(help="HTTP port of broker 0; broker N gets port + N.")] = 8082,
    zookeeper_port: Annotated[int, typer.Option(help="ZooKeeper client port.")] = 2181,
    config: Annotated[Optional[Path], typer.Option("--config", help="A broker .properties file for every broker.")] = None,
    kafka_port: Annotated[int, typer.Option(
        "--kafka-port", help="Port of broker 0's Kafka listener; broker N gets port + N (0: free ports). Unless "
                             "--config sets listeners; none with --secure (the listener serves PLAINTEXT only).")] = 9092,
    log_level: Annotated[str, typer.Option(help="Log level of the brokers.")] = "info",
    log_format: Annotated[LogFormatOption, typer.Option(help=LOG_FORMAT_HELP)] = LogFormatOption.text,
    secure: Annotated[bool, typer.Option(
        "--secure", help="TLS, authentication and ACLs: a CA, broker and client certificates, a super user "
                         "'admin' (its password printed once, kept in DATA_DIR/tls/admin.password) under "
                         "DATA_DIR/tls; brokers with HTTPS, authentication.methods=basic,mtls and the authorizer.")] = False,
) -> None:
    """Embedded ZooKeeper + N broker processes (distinct ports and log dirs) in the foreground.

    Ctrl-C or SIGTERM stops the brokers one by one with SIGTERM (each hands its leaderships over:
    controlled shutdown), then ZooKeeper. ``--secure``: see :mod:`lakelog.security.secure_setup`.
    """
    from lakelog.config import read_properties
    from lakelog.runtime.broker_process import BrokerProcess
    from lakelog.runtime.zookeeper_server import ZooKeeperServer

    data_dir = data_dir.resolve()
    zk = ZooKeeperServer(data_dir=data_dir / "zookeeper", client_port=zookeeper_port)
    tls = _secure_setup(data_dir, brokers=brokers, config=config) if secure else None
    kafka = not secure and (config is None or "listeners" not in read_properties(config, missing_ok=True))
    procs = [BrokerProcess(zookeeper_connect=zk.connect_string, log_dirs=data_dir / f"broker-{i}", broker_id=i,
                           port=port + i, log_file=data_dir / f"broker-{i}.log", log_level=log_level,
                           log_format=log_format.value, new_session=True, config_file=config,
                           **({"extra_env": {"LAKELOG_LISTENERS": f"PLAINTEXT://127.0.0.1:{kafka_port and kafka_port + i}"}}
                              if kafka else {}),
                           **({} if tls is None else {
                               "extra_env": tls.broker_env(), "ssl_certfile": tls.brokers[i].certfile,
                               "ssl_keyfile": tls.brokers[i].keyfile, "ssl_cafile": tls.cafile}))
             for i in range(brokers)]
    with _stop_on_signals():
        try:
            zk.start()
            _wait_for_previous_registrations(zk.connect_string, [proc.broker_id for proc in procs])
            if tls is not None:
                tls.ensure_super_user(zk.connect_string)
            for proc in procs:
                proc.start()
            servers = ",".join(proc.url.replace("http://", "") for proc in procs)
            err_console.print(f"ZooKeeper at {zk.connect_string} (pid {zk.pid}); {brokers} brokers: {servers} "
                              f"(pids {', '.join(str(p.pid) for p in procs)}, logs {data_dir}/broker-N.log). "
                              f"Use --bootstrap-server {servers}")
            if kafka and kafka_port:
                err_console.print("Kafka listeners: " + ",".join(f"127.0.0.1:{kafka_port + i}" for i in range(brokers)))
            if tls is not None:
                _print_secure_connection(tls, servers)
            _wait_forever()
        finally:
            for proc in reversed(procs):  # each in its own try: one failure must not leave the others running
                try:
                    proc.stop(timeout_s=30)
                except Exception as e:  # noqa: BLE001 - reported; the others and ZooKeeper still stop
                    err_console.print(f"[red]error:[/red] stopping broker {proc.broker_id}: {e}")
                    proc.kill()
            zk.stop()


def _secure_setup(data_dir: Path, *, brokers: int, config: Optional[Path]):
    """The CA, certificates and passwords of ``cluster up --secure`` (made or reused under ``data_dir/tls``)."""
    from lakelog.config import BrokerSettings
    from lakelog.errors import LakelogError
    from lakelog.security.secure_setup import prepare_secure_cluster

    try:
        host = BrokerSettings.load(config_file=config).host  # the advertised host goes into the certificates
    except LakelogError as e:
        fail(str(e))
    return prepare_secure_cluster(data_dir, broker_ids=list(range(brokers)), hosts=[host])


def _print_secure_connection(tls, servers: str) -> None:
    """How a client connects to a ``--secure`` cluster: the super user (the password only on the run that
    made it), the environment of the ``lakelog`` commands and the client properties file."""
    from lakelog.security.secure_setup import SUPER_USER

    properties = tls.write_client_properties()
    if tls.created:
        err_console.print(f"Super user {SUPER_USER!r}, password (shown once): {tls.admin_password}")
    err_console.print(f"Its password is in {tls.password_file} (mode 0600). Connect the lakelog commands with:\n"
                      f"export LAKELOG_BOOTSTRAP_SERVER={servers}\n"
                      f"export LAKELOG_SSL_CAFILE={tls.cafile}\n"
                      f"export LAKELOG_USERNAME={SUPER_USER}\n"
                      f'export LAKELOG_PASSWORD="$(cat {tls.password_file})"\n'
                      f"or with the super user's certificate (mtls) instead of the password:\n"
                      f"lakelog --command-config {properties} topics list", soft_wrap=True)
