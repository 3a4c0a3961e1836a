"""Options of the ``lakelog`` source and sink: parsing and checking them, and the offsets JSON.

:meth:`SourceOptions.parse` takes the options of a read exactly as Spark passes them (option names
are case-insensitive, values strings) and checks them as Spark's Kafka source does, with its
messages where it has the same check; :meth:`SinkOptions.parse` does the same for a write. The option
names and their meaning are those of Spark's Kafka source (listed in :mod:`lakelog.spark.source`),
plus lakelog's own ``lakelog.bootstrap.servers``, ``lakelog.read.tail``, ``group.id``,
and ``lakelog.read.mode``; the sink's options are in :mod:`~lakelog.spark.source.sink_options`.

``lakelog.read.tail`` exists because a partition log has two tiers (DESIGN.md, "Storage"): the
broker's flusher commits records to the partition's Delta table every ``lake.commit.interval.ms``, so
the table holds only the offsets below the *lake end offset*, which may lag the high watermark; the
offsets in between are in the leader's segment tail, readable only through its Arrow fetch.

Offsets travel as JSON objects ``{"topic": {"partition": offset}}`` (:func:`offsets_to_json`,
:func:`offsets_from_json`), in options (``startingOffsets``) and as streaming offsets.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, get_args

from lakelog.client import BearerToken, ClientSettings
from lakelog.client.settings import SPARK_BOOTSTRAP_OPTIONS
from lakelog.protocol.fetch_requests import ISOLATION_LEVELS, IsolationLevel
from lakelog.spark.errors import SourceOptionError
from lakelog.spark.source.lake_storage import LAKE_STORAGE_OPTIONS, LakeStorage, lake_storage_option

log = logging.getLogger(__name__)

__all__ = [
    "AUTH_OPTIONS", "BOOTSTRAP_SERVERS_OPTIONS", "EARLIEST", "GROUP_ID_OPTIONS", "LATEST", "READ_TAIL", "SOURCE_OPTIONS",
    "SSL_OPTIONS", "SourceOptions", "TopicPartition", "check_known_options", "client_settings_option",
    "isolation_level_option", "offsets_from_json", "offsets_to_json", "read_tail_option",
    "READ_MODE", "ReadMode", "read_mode_option"]

#: A partition of a topic: ``(topic, partition)``.
TopicPartition = tuple[str, int]


# -- offsets JSON --------------------------------------------------------------------------------

def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}`` with topics and partitions in sorted order (stable text)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition) in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def offsets_from_json(value: Any) -> dict[TopicPartition, int]:
    """``{"t": {"p": o}}`` (a dict or its JSON text) -> ``{(t, p): o}``.

    Raises:
        SourceOptionError: not such an object, or a partition or offset that is not an integer.
        json.JSONDecodeError: ``value`` is text that is not JSON.
    """
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



# -- source options ---------------------------------------------------------------------------------

#: The offsets ``-2`` and ``-1`` in JSON offsets options: earliest and latest (as Kafka's source).
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
    """Option ``name`` (``true``/``false``, any case) of lower-cased ``opts``; ``default`` if absent."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise SourceOptionError(f"Option '{name}' must be 'true' or 'false', got {raw!r}")
    return value == "true"


