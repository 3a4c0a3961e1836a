"""The sink: ``df.write.format("lakelog")`` and ``writeStream.format("lakelog")``, as Spark's Kafka sink.

It takes the Kafka sink's columns: ``value`` (required, string or binary), ``key`` (string or binary),
``headers`` (``array<struct<key: string, value: binary>>``), ``partition`` (int) and ``topic``
(string; the ``topic`` option overrides it). Rows without a partition go where Kafka's Java producer
would put them (murmur2 of the key, :mod:`lakelog.protocol.partitioner`), keyless rows are spread over
the partitions batch by batch (sticky, as Kafka's default partitioner). Records are produced through
the gateway's Arrow produce endpoint, one request per partition and chunk of at most
``lakelog.max.request.bytes`` (default 8 MiB). Each write task produces through its own idempotent
client (Kafka's producer default, ``enable.idempotence=true``): a producer id per task, and a request
retried after a timeout, a dropped connection or a leader change keeps its sequence, so it is written
once (:mod:`lakelog.protocol.idempotent_producer`). Like Kafka's sink the write is still at-least-once
across task attempts: a task Spark runs again gets a new producer id and produces its rows again.
Options: ``lakelog.bootstrap.servers`` (required), ``topic``, ``lakelog.max.request.bytes``
(:class:`~lakelog.spark.source.options.SinkOptions`).

Writes need ``mode("append")``: Spark refuses the default ``ErrorIfExists`` mode for Python data
sources (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``), and ``overwrite`` makes no sense for a log.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from lakelog.protocol.http_client import LakelogClient
from lakelog.log_tables.schema import HEADERS_TYPE
from lakelog.protocol.partitioner import partitions_for_keys
from lakelog.replication.errors import UnknownTopicError
from lakelog.spark.errors import SourceError, SourceOptionError
from lakelog.spark.source.options import SinkOptions, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["LakelogCommitMessage", "LakelogStreamWriter", "LakelogWriter", "check_sink_schema"]


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's ``KafkaWriter.validateQuery`` checks, with the Kafka sink's messages.

    Raises:
        SourceOptionError: no ``value`` column, a column of the wrong type, or neither a ``topic``
            column nor the ``topic`` option.
    """
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
        """Records the task produced, over all partitions."""
        return sum(self.records.values())


class _Producer:
    """Produces Arrow batches of Kafka-sink rows through the gateway's Arrow produce endpoint, with one
    idempotent client (one producer id) per write task."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.client = LakelogClient(options.bootstrap_servers, enable_idempotence=True)
        self._partition_counts: dict[str, int] = {}
        self._sticky = random.randrange(1 << 30)
        self.records: dict[TopicPartition, int] = {}

    def close(self) -> None:
        self.client.close()

    def partition_count(self, topic: str) -> int:
        """The topic's partition count (asked of the gateway once per topic).

        Raises:
            SourceError: the topic does not exist.
        """
        if topic not in self._partition_counts:
            try:
                info = self.client.describe_topic(topic)
            except UnknownTopicError as e:
                raise SourceError(f"Topic '{topic}' does not exist; create it first ({e})") from e
            self._partition_counts[topic] = len(info["partitions"])
        return self._partition_counts[topic]

    def send(self, batch: pa.RecordBatch) -> None:
        """Produce the rows of one Arrow batch of sink columns, grouped by topic and partition.

        Raises:
            SourceError: a null topic, or a partition the topic does not have.
            lakelog.protocol.errors.RemoteError: a gateway error that is not retriable, or still
                there after the client's ``delivery.timeout.ms``; ConnectionError: no gateway answered
                within it.
        """
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
            # One call per chunk: the idempotent client retries retriable failures itself, with the same
            # body and sequence (a second call here would take a new sequence and could write it twice).
            self.client.produce_arrow(topic, partition, chunk)
            key = (topic, partition)
            self.records[key] = self.records.get(key, 0) + chunk.num_rows


class LakelogWriter(DataSourceArrowWriter):
    """``df.write.format("lakelog")``: each task produces its rows; at-least-once like Kafka's sink."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        """Produce one task's rows (runs in an executor); returns how many went to each partition."""
        producer = _Producer(self.options)
        try:
            for batch in iterator:
                producer.send(batch)
        finally:
            producer.close()
        return LakelogCommitMessage(producer.records)

    def commit(self, messages: list) -> None:
        """Log how many records the write produced (they are in the log already)."""
        total = sum(m.count for m in messages if m is not None)
        log.info("lakelog sink: produced %d records", total)

    def abort(self, messages: list) -> None:
        """Log how many records a failed write produced: they stay in the log (at-least-once)."""
        total = sum(m.count for m in messages if m is not None)
        log.warning("lakelog sink: write aborted; %d records were already produced and stay in the log", total)


class LakelogStreamWriter(DataSourceStreamWriter, DataSourceArrowWriter):
    """``writeStream.format("lakelog")``: each micro-batch's tasks produce their rows (at-least-once)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        """Produce one task's rows of a micro-batch, as :meth:`LakelogWriter.write`."""
        return LakelogWriter(self.options, self.schema).write(iterator)

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - Spark's name
        """Log how many records micro-batch ``batchId`` produced."""
        total = sum(m.count for m in messages if m is not None)
        log.info("lakelog sink: micro-batch %d produced %d records", batchId, total)

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803
        """Log how many records a failed micro-batch produced: they stay in the log (at-least-once)."""
        total = sum(m.count for m in messages if m is not None)
        log.warning("lakelog sink: micro-batch %d aborted; %d records were already produced", batchId, total)

