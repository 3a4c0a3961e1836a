"""SQL over topic history: a topic's partition logs as one DataFrame / temp view in Spark's Kafka shape.

Each partition log is a Delta table written by the broker with delta-rs (schema:
:data:`lakelog.log_tables.schema.LOG_SCHEMA`); here delta-spark reads those tables and reshapes the
committed records in them (``log_start_offset <= offset < lake end offset``) into the rows Spark's own
Kafka source produces, so a query written against ``spark.read.format("kafka")`` runs unchanged::

    key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int, headers array<struct<key: string, value: binary>>

(Spark's ``KafkaRecordToRowConverter.kafkaSchema(includeHeaders = true)``, as listed in the
Structured Streaming + Kafka Integration Guide. Every field is nullable there, so it is here.)

The views read Delta only. A partition log has two tiers (DESIGN.md, "Storage"): the broker's flusher
commits records to the table every ``lake.commit.interval.ms`` of the topic, and only offsets below the
high watermark (HW), so the table holds the offsets below the partition's *lake end offset*
(:attr:`PartitionLogInfo.lake_end_offset <lakelog.protocol.log_info.PartitionLogInfo>`, at most the
HW). Every bound here is that offset (:func:`lake_bound`): a view never shows a record at or above
the HW, and records between the lake end offset and the HW (still in the leader's segment tail) appear
once the flusher committed them and the view was registered again. To read up to the HW, use the
``lakelog`` data source with ``lakelog.read.tail=true`` (:mod:`lakelog.spark.source`).

Example::

    spark = lakelog.spark.session()
    register_topic_view(spark, "orders.v1", partitions)      # -> "`orders.v1`"
    spark.sql("SELECT partition, count(*) FROM `orders.v1` GROUP BY partition").show()
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Sequence

from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, DataType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from lakelog.protocol.log_info import CREATE_TIME, LOG_APPEND_TIME, PartitionLogInfo
from lakelog.replication.errors import UnknownTopicError
from lakelog.spark.typed_views import partition_typed_columns, typed_select_sql

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelog.client import LakelogClient

#: Timestamp types as in Kafka's ``TimestampType.id`` (the ``timestampType`` column), and
#: :class:`~lakelog.protocol.log_info.PartitionLogInfo`, the partition bounds every function here takes:
#: re-exported from :mod:`lakelog.protocol.log_info`.
__all__ = [
    "CREATE_TIME", "KAFKA_HEADERS_TYPE", "KAFKA_SOURCE_SCHEMA", "LOG_APPEND_TIME", "PartitionLogInfo", "SCHEMA",
    "catalog_view_name", "create_topic_view", "history", "in_object_store", "lake_bound", "register_lake_topic_view", "partition_logs_from_gateway", "quote_identifier",
    "consumer_offsets_sql", "register_consumer_offsets", "register_topic_view", "register_topics_from_gateway", "topic_dataframe",
    "topic_view_sql",
]

#: ``headers`` column of Spark's Kafka source (``KafkaRecordToRowConverter.headersType``).
KAFKA_HEADERS_TYPE = ArrayType(StructType([
    StructField("key", StringType(), True),
    StructField("value", BinaryType(), True),
]), True)

#: Output schema of Spark's Kafka source with ``includeHeaders=true``, in its column order.
KAFKA_SOURCE_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
    StructField("headers", KAFKA_HEADERS_TYPE, True),
])


def topic_dataframe(spark: "SparkSession", partitions: Sequence[PartitionLogInfo], *,
                    as_of_timestamp: str | None = None) -> "DataFrame":
    """The committed records of a topic's partitions as a DataFrame shaped like Spark's Kafka source.

    Args:
        spark: a session with Delta configured (:func:`lakelog.spark.session`).
        partitions: the partitions to read, usually all of one topic; each is read with
            ``spark.read.format("delta").load(table_uri)`` and filtered to
            ``log_start_offset <= offset < lake end offset`` (:func:`lake_bound`, at most the HW), so
            uncommitted records (at or above the HW) are never visible. The snapshot is the table's
            latest version at analysis time.

    Returns:
        The union of the partitions, schema :data:`KAFKA_SOURCE_SCHEMA` exactly (names, order, types,
        all nullable): ``key binary, value binary, topic string, partition int, offset long,
        timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>``.
        ``value`` null is a tombstone; ``headers`` is null for a record without headers, as in
        Spark's Kafka source. No partitions: an empty DataFrame with that schema. Row order is not
        defined (as in any DataFrame); order by ``partition, offset`` when it matters.

    ``as_of_timestamp`` (``"2024-05-01 12:00:00"``, UTC) reads each partition table as it was then
    (Delta's ``timestampAsOf``): the topic's history up to that moment.
    """
    return spark.sql(topic_view_sql(partitions, as_of_timestamp=as_of_timestamp))


_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Words Spark's parser refuses as an unquoted table name even with the default (non-enforced)
# keyword rules: the "strict non-reserved" keywords, plus ANSI reserved words, which are refused
# when spark.sql.ansi.enforceReservedKeywords=true.
_SQL_KEYWORDS = frozenset("""
anti cross except full inner intersect join lateral left minus natural on right semi setminus union using
all and any as authorization both case cast check collate column constraint create current_date
current_time current_timestamp current_user distinct else end escape false fetch filter for foreign from
grant group having in into is leading limit not null of offset only or order outer overlaps primary
references select session_user some table then to trailing true unique user when where with
""".split())


def quote_identifier(name: str) -> str:
    """``name`` as a SQL identifier: unchanged if it is a plain one, else in backticks.

    ``orders`` -> ``orders``; ``orders.v1`` -> ```orders.v1```; ``my-topic`` -> ```my-topic```;
    keywords (``select``) and names starting with a digit are quoted too; a backtick inside the name
    is doubled; an already backtick-quoted name is returned as is.
    """
    if len(name) >= 2 and name.startswith("`") and name.endswith("`"):
        return name
    if _PLAIN_IDENTIFIER.fullmatch(name) and name.lower() not in _SQL_KEYWORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def register_topic_view(spark: "SparkSession", topic: str, partitions: Sequence[PartitionLogInfo], *,
                        view_name: str | None = None) -> str:
    """Register :func:`topic_dataframe` of ``partitions`` as a session temp view; return its SQL name.

    Args:
        spark: a session with Delta configured.
        topic: the topic; every ``partitions`` entry must belong to it.
        partitions: as for :func:`topic_dataframe` (empty: a view with no rows).
        view_name: the view's name. Default: the topic name. Quoted with backticks when needed
            (topic names may contain ``.`` and ``-``), see :func:`quote_identifier`.

    Returns:
        The view name as written in SQL, e.g. ``"orders"`` or ``"`orders.v1`"``. An existing temp
        view of that name is replaced. The view pins nothing: each query re-reads the Delta tables,
        but the offset bounds (log start offset, lake end offset) are the ones given here; register
        again to move them.
    """
    others = sorted({p.topic for p in partitions if p.topic != topic})
    if others:
        raise ValueError(f"partitions of other topics given for topic {topic!r}: {others}")
    name = quote_identifier(view_name if view_name is not None else topic)
    topic_dataframe(spark, partitions).createOrReplaceTempView(name)
    return name


#: The schema (database) that :func:`register_topics_from_gateway` puts a view per topic into.
SCHEMA = "lakelog"

# The Kafka source's columns are all nullable, the log table's offset and timestamp are not: a union's
# output is nullable where any input is, so a typed empty row set leading the union gives exactly
# KAFKA_SOURCE_SCHEMA (the optimizer drops it again), and an empty topic still has the schema.
_KAFKA_SELECT_NULLS = ", ".join(f"CAST(NULL AS {f.dataType.simpleString()}) AS {f.name}" for f in KAFKA_SOURCE_SCHEMA)


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def topic_view_sql(partitions: Sequence[PartitionLogInfo], *, as_of_timestamp: str | None = None,
                   typed: Sequence[Mapping[str, DataType]] | None = None) -> str:
    """The SQL of a topic's committed records in Spark's Kafka-source shape (see :func:`topic_dataframe`).

    A ``SELECT`` over ``delta.`{table_uri}``` of each partition with
    ``log_start_offset <= offset < lake_bound(info)`` (the lake end offset, at most the HW), joined by
    ``UNION ALL`` behind a typed empty row set. ``as_of_timestamp`` adds Delta's ``TIMESTAMP AS OF`` to
    every table. The bounds are literals: the SQL shows what was in the tables when it was made.

    A schema'd topic's typed columns (``key_parsed``, ``value_parsed``: :mod:`lakelog.spark.typed_views`)
    follow ``headers`` when any partition table has them. ``typed``: each partition's typed columns and
    their types; default: read from the tables' Delta schemas.
    """
    as_of = "" if as_of_timestamp is None else f" TIMESTAMP AS OF {_sql_string(as_of_timestamp)}"
    typed_nulls, typed_selects = typed_select_sql(partition_typed_columns(partitions) if typed is None else typed)
    selects = [f"SELECT {_KAFKA_SELECT_NULLS}{typed_nulls} WHERE false"]
    for info, typed_select in zip(partitions, typed_selects):
        table = "delta.`" + info.table_uri.replace("`", "``") + "`" + as_of
        # Kafka's source gives null, not an empty array, for a record without headers.
        selects.append(
            f"SELECT key, value, {_sql_string(info.topic)} AS topic, CAST({info.partition} AS INT) AS partition, "
            f"CAST(offset AS BIGINT) AS offset, CAST(timestamp AS TIMESTAMP) AS timestamp, "
            f"CAST({info.timestamp_type} AS INT) AS timestampType, "
            f"CASE WHEN size(headers) > 0 THEN headers END AS headers{typed_select} "
            f"FROM {table} WHERE offset >= {info.log_start_offset} AND offset < {lake_bound(info)}")
    return "\nUNION ALL\n".join(selects)


def lake_bound(info: PartitionLogInfo) -> int:
    """The exclusive upper offset bound of a view over a partition's table: ``min(lake_end_offset, high_watermark)``.

    The Delta table holds only the offsets below the lake end offset (the rest up to the HW is in the
    leader's segment tail); the gateway reports it at most the HW, and the ``min`` keeps a view within
    the committed records whatever it is given.
    """
    return min(info.lake_end_offset, info.high_watermark)


def catalog_view_name(topic: str) -> str:
    """The name of a topic's view in the ``lakelog`` schema: the topic name with every character
    other than ``[A-Za-z0-9_]`` replaced by ``_`` (Spark's catalog accepts only those in table
    names): ``orders.v1`` -> ``orders_v1``, ``my-topic`` -> ``my_topic``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", topic)


def create_topic_view(spark: "SparkSession", topic: str, partitions: Sequence[PartitionLogInfo], *,
                      schema: str = SCHEMA) -> str:
    """Create (or replace) the view ``{schema}.{catalog_view_name(topic)}`` over the topic's committed records.

    Unlike :func:`register_topic_view` (a session temp view named exactly as the topic), this is a
    catalog view in a schema, so ``SHOW TABLES IN lakelog`` lists the topics and
    ``SELECT * FROM lakelog.orders`` works like any table. Spark's catalog allows only
    ``[A-Za-z0-9_]`` in its names, so ``orders.v1`` becomes ``lakelog.orders_v1``
    (:func:`catalog_view_name`). With Spark's default in-memory catalog the view lasts as long as the
    session; with a Hive metastore it persists. The offset bounds are fixed when it is made: create it
    again to move them (:func:`register_topics_from_gateway` does).

    Returns:
        The qualified name as written in SQL, e.g. ``"lakelog.orders"`` or ``"lakelog.orders_v1"``.
    """
    others = sorted({p.topic for p in partitions if p.topic != topic})
    if others:
        raise ValueError(f"partitions of other topics given for topic {topic!r}: {others}")
    name = f"{quote_identifier(schema)}.{quote_identifier(catalog_view_name(topic))}"
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(schema)}")
    spark.sql(f"CREATE OR REPLACE VIEW {name} AS {topic_view_sql(partitions)}")
    return name


def partition_logs_from_gateway(client: "LakelogClient", topic: str) -> list[PartitionLogInfo]:
    """Each partition's table URI, log start offset, lake end offset and high watermark, as its leader reports them.

    Uses ``GET /lakelog/v1/topics/{topic}/logs`` and parses every entry of the answer with
    :class:`~lakelog.protocol.log_info.PartitionLogInfo`: one per partition, in the gateway's order
    (partition number).

    Raises:
        lakelog.replication.errors.UnknownTopicError: the topic does not exist (40401; the client
            rebuilds the gateway's error, which is also a :class:`lakelog.protocol.errors.RemoteError`).
        lakelog.protocol.errors.RemoteError: any other error answer; ConnectionError: no gateway
            reachable; pydantic.ValidationError: an entry is not a valid ``PartitionLogInfo``.
    """
    return [PartitionLogInfo.model_validate(p) for p in client.topic_logs(topic)]


def in_object_store(partitions: Sequence[PartitionLogInfo]) -> bool:
    """Whether the partitions' tables are in an object store (a shared lake, ``s3://...``) rather than on a
    filesystem path (``/data/logs/orders-0``, ``file://...``)."""
    return any("://" in p.table_uri and not p.table_uri.startswith("file://") for p in partitions)


def register_lake_topic_view(spark: "SparkSession", topic: str, source_options: dict[str, str], *,
                             view_name: str | None = None) -> str:
    """A session temp view named ``view_name`` (default: the topic) over the ``lakelog`` source (batch: up to each partition's lake
    end offset, as the Delta views) for a topic whose tables are in an object store; returns its SQL name.

    ``source_options``: the source's connection options (``lakelog.bootstrap.servers``, ``lakelog.auth.*``,
    ``lakelog.ssl.*``) and, to read the tables directly, the ``lakelog.lake.storage.*`` ones; the read mode
    is ``auto``, so without them the executors read through the partition leaders. Schema
    :data:`KAFKA_SOURCE_SCHEMA` (``includeHeaders``).
    """
    options = {"lakelog.read.mode": "auto", **source_options, "subscribe": topic, "includeHeaders": "true"}
    name = quote_identifier(view_name if view_name is not None else topic)
    spark.read.format("lakelog").options(**options).load().createOrReplaceTempView(name)
    return name


def register_topics_from_gateway(spark: "SparkSession", client: "LakelogClient", *,
                                 topics: Sequence[str] | None = None, schema: str | None = SCHEMA,
                                 source_options: dict[str, str] | None = None) -> dict[str, str]:
    """Register a view per topic with the bounds the brokers report now.

    Args:
        topics: the topics. Default: every topic of the cluster, plus ``__consumer_offsets``.
        schema: also create ``{schema}.{topic}`` catalog views (:func:`create_topic_view`), and
            ``{schema}.__consumer_offsets`` when ``topics`` is None. Default: ``lakelog``; None: only
            the session temp views.
        source_options: the ``lakelog`` source's options of this cluster (connection, and an S3 lake's
            ``lakelog.lake.storage.*``): a topic whose tables are in an object store
            (:func:`in_object_store`) is then read through the source (:func:`register_lake_topic_view`,
            delta-rs, no Hadoop S3 jars) and gets no catalog view (one over ``s3a://`` tables:
            :mod:`lakelog.spark.metastore`). Default None: every topic through delta-spark's paths.

    Returns:
        ``{topic: temp view name as written in SQL}`` (the temp view is named after the topic).
    """
    names, catalog_names = {}, {}
    for topic in (client.admin.list_topics() if topics is None else topics):
        if topics is None and topic == "__consumer_offsets":
            continue  # its own view below: the commits in its records, not the records
        partitions = partition_logs_from_gateway(client, topic)
        if source_options is not None and in_object_store(partitions):
            names[topic] = register_lake_topic_view(spark, topic, source_options)
            continue
        names[topic] = register_topic_view(spark, topic, partitions)
        if schema is None:
            continue
        other = catalog_names.setdefault(catalog_view_name(topic), topic)
        if other != topic:  # e.g. my-topic and my_topic: the temp views still tell them apart
            log.warning("topics %s and %s share the view name %s.%s; it shows %s", other, topic, schema,
                        catalog_view_name(topic), other)
            continue
        create_topic_view(spark, topic, partitions, schema=schema)
    if topics is None:
        names["__consumer_offsets"] = register_consumer_offsets(spark, client, schema=schema,
                                                                source_options=source_options)
    return names


def history(spark: "SparkSession", client: "LakelogClient", topic: str, *, as_of_timestamp: str | None = None,
            start_offset: int | None = None, end_offset: int | None = None) -> "DataFrame":
    """A topic's history: by offset range (``start_offset <= offset < end_offset``) and/or as of a time.

    Args:
        as_of_timestamp: read the partition tables as they were at this UTC time (Delta time
            travel, e.g. ``"2024-05-01 12:00:00"``); records committed later are not there.
        start_offset, end_offset: offset bounds applied to every partition, within its
            ``[log start offset, lake end offset)`` (:func:`lake_bound`): offsets not in the Delta
            table yet are not there even when ``end_offset`` is past them.

    Returns:
        A DataFrame with :data:`KAFKA_SOURCE_SCHEMA`.
    """
    df = topic_dataframe(spark, partition_logs_from_gateway(client, topic), as_of_timestamp=as_of_timestamp)
    if start_offset is not None:
        df = df.where(F.col("offset") >= start_offset)
    if end_offset is not None:
        df = df.where(F.col("offset") < end_offset)
    return df


#: Columns of the ``__consumer_offsets`` view, from the JSON keys and values of the internal topic's
#: records (:mod:`lakelog.consumer_groups.offset_records`).
CONSUMER_OFFSETS_KEY_DDL = "type STRING, `group` STRING, topic STRING, partition INT"
CONSUMER_OFFSETS_VALUE_DDL = ("offset BIGINT, metadata STRING, generation INT, commit_timestamp_ms BIGINT, "
                              "app_id STRING, app_version BIGINT")


def consumer_offsets_sql(partitions: Sequence[PartitionLogInfo], *, records: str | None = None) -> str:
    """The SQL of every offset commit in the internal topic ``__consumer_offsets`` (its partitions
    ``partitions``), oldest first per partition: ``group, topic, partition, offset, metadata, generation,
    commit_timestamp, app_id, app_version, deleted`` (a tombstone: the offset was deleted, null values),
    and where the record is: ``offsets_partition``, ``log_offset``. ``records``: a view of the topic's
    records in the Kafka source's columns to read instead of the partitions' Delta tables."""
    return (
        "SELECT k.`group` AS `group`, k.topic AS topic, k.partition AS partition, v.offset AS offset, "
        "v.metadata AS metadata, v.generation AS generation, "
        "CAST(timestamp_millis(v.commit_timestamp_ms) AS TIMESTAMP) AS commit_timestamp, "
        "v.app_id AS app_id, v.app_version AS app_version, value IS NULL AS deleted, "
        "partition_ AS offsets_partition, offset_ AS log_offset FROM ("
        f"SELECT from_json(CAST(key AS STRING), {_sql_string(CONSUMER_OFFSETS_KEY_DDL)}) AS k, "
        f"from_json(CAST(value AS STRING), {_sql_string(CONSUMER_OFFSETS_VALUE_DDL)}) AS v, value, "
        f"partition AS partition_, offset AS offset_ FROM ({records or topic_view_sql(partitions)})) "
        "WHERE k.type = 'offset'")


def register_consumer_offsets(spark: "SparkSession", client: "LakelogClient",
                              view_name: str = "__consumer_offsets", *, schema: str | None = None,
                              source_options: dict[str, str] | None = None) -> str:
    """Register every offset commit of the cluster (the internal topic ``__consumer_offsets``, all its
    partitions, whichever broker coordinates them) as a view: :func:`consumer_offsets_sql`'s columns. Also
    creates ``{schema}.{view_name}`` when ``schema`` is given. Before any group committed (no topic yet)
    the view is empty. Returns the temp view's SQL name.

    Records still in a partition's segment tail (below the high watermark, above the lake end offset)
    appear once the flusher committed them (``lake.commit.interval.ms``) and the view is registered again.
    ``source_options``: as :func:`register_topics_from_gateway`'s; the records of a topic in an object store
    are then read through the ``lakelog`` source (temp view ``{view_name}_records``), and no catalog view
    is made.
    """
    try:
        partitions = partition_logs_from_gateway(client, "__consumer_offsets")
    except UnknownTopicError:
        partitions = []
    records = None
    if source_options is not None and in_object_store(partitions):
        records = register_lake_topic_view(spark, "__consumer_offsets", source_options,
                                           view_name=f"{view_name}_records")
        schema = None
    sql = consumer_offsets_sql(partitions, records=records)
    name = quote_identifier(view_name)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")
    if schema is not None:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(schema)}")
        spark.sql(f"CREATE OR REPLACE VIEW {quote_identifier(schema)}.{name} AS {sql}")
    return name