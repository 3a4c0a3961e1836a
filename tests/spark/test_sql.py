"""SQL over topic history: partition tables written by delta-rs, read by delta-spark in Kafka's shape.

Tests marked ``spark`` share one small local SparkSession (``conftest.py``); every test writes its
own partition tables under its own ``tmp_path``. The unmarked tests at the end check the session
configuration and the jar-caching fallback without starting a JVM.
"""

from __future__ import annotations

import datetime as dt
import importlib
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakelog.log_tables.schema import LOG_SCHEMA, table_dir_name
from lakelog.spark.sql import (KAFKA_SOURCE_SCHEMA, LOG_APPEND_TIME, PartitionLogInfo, create_topic_view,
                               lake_bound, quote_identifier, register_topic_view, topic_dataframe, topic_view_sql)

# The module, not the `session` function the package may re-export under the same name.
session_module = importlib.import_module("lakelog.spark.session")

BASE_MS = 1_700_000_000_123  # 2023-11-14T22:13:20.123Z; the .123 checks millisecond precision

# Spark's Kafka source schema, written out independently of lakelog.spark.sql (Structured Streaming +
# Kafka Integration Guide; KafkaRecordToRowConverter.kafkaSchema(includeHeaders = true)).
KAFKA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
             "timestampType int, headers array<struct<key: string, value: binary>>")

# The log table's columns as Spark DDL (lakelog.log_tables.schema docstring).
LOG_DDL = ("offset long, timestamp timestamp, key binary, value binary, "
           "headers array<struct<key: string, value: binary>>, leader_epoch int, producer_id long, "
           "producer_epoch short, sequence int")


def record(offset: int, key: bytes | None, value: bytes | None, headers=None, *, leader_epoch: int = 0) -> dict:
    """One log row (LOG_SCHEMA) with a millisecond timestamp derived from the offset."""
    return {
        "offset": offset,
        "timestamp": dt.datetime.fromtimestamp((BASE_MS + offset * 1000) / 1000, tz=dt.timezone.utc),
        "key": key,
        "value": value,
        "headers": [{"key": k, "value": v} for k, v in headers] if headers is not None else [],
        "leader_epoch": leader_epoch,
        "producer_id": None,
        "producer_epoch": None,
        "sequence": None,
    }


def write_partition(log_dir: Path, topic: str, partition: int, batches: list[list[dict]]) -> str:
    """Write a partition table the way the broker does (delta-rs, LOG_SCHEMA), one commit per batch."""
    uri = str(log_dir / table_dir_name(topic, partition))
    for batch in batches:
        write_deltalake(uri, pa.Table.from_pylist(batch, schema=LOG_SCHEMA), mode="append")
    return uri


ALL_BYTES = bytes(range(256))
UNICODE_KEY = "ключ-🔑-キー".encode()

# Partition 0: offsets 0..9 in two commits; log start offset 2 (0 and 1 are before it, e.g. retention
# has not deleted them yet), high watermark 8 (8 and 9 are appended but not committed).
P0_RECORDS = [
    record(0, b"old", b"before the log start offset"),
    record(1, None, b"also before it"),
    record(2, None, b"null key"),
    record(3, b"k", None),                                   # tombstone
    record(4, b"", b""),                                     # empty key and value, not null
    record(5, ALL_BYTES, ALL_BYTES[::-1]),                   # every byte value
    record(6, UNICODE_KEY, "värde ✓".encode(),
           headers=[("trace-id", b"\x00\xff"), ("ключ", None), ("dup", b"a"), ("dup", b"b"), ("", b"")]),
    record(7, b"k", b"v", headers=[]),                       # no headers -> null, as in Kafka's source
    record(8, b"uncommitted", b"at the HW"),
    record(9, b"uncommitted", b"above the HW"),
]
P0_LOG_START, P0_HW = 2, 8
# Partition 1: offsets 0..4, all committed.
P1_RECORDS = [record(o, b"p1-%d" % o, b"x" * o, headers=[("n", b"%d" % o)]) for o in range(5)]
P1_LOG_START, P1_HW = 0, 5


def log_info(topic: str, partition: int, table_uri: str, log_start_offset: int, high_watermark: int,
             timestamp_type: int = 0) -> PartitionLogInfo:
    """A partition's bounds as the gateway would report them (LEO = HW, leader epoch 0)."""
    return PartitionLogInfo(topic=topic, partition=partition, table_uri=table_uri, log_start_offset=log_start_offset,
                            lake_end_offset=high_watermark, log_end_offset=high_watermark, high_watermark=high_watermark, leader_epoch=0,
                            timestamp_type=timestamp_type)


