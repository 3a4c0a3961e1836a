"""The ``lakelog`` commands that run servers in the foreground: ``up``, ``cluster up``,
``zookeeper start`` and ``broker start``; SIGINT and SIGTERM stop every child they started.
"""

from __future__ import annotations

import contextlib
import enum
import os
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
    myid: Annotated[Optional[int], typer.Option(
        "--myid", min=1, max=255, help="This node's server id in its ensemble (written to DATA_DIR/myid).")] = None,
    server: Annotated[Optional[list[str]], typer.Option(
        "--server", help="A server of the ensemble, ID=HOST:QUORUM_PORT:ELECTION_PORT (e.g. 1=zk1:2888:3888); "
                         "repeat it for every server, this one included.")] = None,
    config: Annotated[Optional[Path], typer.Option(
        "--config", help="A zoo.cfg of your own (ZooKeeper's format), run as written; with --myid for a "
                         "dataDir that has no myid file yet.")] = None,
) -> None:
    """Run a ZooKeeper server in the foreground (the jars shipped in the pyspark wheel); Ctrl-C or SIGTERM
    stops it.

    Standalone by default. One node of an ensemble with --myid and a --server per node (each host runs
    the same command with its own --myid), or with --config and a zoo.cfg that has server.N lines.
    """
    from lakelog.runtime.zookeeper_server import QuorumServer, ZooKeeperServer
    from lakelog.replication.errors import ZooKeeperStartError

    try:
        if config is not None:
            if server:
                fail("--config takes the ensemble's servers from its server.N lines: leave out --server")
            zk = ZooKeeperServer.from_config_file(config, myid=myid)
        else:
            quorum = [QuorumServer.parse(text) for text in server or []]
            if quorum and myid is None:
                fail("--server makes this node one of an ensemble: give its server id with --myid")
            if myid is not None and not quorum:
                fail("--myid names this node in an ensemble: list every server with --server ID=HOST:PORT:PORT")
            zk = ZooKeeperServer(data_dir=data_dir.resolve(), client_port=port, host=host, myid=myid, quorum=quorum)
    except (ValueError, ZooKeeperStartError) as e:
        fail(str(e))
    with _stop_on_signals():
        try:
            zk.start(timeout_s=_ENSEMBLE_START_TIMEOUT_S if zk.quorum else 30.0)
            role = f"node {zk.myid} of {len(zk.quorum)}, {zk.mode()}" if zk.quorum else "standalone"
            console.print(f"ZooKeeper serving at {zk.connect_string} ({role}, pid {zk.pid}); Ctrl-C stops it.")
            _wait_forever()
        finally:
            zk.stop()


#: How long a node of an ensemble waits for a majority of its servers to run (seconds): the other hosts'
#: nodes may be started by hand, one after another.
_ENSEMBLE_START_TIMEOUT_S = 600.0


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
    kafka_port: Annotated[int, typer.Option(
        "--kafka-port", help="Port of the Kafka listener opened when listeners is set nowhere (--config, "
                             "LAKELOG_LISTENERS, --override): listeners=PLAINTEXT://HOST:PORT (0: a free port, "
                             "logged). None opens on a broker with TLS or authentication (the default listener is "
                             "PLAINTEXT: set listeners, e.g. SASL_SSL://:9093, for one with them); an empty "
                             "listeners setting opens none.")] = 9092,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "info",
    log_format: Annotated[LogFormatOption, typer.Option(help=LOG_FORMAT_HELP)] = LogFormatOption.text,
) -> None:
    """Run one broker in the foreground until Ctrl-C / SIGTERM."""
    from lakelog.config import BrokerSettings, read_properties, settings_from_properties
    from lakelog.errors import LakelogError
    from lakelog.runtime.server import configure_logging, run_broker

    if any("=" not in item for item in override or []):
        fail("--override: expected key=value, e.g. --override lake.vacuum.retention.ms=5000")
    try:
        overrides = settings_from_properties(dict(item.split("=", 1) for item in override or []))
        flags = dict(broker_id=broker_id, port=port, host=host, log_dirs=log_dirs, zookeeper_connect=zookeeper_connect)
        settings = BrokerSettings.load(config_file=config,
                                       **{**overrides, **{k: v for k, v in flags.items() if v is not None}})
        listeners_set = ("LAKELOG_LISTENERS" in os.environ or "listeners" in overrides
                         or (config is not None and "listeners" in read_properties(config, missing_ok=True)))
        if not listeners_set and settings.ssl_certfile is None and settings.authentication_methods == "none":
            settings = settings.model_copy(update={"listeners": f"PLAINTEXT://{settings.host}:{kafka_port}"})
    except LakelogError as e:
        fail(str(e))
    configure_logging(log_level, log_format=log_format.value, broker_id=settings.broker_id)
    run_broker(settings, log_level=log_level, log_format=log_format.value)


