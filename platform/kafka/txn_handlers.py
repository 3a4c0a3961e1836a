"""The Kafka listener's transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions and ListTransactions, each a thin translation onto the request layer's
:class:`~lakelog.requests.transactions.TransactionOperations` (the same transaction coordinator as the HTTP
routes: a transactional id used over HTTP and over Kafka is one id). InitProducerId is in
:mod:`lakelog.kafka.handlers`, FindCoordinator's transaction key in :mod:`lakelog.kafka.group_handlers`.

Error codes as Kafka's ``KafkaApis``: a fenced producer epoch answers PRODUCER_FENCED (90) from
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit v2+ and INVALID_PRODUCER_EPOCH (47) below
(clients before KIP-588 know only that one); AddPartitionsToTxn answers each refused partition its own code
(TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION) and the others OPERATION_NOT_ATTEMPTED (55), and
adds none of them. AddPartitionsToTxn is served in its client form (v0-3); v4+ is KIP-890's
broker-to-broker form, which a lakelog partition leader does not need (it adds a transactional produce's
partition itself).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.coordinators.transaction_state import TransactionState
from lakelog.errors import AuthorizationError, InvalidProducerEpochError
from lakelog.kafka import errors as codes
from lakelog.kafka.codec import response_class
from lakelog.kafka.errors import kafka_error_code
from lakelog.producers.errors import TransactionalIdNotFoundError
from lakelog.requests import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    RequestContext,
    RequestHandler,
    TxnOffsetCommitRequest,
)
from lakelog.security.acls import Operation, ResourceType

__all__ = ["TransactionApis"]

log = logging.getLogger(__name__)

Handler = Callable[[Any, int, RequestContext], Awaitable[Any]]

_INVALID_PRODUCER_EPOCH = 47
_OPERATION_NOT_ATTEMPTED = 55
_PRODUCER_FENCED = 90
_TRANSACTIONAL_ID_NOT_FOUND = 105
#: Kafka's ``TransactionState`` names a ListTransactions state filter may name
_STATES = frozenset(s.value for s in TransactionState)


def _txn_code(error: Exception, version: int, what: str) -> int:
    """The Kafka code of a transaction request's error: fenced is PRODUCER_FENCED from v2 (KIP-588)."""
    if isinstance(error, InvalidProducerEpochError):
        return _PRODUCER_FENCED if version >= 2 else _INVALID_PRODUCER_EPOCH
    if isinstance(error, TransactionalIdNotFoundError):
        return _TRANSACTIONAL_ID_NOT_FOUND
    code = kafka_error_code(error, authorization=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if code == codes.UNKNOWN_SERVER_ERROR:
        log.error("%s failed", what, exc_info=error)
    return code


class TransactionApis:
    """The transaction APIs of one listener.

    Args:
        requests: the broker's request layer.
    """

    def __init__(self, *, requests: RequestHandler) -> None:
        self.requests = requests

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler."""
        return {24: self.add_partitions_to_txn, 25: self.add_offsets_to_txn, 26: self.end_txn,
                28: self.txn_offset_commit, 65: self.describe_transactions, 66: self.list_transactions}

    async def add_partitions_to_txn(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's AddPartitionsToTxn v0-3: the partitions join the producer's transaction, all or none."""
        cls = response_class(24)
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        refused: dict[tuple[str, int], int] = {}
        code = codes.NONE
        try:
            found = await self.requests.transactions.add_partitions(AddPartitionsToTxnRequest(
                transactional_id=body.v3_and_below_transactional_id, producer_id=body.v3_and_below_producer_id,
                producer_epoch=body.v3_and_below_producer_epoch, partitions=wanted), context=context)
            refused = {tp: kafka_error_code(e) for tp, e in found.items()}
        except Exception as e:
            code = _txn_code(e, version, f"AddPartitionsToTxn of {body.v3_and_below_transactional_id!r}")
        topic_cls = cls.AddPartitionsToTxnTopicResult
        part_cls = topic_cls.AddPartitionsToTxnPartitionResult
        topics: dict[str, list] = {}
        for topic, partition in wanted:
            partition_code = refused.get((topic, partition), _OPERATION_NOT_ATTEMPTED if refused else code)
            topics.setdefault(topic, []).append(part_cls(version=version, partition_index=partition,
                                                         partition_error_code=partition_code))
        return cls(version=version, throttle_time_ms=0, results_by_topic_v3_and_below=[
            topic_cls(version=version, name=name, results_by_partition=parts) for name, parts in topics.items()])

    async def add_offsets_to_txn(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's AddOffsetsToTxn: the group's offsets partition joins the producer's transaction."""
        cls = response_class(25)
        code = codes.NONE
        try:
            await self.requests.transactions.add_offsets(AddOffsetsToTxnRequest(
                transactional_id=body.transactional_id, producer_id=body.producer_id,
                producer_epoch=body.producer_epoch, group=body.group_id), context=context)
        except Exception as e:
            code = self._denied_code(e, _txn_code(e, version, f"AddOffsetsToTxn of {body.transactional_id!r}"),
                                     body, context)
        return cls(version=version, throttle_time_ms=0, error_code=code)

    def _denied_code(self, error: Exception, code: int, body: Any, context: RequestContext) -> int:
        """Kafka checks the transactional id, then the group, then the topics: an authorization failure where
        Write on the id is allowed was the group's (GROUP_AUTHORIZATION_FAILED) or else a topic's
        (TOPIC_AUTHORIZATION_FAILED)."""
        if code != codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED or not isinstance(error, AuthorizationError):
            return code
        permissions = self.requests.permissions(context)
        if not permissions.allows(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return code
        if not permissions.allows(Operation.READ, ResourceType.GROUP, body.group_id):
            return codes.GROUP_AUTHORIZATION_FAILED
        return codes.TOPIC_AUTHORIZATION_FAILED

    async def end_txn(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's EndTxn: commit or abort, answered once the decision is durable (and, within
        ``request.timeout.ms``, its markers are written)."""
        cls = response_class(26)
        code = codes.NONE
        try:
            await self.requests.transactions.end_transaction(EndTxnRequest(
                transactional_id=body.transactional_id, producer_id=body.producer_id,
                producer_epoch=body.producer_epoch, commit=bool(body.committed)), context=context)
        except Exception as e:
            code = _txn_code(e, version, f"EndTxn of {body.transactional_id!r}")
        return cls(version=version, throttle_time_ms=0, error_code=code)

    async def txn_offset_commit(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's TxnOffsetCommit: the offsets join the transaction, fenced by the consumer's group
        generation and member id from v3 (KIP-447); one code for every partition (one append)."""
        cls = response_class(28)
        offsets = [PartitionOffset(t.name, p.partition_index, p.committed_offset, p.committed_metadata)
                   for t in body.topics for p in t.partitions]
        code = codes.NONE
        try:
            await self.requests.transactions.commit_offsets(TxnOffsetCommitRequest(
                transactional_id=body.transactional_id, producer_id=body.producer_id,
                producer_epoch=body.producer_epoch, group=body.group_id, offsets=offsets,
                generation_id=getattr(body, "generation_id", -1) if version >= 3 else -1,
                member_id=(getattr(body, "member_id", "") or "") if version >= 3 else "",
                group_instance_id=getattr(body, "group_instance_id", None) if version >= 3 else None),
                context=context)
        except Exception as e:
            code = self._denied_code(e, _txn_code(e, version, f"TxnOffsetCommit of {body.transactional_id!r}"),
                                     body, context)
        topic_cls = cls.TxnOffsetCommitResponseTopic
        return cls(version=version, throttle_time_ms=0, topics=[topic_cls(version=version, name=t.name, partitions=[
            topic_cls.TxnOffsetCommitResponsePartition(version=version, partition_index=p.partition_index,
                                                       error_code=code) for p in t.partitions]) for t in body.topics])

    async def describe_transactions(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DescribeTransactions (``kafka-transactions.sh describe``): each id as its coordinator
        holds it, or its error (TRANSACTIONAL_ID_NOT_FOUND, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ...)."""
        cls = response_class(65)
        state_cls = cls.TransactionState
        answers = []
        for transactional_id in body.transactional_ids:
            try:
                found = await self.requests.transactions.describe_transaction(transactional_id, context=context)
            except Exception as e:
                answers.append(state_cls(
                    version=version, error_code=_txn_code(e, version, f"DescribeTransactions of {transactional_id!r}"),
                    transactional_id=transactional_id, transaction_state="", transaction_timeout_ms=0,
                    transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            m = found.metadata
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(m.partitions):
                by_topic.setdefault(topic, []).append(partition)
            answers.append(state_cls(
                version=version, error_code=codes.NONE, transactional_id=transactional_id,
                transaction_state=m.state.value, transaction_timeout_ms=m.transaction_timeout_ms,
                transaction_start_time_ms=m.txn_start_timestamp_ms, producer_id=m.producer_id,
                producer_epoch=m.producer_epoch, topics=[
                    state_cls.TopicData(version=version, topic=t, partitions=ps) for t, ps in by_topic.items()]))
        return cls(version=version, throttle_time_ms=0, transaction_states=answers)

    async def list_transactions(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's ListTransactions (``kafka-transactions.sh list``): every transactional id the principal may
        Describe, cluster-wide (lakelog's coordinators answer for each other, so any broker's answer is
        whole), filtered by state, producer id, duration (v1: open longer than it, ms) and id pattern (v2:
        a regular expression matching the whole id)."""
        cls = response_class(66)
        states = list(body.state_filters or [])
        unknown = [s for s in states if s not in _STATES]
        producer_ids = set(body.producer_id_filters or [])
        duration_ms = getattr(body, "duration_filter", -1) if version >= 1 else -1
        pattern = getattr(body, "transactional_id_pattern", None) if version >= 2 else None
        try:
            matcher = re.compile(pattern) if pattern else None
        except re.error:
            return cls(version=version, throttle_time_ms=0, error_code=codes.INVALID_REQUEST,
                       unknown_state_filters=unknown, transaction_states=[])
        try:
            found = await self.requests.transactions.list_transactions(states=states or None, context=context)
        except Exception as e:
            return cls(version=version, throttle_time_ms=0, error_code=_txn_code(e, version, "ListTransactions"),
                       unknown_state_filters=unknown, transaction_states=[])
        now_ms = int(time.time() * 1000)
        rows = []
        for t in found:
            m = t.metadata
            if producer_ids and m.producer_id not in producer_ids:
                continue
            if duration_ms is not None and duration_ms >= 0 and (
                    m.txn_start_timestamp_ms < 0 or now_ms - m.txn_start_timestamp_ms <= duration_ms):
                continue
            if matcher is not None and not matcher.fullmatch(m.transactional_id):
                continue
            rows.append(cls.TransactionState(version=version, transactional_id=m.transactional_id,
                                             producer_id=m.producer_id, transaction_state=m.state.value))
        return cls(version=version, throttle_time_ms=0, error_code=codes.NONE, unknown_state_filters=unknown,
                   transaction_states=rows)