def make_topic(tmp_path: Path, topic: str, timestamp_type: int = 0) -> list[PartitionLogInfo]:
    log_dir = tmp_path / "logs"
    uri0 = write_partition(log_dir, topic, 0, [P0_RECORDS[:5], P0_RECORDS[5:]])
    uri1 = write_partition(log_dir, topic, 1, [P1_RECORDS])
    return [log_info(topic, 0, uri0, P0_LOG_START, P0_HW, timestamp_type),
            log_info(topic, 1, uri1, P1_LOG_START, P1_HW, timestamp_type)]


def expected_rows(topic: str, timestamp_type: int = 0) -> list[tuple]:
    rows = []
    for partition, records, start, hw in ((0, P0_RECORDS, P0_LOG_START, P0_HW), (1, P1_RECORDS, P1_LOG_START, P1_HW)):
        for r in records:
            if start <= r["offset"] < hw:
                headers = [(h["key"], h["value"]) for h in r["headers"]] or None
                rows.append((r["key"], r["value"], topic, partition, r["offset"],
                             BASE_MS + r["offset"] * 1000, timestamp_type, headers))
    return sorted(rows, key=lambda t: (t[3], t[4]))


def collect(spark, relation: str) -> list[tuple]:
    """Rows of a view/table in Kafka's shape as plain tuples (timestamp as epoch ms), by partition, offset."""
    result = spark.sql(
        f"SELECT key, value, topic, partition, offset, unix_millis(timestamp) AS ts, timestampType, headers "
        f"FROM {relation} ORDER BY partition, offset").collect()
    out = []
    for r in result:
        headers = None if r.headers is None else [
            (h.key, None if h.value is None else bytes(h.value)) for h in r.headers]
        out.append((None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
                    r.topic, r.partition, r.offset, r.ts, r.timestampType, headers))
    return out


# --------------------------------------------------------------------------------------------------
# Spark tests


@pytest.mark.spark
def test_session_has_delta_utc_and_no_ui(spark):
    assert "io.delta.sql.DeltaSparkSessionExtension" in spark.conf.get("spark.sql.extensions")
    assert spark.conf.get("spark.sql.catalog.spark_catalog") == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
    assert spark.sparkContext.master == "local[2]"
    assert spark.sparkContext.uiWebUrl is None


@pytest.mark.spark
def test_topic_dataframe_has_kafka_source_schema(spark, tmp_path):
    df = topic_dataframe(spark, make_topic(tmp_path, "orders"))
    kafka_schema = spark.createDataFrame([], KAFKA_DDL).schema
    assert df.schema == kafka_schema
    assert df.schema == KAFKA_SOURCE_SCHEMA
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


@pytest.mark.spark
def test_view_returns_exactly_the_committed_records(spark, tmp_path):
    partitions = make_topic(tmp_path, "orders")
    name = register_topic_view(spark, "orders", partitions)
    assert name == "orders"
    rows = collect(spark, name)
    assert rows == expected_rows("orders")
    # Spot checks of the edge cases, on top of the full comparison.
    by_offset = {(r[3], r[4]): r for r in rows}
    assert (0, 0) not in by_offset and (0, 1) not in by_offset        # before the log start offset
    assert (0, 8) not in by_offset and (0, 9) not in by_offset        # at and above the HW
    assert by_offset[(0, 2)][0] is None                               # null key
    assert by_offset[(0, 3)][1] is None                               # tombstone
    assert by_offset[(0, 4)][:2] == (b"", b"")                        # empty, not null
    assert by_offset[(0, 5)][:2] == (ALL_BYTES, ALL_BYTES[::-1])
    assert by_offset[(0, 6)][0].decode() == "ключ-🔑-キー"
    assert by_offset[(0, 6)][7] == [("trace-id", b"\x00\xff"), ("ключ", None), ("dup", b"a"), ("dup", b"b"), ("", b"")]
    assert by_offset[(0, 7)][7] is None                               # no headers


