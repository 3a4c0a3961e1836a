"""The sink: ``df.write.format("lakelog")`` and ``writeStream.format("lakelog")``, as Spark's Kafka sink.

It takes the Kafka sink's columns: ``value`` (required, string or binary), ``key`` (string or binary),
``headers`` (``array<struct<key: string, value: binary>>``), ``partition`` (int) and ``topic``
(string; the ``topic`` option overrides it). Rows without a partition go where Kafka's Java producer
would put them (murmur2 of the key, :mod:`lakelog.protocol.partitioner`), keyless rows are spread over
the partitions batch by batch (sticky, as Kafka's default partitioner). Records are produced through
the gateway's Arrow produce endpoint, one request per partition and chunk of at most
``lakelog.max.request.bytes`` (default 8 MiB), each with the idempotent producer's sequence: a request
retried after a timeout, a dropped connection or a leader change is written once
(:mod:`lakelog.client.idempotent_producer`).

**Batch writes** (``df.write``, :class:`LakelogWriter`) are at-least-once, like Kafka's sink: each task
produces through its own idempotent client, and a task Spark runs again produces its rows again.

**Streaming writes** (``writeStream``, :class:`LakelogStreamWriter`) are exactly-once: each micro-batch is
written in transactions and committed once per batch id (KIP-98 transactions; the two-phase commit of
Flink's Kafka sink over Spark's writer protocol):

1. Task ``i`` of micro-batch ``b`` (``i`` the Spark partition id) is the transactional producer
   ``{prefix}-{i}``, ``prefix`` being ``lakelog.transactional.id.prefix`` or ``spark-{query id}``. It
   calls InitProducerId for that id first: this fences every older attempt of the task (a zombie's
   produce and commit are refused) and aborts that attempt's open transaction, and it answers only once a
   previous transaction of the id is completed (committed or aborted, markers written).
2. Then it reads the committed offset of the sink's pseudo consumer group ``spark-sink-{query id}`` for
   the pseudo topic ``__spark_sink_batches``, partition ``i`` (no such topic exists; the group coordinator
   keeps the offset). At ``b + 1`` or more, the task's output of batch ``b`` was committed before a crash:
   it writes nothing and says so.
3. Else it produces its rows in the transaction and commits the group's offset ``b + 1`` for partition
   ``i`` in the same transaction (Kafka's sendOffsetsToTransaction), and returns the transactional id,
   producer id and epoch **without committing**.
4. The driver's ``commit(messages, batchId)`` commits each task's transaction (EndTxn); then Spark writes
   the batch to its commit log. ``abort(messages, batchId)`` aborts them.

So a micro-batch Spark runs again (after a driver crash between the commits and its commit log, or
before any commit) writes nothing twice: the tasks whose transaction committed find their offset and
skip, the others' transactions are aborted by the re-initialization and written again. A task retried
within a batch fences the failed attempt the same way. A transaction left open (the query died) is
aborted by the next InitProducerId of its id or after ``transaction.timeout.ms`` (default 60000, as
Kafka's producer; it must exceed the longest micro-batch, from a task's first record to the driver's
commit). Until then it holds the last stable offset of the partitions it wrote: ``read_committed``
readers of the output wait, ``read_uncommitted`` ones see every attempt's records.

As with Flink's and Kafka Streams' exactly-once, a micro-batch Spark runs again must give each Spark
partition the same rows: true of the ``lakelog`` source (a batch's offset ranges come from the
checkpoint) and of Spark's Kafka and file sources with deterministic transformations; read transactional
inputs with ``isolation.level=read_committed``. The number of Spark partitions may change between
batches (the ids are per partition index). A prefix belongs to one query: a new checkpoint of the same
query gets a new query id, hence new transactional ids and a new pseudo group.

**Schema'd values** (``valueFormat=schema``, the source's option): ``value`` may be a struct (or any type);
each row's value is serialized with the latest version of the topic's value subject (its
``value.schema.subject`` config, ``<topic>-value`` with ``confluent.value.schema.validation=true``, or the
sink's ``value.schema.subject`` option) in Confluent's wire format, as Confluent's Avro, JSON Schema and
Protobuf serializers write it (:func:`~lakelog.schemas.wire_format.python_frames`), so a job needs no
``to_avro``; a row that does not fit fails the task before its batch is produced. Keys stay bytes.

Options: ``lakelog.bootstrap.servers`` (required), ``topic``, ``lakelog.max.request.bytes``,
``lakelog.transactional.id.prefix``, ``transaction.timeout.ms``, ``valueFormat``, ``value.schema.subject``
(:class:`~lakelog.spark.source.options.SinkOptions`).

Writes need ``mode("append")``: Spark refuses the default ``ErrorIfExists`` mode for Python data
sources (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``), and ``overwrite`` makes no sense for a log.
"""

