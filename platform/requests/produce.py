"""Produce: one typed request, validated once, partitioned, appended here or forwarded to each leader.

Kafka's ``KafkaApis.handleProduceRequest`` with the producer's partitioner in front (REST Proxy chooses
partitions for a topic-level request). Steps of :meth:`ProduceOperation.produce` (mirrored by comments in
the code):

0. authorize: Write on the topic and, for a transactional request, on its transactional id
   (:meth:`RequestPermissions.require_produce <lakelog.requests.authorization.RequestPermissions.require_produce>`);
1. validate the whole request before anything is queued (:func:`validate_produce`: not an internal
   topic, acks with the producer, partitions named by records exist, every record fits
   ``max.message.bytes``, timestamps are -1 or within what the log holds, keys on a compacted topic):
   nothing partial is ever written for a bad request;
1b. schema validation, for a topic with a key or value subject (:mod:`lakelog.requests.record_validation`):
   every key and value in Confluent's wire format with a schema of its subject, decoding against it; the
   records that fail refuse the request (nothing written), or, with ``errors.tolerance=all``, go to the
   topic's ``errors.deadletterqueue.topic.name`` first and the rest to the topic;
2. choose partitions as Kafka's producer does: the record's partition, else murmur2 of the key (the
   Java client's ``BuiltInPartitioner``), else one sticky partition for the request's keyless records
   (for an idempotent request one its producer id and sequence choose, so a retry, on any broker, sends
   every record where the original did);
3. append each partition's share: through the local replica manager, or, for a topic-level produce that
   reaches a broker not leading the partition, forwarded to the leader (REST Proxy produces to every
   leader, and the producer headers go along); the group committer batches shares of concurrent
   requests; an idempotent request's share is appended once per partition (:mod:`lakelog.producers.idempotence`,
   the producer-state checks that must hold at append time);
4. one offset per record, in request order; a partition whose share failed reports its error on each of
   its records (the request fails as a whole only when every share failed).

Records travel as one Arrow table from the front door to the log: every check and the partitioner are
Arrow compute kernels over whole columns, never a Python loop over records.

:meth:`ProduceOperation.produce_each` is the same produce with an answer per record (REST Proxy v3's
streaming produce): a record that breaks a rule of step 1 gets its own error and the others are produced.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import LakelogError
from lakelog.errors.schemas import RecordValidationError
from lakelog.log_tables import zero_columns
from lakelog.log_tables.cleaner import check_keys_for_compaction
from lakelog.log_tables.records import check_record_sizes, check_timestamps
from lakelog.protocol.errors import InvalidPartitionInRecordError, InvalidProducerHeadersError, MalformedBodyError
from lakelog.protocol.partitioner import partitions_for_keys
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.acks import Acks
from lakelog.replication.errors import InvalidTopicError, NotLeaderError
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import INTERNAL_TOPICS, TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.requests.record_validation import (DeadLetter, RecordFailure, RecordValidation, dead_letter_batch,
                                                refusal)
from lakelog.schemas.registry import SchemaRegistry
from lakelog.security.authorizer import Authorizer

__all__ = ["ProduceLayout", "ProduceOperation", "ProduceRequest", "ProduceResult", "RecordOutcome",
           "check_acks_for_producer", "check_not_internal", "validate_produce"]

#: How a request's records are laid out: ``records`` (JSON and binary forms, v3: each record may name its
#: partition, a topic-level request is partitioned and forwarded) or ``batch`` (one Arrow IPC batch for
#: one partition: a ``partition`` column naming any other partition is refused, an empty batch too).
ProduceLayout = Literal["records", "batch"]


@dataclass(frozen=True, kw_only=True)
class ProduceRequest:
    """A decoded produce request, whatever front door it came by.

    Attributes:
        topic: the topic produced to.
        records: a produce batch (:data:`~lakelog.log_tables.schema.PRODUCE_SCHEMA`: key, value, headers,
            timestamp ms or -1), one row per record.
        record_partitions: int32, the partition each record named (nulls: none), or None.
        partition: the partition of a partition-level request (every record goes there; never forwarded),
            or None (topic-level: partitioned here, shares forwarded to their leaders).
        acks: Kafka's producer ``acks`` (:mod:`lakelog.replication.acks`). Default: ``all``.
        producer: an idempotent (or transactional) request's producer id, epoch and sequence (not with acks 0).
        layout: :data:`ProduceLayout`. Default: ``records``.
    """

    topic: str
    records: pa.Table
    record_partitions: pa.Array | None = None
    partition: int | None = None
    acks: Acks = "all"
    producer: ProducerBatch | None = None
    layout: ProduceLayout = "records"


@dataclass(frozen=True)
class ProduceResult:
    """Where each record of a produce request went.

    Attributes:
        partitions: int64 array, one partition per record in request order.
        offsets: int64 array, one offset per record (-1 with ``acks=0`` or where its share failed).
        errors: partition -> the exception its share failed with (empty when all succeeded).
        dead_letters: record index -> where a record refused by schema validation went instead (its
            partition and offset here are -1), with ``errors.tolerance=all``; empty otherwise.
    """

    partitions: np.ndarray
    offsets: np.ndarray
    errors: dict[int, BaseException]
    dead_letters: dict[int, DeadLetter] = field(default_factory=dict)

    @property
    def base_offset(self) -> int:
        """The first record's offset (a one-partition request: its batch's base offset); -1 with
        ``acks=0`` or no record."""
        return int(self.offsets[0]) if len(self.offsets) else -1


#: One record's outcome in :meth:`ProduceOperation.produce_each`: ``(partition, offset)`` (offset -1 with
#: ``acks=0``), or the error that kept it out of the log.
RecordOutcome = tuple[int, int] | BaseException


def validate_produce(meta: TopicMetadata, request: ProduceRequest) -> None:
    """Every rule a produce request must meet before anything of it is queued (step 1).

    Raises:
        InvalidTopicError: an internal topic. InvalidProducerHeadersError: a producer with acks 0.
        UnknownPartitionError: ``request.partition`` is not one of the topic's.
        InvalidPartitionInRecordError: a record names a partition the topic lacks (``batch``: any other
            partition). MalformedBodyError: an empty ``batch``. RecordTooLargeError, InvalidTimestampError,
            RecordWithoutKeyError (a compacted topic).
    """
    topic, records, partitions, partition = meta.name, request.records, request.record_partitions, request.partition
    check_not_internal(topic)
    check_acks_for_producer(request.acks, request.producer)
    if partition is not None:
        MetadataCache.check_partition(meta, partition)
    if request.layout == "batch":
        if partitions is not None and pc.any(pc.not_equal(partitions, partition)).as_py():
            raise InvalidPartitionInRecordError(
                f"The Arrow body's 'partition' column names other partitions than {partition}. Nothing was written.")
        if records.num_rows == 0:
            raise MalformedBodyError("The Arrow body holds no records.")
    elif partition is None and partitions is not None and partitions.null_count < len(partitions):
        bad = pc.or_(pc.less(partitions, 0), pc.greater_equal(partitions, meta.partitions_count))
        if pc.any(bad).as_py():
            i = pc.indices_nonzero(bad)[0].as_py()
            raise InvalidPartitionInRecordError(
                f"Record {i} names partition {partitions[i].as_py()}, but topic '{topic}' has partitions "
                f"0 to {meta.partitions_count - 1}. Nothing was written.")
    check_record_sizes(records, max_message_bytes=meta.config.max_message_bytes, topic=topic)
    check_timestamps(records["timestamp"])
    if meta.config.compacts:
        check_keys_for_compaction(records, topic=topic, partition=-1 if partition is None else partition)


class ProduceOperation:
    """Produce requests to partitions and their leaders.

    Args:
        replica_manager: appends to the partitions this broker leads (and knows the topics).
        leader_client: forwards shares for partitions led by other brokers.
        authorizer: the broker's ACLs (``authorizer.enabled``).
        schema_registry: the broker's schema registry (step 1b's subjects).
    """

    def __init__(self, *, replica_manager: ReplicaManager, leader_client: LeaderClient,
                 authorizer: Authorizer, schema_registry: SchemaRegistry) -> None:
        self.replica_manager = replica_manager
        self.leader_client = leader_client
        self.authorizer = authorizer
        self.validation = RecordValidation(registry=schema_registry)
        self._sticky = itertools.count()

    async def produce(self, request: ProduceRequest, *, context: RequestContext,
                      schema_checked: bool = False) -> ProduceResult:
        """Authorize ``context``'s principal, validate, partition and append ``request`` (steps in the
        module docstring).

        Args:
            schema_checked: step 1b already passed every record (:meth:`produce_each`'s own check), or does not
                apply (the dead letters of another topic).

        Returns:
            one partition and offset per record (:class:`ProduceResult`); a failed share's errors; where
            records refused by schema validation went (``dead_letters``).

        Raises:
            AuthorizationError (403 / 40301, checked first); UnknownTopicError (40401); the errors of
            :func:`validate_produce` (nothing written); RecordValidationError (422 / 42230: schema validation
            refused a record; nothing written); the dead-letter write's errors (nothing written to the topic);
            the share's error when every share failed (those of :meth:`ReplicaManager.produce`:
            NotLeaderError, NotEnoughReplicasError, InvalidProducerEpochError, ...).
        """
        # 0. authorize
        if self.authorizer.enabled:
            producer = request.producer
            RequestPermissions.of(self.authorizer, context).require_produce(
                request.topic, transactional_id=None if producer is None else producer.transactional_id)
        meta = await self.replica_manager.topic_fresh(request.topic)
        batch, partition, acks, producer = request.records, request.partition, request.acks, request.producer
        n = batch.num_rows
        # 1. validate the whole request before anything is queued
        validate_produce(meta, request)
        if n == 0:
            return ProduceResult(np.zeros(0, np.int64), np.zeros(0, np.int64), {})
        # 1b. schema validation: refuse, or send the failing records to the dead-letter topic first
        failures = {} if schema_checked else await self.validation.failures(meta, batch)
        if failures:
            dlq = meta.config.errors_deadletterqueue_topic_name
            if meta.config.errors_tolerance != "all" or not dlq or producer is not None:
                raise refusal(meta.name, failures)
            return await self._produce_with_dead_letters(request, failures, dlq, context=context)
        # 2. choose partitions: explicit, else murmur2(key), else sticky
        if partition is None:
            hashed = partitions_for_keys(batch["key"], meta.partitions_count)
            named = request.record_partitions
            parts = hashed if named is None else pc.coalesce(named, hashed)
            if parts.null_count:
                sticky = next(self._sticky) if producer is None else producer.producer_id + producer.sequence
                parts = pc.fill_null(parts, sticky % meta.partitions_count)
            groups = [(int(p), pc.equal(parts, p)) for p in pc.unique(parts).to_pylist()]
        else:
            groups = [(partition, None)]
        # 3. append each partition's share (forwarded to its leader for a topic-level request)
        shares = [(p, batch if mask is None else batch.filter(mask), mask) for p, mask in groups]
        append = self.replica_manager.produce if partition is not None else self._append_or_forward
        results = await asyncio.gather(*(append(meta.name, p, share, acks=acks, producer=producer)
                                         for p, share, _ in shares),
                                       return_exceptions=True)
        errors = {p: r for (p, _, _), r in zip(shares, results) if isinstance(r, BaseException)}
        if errors and len(errors) == len(results):
            raise next(iter(errors.values()))
        # 4. one offset per record, in request order
        if len(shares) == 1 and shares[0][2] is None:  # one share: built whole, no index nor temporaries
            return ProduceResult(*_one_share(n, shares[0][0], results[0], acks), errors)
        offsets = np.zeros(n, dtype=np.int64)
        part_of = np.zeros(n, dtype=np.int64)
        for (p, _, mask), base in zip(shares, results):
            idx = np.arange(n) if mask is None else pc.indices_nonzero(mask).to_numpy()
            part_of[idx] = p
            offsets[idx] = -1 if isinstance(base, BaseException) or acks == "0" else base + np.arange(len(idx))
        return ProduceResult(part_of, offsets, errors)

    async def produce_each(self, request: ProduceRequest, *, context: RequestContext) -> list[RecordOutcome]:
        """Produce ``request`` (layout ``records``) with an outcome per record, in request order: REST Proxy
        v3's streaming produce, where each record gets its own answer and a bad one does not stop the rest.

        The whole request is validated first (step 1); when a rule fails, each record is validated on its
        own (a Python loop over records, on this path only) and the records breaking a rule get that error.
        Schema validation (step 1b) runs once over the whole request: a record it refuses gets its own
        RecordValidationError (with ``errors.tolerance=all``: one saying where in the dead-letter topic it went).
        The others are produced as one request (:meth:`produce`: one append per partition, so an idempotent
        request's sequence still covers it once). A partition whose share failed gives its error to each
        of its records.

        Raises:
            AuthorizationError (403 / 40301) and UnknownTopicError (40401): they concern every record.
        """
        meta = await self.replica_manager.topic_fresh(request.topic)
        if self.authorizer.enabled:
            producer = request.producer
            RequestPermissions.of(self.authorizer, context).require_produce(
                request.topic, transactional_id=None if producer is None else producer.transactional_id)
        n, named = request.records.num_rows, request.record_partitions
        refused: dict[int, BaseException] = {}
        try:
            validate_produce(meta, request)
        except LakelogError:
            for i in range(n):
                one = dataclasses.replace(request, records=request.records.slice(i, 1),
                                          record_partitions=None if named is None else named.slice(i, 1))
                try:
                    validate_produce(meta, one)
                except LakelogError as e:
                    refused[i] = e
        failures = await self.validation.failures(meta, request.records)
        config = meta.config
        dead_lettered = bool(failures) and (config.errors_tolerance == "all" and bool(
            config.errors_deadletterqueue_topic_name) and request.producer is None)
        if not dead_lettered:
            for i, reason in failures.items():
                refused.setdefault(i, refusal(meta.name, {i: reason}))
        kept = np.array([i for i in range(n) if i not in refused], np.int64) if refused else np.arange(n)
        outcomes: list[RecordOutcome] = [refused[i] if i in refused else (-1, -1) for i in range(n)]
        if not len(kept):
            return outcomes
        take = pa.array(kept)
        accepted = request if not refused else dataclasses.replace(
            request, records=request.records.take(take), record_partitions=None if named is None else named.take(take))
        try:
            result = await self.produce(accepted, context=context, schema_checked=not dead_lettered)
        except LakelogError as e:
            for i in kept.tolist():
                outcomes[i] = e
            return outcomes
        for j, (i, p, o) in enumerate(zip(kept.tolist(), result.partitions.tolist(), result.offsets.tolist())):
            letter = result.dead_letters.get(j)
            outcomes[i] = (RecordValidationError(letter.message(i)) if letter is not None
                           else result.errors.get(p) or (p, o))
        return outcomes

    async def _produce_with_dead_letters(self, request: ProduceRequest, failures: dict[int, RecordFailure], dlq: str, *,
                                         context: RequestContext) -> ProduceResult:
        """Step 1b with ``errors.tolerance=all``: the failing records to the dead-letter topic ``dlq`` (the
        caller needs Write there), then, once they are there, the others to the topic; a failed dead-letter
        write fails the request with nothing in the topic."""
        n = request.records.num_rows
        # the dead letters failed a schema by definition: a dead-letter topic's own validation does not apply
        dead = await self.produce(ProduceRequest(topic=dlq, records=dead_letter_batch(
            request.topic, request.records, failures), acks=request.acks), context=context, schema_checked=True)
        if dead.errors:
            raise next(iter(dead.errors.values()))
        letters = {i: DeadLetter(topic=dlq, partition=int(p), offset=int(o), reason=str(reason))
                   for (i, reason), p, o in zip(failures.items(), dead.partitions.tolist(), dead.offsets.tolist())}
        partitions, offsets = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        kept = np.array([i for i in range(n) if i not in failures], np.int64)
        if not len(kept):
            return ProduceResult(partitions, offsets, {}, letters)
        take = pa.array(kept)
        named = request.record_partitions
        good = await self.produce(dataclasses.replace(
            request, records=request.records.take(take), record_partitions=None if named is None else named.take(take)),
            context=context, schema_checked=True)
        partitions[kept], offsets[kept] = good.partitions, good.offsets
        return ProduceResult(partitions, offsets, good.errors, letters)

    async def _append_or_forward(self, topic: str, partition: int, records: pa.Table, *, acks: Acks,
                                 producer: ProducerBatch | None) -> int:
        """Append a topic-level produce's share here, or send it to the partition's leader."""
        try:
            return await self.replica_manager.produce(topic, partition, records, acks=acks, producer=producer)
        except NotLeaderError as e:
            if not e.leader_url:
                raise
            return await self.leader_client.produce(e.leader_url, topic, partition, records, acks=acks,
                                                    producer=producer)


def _one_share(n: int, partition: int, base: int | BaseException, acks: Acks) -> tuple[np.ndarray, np.ndarray]:
    """``(partitions, offsets)`` of a request of ``n`` records appended as one share from ``base`` (or
    failed with it): partition 0's column is unresident zeros (:mod:`~lakelog.log_tables.zero_columns`)."""
    partitions = (np.frombuffer(zero_columns.writable_zeros(8 * n), np.int64) if partition == 0
                  else np.full(n, partition, np.int64))
    if isinstance(base, BaseException) or acks == "0":
        return partitions, np.full(n, -1, np.int64)
    return partitions, np.arange(base, base + n, dtype=np.int64)


def check_acks_for_producer(acks: Acks, producer: ProducerBatch | None) -> None:
    """Refuse an idempotent request with ``acks=0``: its outcome is never known, so it cannot be retried
    safely (Kafka's producer refuses ``enable.idempotence`` unless ``acks=all``; the broker takes 1 too).

    Raises:
        InvalidProducerHeadersError.
    """
    if producer is not None and acks == "0":
        raise InvalidProducerHeadersError(
            "An idempotent produce request (with X-Lakelog-Producer-Id) needs acks=1 or acks=all, not acks=0. "
            "Nothing was written.")


def check_not_internal(topic: str) -> None:
    """Raises InvalidTopicError (400 / 40004) for an internal topic (:data:`INTERNAL_TOPICS`): only its
    coordinator appends to it (Kafka's ``ReplicaManager.appendToLocalLog``: "Cannot append to internal topic")."""
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Cannot produce to the internal topic '{topic}': its records are written by its "
                                "coordinator. Commit offsets with POST /consumers/{group}/offsets. Nothing was written.")
