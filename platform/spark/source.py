"""The ``lakelog`` PySpark data source: topics as batch and streaming DataFrames, and a Kafka-style sink.

A Spark job written for Spark's own Kafka source moves over by changing the format name and the
bootstrap option::

    lakelog.spark.source.register(spark)            # once per session
    df = (spark.readStream.format("lakelog")         # was: format("kafka")
          .option("lakelog.bootstrap.servers", "localhost:8082")   # was: kafka.bootstrap.servers
          .option("subscribe", "orders")
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 10000)
          .load())

Output columns are those of Spark's Kafka source (``KafkaRecordToRowConverter``), in its order:
``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int`` and, only with ``includeHeaders=true``,
``headers array<struct<key: string, value: binary>>`` (null for a record without headers).

Where the data comes from: the driver asks a gateway (``lakelog.bootstrap.servers``) for the topics
and, per partition, its Delta table, log start offset and high watermark
(``GET /lakelog/v1/topics/{t}/logs``). Executors then read the partition tables directly with
:func:`lakelog.log_tables.reader.read_offset_range` (only the files whose offset statistics overlap the
range), as Arrow record batches, never at or past the high watermark the driver saw when it planned
the batch (that is the batch's end offset), so uncommitted records are never returned.

Options (same names and meaning as Spark's Kafka source; option names are case-insensitive):

- exactly one of ``subscribe`` (comma list), ``subscribePattern`` (a regex matched against the whole
  topic name; Python's ``re`` syntax, which agrees with Java's for ordinary patterns), ``assign``
  (JSON ``{"topicA": [0, 1]}``);
- ``lakelog.bootstrap.servers`` (required): comma list of gateway ``host:port`` (or URLs);
- ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets`` (``earliest``,
  ``latest`` (streaming only), or JSON ``{"t": {"0": 23, "1": -2}}``, -2 = earliest, -1 = latest;
  JSON must name every partition read), ``startingOffsetsByTimestampStrategy`` (``error`` | ``latest``);
- batch only: ``endingTimestamp`` > ``endingOffsetsByTimestamp`` > ``endingOffsets`` (``latest`` or
  JSON with -1 = latest);
- streaming only: ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (default 15m);
- ``minPartitions``, ``maxRecordsPerPartition``: split large offset ranges into several Spark tasks;
- ``failOnDataLoss`` (default true): fail, naming the missing offsets, when offsets the query needs
  are no longer in the log (retention removed them, the log was truncated, a topic was deleted);
  false: log a warning and go on with what is there;
- ``includeHeaders`` (default false);
- ``fetchOffset.numRetries`` (default 3), ``fetchOffset.retryIntervalMs`` (default 1000, Kafka's is
  10: a gateway failover takes longer than a Kafka metadata refresh): retries of the driver's
  offset look-ups;
- ``group.id`` (optional, lakelog's): the consumer group whose committed offsets the stream updates
  after each micro-batch (see :meth:`LakelogStreamReader.commit`). ``kafka.group.id`` does not
  commit anything, as with Kafka's source.

Streaming offsets are JSON objects ``{"topic": {"partition": next_offset}}``, keys sorted, so the same
position always serialises to the same text (Spark compares offsets as JSON strings).

PySpark 4.0.1 specifics (checked in ``pyspark/sql/datasource.py``, ``worker/plan_data_source_read.py``,
``streaming/python_streaming_source_runner.py`` and the JVM's ``PythonMicroBatchStream``):

- ``read()`` may yield ``pyarrow.RecordBatch`` es; they must carry exactly the schema's columns.
- ``DataSourceStreamReader.latestOffset()`` takes no arguments (no admission control before Spark
  4.2), so the reader itself remembers where the next micro-batch starts: the end it last returned
  from ``latestOffset``, or the end of the last range Spark planned (``partitions(start, end)``), or
  ``initialOffset()`` for a new query. After a restart from a checkpoint Spark calls
  ``setLatestSeenOffset`` on the JVM stream, which the Python runner turns into
  ``partitions(X, X)`` with X = the last offsets in the checkpoint's offset log; the reader takes X
  as its position, so ``maxOffsetsPerTrigger`` keeps capping batches from the right place after a
  restart. (Spark re-runs an uncommitted last batch with ``partitions(start, X)`` first; either way
  the next batch starts at X.)
- ``trigger(availableNow=True)``: Python streams do not implement ``SupportsTriggerAvailableNow``, so
  Spark runs one batch up to one ``latestOffset()``; with ``maxOffsetsPerTrigger`` that single batch
  is capped (Spark's Kafka source would run several capped batches). Use ``processingTime`` triggers
  with a cap.
- ``commit(end)`` of batch N is called when Spark plans batch N+1 (which an idle stream never
  does), so the reader also commits its position to ``group.id`` at each ``latestOffset()``: Spark
  asks for new offsets only after the previous batch is in its commit log. The checkpoint stays the
  query's own source of truth; the group's offsets are what lag tools see.
- Spark keeps the initial offsets of a Kafka stream in its checkpoint; a Python source has no such
  place, so if a query dies before its first batch commits, the restarted query computes
  ``startingOffsets`` again (with ``latest`` it then starts later).
- Writes need ``mode("append")``: Spark refuses the default ``ErrorIfExists`` mode for Python data
  sources (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``), and ``overwrite`` makes no sense for a log.

The sink (``df.write.format("lakelog")`` / ``writeStream.format("lakelog")``) takes Spark's Kafka
sink's columns: ``value`` (required, string or binary), ``key`` (string or binary), ``headers``,
``partition`` (int) and ``topic`` (string; the ``topic`` option overrides it). Rows without a
partition go where Kafka's Java producer would put them (murmur2 of the key), keyless rows are spread
over the partitions batch by batch (sticky, as Kafka's default partitioner). Records are produced
through the gateway's Arrow produce endpoint, one request per partition and chunk of at most
``lakelog.max.request.bytes`` (default 8 MiB); like Kafka's sink it is at-least-once (a retried
request may write a record twice). Sink options: ``lakelog.bootstrap.servers`` (required), ``topic``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from lakelog.client import GatewayError, LakelogClient
from lakelog.errors import ConfigError, LakelogError
from lakelog.log_tables.reader import DataLoss, DataLossError, offset_for_timestamp, read_offset_range
from lakelog.log_tables.schema import HEADERS_TYPE
from lakelog.spark.sql import KAFKA_SOURCE_SCHEMA, PartitionLogInfo, partition_logs_from_gateway

log = logging.getLogger(__name__)

FORMAT = "lakelog"

#: Kafka's internal topics; a pattern subscription does not match them (``exclude.internal.topics``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

#: Whether this client can commit consumer-group offsets (``LakelogClient.commit_offsets``).
CAN_COMMIT_OFFSETS = hasattr(LakelogClient, "commit_offsets")

_FAIL_ON_DATA_LOSS_HINT = (
    " Some data may have been lost because it is not available in the log any more: either retention "
    "removed it or the topic was deleted before all of it was processed. If you want your query to go "
    "on in such cases, set the source option 'failOnDataLoss' to 'false'.")

TopicPartition = tuple[str, int]


class SourceOptionError(ConfigError):
    """An option of the ``lakelog`` data source is missing, unknown in this mode, or invalid."""


class SourceError(LakelogError):
    """The ``lakelog`` data source can not plan or read a query (e.g. partitions that do not exist)."""

    http_status = 400
    error_code = 40020


# -- schema --------------------------------------------------------------------------------------

def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema: the ``headers`` column only with ``include_headers``."""
    fields = KAFKA_SOURCE_SCHEMA.fields if include_headers else KAFKA_SOURCE_SCHEMA.fields[:-1]
    return StructType(list(fields))


