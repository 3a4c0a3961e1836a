"""The group coordinator as every broker sees it: a group's offsets are committed, read and deleted on
its coordinator, the leader of the group's ``__consumer_offsets`` partition
(:func:`~lakelog.consumer_groups.offset_records.partition_for`, Kafka's rule), wherever that is.

Any broker accepts these requests (Kafka's clients find the coordinator with FindCoordinator; an HTTP
client may talk to any broker): :class:`GroupCoordinator` serves them with its
:class:`~lakelog.consumer_groups.group_metadata.GroupMetadataManager` when this broker is the coordinator,
else sends them to it through the leader client (the internal ``/lakelog/v1/coordinator`` routes), and
sends them again while the coordinator moves (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a leader
election), for up to ``request.timeout.ms``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from lakelog.config import BrokerSettings
from lakelog.consumer_groups.errors import NotCoordinatorError
from lakelog.consumer_groups.group_metadata import GroupMetadataManager
from lakelog.consumer_groups.offset_records import CommittedOffset
from lakelog.coordinators.coordinator_partitions import COORDINATOR_MOVING, retry_while_moving
from lakelog.coordinators.partition_writer import PartitionWriter
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache

#: Errors after which a request to the coordinator is sent again (it moved, or is being elected).
RETRIABLE = COORDINATOR_MOVING


class GroupCoordinator:
    """Committed offsets of every group, from any broker (see the module docstring).

    Args:
        settings: ``broker.id``, ``request.timeout.ms`` (how long a request waits for a coordinator that
            moves) and the settings of :class:`GroupMetadataManager`.
        cache: partition states and broker URLs.
        writer: the local replicas (appends, role changes, markers, local reads).
        leader_client: the inter-broker client.
        create_topic: creates a topic (``Broker.create_topic``), for ``__consumer_offsets``.

    Attributes:
        manager: this broker's :class:`GroupMetadataManager` (the groups it coordinates).

    Call :meth:`start` inside the serving event loop, :meth:`stop` at the end.
    """

    def __init__(self, settings: BrokerSettings, *, cache: MetadataCache, writer: PartitionWriter,
                 leader_client: LeaderClient, create_topic: Callable[..., Awaitable[TopicMetadata]]) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.cache = cache
        self.writer = writer
        self.leader_client = leader_client
        self.manager = GroupMetadataManager(settings, cache=cache, writer=writer,
                                            create_topic=create_topic)

    def start(self) -> None:
        """Start coordinating the groups of the ``__consumer_offsets`` partitions this broker leads."""
        self.manager.start()

    def stop(self) -> None:
        """Stop coordinating; forget every group."""
        self.manager.stop()

    # -- from any broker ------------------------------------------------------------------------

    async def coordinator_url(self, group: str, *, create: bool = False) -> str | None:
        """The URL of ``group``'s coordinator; None when it is this broker.

        Raises: NotCoordinatorError (no topic yet, without ``create``), LeaderNotAvailableError (no leader)."""
        return await self.manager.partitions.coordinator_url(group, what=f"group '{group}'", create=create)

    async def coordinator_id(self, group: str) -> int | None:
        """The broker id of ``group``'s coordinator (the leader of its ``__consumer_offsets`` partition);
        None before any group committed (no topic) or while the partition has no leader."""
        return await self.manager.partitions.coordinator_id(group)

    async def _retrying(self, call: Callable[[], Awaitable]):
        """``call()`` again while the coordinator moves, for up to ``request.timeout.ms``."""
        return await retry_while_moving(call, timeout_ms=self.settings.request_timeout_ms)

    async def commit(self, group: str, offsets: Sequence[CommittedOffset], *, current_generation: int | None = None,
                     only_newer: bool = False, producer: ProducerBatch | None = None) -> bool:
        """:meth:`commit_local` on the group's coordinator, wherever it is (the topic is created on the first
        commit). Same returns and errors; NotCoordinatorError / LeaderNotAvailableError after
        ``request.timeout.ms`` without a coordinator. With a transactional ``producer``: Kafka's
        TxnOffsetCommit, counted once the producer's transaction commits."""
        producer_fields = None if producer is None else {
            "producer_id": producer.producer_id, "producer_epoch": producer.producer_epoch,
            "transactional_id": producer.transactional_id}

        async def call() -> bool:
            url = await self.coordinator_url(group, create=True)
            if url is None:
                return await self.manager.commit_local(group, offsets, current_generation=current_generation,
                                                       only_newer=only_newer, producer=producer)
            return await self.leader_client.coordinator_commit(
                url, group, [dataclasses.asdict(o) for o in offsets], current_generation=current_generation,
                only_newer=only_newer, producer=producer_fields)
        return await self._retrying(call)

    async def committed(self, group: str, topic: str | None = None) -> list[CommittedOffset]:
        """:meth:`committed_local` on the group's coordinator, wherever it is ([] before any group committed)."""
        async def call() -> list[CommittedOffset]:
            try:
                url = await self.coordinator_url(group)
            except NotCoordinatorError:
                return []  # no __consumer_offsets yet
            if url is None:
                return await self.manager.committed_local(group, topic)
            rows = await self.leader_client.coordinator_offsets(url, group, topic=topic)
            return [CommittedOffset(**r) for r in rows]
        return await self._retrying(call)

    async def delete_offsets(self, group: str, partitions: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
        """:meth:`delete_local` on the group's coordinator, wherever it is."""
        async def call() -> list[tuple[str, int]]:
            try:
                url = await self.coordinator_url(group)
            except NotCoordinatorError:
                return []
            if url is None:
                return await self.manager.delete_local(group, partitions)
            return [tuple(tp) for tp in await self.leader_client.coordinator_delete_offsets(url, group, partitions)]
        return await self._retrying(call)

    async def delete_topic_offsets(self, topic: str) -> int:
        """Every group's committed offsets of ``topic`` deleted (a deleted topic's: Kafka's
        ``GroupMetadataManager.cleanupGroupMetadata``, so a topic made again under the name starts with no
        committed offset and no idempotent commit version); returns how many partitions' offsets went.
        Raises the errors of :meth:`groups`, :meth:`committed`, :meth:`delete_offsets`."""
        removed = 0
        for group in await self.groups():
            partitions = [(c.topic, c.partition) for c in await self.committed(group, topic)]
            if partitions:
                removed += len(await self.delete_offsets(group, partitions))
        return removed

    async def groups(self) -> list[str]:
        """Every group with committed offsets, cluster-wide: the union of every coordinator's groups
        (Kafka's ListGroups sent to every broker). Raises LeaderNotAvailableError when a partition of
        ``__consumer_offsets`` has no live leader."""
        names: set[str] = set()
        for url in (await self.manager.partitions.coordinator_brokers()).values():
            if url is None:
                names.update(await self._retrying(self.manager.groups_loaded))
            else:
                names.update(await self.leader_client.coordinator_groups(url))
        return sorted(names)