@pytest.mark.spark
def test_view_in_the_lakelog_schema_equals_the_temp_view(spark, tmp_path):
    schema = f"lakelog_{uuid.uuid4().hex[:8]}"
    partitions = make_topic(tmp_path, "orders.v1", timestamp_type=LOG_APPEND_TIME)
    name = create_topic_view(spark, "orders.v1", partitions, schema=schema)
    assert name == f"{schema}.orders_v1"
    assert collect(spark, name) == expected_rows("orders.v1", timestamp_type=1)
    assert spark.table(name).schema == KAFKA_SOURCE_SCHEMA
    assert [r.tableName for r in spark.sql(f"SHOW TABLES IN {schema}").collect() if not r.isTemporary] == ["orders_v1"]
    # Re-creating moves the bounds; an empty topic keeps the schema.
    create_topic_view(spark, "orders.v1", [], schema=schema)
    assert spark.table(name).count() == 0 and spark.table(name).schema == KAFKA_SOURCE_SCHEMA


@pytest.mark.spark
def test_timestamps_are_utc_milliseconds_and_timestamp_type_is_reported(spark, tmp_path):
    partitions = make_topic(tmp_path, "clicks", timestamp_type=LOG_APPEND_TIME)
    register_topic_view(spark, "clicks", partitions)
    assert collect(spark, "clicks") == expected_rows("clicks", timestamp_type=1)
    first = spark.sql("SELECT CAST(timestamp AS STRING) AS ts FROM clicks WHERE partition = 1 AND offset = 0").first()
    assert first.ts == "2023-11-14 22:13:20.123"
    assert spark.sql("SELECT DISTINCT timestampType FROM clicks").collect() == [(1,)]


@pytest.mark.spark
def test_sql_aggregations(spark, tmp_path):
    register_topic_view(spark, "orders", make_topic(tmp_path, "orders"))
    counts = spark.sql("SELECT partition, count(*) AS n FROM orders GROUP BY partition ORDER BY partition").collect()
    assert [tuple(r) for r in counts] == [(0, P0_HW - P0_LOG_START), (1, P1_HW - P1_LOG_START)]

    stats = spark.sql("""
        SELECT partition,
               min(offset) AS first, max(offset) AS last,
               count_if(value IS NULL) AS tombstones,
               count_if(key IS NULL) AS null_keys,
               sum(length(value)) AS value_bytes,
               sum(coalesce(size(headers), 0)) AS headers
        FROM orders GROUP BY partition ORDER BY partition""").collect()
    expected = {0: P0_RECORDS[P0_LOG_START:P0_HW], 1: P1_RECORDS}
    for row in stats:
        recs = expected[row.partition]
        assert (row.first, row.last) == (recs[0]["offset"], recs[-1]["offset"])
        assert row.tombstones == sum(r["value"] is None for r in recs)
        assert row.null_keys == sum(r["key"] is None for r in recs)
        assert row.value_bytes == sum(len(r["value"]) for r in recs if r["value"] is not None)
        assert row.headers == sum(len(r["headers"]) for r in recs)

    # Header values are reachable with SQL's higher-order functions, as with Spark's Kafka source.
    trace = spark.sql("""
        SELECT offset, filter(headers, h -> h.key = 'trace-id')[0].value AS trace
        FROM orders WHERE exists(headers, h -> h.key = 'trace-id')""").collect()
    assert [(r.offset, bytes(r.trace)) for r in trace] == [(6, b"\x00\xff")]


@pytest.mark.spark
def test_records_above_the_high_watermark_appear_only_when_it_moves(spark, tmp_path):
    partitions = make_topic(tmp_path, "orders")
    register_topic_view(spark, "orders", partitions)
    uri0 = partitions[0].table_uri
    write_deltalake(uri0, pa.Table.from_pylist([record(10, b"later", b"later")], schema=LOG_SCHEMA), mode="append")
    assert spark.sql("SELECT count(*) FROM orders WHERE partition = 0").first()[0] == P0_HW - P0_LOG_START

    moved = [log_info("orders", 0, uri0, P0_LOG_START, 11), partitions[1]]
    register_topic_view(spark, "orders", moved)
    offsets = [r.offset for r in spark.sql("SELECT offset FROM orders WHERE partition = 0 ORDER BY offset").collect()]
    assert offsets == list(range(P0_LOG_START, 11))


