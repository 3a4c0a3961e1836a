"""A transaction marker written by a partition's leader (KIP-98; Kafka's ``ReplicaManager.appendRecords``
for a WriteTxnMarkers request).

The leader appends the commit or abort marker (a control record,
:meth:`LogTransactions.append_control <lakelog.log_tables.log_transactions.LogTransactions.append_control>`)
for the producer, folds it into the producer state (a newer epoch fences the older one) and answers once
the ISR has it (``acks=all``). The last stable offset moves past the transaction. The coordinator's half,
which sends the markers of a decided transaction to every partition's leader, is
:mod:`lakelog.coordinators.transaction_markers`.
"""

from __future__ import annotations

import logging

from lakelog.log_tables.errors import TransactionsNeedTailError
from lakelog.log_tables.transaction_index import ControlType
from lakelog.producers.errors import InvalidProducerEpochError
from lakelog.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

__all__ = ["write_marker"]


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
