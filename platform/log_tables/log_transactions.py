"""A log's transactions: the markers its leader appends and what readers learn from its transaction index.

:class:`LogTransactions` is :attr:`PartitionLog.transactions
<lakelog.log_tables.partition_log.PartitionLog.transactions>`. The index itself
(:mod:`~lakelog.log_tables.transaction_index`) is folded in by every append and rebuilt on recovery by the
log's state (:class:`~lakelog.log_tables.log_state.LogState`).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from lakelog.clock import SYSTEM_TIME, Time
from lakelog.log_tables.log_state import LogState
from lakelog.log_tables.log_writer import AppendInfo
from lakelog.log_tables.schema import CONTROL_BIT, TRANSACTIONAL_BIT
from lakelog.log_tables.transaction_index import ControlType, TransactionView, control_batch

__all__ = ["LogTransactions"]


class LogTransactions:
    """Markers and transaction views of one log.

    Args:
        append: the log's :meth:`~lakelog.log_tables.partition_log.PartitionLog.append`.
        state: the log's state.
        clock: the broker time of markers. Default: the system clock.
    """

    def __init__(self, append: Callable[..., AppendInfo], state: LogState, *, clock: Time = SYSTEM_TIME) -> None:
        self._append = append
        self._state = state
        self._clock = clock

    def view(self) -> TransactionView:
        """The open and aborted transactions and the control records of the segment tail, now."""
        return self._state.view().transactions

    def append_control(self, *, control: ControlType, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int, leader_epoch: int = 0, now_ms: int | None = None) -> AppendInfo:
        """Append a transaction marker (a control record; Kafka's WriteTxnMarkers on the partition leader):
        ``control`` ends ``producer_id``'s open transaction here. A commit makes its records visible to
        read_committed readers and the Delta table; an abort hides them for good. The last stable offset
        moves past the transaction (to the next open one, or the high watermark).

        Args:
            control: ``"commit"`` or ``"abort"``.
            producer_id, producer_epoch: the transaction's producer (the epoch as the coordinator has it).
            coordinator_epoch: the coordinator's epoch, stored in the marker's value (Kafka's encoding).
            leader_epoch: epoch of the leader appending. Default: 0.
            now_ms: the marker's timestamp, ms since the epoch. Default: the wall clock.

        Returns:
            :class:`~lakelog.log_tables.log_writer.AppendInfo` of the one record.

        Raises:
            TransactionsNeedTailError: the log has no segment tail. LogClosedError, FencedLeaderEpochError,
            CommitFailedError: as :meth:`PartitionLog.append <lakelog.log_tables.partition_log.PartitionLog.append>`.
        """
        now_ms = int(self._clock.time() * 1000) if now_ms is None else now_ms
        producers = (pa.array([producer_id], pa.int64()), pa.array([producer_epoch], pa.int16()),
                     pa.array([-1], pa.int32()))  # Kafka's control batches carry no sequence
        return self._append(control_batch(control=control, coordinator_epoch=coordinator_epoch, now_ms=now_ms),
                            leader_epoch=leader_epoch, now_ms=now_ms, producer_columns=producers,
                            attributes=pa.array([TRANSACTIONAL_BIT | CONTROL_BIT], pa.int8()))