OBJECT_STORE_HELP = ("Also run an embedded S3-compatible object store (s3proxy, under DATA_DIR/object-store) and put "
                     "the partition tables in it: bucket 'lakelog', lake.uri=s3://lakelog/lake and its lake.storage.* "
                     "settings for every broker (one table per partition, written by its leader).")
#: the bucket and lake.uri of --object-store
OBJECT_STORE_BUCKET = "lakelog"
OBJECT_STORE_LAKE_URI = f"s3://{OBJECT_STORE_BUCKET}/lake"


def up(
    data_dir: Annotated[Path, typer.Option(help="Data dir: ZooKeeper under zookeeper/, logs under logs/.")] = Path("data"),
    port: Annotated[int, typer.Option(help="HTTP port of the broker.")] = 8082,
    zookeeper_port: Annotated[int, typer.Option(help="ZooKeeper client port.")] = 2181,
    kafka_port: Annotated[int, typer.Option(
        "--kafka-port", help="Port of the broker's Kafka listener (listeners=PLAINTEXT://127.0.0.1:PORT; 0: a free "
                             "port, logged).")] = 9092,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "info",
    log_format: Annotated[LogFormatOption, typer.Option(help=LOG_FORMAT_HELP)] = LogFormatOption.text,
    object_store: Annotated[bool, typer.Option("--object-store", help=OBJECT_STORE_HELP)] = False,
    object_store_port: Annotated[int, typer.Option(help="S3 port of --object-store (0 = a free one).")] = 0,
) -> None:
    """Embedded ZooKeeper + one broker in the foreground; Ctrl-C or SIGTERM stops both cleanly."""
    from lakelog.config import BrokerSettings, settings_from_properties
    from lakelog.runtime.zookeeper_server import ZooKeeperServer
    from lakelog.runtime.server import configure_logging, run_broker

    configure_logging(log_level, log_format=log_format.value)
    data_dir = data_dir.resolve()
    zk = ZooKeeperServer(data_dir=data_dir / "zookeeper", client_port=zookeeper_port)
    store = None
    with _stop_on_signals():
        try:
            zk.start()  # stops a ZooKeeper an earlier, killed `lakelog up` on this data dir left behind
            err_console.print(f"ZooKeeper at {zk.connect_string} (pid {zk.pid}); broker at http://127.0.0.1:{port}, "
                              f"Kafka listener at 127.0.0.1:{kafka_port}")
            lake: dict[str, str] = {}
            if object_store:
                store, lake = _start_object_store(data_dir, port=object_store_port)
            settings = BrokerSettings.load(port=port, log_dirs=data_dir / "logs", zookeeper_connect=zk.connect_string,
                                           listeners=f"PLAINTEXT://127.0.0.1:{kafka_port}",
                                           **settings_from_properties(lake))
            _wait_for_previous_registrations(zk.connect_string, [settings.broker_id])
            configure_logging(log_level, log_format=log_format.value, broker_id=settings.broker_id)
            run_broker(settings, log_level=log_level, log_format=log_format.value)  # returns after SIGINT/SIGTERM
        finally:
            if store is not None:
                store.stop()
            zk.stop()