def _arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


# -- offsets JSON --------------------------------------------------------------------------------

def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}`` with topics and partitions in sorted order (stable text)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition) in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def offsets_from_json(value: Any) -> dict[TopicPartition, int]:
    """``{"t": {"p": o}}`` (a dict or its JSON text) -> ``{(t, p): o}``."""
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise SourceOptionError(f"Expected a JSON object like {{\"topic\": {{\"0\": 23}}}}, got {value!r}")
    out = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise SourceOptionError(f"Expected {{\"partition\": offset}} for topic {topic!r}, got {parts!r}")
        for p, o in parts.items():
            try:
                out[(str(topic), int(p))] = int(o)
            except (TypeError, ValueError):
                raise SourceOptionError(f"Invalid partition/offset {p!r}: {o!r} for topic {topic!r}") from None
    return out


# -- options -------------------------------------------------------------------------------------

EARLIEST = -2
LATEST = -1

_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "mins": 60_000,
                  "h": 3_600_000, "d": 86_400_000}


def _duration_ms(text: str, name: str) -> int:
    """``"15m"``, ``"30s"``, ``"100ms"``, ``"100"`` (ms) -> milliseconds (Spark's ``timeStringAsMs``)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not m or (m.group(2) and m.group(2) not in _TIME_UNITS_MS):
        raise SourceOptionError(f"Option '{name}' must be a duration like 15m, 30s or 500ms, got {text!r}")
    return int(int(m.group(1)) * _TIME_UNITS_MS.get(m.group(2) or "ms", 1))


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise SourceOptionError(f"Option '{name}' must be 'true' or 'false', got {raw!r}")
    return value == "true"


def _int(opts: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SourceOptionError(f"Option '{name}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SourceOptionError(f"Option '{name}' must be >= {minimum}, got {value}")
    return value


def _bootstrap(opts: Mapping[str, str]) -> str:
    servers = (opts.get("lakelog.bootstrap.servers") or "").strip()
    if not servers:
        hint = (" ('kafka.bootstrap.servers' is the Kafka source's name for it; lakelog reads "
                "'lakelog.bootstrap.servers')") if opts.get("kafka.bootstrap.servers") else ""
        raise SourceOptionError(
            "Option 'lakelog.bootstrap.servers' must be specified: a comma-separated list of the "
            f"gateways' host:port{hint}.")
    return servers


@dataclass(frozen=True)
class SourceOptions:
    """The parsed options of a read (see the module docstring for their meaning)."""

    bootstrap_servers: str
    streaming: bool
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting_offsets: "str | dict[TopicPartition, int]" = "earliest"
    starting_timestamp: int | None = None
    starting_offsets_by_timestamp: dict[TopicPartition, int] | None = None
    starting_timestamp_strategy: str = "error"
    ending_offsets: "str | dict[TopicPartition, int]" = "latest"
    ending_timestamp: int | None = None
    ending_offsets_by_timestamp: dict[TopicPartition, int] | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> "SourceOptions":
        """Check and parse the options of a batch (``streaming=False``) or streaming read.

        Raises:
            SourceOptionError: naming the option and what is wrong with it.
        """
        opts = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}
        kind = "streaming" if streaming else "batch"

        strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
        names = {"subscribe": "subscribe", "subscribepattern": "subscribePattern", "assign": "assign"}
        if len(strategies) != 1:
            given = ", ".join(names[k] for k in strategies) or "none"
            raise SourceOptionError(
                "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be specified "
                f"for the lakelog source (given: {given}).")
        subscribe = pattern = assign = None
        if "subscribe" in opts:
            subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
            if not subscribe:
                raise SourceOptionError(f"No topics to subscribe to in option 'subscribe': {opts['subscribe']!r}")
        elif "subscribepattern" in opts:
            pattern = opts["subscribepattern"].strip()
            if not pattern:
                raise SourceOptionError("Option 'subscribePattern' is empty")
            try:
                re.compile(pattern)
            except re.error as e:
                raise SourceOptionError(f"Option 'subscribePattern' is not a valid regex: {e}") from None
        else:
            try:
                raw = json.loads(opts["assign"])
                assign = {str(t): tuple(sorted({int(p) for p in ps})) for t, ps in raw.items()}
            except (ValueError, TypeError, AttributeError):
                raise SourceOptionError(
                    f"Option 'assign' must be JSON like {{\"topicA\": [0, 1]}}, got {opts['assign']!r}") from None
            if not assign or not any(assign.values()):
                raise SourceOptionError(f"No topic partitions to assign in option 'assign': {opts['assign']!r}")

        def offsets_option(name: str, default: str, allowed: tuple[str, ...]) -> "str | dict[TopicPartition, int]":
            raw = opts.get(name.lower())
            if raw is None:
                return default
            text = raw.strip()
            if text.lower() in ("earliest", "latest"):
                if text.lower() not in allowed:
                    what = "starting" if name.startswith("starting") else "ending"
                    raise SourceOptionError(
                        f"{what} offset can't be {text.lower()} for {kind} queries on lakelog (option '{name}')")
                return text.lower()
            return offsets_from_json(text)

        def timestamp_option(name: str) -> int | None:
            return _int(opts, name, minimum=0)

        def by_timestamp_option(name: str) -> dict[TopicPartition, int] | None:
            raw = opts.get(name.lower())
            return None if raw is None else offsets_from_json(raw)

        streaming_only = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
        batch_only = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
        if streaming:
            for name in batch_only:
                if name.lower() in opts:
                    raise SourceOptionError(f"Option '{name}' is not valid in streaming queries (batch queries only).")
        else:
            for name in streaming_only:
                if name.lower() in opts:
                    log.warning("Option '%s' only applies to streaming queries; ignored by this batch query", name)

        starting = offsets_option("startingOffsets", "latest" if streaming else "earliest",
                                  ("earliest", "latest") if streaming else ("earliest",))
        if not streaming and isinstance(starting, dict):
            for (t, p), o in starting.items():
                if o == LATEST:
                    raise SourceOptionError(
                        f"Starting offset for {t}-{p} can't be latest (-1) for batch queries on lakelog")
        ending = "latest"
        if not streaming:
            ending = offsets_option("endingOffsets", "latest", ("latest",))
            if isinstance(ending, dict):
                for (t, p), o in ending.items():
                    if o == EARLIEST:
                        raise SourceOptionError(
                            f"Ending offset for {t}-{p} can't be earliest (-2) for batch queries on lakelog")
        for offsets, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            if isinstance(offsets, dict):
                bad = {tp: o for tp, o in offsets.items() if o < EARLIEST}
                if bad:
                    raise SourceOptionError(f"Invalid offsets in option '{name}': {bad}; use >= 0, -1 (latest) or -2 (earliest)")

        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise SourceOptionError(
                f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}")
        group_id = (opts.get("group.id") or "").strip() or None
        return cls(
            bootstrap_servers=_bootstrap(opts),
            streaming=streaming,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting_offsets=starting,
            starting_timestamp=timestamp_option("startingTimestamp"),
            starting_offsets_by_timestamp=by_timestamp_option("startingOffsetsByTimestamp"),
            starting_timestamp_strategy=strategy,
            ending_offsets=ending,
            ending_timestamp=None if streaming else timestamp_option("endingTimestamp"),
            ending_offsets_by_timestamp=None if streaming else by_timestamp_option("endingOffsetsByTimestamp"),
            max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", minimum=1) if streaming else None,
            min_offsets_per_trigger=_int(opts, "minOffsetsPerTrigger", minimum=1) if streaming else None,
            max_trigger_delay_ms=_duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay"),
            min_partitions=_int(opts, "minPartitions", minimum=1),
            max_records_per_partition=_int(opts, "maxRecordsPerPartition", minimum=1),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            include_headers=_bool(opts, "includeHeaders", False),
            group_id=group_id,
            fetch_offset_retries=_int(opts, "fetchOffset.numRetries", minimum=0) if "fetchoffset.numretries" in opts else 3,
            fetch_offset_retry_interval_ms=(_int(opts, "fetchOffset.retryIntervalMs", minimum=0)
                                            if "fetchoffset.retryintervalms" in opts else 1000),
        )


# -- the cluster as the driver sees it ---------------------------------------------------------------

#: One partition's table and readable offsets, as its leader reported them (the SQL side's record).
PartitionState = PartitionLogInfo


class _Cluster:
    """Driver-side metadata through the gateway: which partitions a read covers and their offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client: LakelogClient | None = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "_client": None}

    @property
    def client(self) -> LakelogClient:
        if self._client is None:
            self._client = LakelogClient(self.options.bootstrap_servers)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _topics(self) -> list[str]:
        opts = self.options
        if opts.subscribe is not None:
            return list(dict.fromkeys(opts.subscribe))
        if opts.assign is not None:
            return sorted(opts.assign)
        pattern = re.compile(opts.subscribe_pattern)
        return sorted(t for t in self.client.list_topics() if t not in INTERNAL_TOPICS and pattern.fullmatch(t))

    def partitions(self) -> dict[TopicPartition, PartitionState]:
        """The partitions of the subscribed/assigned topics that exist now, with their offsets.

        Retriable gateway errors (no leader during a failover, an unreachable gateway) are retried
        ``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart.
        """
        opts = self.options
        for attempt in range(opts.fetch_offset_retries + 1):
            try:
                return self._partitions()
            except (GatewayError, ConnectionError) as e:
                retriable = isinstance(e, ConnectionError) or e.retriable
                if not retriable or attempt == opts.fetch_offset_retries:
                    raise
                log.warning("fetching offsets from %s failed (%s); retrying", opts.bootstrap_servers, e)
                time.sleep(opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def _partitions(self) -> dict[TopicPartition, PartitionState]:
        out: dict[TopicPartition, PartitionState] = {}
        for topic in self._topics():
            try:
                logs = partition_logs_from_gateway(self.client, topic)
            except GatewayError as e:
                if e.error_code == 40401 and self.options.assign is None:
                    continue  # subscribed topic that does not exist (yet): like Kafka, nothing to read
                if e.error_code == 40401:
                    raise SourceError(f"Assigned topic '{topic}' does not exist ({e})") from e
                raise
            for info in logs:
                out[(topic, info.partition)] = info
        if self.options.assign is not None:
            wanted = {(t, p) for t, ps in self.options.assign.items() for p in ps}
            missing = sorted(wanted - out.keys())
            if missing:
                raise SourceError(f"Assigned partitions do not exist: {', '.join(f'{t}-{p}' for t, p in missing)}")
            out = {tp: s for tp, s in out.items() if tp in wanted}
        return dict(sorted(out.items()))


def _check_all_partitions(specified: Mapping[TopicPartition, int], states: Mapping[TopicPartition, Any],
                          option: str) -> None:
    if set(specified) != set(states):
        fmt = lambda tps: "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"  # noqa: E731
        raise SourceOptionError(
            f"If {option} contains specific offsets, you must specify all topic partitions.\n"
            f"Use -1 for latest, -2 for earliest.\nSpecified: {fmt(specified)} Assigned: {fmt(states)}")


def _timestamp_offset(state: PartitionState, timestamp_ms: int) -> int | None:
    if state.high_watermark <= state.log_start_offset:
        return None
    return offset_for_timestamp(state.table_uri, timestamp_ms, start=state.log_start_offset,
                                end=state.high_watermark)


def resolve_starting_offsets(options: SourceOptions, states: Mapping[TopicPartition, PartitionState]
                             ) -> dict[TopicPartition, int]:
    """The first offset to read per partition: ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets``."""
    if options.starting_timestamp is not None or options.starting_offsets_by_timestamp is not None:
        if options.starting_timestamp is not None:
            wanted = {tp: options.starting_timestamp for tp in states}
            option = "startingTimestamp"
        else:
            wanted = options.starting_offsets_by_timestamp
            _check_all_partitions(wanted, states, "startingOffsetsByTimestamp")
            option = "startingOffsetsByTimestamp"
        out = {}
        for tp, ts in wanted.items():
            offset = _timestamp_offset(states[tp], ts)
            if offset is None:
                if options.starting_timestamp_strategy == "error":
                    raise SourceError(
                        f"No record of {tp[0]}-{tp[1]} has a timestamp >= {ts} ({option}); set "
                        "'startingOffsetsByTimestampStrategy' to 'latest' to start such partitions at their latest offset.")
                offset = states[tp].high_watermark
            out[tp] = offset
        return out
    spec = options.starting_offsets
    if spec == "earliest":
        return {tp: s.log_start_offset for tp, s in states.items()}
    if spec == "latest":
        return {tp: s.high_watermark for tp, s in states.items()}
    _check_all_partitions(spec, states, "startingOffsets")
    return {tp: (states[tp].log_start_offset if o == EARLIEST else states[tp].high_watermark if o == LATEST else o)
            for tp, o in spec.items()}


def resolve_ending_offsets(options: SourceOptions, states: Mapping[TopicPartition, PartitionState]
                           ) -> dict[TopicPartition, int]:
    """The exclusive end per partition of a batch read, never past the high watermark."""
    hw = {tp: s.high_watermark for tp, s in states.items()}
    if options.ending_timestamp is not None or options.ending_offsets_by_timestamp is not None:
        if options.ending_timestamp is not None:
            wanted = {tp: options.ending_timestamp for tp in states}
        else:
            wanted = options.ending_offsets_by_timestamp
            _check_all_partitions(wanted, states, "endingOffsetsByTimestamp")
        out = {}
        for tp, ts in wanted.items():
            offset = _timestamp_offset(states[tp], ts)
            out[tp] = hw[tp] if offset is None else offset  # no match: latest, as Kafka
        return out
    spec = options.ending_offsets
    if spec == "latest":
        return hw
    _check_all_partitions(spec, states, "endingOffsets")
    return {tp: hw[tp] if o == LATEST else min(o, hw[tp]) for tp, o in spec.items()}


# -- planning: offset ranges -> input partitions -------------------------------------------------

@dataclass
class OffsetRangePartition(InputPartition):
    """One Spark task: offsets ``start <= offset < end`` of one partition table."""

    topic: str
    partition: int
    table_uri: str
    start: int
    end: int
    timestamp_type: int = 0

    @property
    def size(self) -> int:
        return self.end - self.start


def _divide(r: OffsetRangePartition, parts: int) -> list[OffsetRangePartition]:
    out, remaining, start = [], r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        out.append(OffsetRangePartition(r.topic, r.partition, r.table_uri, start, end, r.timestamp_type))
        start = end
    return [x for x in out if x.size > 0]


def split_ranges(ranges: Sequence[OffsetRangePartition], *, min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[OffsetRangePartition]:
    """Split offset ranges into Spark tasks as Spark's ``KafkaOffsetRangeCalculator`` does.

    Without options one task per non-empty partition range. ``maxRecordsPerPartition`` first cuts each
    range into pieces of at most that many offsets; ``minPartitions`` then, if there are fewer pieces
    than it, divides the large ranges in proportion to their size so that there are about that many.
    """
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records_per_partition is None:
        return list(ranges)
    if max_records_per_partition is not None:
        ranges = [x for r in ranges for x in _divide(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, total_size: int, parts: int) -> int:
        return max(int(math.floor(size / total_size * parts + 0.5)), 1)

    unsplit = [i for i, r in enumerate(ranges) if part_count(r.size, total, min_partitions) == 1]
    unsplit_total = sum(ranges[i].size for i in unsplit)
    split_total = total - unsplit_total
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for i, r in enumerate(ranges):
        parts = 1 if i in unsplit or split_total <= 0 else part_count(r.size, split_total, split_min)
        out.extend(_divide(r, parts))
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               log_start: Mapping[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
    """End offsets covering at most ``limit`` offsets from ``start``, split across partitions by their backlog.

    Like Spark's Kafka source (``maxOffsetsPerTrigger``) each partition gets a share proportional to
    its backlog (``latest - start``, counted from its log start offset if retention moved past the
    start; new partitions start at 0). Unlike Kafka, which rounds small shares up to 1 and can exceed
    the limit, the shares are rounded by largest remainder so the batch never exceeds ``limit``.
    """
    begins, sizes = {}, {}
    for tp, end in latest.items():
        begin = max(start.get(tp, 0), log_start.get(tp, 0))
        if end - begin > 0:
            begins[tp], sizes[tp] = begin, end - begin
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    quotas = {tp: limit * size / total for tp, size in sizes.items()}
    shares = {tp: int(math.floor(q)) for tp, q in quotas.items()}
    left = limit - sum(shares.values())
    for tp in sorted(sizes, key=lambda t: (-(quotas[t] - shares[t]), -sizes[t], t))[:left]:
        shares[tp] += 1
    out = dict(latest)
    for tp in sizes:
        out[tp] = min(latest[tp], begins[tp] + shares[tp])
    return out


# -- reading (executors) ----------------------------------------------------------------------------

def _null_if_empty(headers: pa.Array) -> pa.Array:
    """Kafka's source gives null, not an empty array, for a record without headers."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(headers), 0)
    empty = pc.equal(lengths, 0)
    if not pc.any(empty).as_py():
        return headers
    return pc.if_else(empty, pa.scalar(None, headers.type), headers)


def read_partition(part: OffsetRangePartition | None, schema: StructType, *, fail_on_data_loss: bool,
                   batch_rows: int = 64 * 1024) -> Iterator[pa.RecordBatch]:
    """The Kafka-shaped rows of one planned offset range, as Arrow batches with exactly ``schema``."""
    if part is None or part.size <= 0:
        return
    names = schema.fieldNames()
    arrow_schema = _arrow_schema(schema)
    columns = ["offset", "timestamp", "key", "value"] + (["headers"] if "headers" in names else [])

    def on_data_loss(loss: DataLoss) -> None:
        message = f"{part.topic}-{part.partition}: {loss.describe()}."
        if fail_on_data_loss:
            raise DataLossError(loss, message + _FAIL_ON_DATA_LOSS_HINT)
        log.warning("%s Skipping them (failOnDataLoss=false).", message)

    for batch in read_offset_range(part.table_uri, part.start, part.end, columns=columns, batch_rows=batch_rows,
                                   on_data_loss=on_data_loss, end_is_committed=True):
        n = batch.num_rows
        arrays = {
            "key": batch.column("key"),
            "value": batch.column("value"),
            "topic": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)),
                                                    pa.array([part.topic])).cast(pa.string()),
            "partition": pa.array(np.full(n, part.partition, np.int32)),
            "offset": batch.column("offset"),
            "timestamp": batch.column("timestamp"),
            "timestampType": pa.array(np.full(n, part.timestamp_type, np.int32)),
        }
        if "headers" in names:
            arrays["headers"] = _null_if_empty(batch.column("headers"))
        yield pa.RecordBatch.from_arrays(
            [arrays[name].cast(arrow_schema.field(name).type) for name in names], schema=arrow_schema)


def _report(message: str, *, fail: bool) -> None:
    if fail:
        raise SourceError(message + _FAIL_ON_DATA_LOSS_HINT)
    log.warning("%s Some data may have been missed (failOnDataLoss=false).", message)


# -- batch ------------------------------------------------------------------------------------------

class LakelogBatchReader(DataSourceReader):
    """``spark.read.format("lakelog")``: one planned offset range per Spark task."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._cluster = _Cluster(options)

    def partitions(self) -> list[OffsetRangePartition]:
        opts = self.options
        try:
            states = self._cluster.partitions()
            start = resolve_starting_offsets(opts, states)
            end = resolve_ending_offsets(opts, states)
        finally:
            self._cluster.close()
        ranges = []
        for tp, state in states.items():
            s, e = start[tp], end[tp]
            if s < state.log_start_offset:
                loss = DataLoss(state.table_uri, s, min(e, state.log_start_offset), state.log_start_offset)
                _report(f"{tp[0]}-{tp[1]}: {loss.describe()}.", fail=opts.fail_on_data_loss)
                s = min(state.log_start_offset, max(e, s))
            if s > e:
                raise SourceError(
                    f"Beginning offset {s} is after the ending offset {e} for topic {tp[0]} partition {tp[1]}. "
                    "You either provided an invalid starting offset, or the topic has been damaged.")
            ranges.append(OffsetRangePartition(tp[0], tp[1], state.table_uri, s, e, state.timestamp_type))
        return split_ranges(ranges, min_partitions=opts.min_partitions,
                            max_records_per_partition=opts.max_records_per_partition)

    def read(self, partition: OffsetRangePartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.schema, fail_on_data_loss=self.options.fail_on_data_loss)


# -- streaming --------------------------------------------------------------------------------------

class LakelogStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("lakelog")``: micro-batches of offset ranges.

    One instance lives in the driver's Python streaming runner for the whole run of a query (Spark
    calls ``initialOffset``, ``latestOffset``, ``partitions``, ``commit`` on it); executors use a
    pickled copy only for :meth:`read`, which is stateless.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._cluster = _Cluster(options)
        self._initial: dict[TopicPartition, int] | None = None
        self._position: dict[TopicPartition, int] | None = None  # where the next micro-batch starts
        self._states: dict[TopicPartition, PartitionState] = {}
        self._last_trigger = time.monotonic()
        self._committed_version = -1
        self._warned_commit = False

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_states"] = {}
        return state

    def _refresh(self) -> dict[TopicPartition, PartitionState]:
        self._states = self._cluster.partitions()
        return self._states

    def initialOffset(self) -> dict:
        if self._initial is None:
            self._initial = resolve_starting_offsets(self.options, self._refresh())
            log.info("lakelog stream starts at %s", offsets_to_json(self._initial))
        return offsets_to_json(self._initial)

    def latestOffset(self) -> dict:
        opts = self.options
        if self._position is not None and opts.group_id:
            # Spark runs micro-batches one after another and asks for the next batch's offsets only
            # once the previous one is in the commit log: everything below the position is processed.
            # Committing it here (not only in commit(), which Spark calls when it plans a *new*
            # batch) keeps the group's offsets current when the stream goes idle.
            self.commit(offsets_to_json(self._position))
        if self._position is None:  # a new query: its first batch starts at the initial offsets
            self.initialOffset()
            start = dict(self._initial)
        else:
            start = self._position
        states = self._refresh()
        latest = {tp: s.high_watermark for tp, s in states.items()}
        end = latest
        now = time.monotonic()
        if opts.min_offsets_per_trigger is not None:
            available = sum(max(0, hw - max(start.get(tp, 0), states[tp].log_start_offset)) for tp, hw in latest.items())
            delayed_ms = (now - self._last_trigger) * 1000
            if available < opts.min_offsets_per_trigger and delayed_ms < opts.max_trigger_delay_ms:
                return offsets_to_json(start)  # wait for more records (or for maxTriggerDelay)
        if opts.max_offsets_per_trigger is not None:
            end = rate_limit(start, latest, {tp: s.log_start_offset for tp, s in states.items()},
                             opts.max_offsets_per_trigger)
        if end != start:
            self._last_trigger = now
        self._position = dict(end)
        return offsets_to_json(end)

    def partitions(self, start: dict, end: dict) -> list[OffsetRangePartition]:
        s, e = offsets_from_json(start), offsets_from_json(end)
        # Spark plans every batch it runs through here, and after a restart it calls
        # partitions(X, X) with the last offsets of the checkpoint (setLatestSeenOffset): the end is
        # where the next batch starts.
        self._position = dict(e)
        if s == e:
            return []
        fail = self.options.fail_on_data_loss
        gone = sorted(s.keys() - e.keys())
        if gone:
            _report(f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone (topic deleted?).", fail=fail)
        states = self._states
        if any(tp not in states for tp in e):
            states = self._refresh()
        # Spark starts batch 0 at initialOffset(). When it re-runs an uncommitted batch 0 after a
        # restart, this (new) reader computed the initial offsets again, and "latest" (or "earliest"
        # after retention) may now lie past that batch's end: the query starts later than it first
        # did (Spark's Kafka source keeps its initial offsets in the checkpoint; a Python source has
        # no place for them). That is no data loss of an already started stream: skip quietly.
        rerun_of_first_batch = self._initial is not None and s == self._initial
        ranges = []
        for tp, until in e.items():
            frm = s.get(tp, 0)  # a new partition is read from its beginning; what retention removed is data loss
            state = states.get(tp)
            if state is None:
                _report(f"{tp[0]}-{tp[1]} is gone (topic deleted?); offsets {frm} to {until - 1} were not read.",
                        fail=fail)
                continue
            if until < frm and rerun_of_first_batch:
                log.warning("%s-%d: the first batch ends at %d, before the recomputed starting offset %d; "
                            "nothing read from it in this batch", tp[0], tp[1], until, frm)
                continue
            if until < frm:
                _report(f"{tp[0]}-{tp[1]}'s offset was changed from {frm} to {until} (the log was truncated).",
                        fail=fail)
                continue
            if until > frm:
                ranges.append(OffsetRangePartition(tp[0], tp[1], state.table_uri, frm, until, state.timestamp_type))
        return split_ranges(ranges, min_partitions=self.options.min_partitions,
                            max_records_per_partition=self.options.max_records_per_partition)

    def read(self, partition: OffsetRangePartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.schema, fail_on_data_loss=self.options.fail_on_data_loss)

    def commit(self, end: dict) -> None:
        """Spark processed everything up to ``end``: commit it as ``group.id``'s offsets, if one is set.

        The commit is ``LakelogClient.commit_offsets(group, offsets, transaction_app_id=group,
        transaction_version=sum of the end offsets)``: one Delta transaction, a no-op when that app id
        and version were committed already (a replay after a restart). The sum grows with every
        micro-batch as offsets only move forward. A failed commit is logged, not raised: the
        checkpoint, not the group, is where the query resumes.
        """
        offsets = offsets_from_json(end)
        if self._position is None:
            self._position = dict(offsets)
        group = self.options.group_id
        if not group:
            return
        if not CAN_COMMIT_OFFSETS:
            if not self._warned_commit:
                log.warning("group.id=%s is set but this lakelog client has no commit_offsets(); "
                            "offsets are not committed to the group", group)
                self._warned_commit = True
            return
        version = sum(offsets.values())
        if version <= self._committed_version:
            return
        try:
            self._cluster.client.commit_offsets(
                group, [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())],
                transaction_app_id=group, transaction_version=version)
            self._committed_version = version
        except Exception as e:  # noqa: BLE001 - the checkpoint stays authoritative
            log.warning("committing offsets %s of group %s failed: %s", offsets_to_json(offsets), group, e)

    def stop(self) -> None:
        self._cluster.close()


# -- sink ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SinkOptions:
    """The parsed options of a write: gateways and an optional fixed topic."""

    bootstrap_servers: str
    topic: str | None = None
    max_request_bytes: int = 8 * 1024 * 1024

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        opts = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}
        topic = (opts.get("topic") or "").strip() or None
        max_bytes = _int(opts, "lakelog.max.request.bytes", minimum=1024)
        return cls(_bootstrap(opts), topic, max_bytes or 8 * 1024 * 1024)


_HEADERS_SPARK_TYPE = KAFKA_SOURCE_SCHEMA["headers"].dataType


def _check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's ``KafkaWriter.validateQuery`` checks, with the Kafka sink's messages."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SourceOptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"], (StringType, BinaryType)):
        raise SourceOptionError("value attribute type must be a string or binary")
    if "key" in fields and not isinstance(fields["key"], (StringType, BinaryType)):
        raise SourceOptionError("key attribute type must be a string or binary")
    if options.topic is None and "topic" not in fields:
        raise SourceOptionError("topic option required when no 'topic' attribute is present. "
                                "Use the topic option for setting a topic.")
    if options.topic is None and not isinstance(fields["topic"], StringType):
        raise SourceOptionError("Topic type must be a String")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SourceOptionError("partition attribute type must be an int")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType["key"].dataType, StringType)
              and isinstance(h.elementType["value"].dataType, BinaryType))
        if not ok:
            raise SourceOptionError("headers attribute type must be an array<struct<key:string,value:binary>>")