def _int(opts: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    """Option ``name`` as an int >= ``minimum``; None if absent."""
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


#: The names of the gateways option: lakelog's, and Spark's Kafka source's (an alias, so a Kafka job moves over
#: by changing the format name only).
BOOTSTRAP_SERVERS_OPTIONS = SPARK_BOOTSTRAP_OPTIONS


def _one_of(opts: Mapping[str, str], names: tuple[str, ...], what: str) -> str | None:
    """The value of whichever of ``names`` (aliases, lower-case) is in ``opts``, stripped; None if none is.

    Raises:
        SourceOptionError: two of them given with different values.
    """
    given = {name: opts[name].strip() for name in names if name in opts and opts[name].strip()}
    if len(set(given.values())) > 1:
        raise SourceOptionError(f"Options {' and '.join(repr(n) for n in given)} are aliases ({what}) but differ "
                                f"({given}); give one.")
    return next(iter(given.values()), None)


def client_settings_option(opts: Mapping[str, str]) -> ClientSettings:
    """The connection settings of (lower-cased) ``opts``: ``lakelog.bootstrap.servers`` or its alias
    ``kafka.bootstrap.servers`` (required), the credentials (:data:`AUTH_OPTIONS`) and the TLS files
    (:data:`SSL_OPTIONS`), read by :meth:`ClientSettings.from_spark_options
    <lakelog.client.ClientSettings.from_spark_options>`, the parser the CLI and the demo use too.

    Raises:
        SourceOptionError: neither gateway option given, both with different values, only one of user and
            password, a token with a user name or password too, or an empty token; naming the options.
    """
    try:
        return ClientSettings.from_spark_options(opts)
    except ValueError as e:
        raise SourceOptionError(str(e)) from None


#: The names of the consumer group option: Spark's Kafka source's, and lakelog's own earlier name.
GROUP_ID_OPTIONS = ("kafka.group.id", "group.id")


# -- known options ----------------------------------------------------------------------------------

#: Every option of a read (lower-case): Spark's Kafka source's (``KafkaSourceProvider``) and lakelog's own.
SOURCE_OPTIONS = (
    "subscribe", "subscribePattern", "assign", "lakelog.bootstrap.servers", "kafka.bootstrap.servers",
    "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "failOnDataLoss",
    "includeHeaders", "groupIdPrefix", "kafka.group.id", "group.id", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "isolation.level", "kafka.isolation.level", "lakelog.read.tail",
    "lakelog.read.mode", "lakelog.auth.username", "lakelog.auth.password", "lakelog.auth.token",
    "lakelog.ssl.cafile", "lakelog.ssl.certfile", "lakelog.ssl.keyfile", "valueFormat",
) + LAKE_STORAGE_OPTIONS

#: Options of Spark's Kafka source that tune its Kafka consumer, which lakelog has none of: accepted, so a
#: Kafka job moves over unchanged, and ignored with a warning (``kafka.`` + a Kafka consumer config).
IGNORED_SOURCE_OPTIONS = ("kafkaConsumer.pollTimeoutMs",) + tuple("kafka." + name for name in (
    "client.id", "client.dns.lookup", "check.crcs", "connections.max.idle.ms", "default.api.timeout.ms",
    "fetch.max.bytes", "fetch.max.wait.ms", "fetch.min.bytes", "heartbeat.interval.ms",
    "max.partition.fetch.bytes", "max.poll.interval.ms", "max.poll.records", "metadata.max.age.ms",
    "receive.buffer.bytes", "reconnect.backoff.max.ms", "reconnect.backoff.ms", "request.timeout.ms",
    "retry.backoff.ms", "send.buffer.bytes", "session.timeout.ms"))

#: Kafka consumer options Spark's Kafka source refuses, with its reasons (``KafkaSourceProvider.
#: validateGeneralOptions``), and the Kafka client's security options, which lakelog does not take.
REFUSED_SOURCE_OPTIONS = {
    "kafka.auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the source "
                               "option 'startingOffsets' to 'earliest' or 'latest' to specify where to start.",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are returned as "
                              "bytes. Use DataFrame operations to deserialize the keys explicitly.",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are returned "
                                "as bytes. Use DataFrame operations to deserialize the values explicitly.",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported: offsets are committed "
                                "to 'kafka.group.id' (or 'groupIdPrefix') after each micro-batch.",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported: there is no Kafka "
                                 "consumer to intercept.",
}


def check_known_options(opts: Mapping[str, str], *, known: tuple[str, ...], ignored: tuple[str, ...] = (),
                        refused: Mapping[str, str] | None = None, what: str) -> None:
    """Refuse options of lower-cased ``opts`` that are not ``known`` (nor ``ignored``); warn about ``ignored`` ones.

    Option names are case-insensitive, as Spark's. Spark's Kafka source passes any ``kafka.*`` option to
    its consumer; lakelog has no Kafka consumer, so only the ``kafka.*`` options listed as known (aliases)
    or ignored (consumer tuning) are taken, and the Kafka client's security options (``kafka.security.*``,
    ``kafka.sasl.*``, ``kafka.ssl.*``) are refused rather than silently dropped.

    Args:
        opts: the options, names lower-cased.
        known: the option names that mean something (any case).
        ignored: names accepted without effect; each is logged as a warning.
        refused: ``{lower-case name: message}`` for options refused with a reason of their own.
        what: ``"lakelog source"`` or ``"lakelog sink"``, for the messages.

    Raises:
        SourceOptionError: a refused option (its message), or unknown options, naming them and listing the
            known ones.
    """
    known_lower = {name.lower() for name in known}
    ignored_lower = {name.lower(): name for name in ignored}
    for name in sorted(opts):
        if refused and name in refused:
            raise SourceOptionError(refused[name])
    unknown = sorted(name for name in opts if name not in known_lower and name not in ignored_lower)
    if unknown:
        raise SourceOptionError(
            f"Unknown option{'s' if len(unknown) > 1 else ''} {', '.join(repr(n) for n in unknown)} for the {what}. "
            f"Known options (names are case-insensitive): {', '.join(known)}.")
    for name in sorted(opts):
        if name in ignored_lower:
            log.warning("Option '%s' tunes Spark's Kafka consumer; the %s has none, so it is ignored",
                        ignored_lower[name], what)


#: The credentials options: a lakelog user's name and password, sent as HTTP Basic credentials, or a bearer
#: token (a JWT), sent as ``Authorization: Bearer``, by the driver, the executors' fetches and the sink
#: (brokers with ``authentication.methods`` holding ``basic`` or ``oauthbearer``).
AUTH_OPTIONS = ("lakelog.auth.username", "lakelog.auth.password", "lakelog.auth.token")


#: The TLS options (PEM files; Kafka's client ``ssl.cafile``, ``ssl.certfile``, ``ssl.keyfile``): the CA the
#: brokers' certificates are verified against, and a client certificate with its key for brokers that ask
#: for one (``ssl.client.auth``); used by the driver, the executors (the files must be at the same paths
#: there) and the sink.
SSL_OPTIONS = ("lakelog.ssl.cafile", "lakelog.ssl.certfile", "lakelog.ssl.keyfile")


@dataclass(frozen=True)
class SourceOptions:
    """The parsed options of a read, with the names and meaning of Spark's Kafka source options.

    The options and their defaults are listed in :mod:`lakelog.spark.source`; each attribute is the
    option of the same name in snake case (``maxOffsetsPerTrigger`` -> ``max_offsets_per_trigger``),
    offsets as ``{(topic, partition): offset}`` (-2 earliest, -1 latest), timestamps in ms since the
    epoch, ``max_trigger_delay_ms`` and ``fetch_offset_retry_interval_ms`` in ms. Batch-only
    attributes are left at their defaults in a streaming read and the other way round.

    ``read_tail`` is ``lakelog.read.tail`` (see :func:`read_tail_option`): True, "latest" is each
    partition's high watermark and the offsets at and above its lake end offset are fetched from the
    leader; False, "latest" is the lake end offset and everything is read from the Delta tables. Left
    None it takes the mode's default: True when ``streaming``, else False.

    ``isolation_level`` is ``isolation.level`` / ``kafka.isolation.level`` (see
    :func:`isolation_level_option`); ``read_mode`` is ``lakelog.read.mode`` (see :func:`read_mode_option`);
    ``value_format`` is ``valueFormat`` (see :func:`value_format_option`).

    ``group_id`` is ``kafka.group.id`` (or lakelog's earlier name ``group.id``): the consumer group whose
    offsets a stream commits after each micro-batch; ``group_id_prefix`` is ``groupIdPrefix``: without a
    ``group_id``, a stream commits to the group ``{prefix}-{a random UUID}``, new for each run of the query,
    as Spark's Kafka source names its generated groups. Neither: nothing is committed. Batch reads never
    commit. See :meth:`~lakelog.spark.source.stream.LakelogStreamReader.commit`.
    """

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
    group_id_prefix: str | None = None
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    read_tail: bool | None = None
    isolation_level: IsolationLevel = "read_uncommitted"
    auth: tuple[str, str] | BearerToken | None = field(default=None, repr=False)  # never in a log line
    read_mode: "ReadMode" = "auto"
    value_format: ValueFormat = "bytes"
    #: LakelogClient TLS keyword arguments (:meth:`ClientSettings.tls <lakelog.client.ClientSettings.tls>`)
    tls: dict[str, str] = field(default_factory=dict)
    #: ``lakelog.lake.storage.*``: how executors open ``s3://`` tables (:mod:`~lakelog.spark.source.lake_storage`)
    lake_storage: LakeStorage = field(default_factory=LakeStorage, repr=False)  # holds the secret

    def __post_init__(self) -> None:
        if self.read_tail is None:  # frozen: set through object.__setattr__, as dataclasses do
            object.__setattr__(self, "read_tail", bool(self.streaming))

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> "SourceOptions":
        """Check and parse the options of a batch (``streaming=False``) or streaming read.

        Raises:
            SourceOptionError: naming the option and what is wrong with it.
        """
        opts = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}
        kind = "streaming" if streaming else "batch"
        check_known_options(opts, known=SOURCE_OPTIONS, ignored=IGNORED_SOURCE_OPTIONS,
                            refused=REFUSED_SOURCE_OPTIONS, what="lakelog source")

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
        group_id = _one_of(opts, GROUP_ID_OPTIONS, "the consumer group")
        connection = client_settings_option(opts)
        value_format = value_format_option(opts)
        prefix = opts.get("groupidprefix")
        if prefix is not None and not prefix.strip():
            raise SourceOptionError("Option 'groupIdPrefix' is empty: name a prefix, or leave it out.")
        return cls(
            bootstrap_servers=connection.bootstrap_servers,
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
            group_id_prefix=None if prefix is None else prefix.strip(),
            fetch_offset_retries=_int(opts, "fetchOffset.numRetries", minimum=0) if "fetchoffset.numretries" in opts else 3,
            fetch_offset_retry_interval_ms=(_int(opts, "fetchOffset.retryIntervalMs", minimum=0)
                                            if "fetchoffset.retryintervalms" in opts else 1000),
            read_tail=read_tail_option(opts, streaming=streaming),
            value_format=value_format,
            isolation_level=isolation_level_option(opts),
            read_mode=read_mode_option(opts),
            auth=connection.auth(),
            tls=connection.tls(),
            lake_storage=lake_storage_option(opts),
        )




