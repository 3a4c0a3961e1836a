"""The ``lakelog`` PySpark data source: topics as batch and streaming DataFrames, and a Kafka-style sink.

A Spark job written for Spark's own Kafka source moves over by changing the format name (and pointing
``kafka.bootstrap.servers`` at lakelog's gateways)::

    spark = lakelog.spark.session()                  # registers format("lakelog")
    df = (spark.readStream.format("lakelog")         # was: format("kafka")
          .option("kafka.bootstrap.servers", "localhost:8082")     # the gateways (or lakelog.bootstrap.servers)
          .option("subscribe", "orders")
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 10000)
          .load())

Output columns are those of Spark's Kafka source (``KafkaRecordToRowConverter``), in its order:
``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int`` and, only with ``includeHeaders=true``,
``headers array<struct<key: string, value: binary>>`` (null for a record without headers).

Where the data comes from: the driver asks a gateway (``lakelog.bootstrap.servers``) for the topics
and, per partition, its Delta table, log start offset, lake end offset and high watermark
(``GET /lakelog/v1/topics/{t}/logs``). A partition log has two tiers (DESIGN.md, "Storage"): the
broker's flusher commits records to the partition's Delta table every ``lake.commit.interval.ms`` of
the topic, so the table holds the offsets below the *lake end offset*, and the offsets from there up
to the high watermark (HW) are in the leader's segment tail. Executors read the partition tables
directly with :func:`lakelog.log_tables.reader.read_offset_range` (only the files whose offset
statistics overlap the range; ``lakelog.read.mode=broker`` fetches them through the leader), as Arrow record batches, up to the lake end offset the driver saw;
with ``lakelog.read.tail=true`` they fetch the rest of their range from the partition leader (the
gateway's Arrow fetch). Never at or past the end offset the driver planned the batch with, which is
at most the HW (``lakelog.read.tail=true``) or the lake end offset (``false``), so uncommitted
records are never returned.

Options (same names and meaning as Spark's Kafka source; option names are case-insensitive):

- exactly one of ``subscribe`` (comma list), ``subscribePattern`` (a regex matched against the whole
  topic name; Python's ``re`` syntax, which agrees with Java's for ordinary patterns), ``assign``
  (JSON ``{"topicA": [0, 1]}``);
- ``lakelog.bootstrap.servers`` or its alias ``kafka.bootstrap.servers`` (required): comma list of
  gateway ``host:port`` (or URLs);
- ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets`` (``earliest``,
  ``latest`` (streaming only), or JSON ``{"t": {"0": 23, "1": -2}}``, -2 = earliest, -1 = latest;
  JSON must name every partition read), ``startingOffsetsByTimestampStrategy`` (``error`` | ``latest``);
- batch only: ``endingTimestamp`` > ``endingOffsetsByTimestamp`` > ``endingOffsets`` (``latest`` or
  JSON with -1 = latest);
- streaming only: ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (default 15m),
  through Spark's admission control; ``trigger(availableNow=True)`` reads what was there when the query
  started, in as many micro-batches as ``maxOffsetsPerTrigger`` makes, then stops (see
  :mod:`~lakelog.spark.source.stream`);
- ``minPartitions``, ``maxRecordsPerPartition``: split large offset ranges into several Spark tasks;
- ``failOnDataLoss`` (default true): fail, naming the missing offsets, when offsets the query needs
  are no longer in the log (retention removed them, the log was truncated, a topic was deleted);
  false: log a warning and go on with what is there. Gaps between offsets of a compacted topic
  (``cleanup.policy=compact`` keeps the latest record per key, offsets never change) are no data
  loss: ranges are offset ranges and a task returns the records its range still holds, as Spark's
  Kafka source does on compacted topics;
- ``includeHeaders`` (default false);
- ``lakelog.read.tail`` (lakelog's; default true for ``readStream``, false for ``read``): true,
  "latest" is the HW as with Kafka's source, and what a task needs past the lake end offset is fetched
  from the partition leader over HTTP, so a stream sees records as soon as they are committed; false,
  "latest" is the lake end offset and tasks read only the Delta tables (no load on the brokers;
  records show up about ``lake.commit.interval.ms`` after they were produced), which suits batch
  queries over history. Any other value than ``true``/``false`` is refused (see
  :func:`~lakelog.spark.source.options.read_tail_option`);
- ``valueFormat`` (lakelog's; ``bytes`` | ``schema``, default ``bytes``): ``schema`` makes ``value`` the
  record's value decoded with its schema registry schema (the typed ``value_parsed`` struct the broker
  writes beside the bytes of a topic bound to a subject, ``value.schema.subject``), so a job needs no
  ``from_avro``/``from_json``; null for a record that does not decode. What a task reads through the
  leader (past the lake end offset, or in ``lakelog.read.mode=broker``) the executor decodes the same
  way (see :func:`~lakelog.spark.source.options.value_format_option`,
  :mod:`~lakelog.spark.source.typed_tail`);
- ``lakelog.read.mode`` (lakelog's; ``direct`` | ``broker`` | ``auto``, default ``auto``): where
  executors read the offsets below the lake end offset, batch and streaming: ``direct`` from the
  partition's Delta table path, ``broker`` through the partition leader's Arrow fetch (the leader
  serves any offset, history from its Delta table included: for executors that cannot open the
  brokers' storage), ``auto`` directly when the executor can open the table, else through the leader
  (see :func:`~lakelog.spark.source.options.read_mode_option`, :func:`~lakelog.spark.source.read.direct_table`);
- ``isolation.level`` (or ``kafka.isolation.level``, as Spark's Kafka source passes Kafka consumer options):
  ``read_uncommitted`` (default) or ``read_committed``: "latest" is then each partition's last stable
  offset (the first offset of a still-open transaction) instead of its high watermark, and what is
  fetched from the leaders drops aborted records. The Delta tables hold only committed records of decided
  transactions, so reads of them are read_committed by construction; no read ever returns transaction
  markers (see :func:`~lakelog.spark.source.options.isolation_level_option`);
- ``lakelog.auth.username`` and ``lakelog.auth.password`` (both or neither): a lakelog user's credentials,
  sent as HTTP Basic credentials by the driver's look-ups, the executors' fetches and the sink, for brokers
  with ``authentication.methods=basic``; or ``lakelog.auth.token``: a bearer token (a JWT), sent as
  ``Authorization: Bearer`` the same way (``oauthbearer``); never logged (the options objects leave them
  out of their repr);
- ``fetchOffset.numRetries`` (default 3), ``fetchOffset.retryIntervalMs`` (default 1000, Kafka's is
  10: a gateway failover takes longer than a Kafka metadata refresh): retries of the driver's
  offset look-ups;
- ``kafka.group.id`` (or ``group.id``): the consumer group whose committed offsets a stream updates
  after each micro-batch, so lag tools and ``lakelog groups`` see the query's progress; without it,
  ``groupIdPrefix`` names a group ``{prefix}-{uuid}`` per run of the query, as Spark's Kafka source
  generates its group ids; with neither nothing is committed. Batch reads never commit (see
  :meth:`LakelogStreamReader.commit`);
- Kafka consumer tuning options Spark's Kafka source passes on (``kafka.max.poll.records``,
  ``kafka.fetch.max.bytes``, ``kafkaConsumer.pollTimeoutMs``, ...) are accepted and ignored with a
  warning; the ones Spark's Kafka source refuses (``kafka.auto.offset.reset``, deserializers,
  ``kafka.enable.auto.commit``, ``kafka.interceptor.classes``) are refused with its reasons, and any
  other option, ``kafka.security.protocol`` and the other Kafka client security options included, is
  refused with an error listing the known ones
  (:func:`~lakelog.spark.source.options.check_known_options`).

Filter pushdown (batch reads, :mod:`~lakelog.spark.source.pushdown`): ``topic``, ``partition`` and
``offset`` compared with literals narrow the planned offset ranges on the driver (exact: files of other
offsets are never opened and Spark does not filter again); ``timestamp`` compared with a timestamp
literal prunes Delta files and Parquet row groups by their statistics and filters rows, and Spark
filters again; other filters are Spark's. PySpark 4.2 pushes filters only with
``spark.sql.python.filterPushdown.enabled=true``, which :func:`register` and :func:`lakelog.spark.session`
set; a session that found the source by itself (``pyspark_lakelog``) gets :class:`LakelogPlainDataSource`,
without pushdown. No column pruning: Spark 4.2's Python data source API passes a reader no required
columns; the reader reads only the columns of its schema (``headers`` only with ``includeHeaders``).

The sink (``df.write.format("lakelog")`` / ``writeStream.format("lakelog")``, ``mode("append")``)
takes Spark's Kafka sink's columns and produces through the gateway: at-least-once for batch writes,
exactly-once for streaming writes (each micro-batch in transactions committed once per batch id; options
``lakelog.transactional.id.prefix``, ``transaction.timeout.ms``): see :mod:`~lakelog.spark.source.sink`.

Modules, by responsibility:

- :mod:`~lakelog.spark.source.options`: :class:`SourceOptions`, the offsets JSON;
- :mod:`~lakelog.spark.source.sink_options`: :class:`SinkOptions`;
- :mod:`~lakelog.spark.source.planning`: the partitions a read covers (through the gateway), starting
  and ending offsets, ``maxOffsetsPerTrigger``, the planned ranges (:class:`OffsetRangePartition`,
  one Spark task) and splitting them;
- :mod:`~lakelog.spark.source.pushdown`: which of Spark's filters narrow a batch read (:func:`push_filters`);
- :mod:`~lakelog.spark.source.read`: reading a range (Delta table, then the leader's tail; ``lakelog.read.mode``),
  the batch readers;
- :mod:`~lakelog.spark.source.tail`: the leader's Arrow fetch of the offsets past the lake end offset;
- :mod:`~lakelog.spark.source.stream`: the stream reader (micro-batches, restarts, ``group.id``
  commits, and the PySpark specifics they rely on);
- :mod:`~lakelog.spark.source.sink`: the writers;
- :mod:`lakelog.spark.errors`: :class:`SourceOptionError` (40003), :class:`SourceError` (40020).

A SparkSession built otherwise gets the source with :func:`register`, or without any call when its
Python has lakelog installed as a regular package (Spark's automatic registration of Python data
sources finds the top-level module ``pyspark_lakelog``, whose ``DefaultSource`` is
:class:`LakelogPlainDataSource`, the source without filter pushdown).

This package holds the data source itself (:class:`LakelogDataSource`) and :func:`register`, and
re-exports the names above, so ``from lakelog.spark.source import X`` works for each of them.
"""