from __future__ import annotations

import logging
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from lakelog.client import LakelogClient
from lakelog.errors import InvalidEncodingError
from lakelog.log_tables.schema import HEADERS_TYPE
from lakelog.protocol.partitioner import partitions_for_keys
from lakelog.replication.errors import UnknownTopicError
from lakelog.schemas.wire_format import python_frames
from lakelog.spark.errors import SourceError, SourceOptionError
from lakelog.spark.source.options import TopicPartition
from lakelog.spark.source.sink_options import SinkOptions
from lakelog.spark.source.subjects import SubjectSchema, latest_schema, value_subject

log = logging.getLogger(__name__)

__all__ = ["BATCHES_TOPIC", "LakelogCommitMessage", "LakelogStreamWriter", "LakelogWriter", "StreamTask",
           "check_sink_schema", "commit_transactions", "sink_group", "write_transaction"]

#: The pseudo topic whose offsets in :func:`sink_group` record, per Spark partition id, the next micro-batch
#: to write (the last one committed + 1). No such topic exists: the group coordinator keeps the offsets.
BATCHES_TOPIC = "__spark_sink_batches"
#: Spark's task local properties naming the streaming query and its micro-batch
#: (``StreamExecution.QUERY_ID_KEY``, ``MicroBatchExecution.BATCH_ID_KEY``).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: End transactions (the driver's commit and abort) with at most this many requests at once.
MAX_PARALLEL_ENDS = 8


def sink_group(query_id: str) -> str:
    """The pseudo consumer group whose offsets of :data:`BATCHES_TOPIC` hold a streaming query's
    committed micro-batches: ``spark-sink-{query id}`` (the query id stays with its checkpoint)."""
    return f"spark-sink-{query_id}"


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's ``KafkaWriter.validateQuery`` checks, with the Kafka sink's messages.

    Raises:
        SourceOptionError: no ``value`` column, a column of the wrong type (with ``valueFormat=schema``
            ``value`` may be of any type), or neither a ``topic`` column nor the ``topic`` option.
    """
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SourceOptionError("Required attribute 'value' not found")
    if options.value_format == "bytes" and not isinstance(fields["value"], (StringType, BinaryType)):
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
    """What one write task produced: records per (topic, partition); for a streaming write task, its
    transaction (left open for the driver to commit) or that it found its micro-batch committed already.

    Attributes:
        records: records produced per (topic, partition).
        transactional_id: the task's transactional id (streaming writes; None for batch writes).
        producer_id, producer_epoch: the transaction's producer; None when there is none to commit (nothing
            written, or the batch was committed before).
        already_committed: the task's output of this micro-batch was committed before (a replayed batch):
            it wrote nothing.
    """

    records: dict[TopicPartition, int] = field(default_factory=dict)
    transactional_id: str | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    already_committed: bool = False

    @property
    def open_transaction(self) -> bool:
        """Whether the task left a transaction for the driver to commit or abort."""
        return self.transactional_id is not None and self.producer_id is not None

    @property
    def count(self) -> int:
        """Records the task produced, over all partitions."""
        return sum(self.records.values())


class _Producer:
    """Produces Arrow batches of Kafka-sink rows through the gateway's Arrow produce endpoint, with one
    idempotent client (one producer id) per write task."""

    def __init__(self, options: SinkOptions, client: LakelogClient | None = None) -> None:
        self.options = options
        self.client = client or LakelogClient(options.bootstrap_servers, enable_idempotence=True, auth=options.auth, **options.tls)
        self._partition_counts: dict[str, int] = {}
        self._sticky = random.randrange(1 << 30)
        self._schemas: dict[str, SubjectSchema] = {}
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
                info = self.client.admin.describe_topic(topic)
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
        typed = self.options.value_format == "schema"
        table = pa.table({
            "key": batch.column("key").cast(pa.binary()) if "key" in names else pa.nulls(n, pa.binary()),
            "value": batch.column("value") if typed else batch.column("value").cast(pa.binary()),
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
            if typed:
                rows = rows.set_column(1, "value", self.serialize(topic, rows["value"]))
            self._send_topic(topic, rows, parts)

    def subject_schema(self, topic: str) -> SubjectSchema:
        """The schema a ``valueFormat=schema`` write serializes ``topic``'s values with: the latest version
        of ``value.schema.subject`` (the option) or of the topic's own value subject, asked once per topic.

        Raises:
            SourceError: the topic binds no subject and the option names none, or the subject has no version.
        """
        if topic not in self._schemas:
            subject = self.options.value_subject or value_subject(self.client, topic)
            if subject is None:
                raise SourceError(f"valueFormat=schema: topic '{topic}' binds no schema registry subject. Set its "
                                  "config value.schema.subject (or confluent.value.schema.validation=true), name "
                                  "one with the sink's option 'value.schema.subject', or write valueFormat=bytes.")
            found = latest_schema(self.client, subject)
            if found is None:
                raise SourceError(f"valueFormat=schema: subject '{subject}' (of topic '{topic}') has no schema "
                                  "version: register one first.")
            self._schemas[topic] = found
        return self._schemas[topic]

    def serialize(self, topic: str, values: pa.ChunkedArray | pa.Array) -> pa.Array:
        """``values`` (any Arrow type; maps become dicts) serialized with :meth:`subject_schema` in
        Confluent's wire format (:func:`~lakelog.schemas.wire_format.python_frames`), as a binary column;
        nulls stay null (tombstones).

        Raises:
            SourceError: a value that does not fit the schema (naming its row within the batch and why).
        """
        schema = self.subject_schema(topic)
        try:
            framed = python_frames(schema.schema_type, schema.schema, schema.referenced, schema.schema_id,
                                   values.to_pylist(maps_as_pydicts="strict"), what="value")
        except InvalidEncodingError as e:
            raise SourceError(f"valueFormat=schema: a row of the batch for topic '{topic}' does not fit subject "
                              f"'{schema.subject}' version {schema.version}: {e}") from None
        return pa.array(framed, pa.binary())

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
    """``df.write.format("lakelog")``: each task produces its rows with an idempotent producer;
    at-least-once like Kafka's sink (a task Spark runs again writes its rows again)."""

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


