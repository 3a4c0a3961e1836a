"""Transactions in the segment tail: open transactions, the last stable offset, aborted transactions.

Kafka keeps, per partition, each producer's open transaction (``ProducerStateManager.ongoingTxns``: the
first offset of a transactional batch after its producer's last marker), the aborted transactions
(``TransactionIndex``, the ``.txnindex`` files: producer id, first offset, the abort marker's offset)
and from them the *last stable offset* (LSO): the first offset of a still-open transaction, or the high
watermark when none is open (KIP-98). lakelog derives the same from the rows of the segment tail, whose
:data:`~lakelog.log_tables.schema.ATTRIBUTES` column marks transactional records and control records
(commit and abort markers, :func:`control_batch`). Only the tail is needed: the flusher commits to Delta
only below the LSO and drops control and aborted records (:meth:`TransactionView.keep_mask`), so the table
holds decided, committed records alone, and every open or aborted transaction lies in the tail.

A control record (Kafka's ``EndTransactionMarker``): ``key`` = version int16 0 + type int16 (0 abort,
1 commit), ``value`` = version int16 0 + coordinator epoch int32 (big-endian, Kafka's encoding),
``sequence`` -1 (Kafka's control batches have no sequence), attributes transactional + control.

The index is folded in by every append (leader and follower alike) and rebuilt from the tail on recovery
and after a truncation. :class:`TransactionView` is an immutable snapshot for readers.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log_tables.schema import ATTRIBUTES, CONTROL_BIT, TRANSACTIONAL_BIT

__all__ = ["AbortedTransaction", "ControlType", "IsolationLevel", "TransactionIndex", "TransactionView",
           "control_batch", "control_type"]

#: Kafka's ``isolation.level`` of a consumer: ``read_uncommitted`` (the default) sees every record below
#: the high watermark; ``read_committed`` only records below the last stable offset, and no aborted one.
IsolationLevel = Literal["read_uncommitted", "read_committed"]
#: A transaction marker's type (Kafka's ``ControlRecordType`` ABORT = 0, COMMIT = 1).
ControlType = Literal["abort", "commit"]

_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
_TYPES: dict[str, int] = {"abort": 0, "commit": 1}
_NAMES = {v: k for k, v in _TYPES.items()}


def control_batch(*, control: ControlType, coordinator_epoch: int, now_ms: int) -> pa.Table:
    """The one-row produce batch of a transaction marker (key and value in Kafka's encoding).

    Args:
        control: ``"commit"`` or ``"abort"``.
        coordinator_epoch: the transaction coordinator's epoch (the leader epoch of its
            ``__transaction_state`` partition), int32.
        now_ms: the marker's timestamp, ms since the epoch.
    """
    return pa.table({
        "key": pa.array([_CONTROL_KEY.pack(0, _TYPES[control])], pa.binary()),
        "value": pa.array([_MARKER_VALUE.pack(0, coordinator_epoch)], pa.binary()),
        "timestamp": pa.array([now_ms], pa.int64()),
    })


def control_type(key: bytes) -> ControlType:
    """The type of a control record from its ``key``.

    Raises:
        ValueError: not a control record key of version 0.
    """
    if len(key) < _CONTROL_KEY.size:
        raise ValueError(f"a control record key has {_CONTROL_KEY.size} bytes, not {len(key)}")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version != 0 or kind not in _NAMES:
        raise ValueError(f"unknown control record key version {version} type {kind}")
    return _NAMES[kind]  # type: ignore[return-value]


class AbortedTransaction(NamedTuple):
    """An aborted transaction of one producer: its records are that producer's transactional records with
    ``first_offset <= offset <= last_offset``; ``last_offset`` is the abort marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class TransactionView:
    """The transactions of a log at one moment, for a read (immutable).

    Attributes:
        first_unstable_offset: the first offset of the oldest open transaction, or None.
        aborted: aborted transactions whose abort marker is in the tail, by marker offset.
        control_offsets: offsets of the control records in the tail, ascending.
    """

    first_unstable_offset: int | None = None
    aborted: tuple[AbortedTransaction, ...] = ()
    control_offsets: tuple[int, ...] = field(default=())

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's LSO: the first offset of an open transaction, at most the high watermark."""
        first = self.first_unstable_offset
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTransaction]:
        """The aborted transactions with a record that may lie in ``[start, end)``."""
        i = bisect.bisect_left([a.last_offset for a in self.aborted], start)
        return [a for a in self.aborted[i:] if a.first_offset < end]

    def filters(self, start: int, end: int, *, isolation_level: IsolationLevel, control_records: bool) -> bool:
        """True when a read of ``[start, end)`` must drop rows: a control record in it (unless
        ``control_records``), or, read_committed, an aborted transaction's records."""
        if not control_records:
            i = bisect.bisect_left(self.control_offsets, start)
            if i < len(self.control_offsets) and self.control_offsets[i] < end:
                return True
        return isolation_level == "read_committed" and bool(self.aborted_between(start, end))

    def keep_mask(self, rows: pa.Table, *, isolation_level: IsolationLevel, control_records: bool) -> np.ndarray:
        """Which ``rows`` (with ``offset``, ``producer_id`` and :data:`ATTRIBUTES`) a read returns: a bool
        array, False for control records (unless ``control_records``) and, read_committed, for the
        records of aborted transactions. Vectorised: one pass a column and an aborted transaction."""
        attributes = _numpy(rows[ATTRIBUTES])
        keep = np.ones(len(attributes), dtype=bool) if control_records else (attributes & CONTROL_BIT) == 0
        if isolation_level == "read_committed" and rows.num_rows:
            offsets = _numpy(rows["offset"])
            aborted = self.aborted_between(int(offsets[0]), int(offsets[-1]) + 1)
            if aborted:
                producers = _numpy(pc.fill_null(rows["producer_id"], -1))
                transactional = (attributes & TRANSACTIONAL_BIT) != 0
                for a in aborted:
                    keep &= ~(transactional & (producers == a.producer_id)
                              & (offsets >= a.first_offset) & (offsets <= a.last_offset))
        return keep


