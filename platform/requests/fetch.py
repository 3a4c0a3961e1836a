"""Fetch and list offsets: a consumer's reads, answered by the partition's leader.

Kafka's ``KafkaApis.handleFetchRequest`` (consumer fetches) and ``handleListOffsetRequest``: the request
layer fills in the broker's defaults (``fetch.max.wait.ms``) and answers with the rows and the offsets a
client needs to go on (where the next fetch starts, the high watermark, the log start offset), never with
the broker's internal replica. The read itself is :meth:`ReplicaManager.fetch
<lakelog.replication.replica_manager.ReplicaManager.fetch>`; the offsets of any partition come from its
leader (:mod:`lakelog.replication.partition_views`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lakelog.config import BrokerSettings
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.protocol.errors import FieldOutOfRangeError
from lakelog.replication.consumer_fetch import next_offset
from lakelog.replication.partition_views import LeaderOffsets, leader_offsets, offset_for_timestamp
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.requests.authorization import RequestPermissions
from lakelog.security.acls import Operation, ResourceType

__all__ = ["DEFAULT_FETCH_MAX_BYTES", "FETCH_MAX_BYTES_LIMIT", "FETCH_MAX_WAIT_MS_LIMIT", "FetchRequest", "FetchResult",
           "ListOffsetsRequest", "ListOffsetsResult", "fetch", "list_offsets", "validate_fetch"]

#: A fetch's ``max_bytes`` when the request leaves it out (1 MiB, Kafka's ``max.partition.fetch.bytes``).
DEFAULT_FETCH_MAX_BYTES = 1024 * 1024
#: The largest ``max_bytes`` a fetch may ask for (256 MiB).
FETCH_MAX_BYTES_LIMIT = 256 * 1024 * 1024
#: The longest ``max_wait_ms`` a fetch may long-poll (60 s).
FETCH_MAX_WAIT_MS_LIMIT = 60_000


@dataclass(frozen=True, kw_only=True)
class FetchRequest:
    """A consumer's fetch of one partition.

    Attributes:
        topic, partition: what to read. offset: the first offset wanted (>= 0).
        max_bytes: soft limit on the records' Arrow bytes (at least one record is returned, KIP-74).
        max_wait_ms: long-poll this long (ms) while nothing is there; None: the broker's ``fetch.max.wait.ms``.
        isolation_level: Kafka's ``isolation.level`` (``read_uncommitted``: below the high watermark;
            ``read_committed``: below the last stable offset, no aborted records).
        columns: the log columns wanted (None: all of :data:`~lakelog.log_tables.schema.LOG_SCHEMA`).
        control_records: also return the transaction markers (control records: ``attributes`` with the
            control bit, Kafka's key and value), as Kafka's Fetch answers them; False: none (HTTP).
    """

    topic: str
    partition: int
    offset: int
    max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    max_wait_ms: int | None = None
    isolation_level: IsolationLevel = "read_uncommitted"
    columns: list[str] | None = None
    control_records: bool = False


@dataclass(frozen=True)
class FetchResult:
    """A fetch's answer.

    Attributes:
        records: the rows read, in offset order (the requested columns).
        next_offset: where the next fetch starts (past transaction markers and aborted records the read
            skipped; :func:`~lakelog.replication.consumer_fetch.next_offset`).
        high_watermark, log_start_offset: the partition's, right after the read.
        last_stable_offset: the partition's LSO right after the read (Kafka's Fetch answers it: a
            ``read_committed`` consumer's end of the log); -1 when unknown.
    """

    records: pa.Table
    next_offset: int
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int = -1


def validate_fetch(request: FetchRequest) -> None:
    """The bounds of a fetch: ``offset`` >= 0, ``max_bytes`` in 1 to :data:`FETCH_MAX_BYTES_LIMIT`,
    ``max_wait_ms`` (when given) in 0 to :data:`FETCH_MAX_WAIT_MS_LIMIT`.

    Raises:
        FieldOutOfRangeError: 422 / 42220 naming the field.
    """
    for name, value, low, high in (("offset", request.offset, 0, 2**63 - 1),
                                   ("max_bytes", request.max_bytes, 1, FETCH_MAX_BYTES_LIMIT),
                                   ("max_wait_ms", request.max_wait_ms, 0, FETCH_MAX_WAIT_MS_LIMIT)):
        if value is not None and not low <= value <= high:
            raise FieldOutOfRangeError(f"A fetch's {name} must be from {low} to {high}, not {value}.")


async def fetch(replica_manager: ReplicaManager, settings: BrokerSettings, request: FetchRequest, *,
                permissions: RequestPermissions) -> FetchResult:
    """Authorize (Read on the topic), validate and read ``request`` on this broker, the partition's leader.

    Raises:
        AuthorizationError (403 / 40301, checked first),
        FieldOutOfRangeError (:func:`validate_fetch`), UnknownTopicError, UnknownPartitionError,
        NotLeaderError (naming the leader), LeaderNotAvailableError,
        OffsetOutOfRangeError: ``offset`` below the log start offset or above the high watermark.
    """
    permissions.require(Operation.READ, ResourceType.TOPIC, request.topic)
    validate_fetch(request)
    wait_ms = settings.fetch_max_wait_ms if request.max_wait_ms is None else request.max_wait_ms
    rows, part = await replica_manager.fetch(request.topic, request.partition, request.offset,
                                             max_bytes=request.max_bytes, max_wait_ms=wait_ms,
                                             columns=request.columns, isolation_level=request.isolation_level,
                                             control_records=request.control_records)
    return FetchResult(rows, next_offset(rows, request.offset), part.log.high_watermark, part.log.log_start_offset,
                       part.log.last_stable_offset)


@dataclass(frozen=True, kw_only=True)
class ListOffsetsRequest:
    """Kafka's ListOffsets for one partition.

    Attributes:
        topic, partition: the partition.
        timestamp_ms: also look up the first offset whose record timestamp is at or after this time
            (ms since the epoch), or None.
    """

    topic: str
    partition: int
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class ListOffsetsResult:
    """The partition's offsets as its leader has them, and the offset of ``timestamp_ms`` when asked.

    Attributes:
        offsets: log start, lake end, log end, high watermark, last stable offset
            (:class:`~lakelog.replication.partition_views.LeaderOffsets`).
        offset_for_timestamp: the first offset at or after the request's time (the high watermark when
            no record is that new), or None when no time was asked.
    """

    offsets: LeaderOffsets
    offset_for_timestamp: int | None


async def list_offsets(replica_manager: ReplicaManager, request: ListOffsetsRequest, *,
                       permissions: RequestPermissions) -> ListOffsetsResult:
    """The partition's offsets, from its leader (any broker answers); Describe on the topic.

    Raises:
        AuthorizationError (403 / 40301, checked first),
        UnknownTopicError, UnknownPartitionError, LeaderNotAvailableError, NotLeaderError (moved again).
    """
    permissions.require(Operation.DESCRIBE, ResourceType.TOPIC, request.topic)
    offsets = await leader_offsets(replica_manager, request.topic, request.partition)
    found = None if request.timestamp_ms is None else await offset_for_timestamp(
        replica_manager, request.topic, request.partition, timestamp_ms=request.timestamp_ms)
    return ListOffsetsResult(offsets, found)