#: The option that says whether a read also fetches the offsets not in the Delta tables yet.
READ_TAIL = "lakelog.read.tail"

#: ``valueFormat``: ``bytes`` (Spark's Kafka source: ``value binary``) or ``schema`` (the typed value).
ValueFormat = Literal["bytes", "schema"]
VALUE_FORMATS: tuple[str, ...] = get_args(ValueFormat)


def value_format_option(opts: Mapping[str, str]) -> ValueFormat:
    """``valueFormat`` of lower-cased ``opts``: ``bytes`` (default: the ``value`` column is the record's bytes,
    as Spark's Kafka source gives it) or ``schema``: ``value`` is the record's value decoded with its registry
    schema, the ``value_parsed`` struct the broker's flusher wrote beside the bytes of a schema'd topic
    (``value.schema.subject``; :mod:`lakelog.log_tables.typed_columns`), so a job needs no
    ``from_avro``/``from_json``; null for a record that does not decode. Records read through the leader
    (past the lake end offset with ``lakelog.read.tail``, or in ``lakelog.read.mode=broker``) are decoded
    by the executor the same way (:mod:`~lakelog.spark.source.typed_tail`).

    Raises:
        SourceOptionError: another value.
    """
    raw = opts.get("valueformat", "bytes").strip().lower()
    if raw not in VALUE_FORMATS:
        raise SourceOptionError(f"Option 'valueFormat' must be one of {', '.join(VALUE_FORMATS)}, got {raw!r}")
    return raw  # type: ignore[return-value]


