"""A fetch's rows as Kafka's RecordBatches with their transactions: transactional batches carry the
producer's id, epoch and transactional attribute, and the transaction markers are control batches (Kafka's
``EndTransactionMarker``: the control attribute, key version 0 + type, value version 0 + coordinator epoch),
as Kafka's log holds them (KIP-98). A consumer moves past a control batch, so a transaction's commit
marker at the end of the log leaves no lag of 1; a read_committed consumer that meets an abort marker
forgets that producer's aborted transaction.

Rows outside any transaction (``attributes`` 0) are one plain batch as before
(:func:`~lakelog.kafka.records.build_batch`); the others are cut into runs of one producer, epoch and
attribute, each its own batch.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

from lakelog.kafka.records import build_batch
from lakelog.log_tables.schema import ATTRIBUTES, CONTROL_BIT, FETCH_COLUMNS, TRANSACTIONAL_BIT

__all__ = ["TRANSACTION_FETCH_COLUMNS", "build_fetch_batches"]

#: The columns a Kafka fetch reads: the records' and those of their producer and attributes.
TRANSACTION_FETCH_COLUMNS = [*FETCH_COLUMNS, "producer_id", "producer_epoch", "sequence", ATTRIBUTES]

# RecordBatch v2 header: attributes int16 at 21 (the CRC covers from there), producerId int64 at 43,
# producerEpoch int16 at 51, baseSequence int32 at 53; the CRC (uint32) at 17.
_CRC_AT, _ATTRIBUTES_AT, _PRODUCER_AT = 17, 21, 43
_PRODUCER = struct.Struct(">qhi")


def _numpy(column: pa.ChunkedArray, fill: int) -> np.ndarray:
    return pc.fill_null(column, fill).to_numpy()


def _with_producer(batch: bytes, *, attributes: int, producer_id: int, producer_epoch: int,
                   base_sequence: int) -> bytes:
    """``batch`` (one plain RecordBatch v2) with the transaction's attributes and producer fields, its CRC
    computed again."""
    out = bytearray(batch)
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes)
    _PRODUCER.pack_into(out, _PRODUCER_AT, producer_id, producer_epoch, base_sequence)
    struct.pack_into(">I", out, _CRC_AT, crc32c(bytes(out[_ATTRIBUTES_AT:])))
    return bytes(out)


def build_fetch_batches(rows: pa.Table) -> bytes:
    """The RecordBatches of ``rows`` (:data:`TRANSACTION_FETCH_COLUMNS`, offset order), concatenated; empty
    bytes for no rows. Rows without an ``attributes`` column, or all 0, are one plain batch."""
    if rows.num_rows == 0:
        return b""
    if ATTRIBUTES not in rows.column_names:
        return build_batch(rows)
    attributes = _numpy(rows[ATTRIBUTES], 0).astype(np.int16) & (TRANSACTIONAL_BIT | CONTROL_BIT)
    if not attributes.any():
        return build_batch(rows)
    producers = _numpy(rows["producer_id"], -1)
    epochs = _numpy(rows["producer_epoch"], -1)
    sequences = _numpy(rows["sequence"], -1)
    cuts = np.flatnonzero((attributes[1:] != attributes[:-1]) | (producers[1:] != producers[:-1])
                          | (epochs[1:] != epochs[:-1])) + 1
    bounds = [0, *cuts.tolist(), rows.num_rows]
    out = []
    for start, end in zip(bounds, bounds[1:]):
        batch = build_batch(rows.slice(start, end - start))
        attribute = int(attributes[start])
        if attribute:
            batch = _with_producer(batch, attributes=attribute, producer_id=int(producers[start]),
                                   producer_epoch=int(epochs[start]),
                                   base_sequence=-1 if attribute & CONTROL_BIT else int(sequences[start]))
        out.append(batch)
    return b"".join(out)
