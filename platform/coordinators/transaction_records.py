"""The records of the internal topic ``__transaction_state``: their keys and values, and which partition
holds a transactional id.

Kafka keeps each transactional id's :class:`~lakelog.coordinators.transaction_state.TransactionMetadata` as a
record of its compacted internal topic ``__transaction_state`` (``kafka.coordinator.transaction.TransactionLog``,
KIP-98); lakelog does the same, with JSON keys and values (the topic's Delta table is then readable in SQL
with ``from_json``), as ``__consumer_offsets`` does (:mod:`lakelog.consumer_groups.offset_records`):

- key ``{"type": "transaction", "transactional_id": id}``;
- value ``{"producer_id": pid, "producer_epoch": e, "last_producer_epoch": le, "transaction_timeout_ms": t,
  "state": "Ongoing", "partitions": [{"topic": t, "partition": p}, ...], "txn_start_timestamp_ms": ts,
  "txn_last_update_timestamp_ms": ts}`` (partitions sorted; ``state`` one of Kafka's state names).

A null value is a tombstone: the transactional id expired (``transactional.id.expiration.ms``; Kafka's
state Dead) and compaction drops it later. Keys and values are encoded deterministically (fixed field
order, no spaces), so every record of one id has the same key bytes and the log cleaner keeps only the
newest. All records of an id go to one partition, :func:`partition_for` (Kafka's rule), whose leader is
the id's transaction coordinator.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

import pyarrow as pa

from lakelog.coordinators.transaction_state import TransactionMetadata, TransactionState
from lakelog.protocol.partitioner import coordinator_partition

log = logging.getLogger(__name__)

#: The internal topic's name (Kafka's ``Topic.TRANSACTION_STATE_TOPIC_NAME``).
TRANSACTION_STATE_TOPIC = "__transaction_state"

#: The key's ``type`` of a transactional id's record.
RECORD_TYPE = "transaction"


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``:
    ``Utils.abs(transactionalId.hashCode) % num_partitions`` (Kafka's
    ``TransactionStateManager.partitionFor``, ``num_partitions`` being
    ``transaction.state.log.num.partitions``), so an id lands on the same partition number as in Kafka.

    Raises:
        ValueError: ``num_partitions`` is not in ``[1, 2**31 - 1]``.
    """
    return coordinator_partition(transactional_id, num_partitions)


def transaction_key(transactional_id: str) -> bytes:
    """The key of a transactional id's record (deterministic bytes), e.g.
    ``b'{"type":"transaction","transactional_id":"t1"}'``."""
    return _dump({"type": RECORD_TYPE, "transactional_id": transactional_id})


def transaction_value(metadata: TransactionMetadata) -> bytes:
    """The value of ``metadata``'s record: its fields in a fixed order, the partitions sorted."""
    return _dump({
        "producer_id": metadata.producer_id,
        "producer_epoch": metadata.producer_epoch,
        "last_producer_epoch": metadata.last_producer_epoch,
        "transaction_timeout_ms": metadata.transaction_timeout_ms,
        "state": metadata.state.value,
        "partitions": [{"topic": t, "partition": p} for t, p in sorted(metadata.partitions)],
        "txn_start_timestamp_ms": metadata.txn_start_timestamp_ms,
        "txn_last_update_timestamp_ms": metadata.txn_last_update_timestamp_ms,
    })


def record_of(metadata: TransactionMetadata) -> tuple[bytes, bytes]:
    """``(key, value)`` of ``metadata``'s record (Kafka's ``TransactionLog.keyToBytes`` / ``valueToBytes``)."""
    return transaction_key(metadata.transactional_id), transaction_value(metadata)


def tombstone_of(transactional_id: str) -> tuple[bytes, None]:
    """``(key, None)``: the tombstone that forgets an expired transactional id (Kafka writes a null value
    when a transactional id goes Dead)."""
    return transaction_key(transactional_id), None