def read_tail_option(opts: Mapping[str, str], *, streaming: bool) -> bool:
    """``lakelog.read.tail`` of lower-cased ``opts``: whether the read goes up to the high watermark.

    A partition's Delta table holds the offsets below its lake end offset; the broker's flusher moves
    that up behind the high watermark (HW) every ``lake.commit.interval.ms`` of the topic (default
    1000 ms; 0 = a Delta commit per append, the lake end offset is then the HW).

    - ``true``: "latest" is the HW, as with Spark's Kafka source. A task reads the offsets of its
      range below the lake end offset from the Delta table and the rest from the partition leader's
      Arrow fetch (``GET /topics/{t}/partitions/{p}/records``, any broker forwards to the leader), so
      it sees every committed record, at the price of HTTP reads from the leader for the newest ones.
    - ``false``: "latest" is the lake end offset, and every read is a direct Delta read that never
      loads the brokers; records appear ``lake.commit.interval.ms`` or so after they were produced.

    Default: ``true`` for ``readStream`` (a stream wants records as soon as they are committed, like a
    Kafka consumer), ``false`` for ``read`` (a batch query over history reads the lake only, without
    loading the brokers with HTTP fetches).

    Raises:
        SourceOptionError: a value other than ``true`` or ``false`` (any case).
    """
    try:
        return _bool(opts, READ_TAIL, streaming)
    except SourceOptionError as e:
        raise SourceOptionError(
            f"{e} (true: read up to the high watermark, fetching the offsets not in the Delta tables yet from "
            f"the partition leaders; false: read the Delta tables only, up to their lake end offsets; default "
            f"{'true' if streaming else 'false'} for {'streaming' if streaming else 'batch'} queries)") from None