class TransactionIndex:
    """The open and aborted transactions of a log's tail (see the module docstring). Not thread-safe: the
    log's state lock guards it; :meth:`view` hands readers an immutable snapshot."""

    def __init__(self) -> None:
        #: producer id -> first offset of its open transaction
        self.ongoing: dict[int, int] = {}
        self._aborted: tuple[AbortedTransaction, ...] = ()
        self._control_offsets: tuple[int, ...] = ()
        self._view = TransactionView()

    @classmethod
    def from_batches(cls, batches: list[pa.Table | pa.RecordBatch]) -> "TransactionIndex":
        """The index of a tail read back (recovery), its batches in offset order."""
        index = cls()
        for batch in batches:
            index.fold(batch)
        return index

    def view(self) -> TransactionView:
        """The current snapshot."""
        return self._view

    def fold(self, batch: pa.Table | pa.RecordBatch) -> None:
        """Take in appended rows (tail schema, in offset order). A batch without a transactional record costs
        one vectorised test of its attributes."""
        if ATTRIBUTES not in batch.schema.names or batch.num_rows == 0:
            return
        attributes = _numpy(batch[ATTRIBUTES])
        rows = np.flatnonzero(attributes & TRANSACTIONAL_BIT)
        if len(rows) == 0:
            return
        offsets = _numpy(batch["offset"])[rows]
        producers = _numpy(pc.fill_null(batch["producer_id"], -1))[rows]
        control = (attributes[rows] & CONTROL_BIT) != 0
        # a request's records are one run of a producer: its first offset is all an open transaction needs
        starts = np.flatnonzero(np.concatenate(([True], (producers[1:] != producers[:-1]) | control[1:] | control[:-1])))
        aborted, controls = list(self._aborted), list(self._control_offsets)
        for i in starts.tolist():
            producer_id, offset = int(producers[i]), int(offsets[i])
            if not control[i]:
                self.ongoing.setdefault(producer_id, offset)
                continue
            controls.append(offset)
            first = self.ongoing.pop(producer_id, None)
            if first is not None and control_type(batch["key"][int(rows[i])].as_py() or b"") == "abort":
                aborted.append(AbortedTransaction(producer_id, first, offset))
        self._aborted, self._control_offsets = tuple(aborted), tuple(controls)
        self._publish()

    def release_below(self, offset: int) -> None:
        """Forget the control records and aborted transactions wholly below ``offset`` (the lake end offset:
        the Delta table holds neither)."""
        i = bisect.bisect_left(self._control_offsets, offset)
        j = bisect.bisect_left([a.last_offset for a in self._aborted], offset)
        if i or j:
            self._control_offsets, self._aborted = self._control_offsets[i:], self._aborted[j:]
            self._publish()

    def _publish(self) -> None:
        self._view = TransactionView(min(self.ongoing.values()) if self.ongoing else None, self._aborted,
                                     self._control_offsets)


def _numpy(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column.to_numpy(zero_copy_only=False)
