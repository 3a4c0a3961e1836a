"""The Kafka APIs the listener serves, each a thin translation onto the request layer.

Kafka's ``KafkaApis.handle*``: a handler turns a decoded request (:mod:`lakelog.kafka.codec`) into the
request layer's typed operations (:class:`~lakelog.requests.handler.RequestHandler`: validation,
authorization, leader routing and idempotence live there, as for HTTP) and their results or errors
(:mod:`lakelog.kafka.errors`) into the response message. A handler answers the response object, or
:data:`NO_RESPONSE` (Produce with acks=0), or :data:`CLOSE` (acks=0 and a partition failed: Kafka closes
the connection so the producer refreshes its metadata).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow.compute as pc

from lakelog.errors import RecordValidationError, UnknownTopicError

from lakelog.kafka import errors as codes
from lakelog.kafka.admin_handlers import admin_handlers
from lakelog.kafka.codec import RequestFrame, response_class
from lakelog.kafka.errors import kafka_error_code
from lakelog.kafka.fetch_batches import TRANSACTION_FETCH_COLUMNS, build_fetch_batches
from lakelog.kafka.group_handlers import GroupApis
from lakelog.kafka.membership_handlers import MembershipApis
from lakelog.kafka.txn_handlers import TransactionApis
from lakelog.kafka.records import CorruptBatchError, InvalidBatchError, decode_batches
from lakelog.kafka.versions import SERVED
from lakelog.log_tables.schema import timestamps_us
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.requests import (
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
    RequestContext,
    RequestHandler,
)

__all__ = ["CLOSE", "NO_RESPONSE", "KafkaApis"]

log = logging.getLogger(__name__)

#: a handler's answer for a request that gets no response (Produce with acks=0)
NO_RESPONSE = object()
#: a handler's answer for a request after which the connection closes
CLOSE = object()

_ACKS = {-1: "all", 1: "1", 0: "0"}
_EARLIEST, _LATEST = -2, -1
_FETCH_SESSION_ID_NOT_FOUND = 70
_INVALID_REQUIRED_ACKS = 21
_LEADER_NOT_AVAILABLE = 5
_ZERO_UUID = uuid.UUID(int=0)


def _topic_uuid(topic_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(topic_id)
    except (ValueError, TypeError, AttributeError):
        return _ZERO_UUID


class KafkaApis:
    """The served APIs of one listener (:data:`~lakelog.kafka.versions.SERVED`; the group offset APIs in
    :mod:`lakelog.kafka.group_handlers`).

    Args:
        requests: the broker's request layer.
        listener: the listener's name (``PLAINTEXT``): Metadata answers each broker's endpoint of it.
        cluster_id: the cluster's id once the broker started.
    """

    def __init__(self, *, requests: RequestHandler, listener: str, cluster_id: Callable[[], str]) -> None:
        self.requests = requests
        self.listener = listener
        self.cluster_id = cluster_id
        groups = GroupApis(requests=requests, listener=listener, broker_id=requests.settings.broker_id)
        self._handlers = {0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata,
                          8: groups.offset_commit, 9: groups.offset_fetch, 10: groups.find_coordinator,
                          18: self.api_versions, 22: self.init_producer_id}
        self._handlers.update(MembershipApis(requests=requests).handlers())
        self._handlers.update(TransactionApis(requests=requests).handlers())
        self._handlers.update(admin_handlers(requests=requests, listener=listener, cluster_id=cluster_id))

    async def handle(self, request: RequestFrame, context: RequestContext) -> Any:
        """The response (a message object of the request's version), :data:`NO_RESPONSE` or :data:`CLOSE`."""
        return await self._handlers[request.api_key](request.body, request.api_version, context)

    # -- ApiVersions, Metadata ---------------------------------------------------------------------

    async def api_versions(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's ApiVersions: the served APIs with their advertised ranges, no features."""
        cls = response_class(18)
        return cls(version=version, error_code=0, throttle_time_ms=0, api_keys=[
            cls.ApiVersion(version=version, api_key=key, min_version=r.advertised_min, max_version=r.max)
            for key, r in sorted(SERVED.items())])

    async def metadata(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's Metadata: every live broker's endpoint of this listener, the controller, and the requested
        topics (all the principal may Describe when ``topics`` is null) with leaders, epochs, replicas and
        ISR. A topic that does not exist, or that the principal may not Describe, answers its error code."""
        cls = response_class(3)
        brokers = await self.requests.metadata.brokers()
        controller = await self.requests.metadata.controller_id()
        broker_rows = []
        for info in brokers.values():
            endpoint = info.kafka_endpoint(self.listener)
            if endpoint is not None:
                broker_rows.append(cls.MetadataResponseBroker(version=version, node_id=info.broker_id,
                                                              host=endpoint[0], port=endpoint[1], rack=info.rack))
        if body.topics is None or (version == 0 and not body.topics):
            names = sorted(await self.requests.list_topics(context=context))
        else:
            names = [t.name for t in body.topics if t.name is not None]
        auto_create = body.topics is not None and getattr(body, "allow_auto_topic_creation", True)
        topics = await asyncio.gather(*(self._topic_metadata(cls, name, version, context, auto_create=auto_create)
                                        for name in names))
        return cls(version=version, throttle_time_ms=0, brokers=broker_rows, cluster_id=self.cluster_id() or None,
                   controller_id=-1 if controller is None else controller, topics=list(topics), error_code=0)

    async def _topic_metadata(self, cls: Any, name: str, version: int, context: RequestContext, *,
                              auto_create: bool) -> Any:
        """One topic's entry; an unknown topic is auto-created when the client allows it and the request layer
        does (``auto.create.topics.enable``): LEADER_NOT_AVAILABLE until its next Metadata, as Kafka."""
        topic_cls, partition_cls = cls.MetadataResponseTopic, cls.MetadataResponseTopic.MetadataResponsePartition
        try:
            try:
                meta = await self.requests.describe_topic(name, context=context)
            except UnknownTopicError:
                if not auto_create or not await self.requests.topics.auto_create_topic(name, context=context):
                    raise
                return topic_cls(version=version, error_code=_LEADER_NOT_AVAILABLE, name=name, topic_id=_ZERO_UUID,
                                 is_internal=False, partitions=[])
            replicas = await self.requests.metadata.partition_replicas(name, context=context)
        except Exception as e:
            code = kafka_error_code(e)
            if code == codes.UNKNOWN_SERVER_ERROR:
                log.exception("Metadata of topic %r failed", name)
            return topic_cls(version=version, error_code=code, name=name, topic_id=_ZERO_UUID,
                             is_internal=False, partitions=[])
        partitions = [partition_cls(
            version=version, error_code=0 if r.leader is not None else _LEADER_NOT_AVAILABLE, partition_index=r.partition,
            leader_id=-1 if r.leader is None else r.leader, leader_epoch=r.leader_epoch,
            replica_nodes=[s.broker for s in r.replicas], isr_nodes=[s.broker for s in r.replicas if s.in_sync],
            offline_replicas=[]) for r in replicas]
        return topic_cls(version=version, error_code=0, name=name, topic_id=_topic_uuid(meta.topic_id),
                         is_internal=name.startswith("__"), partitions=partitions)

    # -- Produce -----------------------------------------------------------------------------------

    async def produce(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's Produce: each partition's batches checked and decoded (:mod:`lakelog.kafka.records`),
        then appended through the request layer's produce, one request per batch, partitions concurrently.
        A partition's error is its own (the others are written, as Kafka does). A batch refused by the topic's
        schema validation answers INVALID_RECORD with each refused record in ``record_errors`` (v8+, KIP-467:
        ``batch_index`` its index in the batch). Records schema validation sent to the topic's dead-letter
        topic (``errors.tolerance=all``) are not named in the answer (librdkafka fails a batch whose answer
        lists any record error, whatever its error code): the partition answers NONE and the base offset of
        the records written to the topic, whose offsets follow without the dead-lettered ones."""
        acks = _ACKS.get(body.acks)
        jobs = [(t.name, p.index, self._produce_partition(t.name, p.index, p.records, acks,
                                                          body.transactional_id, context))
                for t in body.topic_data for p in t.partition_data]
        results = await asyncio.gather(*(job for _, _, job in jobs))
        if body.acks == 0:
            return CLOSE if any(code for code, _, _, _ in results) else NO_RESPONSE
        cls = response_class(0)
        part_cls = cls.TopicProduceResponse.PartitionProduceResponse
        topics: dict[str, list] = {}
        for (topic, partition, _), (code, base_offset, message, record_errors) in zip(jobs, results):
            topics.setdefault(topic, []).append(part_cls(
                version=version, index=partition, error_code=code, base_offset=base_offset, log_append_time_ms=-1,
                log_start_offset=-1, error_message=message, record_errors=[
                    part_cls.BatchIndexAndErrorMessage(version=version, batch_index=i, batch_index_error_message=m)
                    for i, m in record_errors]))
        return cls(version=version, throttle_time_ms=0, responses=[
            cls.TopicProduceResponse(version=version, name=name, partition_responses=parts)
            for name, parts in topics.items()])

    async def _produce_partition(self, topic: str, partition: int, records: bytes | None, acks: str | None,
                                 transactional_id: str | None, context: RequestContext
                                 ) -> tuple[int, int, str | None, list[tuple[int, str]]]:
        """``(error code, base offset, error message, record errors)`` of one partition's share of a Produce
        (record errors: ``(batch index, message)`` of the records schema validation refused)."""
        if acks is None:
            return _INVALID_REQUIRED_ACKS, -1, "acks must be -1 (all), 0 or 1", []
        try:
            batches = decode_batches(records or b"",
                                     max_uncompressed_bytes=self.requests.settings.socket_request_max_bytes)
        except CorruptBatchError as e:
            return codes.CORRUPT_MESSAGE, -1, f"{e}; nothing was written", []
        except InvalidBatchError as e:
            return codes.INVALID_RECORD, -1, f"{e}; nothing was written", []
        if not batches:
            return codes.CORRUPT_MESSAGE, -1, "the partition's records hold no batch", []
        base_offset = -1
        for batch in batches:
            producer = None if batch.producer_id < 0 else ProducerBatch(
                batch.producer_id, batch.producer_epoch, batch.base_sequence,
                transactional_id if batch.transactional else None)
            try:
                result = await self.requests.produce(ProduceRequest(
                    topic=topic, records=batch.records, partition=partition, acks=acks, producer=producer),
                    context=context)
            except RecordValidationError as e:
                return codes.INVALID_RECORD, -1, str(e), [(i, f"Record {i}: {m}") for i, m in e.failures.items()]
            except Exception as e:
                code = kafka_error_code(e, authorization=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                                        if producer is not None and producer.transactional_id
                                        else codes.TOPIC_AUTHORIZATION_FAILED)
                if code == codes.UNKNOWN_SERVER_ERROR:
                    log.exception("Produce to %s-%d failed", topic, partition)
                return code, -1, str(e), []
            if base_offset < 0:
                kept = result.offsets[result.offsets >= 0]
                base_offset = int(kept[0]) if len(kept) else -1
        return codes.NONE, base_offset, None, []

    # -- Fetch, ListOffsets --------------------------------------------------------------------------

    async def fetch(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's Fetch, sessionless (session id 0; a client's session id answers FETCH_SESSION_ID_NOT_FOUND
        so it starts over without one). Every partition is read at once; when fewer than ``min_bytes`` came
        back, the partitions long-poll until one has records or ``max_wait_ms`` passes (the request layer
        wakes on append). Per partition ``partition_max_bytes``, for the response ``max_bytes`` (a soft
        limit as Kafka's KIP-74: the first partition with records returns at least one batch). Transactions
        as Kafka's log holds them (:mod:`lakelog.kafka.fetch_batches`): transactional batches and the markers'
        control batches; read_committed answers stop at the last stable offset, and the leader leaves the
        aborted transactions' records out, so ``aborted_transactions`` is empty (a client skips nothing more)."""
        cls = response_class(1)
        if getattr(body, "session_id", 0):
            return cls(version=version, throttle_time_ms=0, error_code=_FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                       responses=[])
        isolation = "read_committed" if getattr(body, "isolation_level", 0) == 1 else "read_uncommitted"
        wanted = [(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
                  for t in body.topics for p in t.partitions]
        results = await asyncio.gather(*(self._fetch_one(w, isolation, 0, context) for w in wanted))
        total = sum(len(r[-1]) for r in results)
        if total < max(body.min_bytes, 1) and body.max_wait_ms > 0 and wanted:
            results = await self._long_poll(wanted, results, isolation, body.max_wait_ms, context)
        budget = getattr(body, "max_bytes", 2**31 - 1)  # (v3+)
        answered = False
        topics: dict[str, list] = {}
        part_cls = cls.FetchableTopicResponse.PartitionData
        for (topic, partition, _, _), (code, high_watermark, last_stable, log_start, records) in zip(wanted, results):
            if records and answered and len(records) > budget:
                records = b""  # the response's budget is spent (the first partition with records gets its batch)
            answered = answered or bool(records)
            budget -= len(records)
            topics.setdefault(topic, []).append(part_cls(
                version=version, partition_index=partition, error_code=code, high_watermark=high_watermark,
                last_stable_offset=last_stable, log_start_offset=log_start,
                aborted_transactions=[] if isolation == "read_committed" else None,
                preferred_read_replica=-1, records=records))
        return cls(version=version, throttle_time_ms=0, error_code=0, session_id=0, responses=[
            cls.FetchableTopicResponse(version=version, topic=name, partitions=parts)
            for name, parts in topics.items()])

    async def _long_poll(self, wanted: list, results: list, isolation: str, max_wait_ms: int,
                         context: RequestContext) -> list:
        """Wait on every partition at once until one answers records (or an error) or ``max_wait_ms``."""
        results = list(results)
        tasks = {asyncio.ensure_future(self._fetch_one(w, isolation, max_wait_ms, context)): i
                 for i, w in enumerate(wanted) if results[i][0] == codes.NONE}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()),
                                                   return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    break
                for task in done:
                    results[tasks[task]] = task.result()
                if any(task.result()[0] or task.result()[-1] for task in done):
                    break
        finally:
            for task in tasks:
                task.cancel()
        return results

    async def _fetch_one(self, wanted: tuple, isolation: str, max_wait_ms: int,
                         context: RequestContext) -> tuple[int, int, int, int, bytes]:
        """``(error code, high watermark, last stable offset, log start offset, batch bytes)`` of one
        partition's fetch."""
        topic, partition, offset, max_bytes = wanted
        try:
            result = await self.requests.fetch(FetchRequest(
                topic=topic, partition=partition, offset=offset, max_bytes=max(1, max_bytes),
                max_wait_ms=max_wait_ms, isolation_level=isolation, columns=TRANSACTION_FETCH_COLUMNS,
                control_records=True), context=context)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code = kafka_error_code(e)
            if code == codes.UNKNOWN_SERVER_ERROR:
                log.exception("Fetch of %s-%d failed", topic, partition)
            return code, -1, -1, -1, b""
        return (codes.NONE, result.high_watermark, result.last_stable_offset, result.log_start_offset,
                build_fetch_batches(result.records))

    async def list_offsets(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's ListOffsets: -2 the log start offset, -1 the high watermark (the last stable offset with
        read_committed), else the first offset whose timestamp is at or after the given one (-1 when no
        record is that new)."""
        cls = response_class(2)
        committed = getattr(body, "isolation_level", 0) == 1
        part_cls = cls.ListOffsetsTopicResponse.ListOffsetsPartitionResponse

        async def one(topic: str, p: Any) -> Any:
            ts = p.timestamp
            try:
                result = await self.requests.list_offsets(ListOffsetsRequest(
                    topic=topic, partition=p.partition_index, timestamp_ms=ts if ts >= 0 else None), context=context)
            except Exception as e:
                code = kafka_error_code(e)
                if code == codes.UNKNOWN_SERVER_ERROR:
                    log.exception("ListOffsets of %s-%d failed", topic, p.partition_index)
                return part_cls(version=version, partition_index=p.partition_index, error_code=code, timestamp=-1,
                                offset=-1, leader_epoch=-1)
            o = result.offsets
            if ts == _EARLIEST:
                offset, found_ts = o.log_start_offset, -1
            elif ts == _LATEST:
                offset, found_ts = (o.last_stable_offset if committed else o.high_watermark), -1
            elif ts >= 0:
                found = result.offset_for_timestamp
                if found is None or found >= o.high_watermark:
                    offset, found_ts = -1, -1
                else:
                    offset, found_ts = found, await self._timestamp_at(topic, p.partition_index, found, context)
            else:
                return part_cls(version=version, partition_index=p.partition_index, error_code=codes.INVALID_REQUEST,
                                timestamp=-1, offset=-1, leader_epoch=-1)
            return part_cls(version=version, partition_index=p.partition_index, error_code=0, timestamp=found_ts,
                            offset=offset, leader_epoch=-1)

        topics = []
        for t in body.topics:
            parts = await asyncio.gather(*(one(t.name, p) for p in t.partitions))
            topics.append(cls.ListOffsetsTopicResponse(version=version, name=t.name, partitions=list(parts)))
        return cls(version=version, throttle_time_ms=0, topics=topics)

    async def _timestamp_at(self, topic: str, partition: int, offset: int, context: RequestContext) -> int:
        """The timestamp (ms) of the record at ``offset``, what ListOffsets by time answers beside the offset
        (Kafka's ``TimestampAndOffset``); -1 when it cannot be read here."""
        try:
            result = await self.requests.fetch(FetchRequest(
                topic=topic, partition=partition, offset=offset, max_bytes=1, max_wait_ms=0,
                columns=["offset", "timestamp"]), context=context)
        except Exception:
            return -1
        if result.records.num_rows == 0:
            return -1
        return int(pc.divide(timestamps_us(result.records["timestamp"]), 1000)[0].as_py())

    # -- InitProducerId ------------------------------------------------------------------------------

    async def init_producer_id(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's InitProducerId: an idempotent producer's id and epoch (a transactional id's from its
        transaction coordinator), through the request layer's producer ids."""
        cls = response_class(22)
        txn_id = body.transactional_id or None
        try:
            ids = await self.requests.producers.init_producer_id(InitProducerIdRequest(
                transactional_id=txn_id,
                transaction_timeout_ms=body.transaction_timeout_ms if txn_id else None), context=context)
        except Exception as e:
            code = kafka_error_code(e, authorization=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if txn_id
                                    else codes.CLUSTER_AUTHORIZATION_FAILED)
            if code == codes.UNKNOWN_SERVER_ERROR:
                log.exception("InitProducerId failed")
            return cls(version=version, throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
        return cls(version=version, throttle_time_ms=0, error_code=0, producer_id=ids.producer_id,
                   producer_epoch=ids.producer_epoch)

