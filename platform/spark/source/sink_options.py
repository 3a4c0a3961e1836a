"""Options of the ``lakelog`` sink (``df.write`` / ``writeStream.format("lakelog")``): parsing and checking them.

The names and meaning are those of Spark's Kafka sink (``kafka.bootstrap.servers`` as an alias of
``lakelog.bootstrap.servers``, ``topic``), plus lakelog's ``lakelog.max.request.bytes`` and
``lakelog.transactional.id.prefix``, the Kafka producer's ``transaction.timeout.ms`` for the exactly-once
``writeStream``, and the credentials ``lakelog.auth.username`` / ``lakelog.auth.password`` or ``lakelog.auth.token`` (as the source's,
:func:`~lakelog.spark.source.options.client_settings_option`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from lakelog.client import BearerToken
from lakelog.spark.errors import SourceOptionError
from lakelog.spark.source.options import (AUTH_OPTIONS, SSL_OPTIONS, ValueFormat, _int, check_known_options,
                                          client_settings_option, value_format_option)

__all__ = ["DEFAULT_TRANSACTION_TIMEOUT_MS", "SINK_OPTIONS", "SinkOptions", "TRANSACTIONAL_ID_PREFIX",
           "TRANSACTION_TIMEOUT_OPTIONS"]


#: Every option of a write (any case): Spark's Kafka sink's, lakelog's own, and the options Spark's
#: ``DataStreamWriter`` keeps among a sink's options (``checkpointLocation``, ``path``, ``queryName``).
SINK_OPTIONS = ("lakelog.bootstrap.servers", "kafka.bootstrap.servers", "topic", "lakelog.max.request.bytes",
                "lakelog.transactional.id.prefix", "transaction.timeout.ms", "kafka.transaction.timeout.ms",
                "valueFormat", "value.schema.subject",
                "checkpointLocation", "path", "queryName") + AUTH_OPTIONS + SSL_OPTIONS

#: Kafka producer options Spark's Kafka sink passes to its producer, which lakelog has none of: ignored
#: with a warning (the sink's produce requests use the gateway's default ``acks=all``).
IGNORED_SINK_OPTIONS = tuple("kafka." + name for name in (
    "acks", "batch.size", "buffer.memory", "client.id", "compression.type", "delivery.timeout.ms",
    "enable.idempotence", "linger.ms", "max.block.ms", "max.in.flight.requests.per.connection",
    "max.request.size", "request.timeout.ms", "retries", "retry.backoff.ms", "send.buffer.bytes"))

#: Kafka producer options Spark's Kafka sink refuses (``KafkaSourceProvider.validateSinkOptions``).
REFUSED_SINK_OPTIONS = {
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported, as keys are written as bytes. "
                            "Use DataFrame operations to serialize the keys explicitly (a binary or string 'key').",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported, as values are written as "
                              "bytes. Use DataFrame operations to serialize the values explicitly.",
}

#: The option naming the transactional id prefix of a streaming write's tasks.
TRANSACTIONAL_ID_PREFIX = "lakelog.transactional.id.prefix"
#: The names of the transaction timeout option: lakelog's, and the Kafka producer option as Spark passes it.
TRANSACTION_TIMEOUT_OPTIONS = ("transaction.timeout.ms", "kafka.transaction.timeout.ms")
#: Kafka's producer default ``transaction.timeout.ms``.
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class SinkOptions:
    """The parsed options of a write: gateways, an optional fixed topic, request size and, for
    ``writeStream`` (exactly-once, :mod:`lakelog.spark.source.sink`), the transactions' settings.

    Attributes:
        bootstrap_servers: ``lakelog.bootstrap.servers`` (required), comma list of gateway ``host:port``.
        topic: ``topic`` (as the Kafka sink's): every row goes to it, whatever its ``topic`` column says.
        max_request_bytes: ``lakelog.max.request.bytes`` (>= 1024, default 8 MiB): the size of one
            produce request's Arrow body, roughly.
        transactional_id_prefix: ``lakelog.transactional.id.prefix``: a streaming write task's
            transactional id is ``{prefix}-{Spark partition id}``. None (the default): ``spark-{query id}``.
            A prefix must belong to one query (one checkpoint) at a time: two queries with the same prefix
            fence each other's transactions.
        transaction_timeout_ms: ``transaction.timeout.ms`` (or ``kafka.transaction.timeout.ms``; >= 1,
            default 60000 as Kafka's producer): the coordinator aborts a task's transaction open longer,
            from the task's first record to the driver's commit of the micro-batch; set it above the
            longest micro-batch. The broker refuses one above its ``transaction.max.timeout.ms``.
        auth: ``(lakelog.auth.username, lakelog.auth.password)``: HTTP Basic credentials of every produce, or
            the bearer token of ``lakelog.auth.token`` (:func:`~lakelog.spark.source.options.client_settings_option`).
            None: none sent.
        tls: ``lakelog.ssl.cafile`` / ``lakelog.ssl.certfile`` / ``lakelog.ssl.keyfile`` as LakelogClient keyword
            arguments (:func:`~lakelog.spark.source.options.client_settings_option`). Default: none (plain HTTP or the
            system's CAs).
        value_format: ``valueFormat`` (as the source's): ``bytes`` (default; ``value`` is a string or binary
            column, written as it is) or ``schema``: ``value`` is a column of any type (a struct, typically),
            each row serialized with the latest version of the topic's value subject in Confluent's wire format
            (what Confluent's serializers write; :mod:`lakelog.spark.source.sink`).
        value_subject: ``value.schema.subject`` (with ``valueFormat=schema`` only): the subject to serialize
            with. None (the default): each topic's own (its ``value.schema.subject`` config, or
            ``<topic>-value`` with ``confluent.value.schema.validation=true``).
    """

    bootstrap_servers: str
    topic: str | None = None
    max_request_bytes: int = 8 * 1024 * 1024
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    auth: tuple[str, str] | BearerToken | None = field(default=None, repr=False)  # never in a log line
    tls: dict[str, str] = field(default_factory=dict)
    value_format: ValueFormat = "bytes"
    value_subject: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        """Check and parse the options of a write (names case-insensitive).

        Raises:
            SourceOptionError: an unknown option, no ``lakelog.bootstrap.servers``, an invalid ``lakelog.max.request.bytes`` or
                ``transaction.timeout.ms``, the two timeout options with different values, an empty
                ``lakelog.transactional.id.prefix``, a ``valueFormat`` other than ``bytes`` / ``schema``, or
                ``value.schema.subject`` without ``valueFormat=schema`` (or empty).
        """
        opts = {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}
        check_known_options(opts, known=SINK_OPTIONS, ignored=IGNORED_SINK_OPTIONS, refused=REFUSED_SINK_OPTIONS,
                            what="lakelog sink")
        topic = (opts.get("topic") or "").strip() or None
        max_bytes = _int(opts, "lakelog.max.request.bytes", minimum=1024)
        timeouts = {name: _int(opts, name, minimum=1) for name in TRANSACTION_TIMEOUT_OPTIONS if name in opts}
        if len(set(timeouts.values())) > 1:
            raise SourceOptionError(f"Options 'transaction.timeout.ms' and 'kafka.transaction.timeout.ms' differ "
                                    f"({timeouts}); give one.")
        prefix = opts.get(TRANSACTIONAL_ID_PREFIX)
        if prefix is not None and not prefix.strip():
            raise SourceOptionError(f"Option '{TRANSACTIONAL_ID_PREFIX}' is empty: name a prefix, or leave it out "
                                    "for spark-{query id}.")
        value_format = value_format_option(opts)
        subject = opts.get("value.schema.subject")
        if subject is not None and (value_format != "schema" or not subject.strip()):
            raise SourceOptionError("Option 'value.schema.subject' names the subject a valueFormat=schema write "
                                    "serializes with: set valueFormat=schema and a non-empty subject, or leave it out.")
        connection = client_settings_option(opts)
        return cls(connection.bootstrap_servers, topic, max_bytes or 8 * 1024 * 1024,
                   None if prefix is None else prefix.strip(),
                   next(iter(timeouts.values()), DEFAULT_TRANSACTION_TIMEOUT_MS), connection.auth(), connection.tls(),
                   value_format, None if subject is None else subject.strip())