@pytest.mark.spark
def test_views_stop_at_the_lake_end_offset_when_it_lags_the_high_watermark(spark, tmp_path):
    # The two-tier log: the Delta table holds the offsets below the lake end offset (here 6), the
    # rest up to the HW (8) is in the leader's segment tail. Even if the table held more (a flush
    # that landed after the view was made), a view shows only what was below the lake end offset.
    p0, p1 = make_topic(tmp_path, "orders")
    lagging = p0.model_copy(update={"lake_end_offset": 6})
    name = register_topic_view(spark, "orders", [lagging, p1])
    offsets = [(r.partition, r.offset) for r in spark.sql(f"SELECT partition, offset FROM {name}").collect()]
    assert sorted(offsets) == [(0, o) for o in range(P0_LOG_START, 6)] + [(1, o) for o in range(P1_HW)]
    assert lake_bound(lagging) == 6 and lake_bound(p1) == P1_HW
    assert "offset < 6" in topic_view_sql([lagging]) and f"offset < {P0_HW}" not in topic_view_sql([lagging])
    # a lake end offset past the HW (never reported so) still stops at the HW
    assert lake_bound(p0.model_copy(update={"lake_end_offset": P0_HW + 5})) == P0_HW


@pytest.mark.spark
def test_view_names_are_quoted_when_needed(spark, tmp_path):
    topic = "eu.orders-v1_raw"
    partitions = make_topic(tmp_path, topic)
    name = register_topic_view(spark, topic, partitions)
    assert name == "`eu.orders-v1_raw`"
    assert spark.sql(f"SELECT count(*) FROM {name}").first()[0] == len(expected_rows(topic))
    assert spark.sql(f"SELECT DISTINCT topic FROM {name}").collect() == [(topic,)]

    alias = register_topic_view(spark, topic, partitions, view_name="orders_alias")
    assert alias == "orders_alias"
    assert spark.sql("SELECT count(*) FROM orders_alias").first()[0] == len(expected_rows(topic))
    assert spark.catalog.tableExists(name) and spark.catalog.tableExists("orders_alias")


@pytest.mark.spark
def test_empty_topic_gives_empty_dataframe_with_kafka_schema(spark):
    df = topic_dataframe(spark, [])
    assert df.schema == KAFKA_SOURCE_SCHEMA
    assert df.count() == 0
    name = register_topic_view(spark, "empty-topic", [])
    assert spark.sql(f"SELECT partition, count(*) FROM {name} GROUP BY partition").collect() == []


@pytest.mark.spark
def test_empty_partition_table_and_empty_offset_range(spark, tmp_path):
    uri = str(tmp_path / "logs" / "quiet-0")
    write_deltalake(uri, pa.Table.from_pylist([], schema=LOG_SCHEMA), mode="append")
    uri1 = write_partition(tmp_path / "logs", "quiet", 1, [P1_RECORDS])
    df = topic_dataframe(spark, [log_info("quiet", 0, uri, 0, 0),
                                 log_info("quiet", 1, uri1, 3, 3)])
    assert df.schema == KAFKA_SOURCE_SCHEMA
    assert df.count() == 0


@pytest.mark.spark
def test_delta_rs_tables_are_protocol_compatible_with_delta_spark(spark, tmp_path):
    uri = make_topic(tmp_path, "orders")[0].table_uri
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").first()
    protocol = DeltaTable(uri).protocol()
    assert detail.format == "delta"
    assert (detail.minReaderVersion, detail.minWriterVersion) == (
        protocol.min_reader_version, protocol.min_writer_version)
    assert detail.minReaderVersion in (1, 2, 3)
    assert "deletionVectors" not in (detail.tableFeatures or [])
    assert detail.numFiles == 2
    # delta-spark reads the log table with the documented Spark types.
    assert spark.read.format("delta").load(uri).schema.simpleString() == spark.createDataFrame([], LOG_DDL).schema.simpleString()
    history = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").select("version").collect()
    assert sorted(r.version for r in history) == [0, 1] == list(range(DeltaTable(uri).version() + 1))


