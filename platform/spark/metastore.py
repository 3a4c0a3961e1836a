"""Topics registered in a Hive metastore: ``spark.table("lakelog.orders")`` in any Spark session that uses it.

A Spark session configured with the same metastore (:func:`metastore_conf`) finds every topic as a view
``lakelog.<topic>`` without calling lakelog: the catalog holds the view's SQL, a ``UNION ALL`` over the
partitions' Delta tables (delta-spark's path tables, ``delta.`<table uri>```) in the Kafka source's
columns (:data:`lakelog.spark.sql.KAFKA_SOURCE_SCHEMA`). Unlike the session views of
:mod:`lakelog.spark.sql`, the view has no literal offset bound: a partition's table holds only committed
records below its lake end offset, so the view shows what the tables hold when it is queried, and stays
right while records arrive; only partitions added or a topic deleted change it.

Which metastore (:func:`metastore_conf`), as Spark configures one (``spark.sql.catalogImplementation=hive``,
the Hive 2.3 client pyspark ships in its ``jars/``):

- embedded (default): Spark's own, a Derby database under the data dir
  (``{data_dir}/metastore/metastore_db``, tables' warehouse ``{data_dir}/metastore/warehouse``). Derby
  embedded admits one JVM at a time: sessions in other processes use it one after another.
- external: a Hive metastore service at ``hive.metastore.uris`` (``thrift://host:9083``), shared by any
  number of sessions at once.

:func:`sync_metastore` makes the ``lakelog`` schema match the cluster: a view per topic (created or
replaced with the topic's current partitions: a topic created or given more partitions), and the views
it made of topics since deleted dropped (it marks its views with the table property ``lakelog.topic``
and drops no other table). ``lakelog metastore sync`` runs it.

An S3 lake's tables (``lake.uri=s3://bucket/prefix``) are named ``s3a://...`` in the views: Spark reads
them through Hadoop's S3A filesystem (delta-spark's ``s3a`` route), so a session reading such views
needs ``org.apache.hadoop:hadoop-aws`` of its Hadoop version and the ``spark.hadoop.fs.s3a.*`` settings
of the store (:func:`s3a_conf`). The ``lakelog`` data source needs none of that: its executors read
the tables with delta-rs (:mod:`lakelog.spark.source.lake_storage`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.spark.sql import (_KAFKA_SELECT_NULLS, SCHEMA, _sql_string, catalog_view_name,
                               partition_logs_from_gateway, quote_identifier)
from lakelog.spark.typed_views import partition_typed_columns, typed_select_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelog.client import LakelogClient

log = logging.getLogger(__name__)

__all__ = ["TOPIC_PROPERTY", "MetastoreSync", "lake_storage_s3a_conf", "metastore_conf", "register_topic", "s3a_conf",
           "spark_table_uri", "sync_metastore", "topic_table_sql", "unregister_topic"]

#: The table property that marks a view :func:`sync_metastore` made; its value is the topic.
TOPIC_PROPERTY = "lakelog.topic"

def metastore_conf(*, data_dir: Path | str | None = None, metastore_uris: str | None = None) -> dict[str, str]:
    """The Spark settings of a session whose catalog is the Hive metastore.

    Args:
        data_dir: the embedded metastore's place: Derby's database at ``{data_dir}/metastore/metastore_db``,
            the warehouse at ``{data_dir}/metastore/warehouse``, Derby's log there too.
        metastore_uris: ``hive.metastore.uris`` of an external metastore (``thrift://host:9083``,
            comma-separated); wins over ``data_dir``.

    Returns:
        ``{key: value}`` to give :func:`lakelog.spark.session` (``conf=``) or any ``SparkSession.builder``
        (with Delta's extension and catalog, which :func:`lakelog.spark.session` sets itself).

    Raises:
        ValueError: neither given.
    """
    conf = {"spark.sql.catalogImplementation": "hive"}
    if metastore_uris:
        conf["spark.hadoop.hive.metastore.uris"] = metastore_uris.strip()
        return conf
    if data_dir is None:
        raise ValueError("give the data dir of the embedded metastore, or hive.metastore.uris of an external one")
    root = Path(data_dir).resolve() / "metastore"
    root.mkdir(parents=True, exist_ok=True)
    conf.update({
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        # derby.log in the metastore's folder, not in the working directory
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
    })
    return conf


def s3a_conf(*, endpoint: str | None = None, access_key_id: str | None = None,
             secret_access_key: str | None = None, path_style_access: bool = False,
             region: str | None = None, hadoop_aws_version: str = "3.5.0") -> dict[str, str]:
    """The Spark settings of delta-spark's ``s3a`` route to an S3 lake (the broker's ``lake.storage.*``
    values as Hadoop S3A settings), for sessions that read the metastore's views of an S3 lake.

    ``hadoop_aws_version`` must be the Hadoop of the pyspark install (``hadoop-client-api-<version>.jar``
    in its ``jars/``; pyspark 4.2 ships 3.5.0). The secret is in the answer: never log it.
    """
    conf = {"spark.jars.packages": f"org.apache.hadoop:hadoop-aws:{hadoop_aws_version}",
            "spark.hadoop.fs.s3a.path.style.access": "true" if path_style_access else "false"}
    for key, value in (("endpoint", endpoint), ("access.key", access_key_id), ("secret.key", secret_access_key),
                       ("endpoint.region", region)):
        if value:
            conf[f"spark.hadoop.fs.s3a.{key}"] = value
    return conf


def lake_storage_s3a_conf(storage_options: dict[str, str]) -> dict[str, str]:
    """:func:`s3a_conf` for the store delta-rs ``storage_options`` reach (those a
    :class:`~lakelog.spark.source.lake_storage.LakeStorage` holds: ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false`` for
    path-style access), so one set of the broker's ``lake.storage.*`` settings configures both routes. The
    secret is in the answer: never log it."""
    return s3a_conf(endpoint=storage_options.get("AWS_ENDPOINT_URL"), region=storage_options.get("AWS_REGION"),
                    access_key_id=storage_options.get("AWS_ACCESS_KEY_ID"),
                    secret_access_key=storage_options.get("AWS_SECRET_ACCESS_KEY"),
                    path_style_access=storage_options.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST") == "false")


def spark_table_uri(table_uri: str) -> str:
    """A partition table's URI as Spark's Hadoop filesystems name it: ``s3://`` becomes ``s3a://`` (Hadoop's
    S3A filesystem; delta-rs and the gateway say ``s3://``); any other URI or path is left as is."""
    return "s3a://" + table_uri[len("s3://"):] if table_uri.startswith("s3://") else table_uri