def _start_object_store(data_dir: Path, *, port: int):
    """Start the embedded object store of ``--object-store`` under ``data_dir/object-store`` with its bucket;
    returns ``(server, the lake settings every broker gets)``. Exits with the error when it cannot start."""
    from lakelog.errors import LakelogError
    from lakelog.runtime.object_store import ObjectStoreServer

    store = ObjectStoreServer(data_dir=data_dir / "object-store", port=port or None)
    try:
        store.start()
        store.create_bucket(OBJECT_STORE_BUCKET)
    except (LakelogError, OSError) as e:
        store.stop()
        fail(str(e))
    err_console.print(f"Object store at {store.endpoint_url} (pid {store.pid}); lake.uri={OBJECT_STORE_LAKE_URI} "
                      f"(access key id {store.access_key_id}; the secret is in {store.config_file})")
    return store, store.lake_settings(OBJECT_STORE_LAKE_URI)


def _wait_for_previous_registrations(zookeeper_connect: str, broker_ids: list[int], *,
                                     timeout_s: float = 45.0) -> None:
    """Wait until no earlier broker holds any of ``broker_ids`` in the ZooKeeper just started.

    A killed ``lakelog up`` / ``lakelog cluster up`` leaves its brokers' ephemeral registrations in
    ZooKeeper's data; the restarted ZooKeeper keeps them until those sessions expire
    (``zookeeper.session.timeout.ms`` after the restart, at most 40 s with the embedded server's 2 s
    tick). As Kafka, a registration is never deleted on a broker's behalf: this waits for them
    (``timeout_s`` seconds at most), so the brokers then start instead of failing with "broker.id is
    already registered". Returns at once when there is none. Creates the chroot of ``zookeeper_connect``
    (``host:port,.../chroot``) if it is missing.
    """
    from kazoo.client import KazooClient

    from lakelog.replication.metadata import BROKERS_PATH

    hosts, slash, chroot = zookeeper_connect.partition("/")
    chroot = slash + chroot if chroot else ""
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=15.0)
    try:
        if chroot:
            client.ensure_path(chroot)

        def registered() -> list[int]:
            return [i for i in broker_ids if client.exists(f"{chroot}{BROKERS_PATH}/{i}") is not None]

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
    zookeeper_port: Annotated[int, typer.Option(help="ZooKeeper client port (a single node; an ensemble's are "
                                                      "chosen free).")] = 2181,
    zookeeper_nodes: Annotated[int, typer.Option(
        "--zookeeper-nodes", help="ZooKeeper servers: 1 (standalone, DATA_DIR/zookeeper) or an ensemble of 3 or 5 "
                                  "(DATA_DIR/zookeeper/node-N, every port chosen free).")] = 1,
    zookeeper_chroot: Annotated[str, typer.Option(
        "--zookeeper-chroot", help="The brokers' chroot in an ensemble (zookeeper.connect HOST:PORT,...,HOST:PORT"
                                   "/CHROOT).")] = "/lakelog",
    config: Annotated[Optional[Path], typer.Option("--config", help="A broker .properties file for every broker.")] = None,
    kafka_port: Annotated[int, typer.Option(
        "--kafka-port", help="Port of broker 0's Kafka listener; broker N gets port + N (0: free ports). Unless "
                             "--config sets listeners; none with --secure (the default listener is PLAINTEXT: set "
                             "listeners, e.g. SASL_SSL://:9093, in --config for one with authentication).")] = 9092,
    log_level: Annotated[str, typer.Option(help="Log level of the brokers.")] = "info",
    log_format: Annotated[LogFormatOption, typer.Option(help=LOG_FORMAT_HELP)] = LogFormatOption.text,
    secure: Annotated[bool, typer.Option(
        "--secure", help="TLS, authentication and ACLs: a CA, broker and client certificates, a super user "
                         "'admin' (its password printed once, kept in DATA_DIR/tls/admin.password) under "
                         "DATA_DIR/tls; brokers with HTTPS, authentication.methods=basic,mtls and the authorizer.")] = False,
    object_store: Annotated[bool, typer.Option("--object-store", help=OBJECT_STORE_HELP)] = False,
    object_store_port: Annotated[int, typer.Option(help="S3 port of --object-store (0 = a free one).")] = 0,
) -> None:
    """Embedded ZooKeeper (one server, or an ensemble with --zookeeper-nodes 3 or 5) + N broker processes
    (distinct ports and log dirs) in the foreground.

    Ctrl-C or SIGTERM stops the brokers one by one with SIGTERM (each hands its leaderships over:
    controlled shutdown), then ZooKeeper. ``--secure``: see :mod:`lakelog.security.secure_setup`.
    """
    from lakelog.config import read_properties
    from lakelog.runtime.broker_process import BrokerProcess
    from lakelog.runtime.zookeeper_ensemble import ZooKeeperEnsemble
    from lakelog.runtime.zookeeper_server import ZooKeeperServer

    data_dir = data_dir.resolve()
    if zookeeper_nodes == 1:
        zk = ZooKeeperServer(data_dir=data_dir / "zookeeper", client_port=zookeeper_port)
        zookeeper_connect = zk.connect_string
    else:
        if not zookeeper_chroot.startswith("/") or zookeeper_chroot == "/" or zookeeper_chroot.endswith("/"):
            fail(f"--zookeeper-chroot is a znode path such as /lakelog, not {zookeeper_chroot!r}")
        try:
            zk = ZooKeeperEnsemble(data_dir=data_dir / "zookeeper", nodes=zookeeper_nodes)
        except ValueError as e:
            fail(f"--zookeeper-nodes: {e}")
        zookeeper_connect = zk.connect_string + zookeeper_chroot
    tls = _secure_setup(data_dir, brokers=brokers, config=config) if secure else None
    kafka = not secure and (config is None or "listeners" not in read_properties(config, missing_ok=True))
    procs = [BrokerProcess(zookeeper_connect=zookeeper_connect, log_dirs=data_dir / f"broker-{i}", broker_id=i,
                           port=port + i, log_file=data_dir / f"broker-{i}.log", log_level=log_level,
                           log_format=log_format.value, new_session=True, config_file=config,
                           **({"extra_env": {"LAKELOG_LISTENERS": f"PLAINTEXT://127.0.0.1:{kafka_port and kafka_port + i}"}}
                              if kafka else {}),
                           **({} if tls is None else {
                               "extra_env": tls.broker_env(), "ssl_certfile": tls.brokers[i].certfile,
                               "ssl_keyfile": tls.brokers[i].keyfile, "ssl_cafile": tls.cafile}))
             for i in range(brokers)]
    store = None
    with _stop_on_signals():
        try:
            zk.start()
            if object_store:
                store, lake = _start_object_store(data_dir, port=object_store_port)
                lake_env = {"LAKELOG_" + k.replace(".", "_").upper(): v for k, v in lake.items()}
                for proc in procs:
                    proc.extra_env = {**proc.extra_env, **lake_env}
            _wait_for_previous_registrations(zookeeper_connect, [proc.broker_id for proc in procs])
            if tls is not None:
                tls.ensure_super_user(zookeeper_connect)
            for proc in procs:
                proc.start()
            servers = ",".join(proc.url.replace("http://", "") for proc in procs)
            zk_pids = zk.pid if zookeeper_nodes == 1 else ", ".join(str(node.pid) for node in zk.servers)
            err_console.print(f"ZooKeeper at {zookeeper_connect} (pid {zk_pids}); {brokers} brokers: {servers} "
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
            if store is not None:
                store.stop()
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