from __future__ import annotations

import logging
import os

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from lakelog.log_tables.reader import DataLoss, DataLossError
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.spark.errors import SourceError, SourceOptionError
from lakelog.spark.source.options import (EARLIEST, LATEST, READ_TAIL, SourceOptions, TopicPartition, _bool,
                                          offsets_from_json, offsets_to_json)
from lakelog.spark.source.sink_options import SinkOptions
from lakelog.spark.source.planning import (INTERNAL_TOPICS, OffsetRangePartition, batch_ranges, latest_offsets,
                                           micro_batch_ranges, rate_limit, readable_end, resolve_ending_offsets,
                                           resolve_starting_offsets, split_ranges)
from lakelog.spark.source.pushdown import PushedFilters, push_filters
from lakelog.spark.source.planning import _Cluster
from lakelog.spark.source.read import (LakelogBatchReader, LakelogPushdownBatchReader, kafka_schema, read_partition,
                                       tail_fetch, typed_value_schema)
from lakelog.spark.source.tail import TailFetch
from lakelog.spark.source.sink import LakelogCommitMessage, LakelogStreamWriter, LakelogWriter, check_sink_schema
from lakelog.spark.source.stream import LakelogStreamReader

log = logging.getLogger(__name__)

__all__ = [
    "EARLIEST", "FORMAT", "INTERNAL_TOPICS", "LATEST", "READ_TAIL", "DataLoss", "DataLossError",
    "LakelogBatchReader", "LakelogCommitMessage", "LakelogDataSource", "LakelogPlainDataSource",
    "LakelogPushdownBatchReader", "LakelogStreamReader", "LakelogStreamWriter", "LakelogWriter", "OffsetRangePartition",
    "PUSHDOWN_CONF", "PartitionLogInfo", "PushedFilters", "REGISTERED_CONF", "SinkOptions", "SourceError",
    "SourceOptionError", "SourceOptions", "TailFetch", "TopicPartition", "batch_ranges", "kafka_schema",
    "latest_offsets", "micro_batch_ranges", "offsets_from_json", "offsets_to_json", "push_filters", "rate_limit",
    "read_partition", "readable_end", "register", "resolve_ending_offsets", "resolve_starting_offsets",
    "split_ranges", "tail_fetch",
]