@dataclass(frozen=True)
class StreamTask:
    """Who a streaming write task is: its query, micro-batch and Spark partition id."""

    query_id: str
    batch_id: int
    partition_id: int

    @classmethod
    def current(cls) -> "StreamTask":
        """The running Spark task's (its local properties, set by Spark's micro-batch execution).

        Raises:
            SourceError: not in a streaming write task (no query id or batch id).
        """
        from pyspark import TaskContext
        context = TaskContext.get()
        query_id = None if context is None else context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_id = None if context is None else context.getLocalProperty(BATCH_ID_PROPERTY)
        if query_id is None or batch_id is None:
            raise SourceError(f"writeStream.format('lakelog') runs in a streaming query's task: Spark's local "
                              f"properties {QUERY_ID_PROPERTY} and {BATCH_ID_PROPERTY} are not set")
        return cls(query_id, int(batch_id), context.partitionId())

    def transactional_id(self, options: SinkOptions) -> str:
        """``{prefix}-{partition id}``, the prefix ``lakelog.transactional.id.prefix`` or ``spark-{query id}``."""
        return f"{options.transactional_id_prefix or f'spark-{self.query_id}'}-{self.partition_id}"


def _batch_committed(client: LakelogClient, task: StreamTask) -> bool:
    """Whether the task's output of its micro-batch was committed (its pseudo offset is past the batch)."""
    for o in client.committed_offsets(sink_group(task.query_id), BATCHES_TOPIC):
        if o["topic"] == BATCHES_TOPIC and o["partition"] == task.partition_id:
            return o["offset"] >= task.batch_id + 1
    return False