#: The option that says where executors read a partition's Delta table offsets from.
READ_MODE = "lakelog.read.mode"

#: The values of ``lakelog.read.mode`` (see :func:`read_mode_option`).
ReadMode = Literal["direct", "broker", "auto"]
READ_MODES: tuple[str, ...] = ("direct", "broker", "auto")


def read_mode_option(opts: Mapping[str, str]) -> ReadMode:
    """``lakelog.read.mode`` of lower-cased ``opts``: how executors read the offsets below the lake end offset.

    - ``direct``: from the partition's Delta table (its path as the gateway reported it), only the
      files and row groups the offsets (and pushed-down timestamp filters) need; the executor must be
      able to open that path.
    - ``broker``: the executor fetches its whole offset range through the partition leader's Arrow fetch
      (the gateway), which serves any offset, the history in Delta included: for executors that cannot
      reach the brokers' storage, at the price of loading the leaders.
    - ``auto`` (default): ``direct`` when the executor can open the table, else ``broker``.

    Applies to batch and streaming reads; the offsets past the lake end offset (``lakelog.read.tail``)
    always come from the leader.

    Raises:
        SourceOptionError: another value (the values are case-insensitive).
    """
    value = opts.get(READ_MODE.lower(), "auto").strip().lower()
    if value not in READ_MODES:
        raise SourceOptionError(
            f"Option '{READ_MODE}' must be 'direct' (executors read the Delta tables), 'broker' (executors fetch "
            f"through the partition leaders) or 'auto' (direct when the table can be opened, else broker; the "
            f"default), got {opts[READ_MODE.lower()]!r}")
    return value  # type: ignore[return-value]


#: The names of the isolation level option: lakelog's, and the Kafka consumer option as Spark's Kafka source passes it.
ISOLATION_LEVEL_OPTIONS = ("isolation.level", "kafka.isolation.level")


def isolation_level_option(opts: Mapping[str, str]) -> IsolationLevel:
    """``isolation.level`` (or ``kafka.isolation.level``, the Kafka consumer option as Spark's Kafka source
    takes it) of lower-cased ``opts``: Kafka's consumer isolation level, default ``read_uncommitted``.

    - ``read_uncommitted``: what a read fetches from the partition leaders (``lakelog.read.tail``) includes
      records of open and aborted transactions, as a Kafka consumer's default; the Delta tables never hold
      any (the flusher commits decided, committed records only).
    - ``read_committed``: "latest" is each partition's last stable offset (the first offset of a still-open
      transaction), not its high watermark, and the leader fetches drop aborted records, as Spark's Kafka
      source with ``kafka.isolation.level=read_committed``.

    Neither ever returns transaction markers (control records).

    Raises:
        SourceOptionError: another value, or both options given with different values.
    """
    given = {name: opts[name].strip() for name in ISOLATION_LEVEL_OPTIONS if name in opts}
    for name, value in given.items():
        if value not in ISOLATION_LEVELS:
            raise SourceOptionError(f"Option '{name}' must be 'read_uncommitted' or 'read_committed' (Kafka's "
                                    f"isolation.level), got {value!r}")
    if len(set(given.values())) > 1:
        raise SourceOptionError(f"Options 'isolation.level' and 'kafka.isolation.level' differ ({given}); give one.")
    return next(iter(given.values()), "read_uncommitted")  # type: ignore[return-value]
