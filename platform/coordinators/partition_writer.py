"""What a coordinator needs of the broker's replicas: a narrow writer, Kafka's ``PartitionWriter``.

The group and transaction coordinators keep their state in internal compacted topics
(``__consumer_offsets``, ``__transaction_state``) whose partitions this broker may lead. They never reach
into the replica manager: they append to a partition they lead with ``acks=all``, listen to role changes
(this broker became leader or follower of a partition) and to transaction markers written here, read a
partition they lead from its local log (a load), and write a transaction marker on a partition this broker
leads. :class:`PartitionWriter` is that contract, as a :class:`~typing.Protocol`;
:class:`lakelog.replication.partition_writer.ReplicaPartitionWriter` implements it over the replica manager
and the composition root (``lakelog.broker``) hands it to the coordinators.

Kafka source: ``coordinator-common/src/main/java/org/apache/kafka/coordinator/common/runtime/PartitionWriter.java``
(``append``, ``registerListener``, ``config``); the role changes are what Kafka's coordinator runtime
receives as ``onElection`` / ``onResignation``, the markers what ``GroupCoordinator.onTransactionCompleted``
hears.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import pyarrow as pa

from lakelog.log_tables.transaction_index import ControlType
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.metadata import TopicMetadata


class PartitionRole(Protocol):
    """A local replica as a role listener sees it: which partition, and whether this broker leads it (at
    which leader epoch)."""

    @property
    def topic(self) -> str:
        """The partition's topic."""
        ...

    @property
    def partition(self) -> int:
        """The partition number (>= 0)."""
        ...

    @property
    def name(self) -> str:
        """``{topic}-{partition}``, for log lines and errors."""
        ...

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition now."""
        ...

    @property
    def leader_epoch(self) -> int:
        """The partition's leader epoch as this replica knows it."""
        ...


#: Called in the event loop with a replica after it took up a role or was dropped.
RoleListener = Callable[[PartitionRole], None]
#: Called ``(replica, producer_id, "commit" | "abort")`` after a transaction marker was written on a
#: partition this broker leads, once the ISR has it.
MarkerListener = Callable[[PartitionRole, int, str], None]


@runtime_checkable
class PartitionWriter(Protocol):
    """The replicas of this broker as a coordinator uses them (see the module docstring).

    ``runtime_checkable``: ``isinstance(writer, PartitionWriter)`` checks the names, not the signatures.
    """

    @property
    def broker_id(self) -> int:
        """This broker's ``broker.id``."""
        ...

    def add_role_listener(self, listener: RoleListener) -> None:
        """Call ``listener`` after each role change of a local replica (Kafka's ``onElection`` /
        ``onResignation``)."""
        ...

    def remove_role_listener(self, listener: RoleListener) -> None:
        """Stop calling ``listener``; nothing when it is not registered."""
        ...

    def add_marker_listener(self, listener: MarkerListener) -> None:
        """Call ``listener`` after each transaction marker written on a partition this broker leads."""
        ...

    def remove_marker_listener(self, listener: MarkerListener) -> None:
        """Stop calling ``listener``; nothing when it is not registered."""
        ...

    def roles(self) -> list[PartitionRole]:
        """Every partition replica open on this broker, with its role now."""
        ...

    def role(self, topic: str, partition: int) -> PartitionRole | None:
        """The local replica of a partition with its role now; None when this broker holds none."""
        ...

    async def append(self, topic: str, partition: int, records: pa.Table, *,
                     producer: ProducerBatch | None = None) -> int:
        """Append a normalised batch (:func:`lakelog.log_tables.records.normalize_produce_batch`) to a
        partition this broker leads with ``acks=all`` (Kafka's ``PartitionWriter.append``); answered once
        the ISR has it. With ``producer``, idempotently and, with a transactional id, in its transaction.

        Returns:
            The offset of the batch's first record.

        Raises:
            NotLeaderError, LeaderNotAvailableError, NotEnoughReplicasError (nothing written);
            NotEnoughReplicasAfterAppendError, RequestTimedOutError, CommitFailedError, FencedLeaderEpochError
            (it may or may not be in the log); the producer state's errors.
        """
        ...

    def next_sequence(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int) -> int:
        """The sequence the next batch of ``(producer_id, producer_epoch)`` on a local replica carries: one
        after its last batch there, 0 when it has none at that epoch."""
        ...

    def read_local(self, topic: str, partition: int, start_offset: int, *, end_offset: int, max_bytes: int,
                   columns: list[str]) -> pa.Table:
        """Records of a local replica in ``[start_offset, end_offset)``, in offset order, about ``max_bytes``
        of Arrow data at most (at least one record), transaction markers included. Blocking (Delta and
        segment reads): call it off the event loop.

        Raises:
            LeaderNotAvailableError: this broker holds no replica of the partition.
        """
        ...

    def log_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """``(log start offset, log end offset)`` of a local replica.

        Raises:
            LeaderNotAvailableError: this broker holds no replica of the partition.
        """
        ...

    async def topic(self, name: str) -> TopicMetadata:
        """A topic's metadata, read from ZooKeeper when not cached (Kafka's ``PartitionWriter.config`` reads
        the log's config). Raises UnknownTopicError."""
        ...

    async def write_txn_marker(self, topic: str, partition: int, *, producer_id: int, producer_epoch: int,
                               control: ControlType, coordinator_epoch: int) -> int:
        """Write a transaction marker on a partition this broker leads and wait until the ISR has it (Kafka's
        WriteTxnMarkers, answered by the partition's leader).

        Returns:
            The marker's offset.

        Raises:
            NotLeaderError, LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError;
            InvalidProducerEpochError (a newer epoch of the producer wrote there); TransactionsNeedTailError;
            NotEnoughReplicasAfterAppendError, RequestTimedOutError, CommitFailedError, FencedLeaderEpochError.
        """
        ...