def topic_table_sql(partitions: Sequence[PartitionLogInfo], *, storage_options: dict[str, str] | None = None) -> str:
    """The SQL of a topic's view in the metastore: every record of its partitions' Delta tables.

    A schema'd topic's typed columns (``key_parsed``, ``value_parsed``) follow ``headers``
    (:mod:`lakelog.spark.typed_views`; an object-store table's are read with delta-rs ``storage_options``,
    none without them).

    Columns and order of :data:`lakelog.spark.sql.KAFKA_SOURCE_SCHEMA` (an empty topic too). No offset
    bound: a table holds only committed records (below its lake end offset), so the view is right at any
    time; offsets below the log start offset show until retention removed their files.
    """
    partitions = sorted(partitions, key=lambda i: i.partition)
    typed_nulls, typed_selects = typed_select_sql(partition_typed_columns(partitions, storage_options=storage_options))
    selects = [f"SELECT {_KAFKA_SELECT_NULLS}{typed_nulls} WHERE false"]
    for info, typed_select in zip(partitions, typed_selects):
        table = "delta.`" + spark_table_uri(info.table_uri).replace("`", "``") + "`"
        selects.append(
            f"SELECT key, value, {_sql_string(info.topic)} AS topic, CAST({info.partition} AS INT) AS partition, "
            f"CAST(offset AS BIGINT) AS offset, CAST(timestamp AS TIMESTAMP) AS timestamp, "
            f"CAST({info.timestamp_type} AS INT) AS timestampType, "
            f"CASE WHEN size(headers) > 0 THEN headers END AS headers{typed_select} FROM {table}")
    return "\nUNION ALL\n".join(selects)


def _view_name(schema: str, topic: str) -> str:
    return f"{quote_identifier(schema)}.{quote_identifier(catalog_view_name(topic))}"