@pytest.mark.spark
def test_delta_spark_appends_and_delta_rs_reads_back(spark, tmp_path):
    uri = write_partition(tmp_path / "logs", "mixed", 0, [P0_RECORDS[:4]])
    protocol_before = DeltaTable(uri).protocol()

    # delta-spark appends offsets 4..7 (with nulls, all bytes, unicode and headers).
    spark.createDataFrame(P0_RECORDS[4:8], LOG_DDL).write.format("delta").mode("append").save(uri)
    # delta-rs appends after Spark's commit.
    write_deltalake(uri, pa.Table.from_pylist(P0_RECORDS[8:], schema=LOG_SCHEMA), mode="append")

    table = DeltaTable(uri)
    assert table.version() == 2
    assert table.protocol() == protocol_before          # Spark's append did not upgrade the protocol
    from_rs = sorted(table.to_pyarrow_table().cast(LOG_SCHEMA).to_pylist(), key=lambda r: r["offset"])
    assert from_rs == P0_RECORDS

    # Both engines agree on every committed record, read through the Kafka-shaped view as well.
    register_topic_view(spark, "mixed", [log_info("mixed", 0, uri, 0, 10)])
    from_spark = collect(spark, "mixed")
    assert [(r[0], r[1], r[4], r[5]) for r in from_spark] == [
        (r["key"], r["value"], r["offset"], BASE_MS + r["offset"] * 1000) for r in from_rs]
    assert [r[7] for r in from_spark] == [
        [(h["key"], h["value"]) for h in r["headers"]] or None for r in from_rs]


# --------------------------------------------------------------------------------------------------
# No JVM: configuration and helpers


def test_partition_log_info_validates():
    log_info("t", 0, "/x", 0, 0)
    with pytest.raises(ValueError):
        log_info("t", -1, "/x", 0, 0)
    with pytest.raises(ValueError):
        log_info("t", 0, "/x", 5, 4)
    with pytest.raises(ValueError):
        log_info("t", 0, "/x", 0, 1, timestamp_type=2)
    with pytest.raises(Exception):
        log_info("t", 0, "/x", 0, 1).high_watermark = 3  # frozen


def test_partition_log_info_is_the_gateways_logs_body():
    from lakelog.ingest_api import models
    from lakelog.spark.sql import partition_logs_from_gateway

    body = {"topic": "t", "partition": 1, "table_uri": "/data/t-1", "log_start_offset": 2, "lake_end_offset": 5, "log_end_offset": 9,
            "high_watermark": 7, "leader_epoch": 3, "timestamp_type": 1, "last_stable_offset": 6}
    assert PartitionLogInfo.model_validate(body).model_dump(exclude_none=True) == body  # no table facts asked
    # a body without the last stable offset (a broker without transactions): the high watermark
    assert PartitionLogInfo.model_validate({k: v for k, v in body.items() if k != "last_stable_offset"}
                                           ).last_stable_offset == 7
    # the gateway's response model and this one read and write the same JSON
    assert models.PartitionLogInfo.model_validate(body).model_dump(exclude_none=True) == body
    ours, gateways = PartitionLogInfo.model_json_schema(), models.PartitionLogInfo.model_json_schema()
    assert (ours["properties"], sorted(ours["required"])) == (gateways["properties"], sorted(gateways["required"]))
    with pytest.raises(ValueError):
        PartitionLogInfo.model_validate({k: v for k, v in body.items() if k != "leader_epoch"})

    class FakeClient:
        def topic_logs(self, topic):
            return [dict(body, topic=topic, partition=p) for p in (0, 1)]

    assert [(i.topic, i.partition, i.high_watermark) for i in partition_logs_from_gateway(FakeClient(), "u")] == [
        ("u", 0, 7), ("u", 1, 7)]


def test_register_topic_view_refuses_other_topics_partitions():
    with pytest.raises(ValueError, match="other topics"):
        register_topic_view(None, "a", [log_info("b", 0, "/x", 0, 0)])


@pytest.mark.parametrize("name, quoted", [
    ("orders", "orders"),
    ("_orders_2", "_orders_2"),
    ("orders.v1", "`orders.v1`"),
    ("my-topic", "`my-topic`"),
    ("2024_orders", "`2024_orders`"),
    ("select", "`select`"),
    ("Join", "`Join`"),
    ("we`ird", "`we``ird`"),
    ("`already.quoted`", "`already.quoted`"),
])
def test_quote_identifier(name, quoted):
    assert quote_identifier(name) == quoted


def test_shipped_conf_files():
    defaults = session_module.read_spark_defaults()
    assert defaults["spark.sql.session.timeZone"] == "UTC"
    assert defaults["spark.ui.enabled"] == "false"
    log4j = session_module.LOG4J2_FILE.read_text()
    assert "rootLogger.level = warn" in log4j
    assert "logger.lakelog.name = lakelog" in log4j and "logger.lakelog.level = info" in log4j


