"""What consumer groups need of the broker: typed :class:`~typing.Protocol` s, so this layer (3) names
the broker's pieces without importing the composition root (``lakelog.broker``, layer 5).

- :class:`ConsumerBroker`: what the consumer instances of one broker use
  (:mod:`lakelog.consumer_groups.manager`, :mod:`~lakelog.consumer_groups.positions`,
  :mod:`~lakelog.consumer_groups.poller`);
- :class:`OffsetsAdminBroker`: what the group offset administration uses
  (:mod:`lakelog.consumer_groups.offsets_admin`: commits, lag, resets);
- :class:`LocalReplica`: the parts of a local partition replica they touch.

:class:`lakelog.broker.Broker` (started) provides all of them. Both broker protocols are
``runtime_checkable``: ``isinstance(broker, ConsumerBroker)`` checks that every name is present
(not the signatures).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
from kazoo.client import KazooClient

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.partition_views import LeaderOffsets
from lakelog.replication.metadata import ClusterMetadata, TopicMetadata


class ReplicaLog(Protocol):
    """The part of a replica's partition log consumers look at (``PartitionLog``)."""

    @property
    def high_watermark(self) -> int:
        """First offset not yet replicated to the ISR: consumers see offsets below it."""
        ...

    @property
    def last_stable_offset(self) -> int:
        """First offset of a still-open transaction, at most the HW: read_committed consumers see offsets below it."""
        ...


class LocalReplica(Protocol):
    """A partition replica this broker holds open (``Broker.local_partition``)."""

    @property
    def role(self) -> str:
        """``"leader"`` or ``"follower"``."""
        ...

    @property
    def log(self) -> ReplicaLog:
        """The replica's partition log."""
        ...

    async def wait_for_records(self, offset: int, timeout_s: float) -> None:
        """Return once the high watermark passes ``offset`` or after ``timeout_s`` seconds."""
        ...

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Return ``condition()`` once it holds (re-checked when the high watermark or the role moves) or
        after ``timeout_s`` seconds."""
        ...


@runtime_checkable
class ConsumerBroker(Protocol):
    """The broker as the consumer instances of :class:`~lakelog.consumer_groups.manager.ConsumerManager`
    use it (started)."""

    broker_id: int
    settings: BrokerSettings  # advertised_url: the base URI of this broker's instances
    zk: KazooClient  # group membership, topic watch
    metadata: ClusterMetadata  # topics, partition counts
    coordinator: GroupCoordinator  # committed offsets (__consumer_offsets), wherever a group's coordinator is
    leader_client: LeaderClient  # reads of partitions led by another broker

    async def topic_fresh(self, name: str) -> TopicMetadata:
        """Metadata of ``name`` (re-read from ZooKeeper when not cached). Raises ``UnknownTopicError``."""
        ...

    def check_partition(self, meta: TopicMetadata, partition: int) -> None:
        """Raises ``UnknownPartitionError`` when ``partition`` is not one of the topic's."""
        ...

    async def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int,
                    columns: list[str] | None = None,
                    isolation_level: IsolationLevel = "read_uncommitted") -> tuple[pa.Table, Any]:
        """Records from ``offset`` below the HW (read_committed: below the LSO, no aborted records) of a
        partition this broker leads: ``(table, replica)``; the next offset is
        :func:`lakelog.replication.consumer_fetch.next_offset` of the table.

        Raises: ``NotLeaderError`` (with ``leader_url``), ``LeaderNotAvailableError``,
        ``OffsetOutOfRangeError``, ``UnknownTopicError``, ``UnknownPartitionError``.
        """
        ...

    def local_partition(self, topic: str, partition: int) -> LocalReplica | None:
        """The local replica of a partition, if this broker holds it open (no I/O)."""
        ...

    async def partition_offsets(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(log_start_offset, log_end_offset, high_watermark)`` from the partition's leader, wherever it is."""
        ...

    async def leader_offsets(self, topic: str, partition: int) -> LeaderOffsets:
        """The partition's offsets with its last stable offset, from its leader wherever it is."""
        ...

    async def group_generation(self, group: str) -> int | None:
        """The group's current generation (ZooKeeper), None without membership state."""
        ...


@runtime_checkable
class OffsetsAdminBroker(Protocol):
    """The broker as :mod:`lakelog.consumer_groups.offsets_admin` uses it (started)."""

    coordinator: GroupCoordinator

    async def topic_fresh(self, name: str) -> TopicMetadata:
        """Metadata of ``name``. Raises ``UnknownTopicError``."""
        ...

    async def partition_offsets(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(log_start_offset, log_end_offset, high_watermark)`` from the partition's leader."""
        ...

    async def offset_for_timestamp(self, topic: str, partition: int, *, timestamp_ms: int) -> int:
        """The first offset whose timestamp is >= ``timestamp_ms`` (the high watermark when none is), from
        the partition's leader wherever it is."""
        ...

    async def group_generation(self, group: str) -> int | None:
        """The group's current generation (ZooKeeper), None without membership state."""
        ...

    async def group_members(self, group: str) -> list[str]:
        """Ids of the group's live members (ZooKeeper ephemeral znodes)."""
        ...