def register_topic(spark: "SparkSession", topic: str, partitions: Sequence[PartitionLogInfo], *,
                   schema: str = SCHEMA, storage_options: dict[str, str] | None = None) -> str:
    """Create or replace the view ``{schema}.{catalog_view_name(topic)}`` over ``partitions`` (all of the
    topic's), marked with :data:`TOPIC_PROPERTY`; returns its name as written in SQL. ``storage_options``:
    delta-rs's, to read an S3 lake's tables' typed columns (:func:`topic_table_sql`).

    Raises:
        ValueError: partitions of another topic given.
    """
    others = sorted({p.topic for p in partitions if p.topic != topic})
    if others:
        raise ValueError(f"partitions of other topics given for topic {topic!r}: {others}")
    name = _view_name(schema, topic)
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(schema)}")
    spark.sql(f"CREATE OR REPLACE VIEW {name} TBLPROPERTIES ({_sql_string(TOPIC_PROPERTY)} = {_sql_string(topic)}) "
              f"AS {topic_table_sql(partitions, storage_options=storage_options)}")
    return name


def unregister_topic(spark: "SparkSession", topic: str, *, schema: str = SCHEMA) -> None:
    """Drop the view of ``topic`` (nothing when there is none)."""
    spark.sql(f"DROP VIEW IF EXISTS {_view_name(schema, topic)}")


def _registered(spark: "SparkSession", schema: str) -> dict[str, str]:
    """``{view name: topic}`` of the views in ``schema`` marked with :data:`TOPIC_PROPERTY`."""
    if not spark.catalog.databaseExists(schema):
        return {}
    out = {}
    for table in spark.catalog.listTables(schema):
        if table.tableType != "VIEW" or table.isTemporary:
            continue
        rows = spark.sql(f"SHOW TBLPROPERTIES {quote_identifier(schema)}.{quote_identifier(table.name)}").collect()
        props = {r["key"]: r["value"] for r in rows}
        if TOPIC_PROPERTY in props:
            out[table.name] = props[TOPIC_PROPERTY]
    return out


@dataclass(frozen=True)
class MetastoreSync:
    """What :func:`sync_metastore` did: the topics whose views it created or replaced, and those dropped."""

    registered: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # topics whose view name another topic has


def sync_metastore(spark: "SparkSession", client: "LakelogClient", *, schema: str = SCHEMA,
                   storage_options: dict[str, str] | None = None) -> MetastoreSync:
    """Make the metastore's ``schema`` match the cluster: a view per topic over its current partitions, and
    no view of a deleted topic.

    ``spark`` is a session whose catalog is the metastore (:func:`metastore_conf`; for an S3 lake with
    :func:`lake_storage_s3a_conf` too, and ``storage_options`` for the typed columns). Internal topics
    (``__consumer_offsets``, ...) are left out. Two topics whose view names collide (``my-topic``,
    ``my_topic``) keep the first one in sorted order; the other is named in :attr:`MetastoreSync.skipped`.

    Raises:
        lakelog.protocol.errors.RemoteError, ConnectionError: the gateway failed to answer.
    """
    topics = sorted(t for t in client.admin.list_topics() if not t.startswith("_"))
    registered, skipped, names = [], [], {}
    for topic in topics:
        name = catalog_view_name(topic).lower()  # the metastore keeps names in lower case
        if name in names:
            skipped.append(topic)
            log.warning("topics %s and %s share the view name %s.%s; it shows %s", names[name], topic, schema,
                        name, names[name])
            continue
        names[name] = topic
        register_topic(spark, topic, partition_logs_from_gateway(client, topic), schema=schema,
                       storage_options=storage_options)
        registered.append(topic)
    dropped = []
    for view, topic in _registered(spark, schema).items():
        if names.get(view.lower()) != topic:
            spark.sql(f"DROP VIEW IF EXISTS {quote_identifier(schema)}.{quote_identifier(view)}")
            dropped.append(topic)
    log.info("metastore schema %s: %d topic views registered, %d dropped", schema, len(registered), len(dropped))
    return MetastoreSync(tuple(registered), tuple(sorted(dropped)), tuple(skipped))