#: The data source's short name: ``spark.read.format(FORMAT)``.
FORMAT = "lakelog"

#: The SQL setting without which PySpark 4.2 never pushes filters to a Python data source (default false);
#: :func:`register` and :func:`lakelog.spark.session` set it to true.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

#: The session setting with which :func:`register` marks a session it registered the source in.
REGISTERED_CONF = "spark.lakelog.source.registered"


class LakelogDataSource(DataSource):
    """The ``lakelog`` format: Spark's Kafka source and sink, over lakelog topics.

    Spark makes one per ``load()``/``save()``/``start()`` with the options given (``self.options``);
    the options are checked here, on the driver, so a bad option fails at once with
    :class:`SourceOptionError`.
    """

    @classmethod
    def name(cls) -> str:
        """The short name, ``"lakelog"`` (:data:`FORMAT`)."""
        return FORMAT

    def schema(self) -> StructType:
        """:func:`kafka_schema`, with ``headers`` when ``includeHeaders=true``; with ``valueFormat=schema``
        ``value`` is the topics' typed value (:func:`~lakelog.spark.source.read.typed_value_schema`, asked of
        the gateway and the partition tables once per DataSource)."""
        opts = {str(k).lower(): v for k, v in dict(self.options).items()}
        if str(opts.get("valueformat", "bytes")).strip().lower() != "schema":
            return kafka_schema(_bool(opts, "includeHeaders", False))
        cached = getattr(self, "_typed_schema", None)
        if cached is None:
            # the connection and the topics (a stream's own options are no concern here)
            options = SourceOptions.parse({k: v for k, v in dict(self.options).items() if str(k).lower() not in (
                "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")}, streaming=False)
            cluster = _Cluster(options)
            try:
                partitions = list(cluster.partitions().values())
                cached = self._typed_schema = typed_value_schema(options, partitions, client=cluster.client)
            finally:
                cluster.close()
        return cached

    def _check_schema(self, schema: StructType, options: SourceOptions) -> None:
        """Refuse a user-given schema other than the Kafka source's (the schema is fixed)."""
        expected = kafka_schema(options.include_headers) if options.value_format == "bytes" else self.schema()
        if schema is not None and schema != expected:
            raise SourceOptionError(
                "The lakelog source has a fixed schema and cannot be set with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()})")

    def reader(self, schema: StructType) -> LakelogBatchReader:
        """``spark.read``: the batch reader with filter pushdown (:class:`LakelogPushdownBatchReader`; the
        session needs :data:`PUSHDOWN_CONF` true, which :func:`register` sets). Raises
        :class:`SourceOptionError` for invalid options."""
        options = SourceOptions.parse(self.options, streaming=False)
        self._check_schema(schema, options)
        return LakelogPushdownBatchReader(options, schema)

    def streamReader(self, schema: StructType) -> LakelogStreamReader:
        """``spark.readStream``: the stream reader. Raises :class:`SourceOptionError` for invalid options."""
        options = SourceOptions.parse(self.options, streaming=True)
        self._check_schema(schema, options)
        return LakelogStreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> LakelogWriter:
        """``df.write`` in ``append`` mode. Raises :class:`SourceOptionError` for overwrite, options or columns."""
        if overwrite:
            raise SourceOptionError("Save mode Overwrite is not allowed for lakelog: a topic is an append-only "
                                    "log. Use mode('append').")
        options = SinkOptions.parse(self.options)
        check_sink_schema(schema, options)
        return LakelogWriter(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LakelogStreamWriter:
        """``df.writeStream``. Raises :class:`SourceOptionError` for invalid options or columns."""
        options = SinkOptions.parse(self.options)
        check_sink_schema(schema, options)
        return LakelogStreamWriter(options, schema)


class LakelogPlainDataSource(LakelogDataSource):
    """The ``lakelog`` format without filter pushdown: the ``DefaultSource`` Spark finds by itself
    (``pyspark_lakelog``) in sessions that never call :func:`register`.

    Its batch reader is :class:`LakelogBatchReader`, which does not override ``pushFilters``: PySpark
    4.2 refuses to plan a reader that does while :data:`PUSHDOWN_CONF` is false, its default, and such
    a session may never have set it. Queries work the same; filters are evaluated by Spark only.
    """

    def reader(self, schema: StructType) -> LakelogBatchReader:
        """``spark.read``: the batch reader without pushdown. Raises :class:`SourceOptionError` for invalid options."""
        options = SourceOptions.parse(self.options, streaming=False)
        self._check_schema(schema, options)
        return LakelogBatchReader(options, schema)


def register(spark) -> None:
    """Make ``format("lakelog")`` available in ``spark`` with filter pushdown; idempotent.

    Registers :class:`LakelogDataSource` (``spark.dataSource.register``) and sets :data:`PUSHDOWN_CONF`
    to true, once per session (marked with :data:`REGISTERED_CONF`). :func:`lakelog.spark.session`
    calls it. A session whose Python has lakelog installed as a regular package finds the source by
    itself (the ``pyspark_lakelog`` module, see its docstring), but without pushdown
    (:class:`LakelogPlainDataSource`); registering replaces that one in the session (Spark does not
    warn when a registration shadows a source it found that way).

    Spark's Python workers (planning, reading, writing) must be able to import ``lakelog``. PySpark
    starts them with ``SparkContext.pythonExec``, which it takes from the environment variable
    ``PYSPARK_PYTHON`` only (default ``python3``), not from the ``spark.pyspark.python`` setting that
    :func:`lakelog.spark.session` makes (this interpreter). So when that setting is there and the
    variable is not, the context is pointed at it before the data source is registered.
    """
    sc = spark.sparkContext
    conf_python = sc.getConf().get("spark.pyspark.python")
    if conf_python and "PYSPARK_PYTHON" not in os.environ and sc.pythonExec != conf_python:
        log.info("Python workers will run %s (spark.pyspark.python) instead of %s", conf_python, sc.pythonExec)
        sc.pythonExec = conf_python
    if spark.conf.get(REGISTERED_CONF, "false") != "true":
        spark.dataSource.register(LakelogDataSource)
        spark.conf.set(PUSHDOWN_CONF, "true")
        spark.conf.set(REGISTERED_CONF, "true")