def test_read_spark_defaults_syntax(tmp_path):
    f = tmp_path / "spark-defaults.conf"
    f.write_text("# comment\n! comment\n\nspark.a   1\nspark.b=2\nspark.c: 3\n"
                 "spark.d  -Dx=y -Dz=file:/w\nspark.jars.ivy ~/.ivy2\n")
    assert session_module.read_spark_defaults(f) == {
        "spark.a": "1", "spark.b": "2", "spark.c": "3", "spark.d": "-Dx=y -Dz=file:/w",
        "spark.jars.ivy": str(Path.home() / ".ivy2")}
    assert session_module.read_spark_defaults(tmp_path / "missing.conf") == {}


def test_session_conf_precedence(monkeypatch):
    monkeypatch.delenv(session_module.MASTER_ENV, raising=False)
    conf = session_module.session_conf()
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.app.name"] == "lakelog"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.catalog.spark_catalog"] == session_module.DELTA_CATALOG
    assert conf["spark.sql.extensions"] == session_module.DELTA_SQL_EXTENSION
    # The jar delta-spark's own pip helper names for the installed pyspark (delta-spark_4.2_2.13 for 4.2.x)
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession
    delta_pip = configure_spark_with_delta_pip(SparkSession.Builder())._options["spark.jars.packages"]
    assert conf["spark.jars.packages"] == delta_pip == session_module.delta_maven_coordinates()[0]
    assert f"-Dlog4j2.configurationFile={session_module.LOG4J2_FILE.as_uri()}" in conf["spark.driver.extraJavaOptions"]

    monkeypatch.setenv(session_module.MASTER_ENV, "local[3]")
    assert session_module.session_conf()["spark.master"] == "local[3]"
    assert session_module.session_conf(master="local[1]")["spark.master"] == "local[1]"

    # a driver spark-submit started: its --master and --conf win over the env and the conf file
    submitted = {"spark.master": "spark://127.0.0.1:7077", "spark.executor.memory": "512m",
                 "spark.sql.shuffle.partitions": "3"}
    conf = session_module.session_conf(submitted=submitted)
    assert (conf["spark.master"], conf["spark.executor.memory"]) == ("spark://127.0.0.1:7077", "512m")
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert session_module.session_conf(master="local[1]", submitted=submitted)["spark.master"] == "local[1]"
    assert not session_module._has_delta_jars(submitted)
    assert session_module._has_delta_jars({"spark.jars.packages": session_module.delta_maven_coordinates()[0]})

    conf = session_module.session_conf(app_name="job", conf={
        "spark.ui.enabled": "true",
        "spark.sql.extensions": "com.example.Ext",
        "spark.jars.packages": "org.example:thing:1.0",
        "spark.driver.extraJavaOptions": "-Dfoo=bar",
    })
    assert conf["spark.app.name"] == "job"
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.sql.extensions"] == f"{session_module.DELTA_SQL_EXTENSION},com.example.Ext"
    assert conf["spark.jars.packages"].split(",")[1:] == ["org.example:thing:1.0"]
    assert conf["spark.driver.extraJavaOptions"].endswith(" -Dfoo=bar")
    assert conf["spark.driver.extraJavaOptions"].startswith(f"-Xss{session_module.DRIVER_THREAD_STACK} ")


def test_ensure_delta_jars_falls_back_to_maven(monkeypatch):
    calls = []
    results = iter([(False, "Spark's resolver exited with 1: unresolved dependency"), (True, "")])
    monkeypatch.setattr(session_module, "_resolve_with_spark", lambda t: calls.append("spark") or next(results))
    monkeypatch.setattr(session_module, "_resolve_with_maven", lambda t: calls.append("maven"))
    session_module.ensure_delta_jars(timeout_s=60)
    assert calls == ["spark", "maven", "spark"]


def test_ensure_delta_jars_uses_spark_alone_when_it_works(monkeypatch):
    calls = []
    monkeypatch.setattr(session_module, "_resolve_with_spark", lambda t: calls.append("spark") or (True, ""))
    monkeypatch.setattr(session_module, "_resolve_with_maven", lambda t: calls.append("maven"))
    session_module.ensure_delta_jars(timeout_s=60)
    assert calls == ["spark"]


def test_ensure_delta_jars_reports_failure(monkeypatch):
    monkeypatch.setattr(session_module, "_resolve_with_spark", lambda t: (False, "no route"))
    monkeypatch.setattr(session_module, "_resolve_with_maven", lambda t: None)
    with pytest.raises(session_module.DeltaJarsError, match="no route"):
        session_module.ensure_delta_jars(timeout_s=60)
