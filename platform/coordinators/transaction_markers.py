"""Transaction markers: a decided transaction carried out on each of its partitions (KIP-98).

Two halves, as in Kafka:

- **The partition leader** (:func:`lakelog.replication.transaction_markers.write_marker`, Kafka's
  ``ReplicaManager.appendRecords`` for a WriteTxnMarkers request): appends the commit or abort marker and
  answers once the ISR has it.
- **The coordinator** (:class:`TransactionMarkerWriter`, this module; Kafka's
  ``TransactionMarkerChannelManager``): for a transaction in PrepareCommit or PrepareAbort, sends the
  marker to the leader of every partition of the transaction (this broker's, through the
  :class:`~lakelog.coordinators.partition_writer.PartitionWriter`, or the leader through the leader
  client), resending while leaders move, then completes the transaction
  (:meth:`TransactionStateManager.complete <lakelog.coordinators.transaction_log.TransactionStateManager.complete>`).

Steps of :meth:`TransactionMarkerWriter.carry_out` (mirrored in the code):

1. the coordinator epoch: the leader epoch of the transactional id's ``__transaction_state`` partition
   here (a coordinator that no longer leads it stops: the new one carries the decision out after its load);
2. one marker per partition, all partitions at once, each resent with backoff while its leader is unknown,
   moving or short of replicas; a deleted topic's partition needs none (Kafka drops it too). A partition
   this broker leads gets its marker without a ZooKeeper read;
3. CompleteCommit / CompleteAbort written to ``__transaction_state``, written again with backoff when the
   write fails (not enough replicas, a timeout: the id would stay in Prepare* and refuse every request of
   its producer until a coordinator failover), until this broker stops coordinating the id.

A marker may be written twice (a resend after a lost answer): the second one finds no open transaction
and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging

from lakelog.config import BrokerSettings
from lakelog.coordinators.partition_writer import PartitionWriter
from lakelog.coordinators.transaction_log import TransactionStateManager
from lakelog.coordinators.transaction_records import TRANSACTION_STATE_TOPIC, partition_for
from lakelog.coordinators.transaction_state import TransactionMetadata, TransactionState
from lakelog.errors import LakelogError
from lakelog.log_tables.transaction_index import ControlType
from lakelog.producers.errors import InvalidProducerEpochError, InvalidTxnStateError
from lakelog.replication.errors import UnknownPartitionError, UnknownTopicError
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

__all__ = ["TransactionMarkerWriter"]

#: Wait between resends of a marker whose leader did not take it (Kafka's ``retry.backoff.ms``).
MARKER_RETRY_BACKOFF_S = 0.1


class TransactionMarkerWriter:
    """Carries out the decided transactions of this broker's coordinator (see the module docstring).

    Args:
        settings: ``request.timeout.ms``.
        manager: the coordinator's state (:meth:`~TransactionStateManager.complete`; its ``on_decided``
            hook is set to :meth:`carry_out` by :meth:`attach`).
        cache: partition states and broker URLs (the leaders of other brokers' partitions).
        writer: this broker's replicas (local markers, the coordinator epoch).
        leader_client: the inter-broker client (markers for partitions other brokers lead).
    """

    def __init__(self, settings: BrokerSettings, *, manager: TransactionStateManager, cache: MetadataCache,
                 writer: PartitionWriter, leader_client: LeaderClient) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.manager = manager
        self.cache = cache
        self.writer = writer
        self.leader_client = leader_client

    def attach(self) -> None:
        """Make the coordinator hand every decided transaction to :meth:`carry_out`."""
        self.manager.on_decided = self.carry_out

    async def carry_out(self, metadata: TransactionMetadata) -> None:
        """Write the markers of a PrepareCommit / PrepareAbort transaction, then complete it. Returns when
        done, or when this broker stopped coordinating the id (the new coordinator carries it out)."""
        if metadata.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return
        control: ControlType = "commit" if metadata.state is TransactionState.PREPARE_COMMIT else "abort"
        # 1. the coordinator epoch
        coordinator_epoch = await self._coordinator_epoch(metadata.transactional_id)
        if coordinator_epoch is None:
            return
        # 2. a marker on every partition
        done = await asyncio.gather(*(self._marker(metadata, topic, partition, control, coordinator_epoch)
                                      for topic, partition in sorted(metadata.partitions)))
        if not all(done):
            return
        # 3. the transaction completes (written again until it is, or until another broker coordinates the id)
        completed = await self._complete(metadata, coordinator_epoch)
        if completed is None:
            return
        log.info("transactional id %r: %s written on %d partition(s), %s", metadata.transactional_id, control,
                 len(metadata.partitions), completed.state.value)

    async def _complete(self, metadata: TransactionMetadata, coordinator_epoch: int) -> TransactionMetadata | None:
        """Write CompleteCommit / CompleteAbort; the written metadata, or None when there is nothing to
        complete any more or this broker stopped coordinating the id (at this epoch)."""
        while True:
            try:
                return await self.manager.complete(metadata.transactional_id)
            except InvalidTxnStateError as e:  # no decided transaction any more (completed, expired)
                log.info("transactional id %r: %s", metadata.transactional_id, e)
                return None
            except (LakelogError, OSError) as e:
                if await self._coordinator_epoch(metadata.transactional_id) != coordinator_epoch:
                    return None  # the new coordinator completes it after its load
                outcome = "CompleteCommit" if metadata.state is TransactionState.PREPARE_COMMIT else "CompleteAbort"
                log.warning("transactional id %r: writing %s failed: %s; retrying", metadata.transactional_id,
                            outcome, e)
                await asyncio.sleep(MARKER_RETRY_BACKOFF_S)

    async def _coordinator_epoch(self, transactional_id: str) -> int | None:
        """The leader epoch of the id's ``__transaction_state`` partition here, or None when this broker no
        longer leads it."""
        num_partitions = await self.manager.partitions.num_partitions()
        part = self.writer.role(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, num_partitions))
        return part.leader_epoch if part is not None and part.is_leader else None

    async def _leader(self, topic: str, partition: int) -> int:
        """The partition's leader (-1: none): this broker when it leads the partition, else ZooKeeper's
        partition state (Kafka's marker channel asks its metadata cache; a marker sent to a broker that
        stopped leading is answered NotLeader and resent)."""
        part = self.writer.role(topic, partition)
        if part is not None and part.is_leader:
            return self.broker_id
        return (await self.cache.partition_state(topic, partition)).leader

    async def _marker(self, metadata: TransactionMetadata, topic: str, partition: int, control: ControlType,
                      coordinator_epoch: int) -> bool:
        """One partition's marker, resent until a leader took it; False when this broker stopped
        coordinating the id meanwhile."""
        while True:
            try:
                leader = await self._leader(topic, partition)
                url = None if leader == self.broker_id else (
                    await self.cache.broker_url(leader) if leader >= 0 else None)
                if leader < 0 or (url is None and leader != self.broker_id):
                    raise _Retry(f"{topic}-{partition} has no live leader")
                kwargs = dict(producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
                              control=control, coordinator_epoch=coordinator_epoch)
                if url is None:
                    await self.writer.write_txn_marker(topic, partition, **kwargs)
                else:
                    await self.leader_client.write_txn_marker(url, topic, partition, **kwargs)
                return True
            except (UnknownTopicError, UnknownPartitionError):
                log.info("transactional id %r: %s-%d is gone; no marker needed", metadata.transactional_id, topic,
                         partition)
                return True
            except InvalidProducerEpochError as e:  # a newer epoch wrote there: this transaction is over there
                log.info("transactional id %r: %s", metadata.transactional_id, e)
                return True
            except (LakelogError, OSError, _Retry) as e:
                if getattr(e, "retriable", True) is False and not isinstance(e, _Retry):
                    log.warning("transactional id %r: the %s marker for %s-%d failed: %s; retrying",
                                metadata.transactional_id, control, topic, partition, e)
                if await self._coordinator_epoch(metadata.transactional_id) != coordinator_epoch:
                    return False  # no longer the coordinator (at this epoch): the new one carries it out
                await asyncio.sleep(MARKER_RETRY_BACKOFF_S)


class _Retry(Exception):
    """A marker's partition has no live leader yet."""