def records_table(metadatas: Iterable[TransactionMetadata] = (), *, tombstones: Iterable[str] = ()) -> pa.Table:
    """The records to append to ``__transaction_state`` (``key``, ``value`` binary; value null for a
    tombstone): one per metadata, in order, then one tombstone per transactional id in ``tombstones``.
    Every id should map to one partition (:func:`partition_for`) for the append to be atomic."""
    rows = [record_of(m) for m in metadatas] + [tombstone_of(t) for t in tombstones]
    return pa.table({"key": pa.array([k for k, _ in rows], pa.binary()),
                     "value": pa.array([v for _, v in rows], pa.binary())})


def _int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} is not an integer: {value!r}")
    return value


def metadata_of(transactional_id: str, value: bytes) -> TransactionMetadata:
    """The :class:`TransactionMetadata` of a record's value (:func:`transaction_value`'s inverse).

    Raises:
        ValueError (json.JSONDecodeError included), KeyError, TypeError: the value is not such a record.
    """
    v = json.loads(value)
    partitions = frozenset((p["topic"], _int(p["partition"], "partition")) for p in v["partitions"])
    if any(not isinstance(t, str) for t, _ in partitions):
        raise ValueError("a partition's topic is not a string")
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=_int(v["producer_id"], "producer_id"),
        producer_epoch=_int(v["producer_epoch"], "producer_epoch"),
        transaction_timeout_ms=_int(v["transaction_timeout_ms"], "transaction_timeout_ms"),
        state=TransactionState(v["state"]),
        partitions=partitions,
        txn_start_timestamp_ms=_int(v["txn_start_timestamp_ms"], "txn_start_timestamp_ms"),
        txn_last_update_timestamp_ms=_int(v["txn_last_update_timestamp_ms"], "txn_last_update_timestamp_ms"),
        last_producer_epoch=_int(v.get("last_producer_epoch", -1), "last_producer_epoch"),
    )


def _pylist(values: Iterable[bytes | None] | pa.Array | pa.ChunkedArray) -> list:
    return values.to_pylist() if isinstance(values, (pa.Array, pa.ChunkedArray)) else list(values)


def apply_records(state: dict[str, TransactionMetadata], keys: Iterable[bytes | None] | pa.Array | pa.ChunkedArray,
                  values: Iterable[bytes | None] | pa.Array | pa.ChunkedArray) -> int:
    """Fold records read back from ``__transaction_state`` (in offset order) into ``state``
    (transactional id -> :class:`TransactionMetadata`), as Kafka's
    ``TransactionStateManager.loadTransactionMetadata``: a later record of an id replaces an earlier one; a
    tombstone (null value) or a value in state Dead removes the id. A record that is not a transaction
    record (another key type, garbled JSON, a missing field, the never-written PrepareEpochFence state) is
    skipped with a warning.

    Args:
        state: updated in place.
        keys, values: the records' keys and values (bytes or None), as sequences or Arrow arrays of equal
            length.

    Returns:
        The number of records applied (skipped ones not counted).
    """
    keys, values = _pylist(keys), _pylist(values)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    applied = 0
    for key, value in zip(keys, values):
        try:
            k = json.loads(key)
            if k["type"] != RECORD_TYPE:
                raise ValueError(f"unknown record type {k['type']!r}")
            transactional_id = k["transactional_id"]
            if not isinstance(transactional_id, str) or not transactional_id:
                raise ValueError(f"invalid transactional id {transactional_id!r}")
            if value is None:
                state.pop(transactional_id, None)
            else:
                metadata = metadata_of(transactional_id, value)
                if metadata.state == TransactionState.PREPARE_EPOCH_FENCE:
                    raise ValueError("state PrepareEpochFence is never written")
                if metadata.state == TransactionState.DEAD:
                    state.pop(transactional_id, None)
                else:
                    state[transactional_id] = metadata
            applied += 1
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            log.warning("%s: a record that is not a transaction record was skipped (%s): key %r",
                        TRANSACTION_STATE_TOPIC, e, key[:200] if key else key)
    return applied