@dataclass
class LakelogCommitMessage(WriterCommitMessage):
    """What one write task produced: records per (topic, partition)."""

    records: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(self.records.values())


class _Producer:
    """Produces Arrow batches of Kafka-sink rows through the gateway's Arrow produce endpoint."""

    RETRIES = 3

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.client = LakelogClient(options.bootstrap_servers)
        self._partition_counts: dict[str, int] = {}
        self._sticky = random.randrange(1 << 30)
        self.records: dict[TopicPartition, int] = {}

    def close(self) -> None:
        self.client.close()

    def partition_count(self, topic: str) -> int:
        if topic not in self._partition_counts:
            try:
                info = self.client.describe_topic(topic)
            except GatewayError as e:
                if e.error_code == 40401:
                    raise SourceError(f"Topic '{topic}' does not exist; create it first ({e})") from e
                raise
            self._partition_counts[topic] = len(info["partitions"])
        return self._partition_counts[topic]

    def send(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names
        table = pa.table({
            "key": batch.column("key").cast(pa.binary()) if "key" in names else pa.nulls(n, pa.binary()),
            "value": batch.column("value").cast(pa.binary()),
            "headers": batch.column("headers").cast(HEADERS_TYPE) if "headers" in names else pa.nulls(n, HEADERS_TYPE),
        })
        if self.options.topic is not None:
            topics = None
            groups = [(self.options.topic, None)]
        else:
            topics = batch.column("topic")
            if topics.null_count:
                raise SourceError("null topic present in the data. Use the topic option for setting a topic.")
            groups = [(t, pc.equal(topics, t)) for t in pc.unique(topics).to_pylist()]
        explicit = batch.column("partition") if "partition" in names else None
        for topic, mask in groups:
            rows = table if mask is None else table.filter(mask)
            parts = None if explicit is None else (explicit if mask is None else explicit.filter(mask))
            self._send_topic(topic, rows, parts)

    def _send_topic(self, topic: str, rows: pa.Table, explicit: pa.Array | None) -> None:
        from lakelog.protocol.partitioner import partitions_for_keys

        count = self.partition_count(topic)
        hashed = partitions_for_keys(rows["key"], count)
        parts = hashed if explicit is None else pc.coalesce(explicit.cast(pa.int32()), hashed)
        if parts.null_count:  # keyless and no partition: one partition per batch, moving on each time
            self._sticky += 1
            parts = pc.fill_null(parts, pa.scalar(self._sticky % count, pa.int32()))
        for p in sorted(pc.unique(parts).to_pylist()):
            if not 0 <= p < count:
                raise SourceError(f"Partition {p} does not exist in topic '{topic}' (it has partitions 0 to {count - 1})")
            sub = rows.filter(pc.equal(parts, p))
            self._produce(topic, p, sub)

    def _produce(self, topic: str, partition: int, rows: pa.Table) -> None:
        limit = self.options.max_request_bytes
        per_row = max(1, rows.nbytes // max(rows.num_rows, 1))
        step = max(1, limit // per_row)
        for offset in range(0, rows.num_rows, step):
            chunk = rows.slice(offset, step)
            for attempt in range(self.RETRIES + 1):
                try:
                    self.client.produce_arrow(topic, partition, chunk)
                    break
                except (GatewayError, ConnectionError) as e:
                    retriable = isinstance(e, ConnectionError) or e.retriable
                    if not retriable or attempt == self.RETRIES:
                        raise
                    log.warning("produce to %s-%d failed (%s); retrying", topic, partition, e)
                    time.sleep(0.2 * 2 ** attempt)
            key = (topic, partition)
            self.records[key] = self.records.get(key, 0) + chunk.num_rows


class LakelogWriter(DataSourceArrowWriter):
    """``df.write.format("lakelog")``: each task produces its rows; at-least-once like Kafka's sink."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        producer = _Producer(self.options)
        try:
            for batch in iterator:
                producer.send(batch)
        finally:
            producer.close()
        return LakelogCommitMessage(producer.records)

    def commit(self, messages: list) -> None:
        total = sum(m.count for m in messages if m is not None)
        log.info("lakelog sink: produced %d records", total)

    def abort(self, messages: list) -> None:
        total = sum(m.count for m in messages if m is not None)
        log.warning("lakelog sink: write aborted; %d records were already produced and stay in the log", total)


class LakelogStreamWriter(DataSourceStreamWriter, DataSourceArrowWriter):
    """``writeStream.format("lakelog")``: each micro-batch's tasks produce their rows (at-least-once)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        return LakelogWriter(self.options, self.schema).write(iterator)

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - Spark's name
        total = sum(m.count for m in messages if m is not None)
        log.info("lakelog sink: micro-batch %d produced %d records", batchId, total)

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803
        total = sum(m.count for m in messages if m is not None)
        log.warning("lakelog sink: micro-batch %d aborted; %d records were already produced", batchId, total)


# -- the data source ----------------------------------------------------------------------------------

class LakelogDataSource(DataSource):
    """The ``lakelog`` format: Spark's Kafka source and sink, over lakelog topics."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return kafka_schema(_bool({str(k).lower(): v for k, v in dict(self.options).items()}, "includeHeaders", False))

    def _check_schema(self, schema: StructType, options: SourceOptions) -> None:
        expected = kafka_schema(options.include_headers)
        if schema is not None and schema != expected:
            raise SourceOptionError(
                "The lakelog source has a fixed schema and cannot be set with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()})")

    def reader(self, schema: StructType) -> LakelogBatchReader:
        options = SourceOptions.parse(self.options, streaming=False)
        self._check_schema(schema, options)
        return LakelogBatchReader(options, schema)

    def streamReader(self, schema: StructType) -> LakelogStreamReader:
        options = SourceOptions.parse(self.options, streaming=True)
        self._check_schema(schema, options)
        return LakelogStreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> LakelogWriter:
        if overwrite:
            raise SourceOptionError("Save mode Overwrite is not allowed for lakelog: a topic is an append-only "
                                    "log. Use mode('append').")
        options = SinkOptions.parse(self.options)
        _check_sink_schema(schema, options)
        return LakelogWriter(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LakelogStreamWriter:
        options = SinkOptions.parse(self.options)
        _check_sink_schema(schema, options)
        return LakelogStreamWriter(options, schema)


def register(spark) -> None:
    """Make ``format("lakelog")`` available in ``spark`` (``spark.dataSource.register``).

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
    spark.dataSource.register(LakelogDataSource)
