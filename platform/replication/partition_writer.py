"""The replica manager as the coordinators see it: :class:`ReplicaPartitionWriter`, the one implementation
of :class:`lakelog.coordinators.partition_writer.PartitionWriter` (Kafka's ``CoordinatorPartitionWriter``
over its ``ReplicaManager``).

The group and transaction coordinators (layer 3) append to their internal partitions, hear role changes
and transaction markers, and read a partition they lead through this adapter only, so the replica
manager's listeners, replicas and logs stay this layer's. The composition root (``lakelog.broker``) builds
it and hands it to them. It matches the protocol by shape (this layer does not import the coordinators).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from lakelog.log_tables.transaction_index import ControlType
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.errors import LeaderNotAvailableError
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.partition import Partition
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.replication.transaction_markers import write_marker

__all__ = ["ReplicaPartitionWriter"]


class ReplicaPartitionWriter:
    """A coordinator's narrow view of this broker's replicas (see the module docstring; each method's
    contract is :class:`lakelog.coordinators.partition_writer.PartitionWriter`'s).

    Args:
        replica_manager: this broker's replica manager.
        request_timeout_ms: how long a transaction marker waits for the ISR (``request.timeout.ms``).
    """

    def __init__(self, replica_manager: ReplicaManager, *, request_timeout_ms: int) -> None:
        self._rm = replica_manager
        self._request_timeout_ms = request_timeout_ms

    @property
    def broker_id(self) -> int:
        """This broker's ``broker.id``."""
        return self._rm.broker_id

    # -- listeners ------------------------------------------------------------------------------

    def add_role_listener(self, listener: Callable[[Partition], None]) -> None:
        """Call ``listener(replica)`` in the event loop after each role change of a local replica."""
        self._rm.role_listeners.append(listener)

    def remove_role_listener(self, listener: Callable[[Partition], None]) -> None:
        """Stop calling ``listener``; nothing when it is not registered."""
        if listener in self._rm.role_listeners:
            self._rm.role_listeners.remove(listener)

    def add_marker_listener(self, listener: Callable[[Partition, int, str], None]) -> None:
        """Call ``listener(replica, producer_id, "commit" | "abort")`` after each marker written here."""
        self._rm.marker_listeners.append(listener)

    def remove_marker_listener(self, listener: Callable[[Partition, int, str], None]) -> None:
        """Stop calling ``listener``; nothing when it is not registered."""
        if listener in self._rm.marker_listeners:
            self._rm.marker_listeners.remove(listener)

    # -- roles ----------------------------------------------------------------------------------

    def roles(self) -> list[Partition]:
        """Every partition replica open on this broker."""
        return self._rm.partitions()

    def role(self, topic: str, partition: int) -> Partition | None:
        """The local replica of a partition; None when this broker holds none."""
        return self._rm.local_partition(topic, partition)

    # -- writes ---------------------------------------------------------------------------------

    async def append(self, topic: str, partition: int, records: pa.Table, *,
                     producer: ProducerBatch | None = None) -> int:
        """Append ``records`` with ``acks=all`` (:meth:`ReplicaManager.produce`); the first record's offset."""
        return await self._rm.produce(topic, partition, records, acks="all", producer=producer)

    def next_sequence(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int) -> int:
        """One after the producer's last sequence on the local replica at ``producer_epoch``; else 0."""
        part = self._rm.local_partition(topic, partition)
        entry = None if part is None else part.producer_state.entries.get(producer_id)
        if entry is not None and entry.batches and entry.producer_epoch == producer_epoch:
            return entry.batches[-1].sequence + 1
        return 0

    async def write_txn_marker(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int,
                               control: ControlType, coordinator_epoch: int) -> int:
        """:func:`~lakelog.replication.transaction_markers.write_marker` on this broker; the marker's offset."""
        return await write_marker(self._rm, topic, partition, producer_id=producer_id, producer_epoch=producer_epoch,
                                  control=control, coordinator_epoch=coordinator_epoch,
                                  request_timeout_ms=self._request_timeout_ms)

    # -- reads ----------------------------------------------------------------------------------

    def _local(self, topic: str, partition: int) -> Partition:
        part = self._rm.local_partition(topic, partition)
        if part is None:
            raise LeaderNotAvailableError(f"Broker {self._rm.broker_id} holds no replica of {topic}-{partition}.")
        return part

    def log_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """``(log start offset, log end offset)`` of the local replica. Raises LeaderNotAvailableError."""
        plog = self._local(topic, partition).log
        return plog.log_start_offset, plog.log_end_offset

    def read_local(self, topic: str, partition: int, start_offset: int, *, end_offset: int, max_bytes: int,
                   columns: list[str]) -> pa.Table:
        """Rows of the local replica in ``[start_offset, end_offset)``, markers included (blocking).
        Raises LeaderNotAvailableError."""
        return self._local(topic, partition).log.read(start_offset, max_bytes=max_bytes, end_offset=end_offset,
                                                      columns=columns, control_records=True)

    async def topic(self, name: str) -> TopicMetadata:
        """The topic's metadata, read from ZooKeeper when not cached. Raises UnknownTopicError."""
        return await self._rm.topic_fresh(name)
