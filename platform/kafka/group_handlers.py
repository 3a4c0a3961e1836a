"""The Kafka listener's group offset APIs: FindCoordinator, OffsetCommit and OffsetFetch, translated onto
the request layer's :class:`~lakelog.requests.groups.GroupOffsets` (the same ``__consumer_offsets`` as the
HTTP routes, ``lakelog groups describe`` and the lag metrics).

What they serve: consumers that ``assign()`` partitions and commit and fetch their positions under a
``group.id`` (Kafka's "simple" consumer groups, generation -1), and the members of Kafka-protocol groups
(:mod:`lakelog.kafka.membership_handlers`), whose commits are fenced by their member id and generation.
Any broker forwards a simple group's offset requests to the group's coordinator, so FindCoordinator
answers the coordinator when it has a Kafka endpoint and this broker otherwise (before the group's
``__consumer_offsets`` partition exists or has a leader). FindCoordinator's transaction key (key type 1)
answers a transactional id's coordinator the same way (:meth:`TransactionOperations.find_coordinator
<lakelog.requests.transactions.TransactionOperations.find_coordinator>`: any broker forwards its requests).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.kafka import errors as codes
from lakelog.kafka.codec import response_class
from lakelog.kafka.errors import kafka_error_code
from lakelog.requests import OffsetCommitRequest, RequestContext, RequestHandler

__all__ = ["GroupApis"]

log = logging.getLogger(__name__)

_GROUP_KEY, _TRANSACTION_KEY = 0, 1
_COORDINATOR_NOT_AVAILABLE = 15


def _code(error: Exception, what: str) -> int:
    code = kafka_error_code(error, authorization=codes.GROUP_AUTHORIZATION_FAILED)
    if code == codes.UNKNOWN_SERVER_ERROR:
        log.error("%s failed", what, exc_info=error)
    return code


class GroupApis:
    """FindCoordinator, OffsetCommit and OffsetFetch of one listener.

    Args:
        requests: the broker's request layer. listener: the listener's name (the endpoint answered).
        broker_id: this broker's id.
    """

    def __init__(self, *, requests: RequestHandler, listener: str, broker_id: int) -> None:
        self.requests = requests
        self.listener = listener
        self.broker_id = broker_id

    async def _coordinator(self, key: str, key_type: int, context: RequestContext) -> tuple[int, int, str, int]:
        """``(error code, node id, host, port)`` of one FindCoordinator key."""
        if key_type not in (_GROUP_KEY, _TRANSACTION_KEY):
            return codes.INVALID_REQUEST, -1, "", -1
        try:
            if key_type == _TRANSACTION_KEY:
                node = await self.requests.transactions.find_coordinator(key, context=context)
            else:
                node = await self.requests.groups.find_coordinator(key, context=context)
        except Exception as e:
            if key_type == _TRANSACTION_KEY:
                code = kafka_error_code(e, authorization=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                return code, -1, "", -1
            return _code(e, f"FindCoordinator of group {key!r}"), -1, "", -1
        brokers = await self.requests.metadata.brokers()
        for broker_id in (node, self.broker_id):
            info = brokers.get(broker_id) if broker_id is not None else None
            endpoint = None if info is None else info.kafka_endpoint(self.listener)
            if endpoint is not None:
                return codes.NONE, info.broker_id, endpoint[0], endpoint[1]
        return _COORDINATOR_NOT_AVAILABLE, -1, "", -1

    async def find_coordinator(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's FindCoordinator (v4+: several keys)."""
        cls = response_class(10)
        key_type = getattr(body, "key_type", _GROUP_KEY) or _GROUP_KEY
        if version >= 4:
            found = await asyncio.gather(*(self._coordinator(k, key_type, context) for k in body.coordinator_keys))
            return cls(version=version, throttle_time_ms=0, coordinators=[
                cls.Coordinator(version=version, key=k, node_id=node, host=host, port=port, error_code=code,
                                error_message=None) for k, (code, node, host, port) in zip(body.coordinator_keys, found)])
        code, node, host, port = await self._coordinator(body.key, key_type, context)
        return cls(version=version, throttle_time_ms=0, error_code=code, error_message=None, node_id=node,
                   host=host, port=port)

    async def offset_commit(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's OffsetCommit: every partition's offset in one commit through the request layer (its
        error, if any, on every partition, as the commit is one append)."""
        cls = response_class(8)
        generation = getattr(body, "generation_id_or_member_epoch", -1)
        offsets = [PartitionOffset(t.name, p.partition_index, p.committed_offset, p.committed_metadata)
                   for t in body.topics for p in t.partitions]
        code = codes.NONE
        try:
            await self.requests.groups.commit_offsets(OffsetCommitRequest(
                group=body.group_id, offsets=offsets, generation_id=None if generation < 0 else generation,
                member_id=getattr(body, "member_id", None) or "",
                group_instance_id=getattr(body, "group_instance_id", None) if version >= 7 else None),
                context=context)
        except Exception as e:
            code = _code(e, f"OffsetCommit of group {body.group_id!r}")
        topic_cls = cls.OffsetCommitResponseTopic
        return cls(version=version, throttle_time_ms=0, topics=[topic_cls(version=version, name=t.name, partitions=[
            topic_cls.OffsetCommitResponsePartition(version=version, partition_index=p.partition_index,
                                                    error_code=code) for p in t.partitions]) for t in body.topics])

    async def offset_fetch(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's OffsetFetch (one group, v1-7): the committed offset of each asked partition (-1 where the
        group committed none; every committed partition when ``topics`` is null)."""
        cls = response_class(9)
        topic_cls = cls.OffsetFetchResponseTopic
        part_cls = topic_cls.OffsetFetchResponsePartition
        try:
            committed = await self.requests.groups.committed_offsets(body.group_id, context=context)
        except Exception as e:
            return cls(version=version, throttle_time_ms=0, error_code=_code(e, f"OffsetFetch of {body.group_id!r}"),
                       topics=[])
        by_partition = {(c.topic, c.partition): c for c in committed}
        wanted: dict[str, list[int]] = {}
        if body.topics is None:
            for c in committed:
                wanted.setdefault(c.topic, []).append(c.partition)
        else:
            for t in body.topics:
                wanted[t.name] = list(t.partition_indexes)
        topics = []
        for name, partitions in wanted.items():
            rows = []
            for p in partitions:
                c = by_partition.get((name, p))
                rows.append(part_cls(version=version, partition_index=p, committed_offset=-1 if c is None else c.offset,
                                     committed_leader_epoch=-1, metadata=None if c is None else c.metadata,
                                     error_code=codes.NONE))
            topics.append(topic_cls(version=version, name=name, partitions=rows))
        return cls(version=version, throttle_time_ms=0, error_code=codes.NONE, topics=topics)
