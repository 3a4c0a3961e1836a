"""DeleteRecords: a user moves the log start offset of partitions up, as ``kafka-delete-records`` does.

Kafka's ``KafkaApis.handleDeleteRecordsRequest`` and ``ReplicaManager.deleteRecords``:

1. authorize: Delete on each topic named (403 / 40301 naming the first one denied; nothing moves);
2. validate the whole request before anything moves: at least one partition, each named once, an offset
   of -1 (the high watermark) or more, a topic that exists and is not internal, a partition it has, a
   ``cleanup.policy`` with ``delete``, an offset at most the partition's high watermark (asked of each
   leader);
3. each partition's leader moves its log start offset (:mod:`lakelog.replication.record_deletion`: here,
   or forwarded through the one inter-broker client), the partitions at once, and answers once its
   replicas followed (the low watermark; Kafka's ``DelayedDeleteRecords``, up to ``timeout_ms``).

DeleteRecords is idempotent: a log start offset never moves back, so a request retried after an error
(a leader that moved on the way) changes nothing where it was done already.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from lakelog.protocol.errors import FieldOutOfRangeError, InvalidBodyFieldError
from lakelog.replication.errors import InvalidTopicError
from lakelog.replication.metadata import INTERNAL_TOPICS
from lakelog.replication.partition_views import leader_offsets
from lakelog.replication.record_deletion import HIGH_WATERMARK, check_deletable, check_offset, delete_records
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.requests.authorization import RequestPermissions
from lakelog.security.acls import Operation, ResourceType

__all__ = ["DeleteRecordsRequest", "DeleteRecordsResult", "RecordDeletion"]


@dataclass(frozen=True, kw_only=True)
class DeleteRecordsRequest:
    """Kafka's DeleteRecords request: per partition, the offset the log is to start at.

    Attributes:
        offsets: ``{(topic, partition): offset}``; every record below ``offset`` goes. ``-1`` means the
            partition's high watermark (every record a consumer can read), as in kafka-delete-records'
            offsets JSON.
        timeout_ms: how long the answer waits for the replicas' log start offsets (Kafka's DeleteRecords
            ``timeout_ms``). None: the broker's ``request.timeout.ms``.
    """

    offsets: dict[tuple[str, int], int]
    timeout_ms: int | None = None

    @classmethod
    def of(cls, partitions: list[tuple[str, int, int]], *, timeout_ms: int | None = None) -> "DeleteRecordsRequest":
        """From ``[(topic, partition, offset), ...]`` (kafka-delete-records' offsets JSON, a route's body).

        Raises:
            InvalidBodyFieldError: 422 / 42222, a partition named twice.
        """
        offsets: dict[tuple[str, int], int] = {}
        for topic, partition, offset in partitions:
            if (topic, partition) in offsets:
                raise InvalidBodyFieldError(f"Partition {topic}-{partition} is named twice in one DeleteRecords "
                                            "request. Nothing was deleted.")
            offsets[(topic, partition)] = offset
        # a Kafka request's timeout_ms is any int32: bounded as the internal route bounds it (0 to 1 hour)
        return cls(offsets=offsets, timeout_ms=None if timeout_ms is None else max(0, min(timeout_ms, 3_600_000)))


@dataclass(frozen=True)
class DeleteRecordsResult:
    """Kafka's DeleteRecords response.

    Attributes:
        low_watermarks: ``{(topic, partition): low_watermark}``, the lowest log start offset of the
            partition's replicas on live brokers once each reached the offset asked (Kafka's low watermark;
            more when the logs already started later).
    """

    low_watermarks: dict[tuple[str, int], int]


class RecordDeletion:
    """The DeleteRecords operation (see the module docstring).

    Args:
        replica_manager: this broker's replicas, the topics' metadata and the one inter-broker client.
    """

    def __init__(self, *, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    async def delete_records(self, request: DeleteRecordsRequest, *,
                             permissions: RequestPermissions) -> DeleteRecordsResult:
        """Move each partition's log start offset up to its offset (module docstring: steps 1-3).

        Raises (before anything moves):
            AuthorizationError: 403 / 40301, no Delete on a topic named.
            InvalidBodyFieldError: 422 / 42222, no partition named.
            FieldOutOfRangeError: 422 / 42220, an offset below -1.
            InvalidTopicError: 400 / 40004, an internal topic.
            UnknownTopicError (40401), UnknownPartitionError (40402).
            PolicyViolationError: 400 / 40030, a topic whose ``cleanup.policy`` is ``compact`` alone.
            OffsetOutOfRangeError: an offset above the partition's high watermark.
            LeaderNotAvailableError: a leader that cannot be asked.
        Raises (after some partitions moved, retriable as a whole): NotLeaderError, LeaderNotAvailableError,
            CommitFailedError of a partition, RequestTimedOutError (504 / 50401: a replica did not follow
            within ``timeout_ms``).
        """
        rm = self.replica_manager
        # 1.
        permissions.require_all(Operation.DELETE, ResourceType.TOPIC, {topic for topic, _ in request.offsets})
        # 2.
        if not request.offsets:
            raise InvalidBodyFieldError("A DeleteRecords request must name at least one partition.")
        for (topic, partition), offset in sorted(request.offsets.items()):
            if offset < HIGH_WATERMARK:
                raise FieldOutOfRangeError(f"The offset of {topic}-{partition} must be -1 (the high watermark) or "
                                           f"more, not {offset}. Nothing was deleted.")
            if topic in INTERNAL_TOPICS:
                raise InvalidTopicError(f"Cannot delete records of the internal topic '{topic}'. Nothing was deleted.")
            meta = await rm.topic_fresh(topic)
            rm.cache.check_partition(meta, partition)
            check_deletable(topic, cleanup_policy=meta.config.cleanup_policy)
        keys = sorted(request.offsets)
        found = await asyncio.gather(*(leader_offsets(rm, topic, partition) for topic, partition in keys))
        for (topic, partition), offsets in zip(keys, found, strict=True):
            check_offset(topic, partition, offset=request.offsets[(topic, partition)],
                         log_start_offset=offsets.log_start_offset, high_watermark=offsets.high_watermark)
        # 3.
        timeout_ms = rm.settings.request_timeout_ms if request.timeout_ms is None else request.timeout_ms
        moved = await asyncio.gather(*(delete_records(rm, topic, partition, offset=request.offsets[(topic, partition)],
                                                      timeout_ms=timeout_ms)
                                       for topic, partition in keys), return_exceptions=True)
        for result in moved:
            if isinstance(result, BaseException):
                raise result
        return DeleteRecordsResult(dict(zip(keys, moved, strict=True)))  # type: ignore[arg-type]