def write_transaction(options: SinkOptions, batches: Iterable[pa.RecordBatch], task: StreamTask) -> LakelogCommitMessage:
    """One streaming write task (runs in an executor; steps 1-3 of the module docstring): InitProducerId
    of the task's transactional id (fencing older attempts, aborting their open transaction), nothing
    written if the batch was committed before, else the rows and the batch's pseudo offset in one
    transaction, left open for the driver's :func:`commit_transactions`. On a failure the transaction
    is aborted (best effort: a retry of the task aborts it too).

    Raises:
        SourceError: as :meth:`_Producer.send`. lakelog.protocol.errors.RemoteError: a gateway error
            (InvalidProducerEpochError 40915 when a newer attempt of the task fenced this one).
            ConnectionError: no gateway answered.
    """
    transactional_id = task.transactional_id(options)
    client = LakelogClient(options.bootstrap_servers, auth=options.auth, **options.tls)
    try:
        answer = client.transactions.init_transactions(transactional_id, transaction_timeout_ms=options.transaction_timeout_ms)
        # after InitProducerId: a previous transaction of this id is complete, its offsets applied or dropped
        if _batch_committed(client, task):
            log.info("lakelog sink: %s already committed micro-batch %d; writing nothing", transactional_id,
                     task.batch_id)
            for _ in batches:  # Spark's Python runner expects its input read to the end
                pass
            return LakelogCommitMessage(transactional_id=transactional_id, already_committed=True)
        producer = _Producer(options, client)
        try:
            for batch in batches:
                producer.send(batch)
            if not producer.records:  # nothing written: no transaction to commit
                return LakelogCommitMessage(transactional_id=transactional_id)
            client.transactions.send_offsets_to_transaction(sink_group(task.query_id), [
                {"topic": BATCHES_TOPIC, "partition": task.partition_id, "offset": task.batch_id + 1}])
        except BaseException:
            _abort_quietly(client, transactional_id)
            raise
        return LakelogCommitMessage(producer.records, transactional_id, int(answer["producer_id"]),
                                    int(answer["producer_epoch"]))
    finally:
        client.close()


def _abort_quietly(client: LakelogClient, transactional_id: str) -> None:
    try:
        client.transactions.abort_transaction(timeout_s=10)
    except Exception as e:  # noqa: BLE001 - the re-initialization of the id aborts it anyway
        log.warning("lakelog sink: could not abort the transaction of %s (%s); the next attempt or its "
                    "timeout aborts it", transactional_id, e)


def commit_transactions(options: SinkOptions, messages: Iterable[LakelogCommitMessage | None], *,
                        commit: bool) -> int:
    """End the open transactions of a micro-batch's tasks (the driver's step 4): commit or abort each,
    several at once. Returns how many were ended.

    Raises:
        SourceError: (commit) a transaction was not committed: fenced or aborted meanwhile (its timeout
            passed), or it answered another state. Spark fails the query; run again from the checkpoint it
            re-runs the micro-batch, and the tasks whose transaction did commit write nothing.
    """
    open_ones = [m for m in messages if m is not None and m.open_transaction]
    if not open_ones:
        return 0
    with LakelogClient(options.bootstrap_servers, enable_idempotence=False, auth=options.auth, **options.tls) as client:
        def end(m: LakelogCommitMessage) -> str:
            return client.transactions.end_transaction(m.transactional_id, producer_id=m.producer_id,
                                          producer_epoch=m.producer_epoch, commit=commit)["state"]

        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_ENDS, len(open_ones))) as pool:
            futures = [(m, pool.submit(end, m)) for m in open_ones]
            failures = []
            for m, future in futures:
                try:
                    state = future.result()
                except Exception as e:  # noqa: BLE001 - reported together below
                    failures.append(f"{m.transactional_id}: {type(e).__name__}: {e}")
                    continue
                wanted = ("CompleteCommit", "PrepareCommit") if commit else ("CompleteAbort", "PrepareAbort")
                if state not in wanted:
                    failures.append(f"{m.transactional_id}: answered {state}")
    if failures and commit:
        raise SourceError("lakelog sink: transactions not committed (the micro-batch runs again from the "
                          "checkpoint; what did commit is not written twice): " + "; ".join(failures))
    for failure in failures:
        log.warning("lakelog sink: abort failed (the next attempt or the timeout aborts it): %s", failure)
    return len(open_ones)


class LakelogStreamWriter(DataSourceStreamWriter, DataSourceArrowWriter):
    """``writeStream.format("lakelog")``: exactly-once, each micro-batch's tasks writing in transactions
    that the driver commits once per batch id (see the module docstring)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        """Produce one task's rows of a micro-batch in its transaction (:func:`write_transaction`)."""
        return write_transaction(self.options, iterator, StreamTask.current())

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - Spark's name
        """Commit the transactions of micro-batch ``batchId`` (:func:`commit_transactions`)."""
        ended = commit_transactions(self.options, messages, commit=True)
        total = sum(m.count for m in messages if m is not None)
        skipped = sum(1 for m in messages if m is not None and m.already_committed)
        log.info("lakelog sink: micro-batch %d committed %d records in %d transactions (%d tasks had committed "
                 "it before)", batchId, total, ended, skipped)

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803
        """Abort the transactions of a failed micro-batch (those of tasks that did not report are aborted
        by the next attempt's InitProducerId or their timeout)."""
        ended = commit_transactions(self.options, messages, commit=False)
        log.warning("lakelog sink: micro-batch %d aborted (%d transactions)", batchId, ended)
