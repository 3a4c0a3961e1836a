"""Transaction markers: a decided transaction carried out on each of its partitions (KIP-98).

Two halves, as in Kafka:

- **The partition leader** (:func:`write_marker`, Kafka's ``ReplicaManager.appendRecords`` for a
  WriteTxnMarkers request): appends the commit or abort marker (a control record,
  :meth:`LogTransactions.append_control <lakelog.log_tables.log_transactions.LogTransactions.append_control>`)
  for the producer, folds it into the producer state (a newer epoch fences the older one) and answers once
  the ISR has it (``acks=all``). The last stable offset moves past the transaction.
- **The coordinator** (:class:`TransactionMarkerWriter`, Kafka's ``TransactionMarkerChannelManager``):
  for a transaction in PrepareCommit or PrepareAbort, sends the marker to the leader of every partition of
  the transaction (this broker's replica manager, or the leader through the leader client), resending
  while leaders move, then completes the transaction
  (:meth:`TransactionStateManager.complete <lakelog.producers.transaction_log.TransactionStateManager.complete>`).

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
from lakelog.errors import LakelogError
from lakelog.log_tables.errors import TransactionsNeedTailError
from lakelog.log_tables.transaction_index import ControlType
from lakelog.producers.errors import InvalidProducerEpochError, InvalidTxnStateError
from lakelog.producers.transaction_log import TransactionStateManager
from lakelog.producers.transaction_records import TRANSACTION_STATE_TOPIC, partition_for
from lakelog.producers.transaction_state import TransactionMetadata, TransactionState
from lakelog.replication.errors import UnknownPartitionError, UnknownTopicError
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

__all__ = ["TransactionMarkerWriter", "write_marker"]

#: Wait between resends of a marker whose leader did not take it (Kafka's ``retry.backoff.ms``).
MARKER_RETRY_BACKOFF_S = 0.1


async def write_marker(rm: ReplicaManager, topic: str, partition: int, *, producer_id: int, producer_epoch: int,
                       control: ControlType, coordinator_epoch: int, request_timeout_ms: int) -> int:
    """Write a transaction marker on this broker, the partition's leader, and wait until the ISR has it.

    Args:
        rm: this broker's replica manager.
        topic, partition: the partition.
        producer_id, producer_epoch: the transaction's producer, the epoch as the coordinator holds it.
        control: ``"commit"`` or ``"abort"``.
        coordinator_epoch: the coordinator's epoch (stored in the marker).
        request_timeout_ms: how long to wait for the ISR (``request.timeout.ms``).

    Returns:
        The marker's offset.

    Raises:
        NotLeaderError, LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError (the coordinator
        resends elsewhere or drops the partition); InvalidProducerEpochError: a newer epoch of the producer
        wrote here (Kafka's ProducerFenced for a marker); TransactionsNeedTailError: the log has no segment
        tail (it never held a transaction); NotEnoughReplicasAfterAppendError, RequestTimedOutError,
        CommitFailedError, FencedLeaderEpochError.
    """
    part = await rm.leader_partition(topic, partition)
    entry = part.producer_state.entries.get(producer_id)
    if entry is not None and entry.producer_epoch > producer_epoch:
        raise InvalidProducerEpochError(
            f"Producer {producer_id} epoch {producer_epoch} is fenced on {part.name}: epoch {entry.producer_epoch} "
            "wrote there; the marker was not written.")
    if not part.log.tiered:
        raise TransactionsNeedTailError(f"{part.name} has no segment tail: it holds no transaction to end.")
    epoch = part.leader_epoch
    info = part.log.transactions.append_control(control=control, producer_id=producer_id,
                                                producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                                                leader_epoch=part.append_epoch())
    part.producer_state.marker_appended(producer_id, producer_epoch, end_offset=info.last_offset + 1)
    part.notify_log_end_offset()
    part.maybe_advance_high_watermark()
    await part.wait_for_commit(epoch, info.last_offset + 1, request_timeout_ms=request_timeout_ms)
    for listener in list(rm.marker_listeners):  # e.g. the group coordinator's pending offset commits
        try:
            listener(part, producer_id, control)
        except Exception:
            log.exception("a marker listener of %s failed", part.name)
    return info.base_offset


class TransactionMarkerWriter:
    """Carries out the decided transactions of this broker's coordinator (see the module docstring).

    Args:
        settings: ``request.timeout.ms``.
        manager: the coordinator's state (:meth:`~TransactionStateManager.complete`; its ``on_decided``
            hook is set to :meth:`carry_out` by :meth:`attach`).
        replica_manager: this broker's replicas (local markers, the coordinator epoch).
        leader_client: the inter-broker client (markers for partitions other brokers lead).
    """

    def __init__(self, settings: BrokerSettings, *, manager: TransactionStateManager, replica_manager: ReplicaManager,
                 leader_client: LeaderClient) -> None:
        self.settings = settings
        self.manager = manager
        self.replica_manager = replica_manager
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
        part = self.replica_manager.local_partition(TRANSACTION_STATE_TOPIC, partition_for(transactional_id,
                                                                                            num_partitions))
        return part.leader_epoch if part is not None and part.is_leader else None

    async def _leader(self, topic: str, partition: int) -> int:
        """The partition's leader (-1: none): this broker when it leads the partition, else ZooKeeper's
        partition state (Kafka's marker channel asks its metadata cache; a marker sent to a broker that
        stopped leading is answered NotLeader and resent)."""
        part = self.replica_manager.local_partition(topic, partition)
        if part is not None and part.is_leader:
            return self.replica_manager.broker_id
        return (await self.replica_manager.cache.partition_state(topic, partition)).leader

    async def _marker(self, metadata: TransactionMetadata, topic: str, partition: int, control: ControlType,
                      coordinator_epoch: int) -> bool:
        """One partition's marker, resent until a leader took it; False when this broker stopped
        coordinating the id meanwhile."""
        while True:
            try:
                leader = await self._leader(topic, partition)
                url = None if leader == self.replica_manager.broker_id else (
                    await self.replica_manager.cache.broker_url(leader) if leader >= 0 else None)
                if leader < 0 or (url is None and leader != self.replica_manager.broker_id):
                    raise _Retry(f"{topic}-{partition} has no live leader")
                kwargs = dict(producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
                              control=control, coordinator_epoch=coordinator_epoch)
                if url is None:
                    await write_marker(self.replica_manager, topic, partition,
                                       request_timeout_ms=self.settings.request_timeout_ms, **kwargs)
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
