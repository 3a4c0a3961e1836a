"""Produce batches: the columns a producer sends, normalised and checked before they reach a log.

A produce batch is an Arrow table with the columns of :data:`PRODUCE_SCHEMA`; any may be missing in
what a client sends (they become nulls). Checks here run on whole columns (Arrow compute), so a
rejected request is refused before anything is queued for a commit. :func:`to_log_batch` turns a
produce batch into the rows a log appends (offsets, final timestamps, leader epoch).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log_tables.errors import (
    InvalidTimestampError,
    NonContiguousOffsetsError,
    RecordTooLargeError,
    UnreadableBatchError,
)
from lakelog.log_tables.schema import HEADERS_TYPE, LOG_SCHEMA, TIMESTAMP_TYPE

PRODUCE_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", HEADERS_TYPE),
    pa.field("timestamp", pa.int64()),  # ms since the epoch; null = broker time
])

#: Fixed per-record overhead counted against ``max.message.bytes`` (Kafka's record batch v2 header
#: is 61 bytes for one record; we count the same so limits carry over from Kafka).
RECORD_OVERHEAD_BYTES = 61

#: Kafka's "no timestamp" (``RecordBatch.NO_TIMESTAMP``); Kafka refuses every other negative timestamp.
NO_TIMESTAMP = -1
#: The largest timestamp (ms) the log can hold: its ``timestamp[us]`` column is int64 microseconds.
MAX_TIMESTAMP_MS = (2**63 - 1) // 1000  # 9223372036854775
#: The range of a timestamp in a produce request, as said in error messages.
TIMESTAMP_RANGE = f"-1 (none) or 0 to {MAX_TIMESTAMP_MS} ms since the epoch"


def normalize_produce_batch(records: pa.Table | pa.RecordBatch) -> pa.Table:
    """Return ``records`` with exactly the columns of :data:`PRODUCE_SCHEMA`, in order.

    Missing columns become nulls; ``timestamp`` may be int64 ms or any Arrow timestamp; string keys
    and values are taken as their UTF-8 bytes. Extra columns are refused.

    Raises:
        ValueError: an unknown column or a column that cannot be cast (the message names it).
    """
    if isinstance(records, pa.RecordBatch):
        records = pa.Table.from_batches([records])
    if records.schema.equals(PRODUCE_SCHEMA):
        return records
    unknown = set(records.column_names) - set(PRODUCE_SCHEMA.names)
    if unknown:
        raise ValueError(f"unknown column(s) {sorted(unknown)}; a produce batch has {PRODUCE_SCHEMA.names}")
    n = records.num_rows
    columns = []
    for field in PRODUCE_SCHEMA:
        if field.name not in records.column_names:
            columns.append(pa.nulls(n, field.type))
            continue
        col = records[field.name]
        if field.name == "timestamp" and pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
        try:
            columns.append(col.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ValueError(f"column '{field.name}' of type {col.type} cannot be read as {field.type}: {e}") from e
    return pa.Table.from_arrays(columns, schema=PRODUCE_SCHEMA)


def check_timestamps(timestamps: pa.Array | pa.ChunkedArray) -> None:
    """Refuse timestamps (int64 ms, nulls = broker time) the log cannot store and read back.

    Legal: null, -1 (Kafka's "none") and 0 to :data:`MAX_TIMESTAMP_MS`. One min/max pass over the column
    (a second one only to name the first bad record).

    Raises:
        InvalidTimestampError: naming the first offending record's index, its value and the range.
    """
    if len(timestamps) == timestamps.null_count:
        return
    bounds = pc.min_max(timestamps)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low >= NO_TIMESTAMP and high <= MAX_TIMESTAMP_MS:
        return
    bad = pc.or_(pc.and_(pc.less(timestamps, 0), pc.not_equal(timestamps, NO_TIMESTAMP)),
                 pc.greater(timestamps, MAX_TIMESTAMP_MS))
    where = pc.indices_nonzero(pc.fill_null(bad, False).combine_chunks() if isinstance(bad, pa.ChunkedArray)
                               else pc.fill_null(bad, False))
    first = where[0].as_py()
    raise InvalidTimestampError(
        f"Record {first} of the request has timestamp {timestamps[first].as_py()}, outside the legal range "
        f"{TIMESTAMP_RANGE} (Kafka's INVALID_TIMESTAMP); {len(where)} record(s) refused, nothing was written.")


def record_sizes(batch: pa.Table) -> pa.Array:
    """Bytes of each record as counted against ``max.message.bytes``: key + value + headers + overhead."""
    def lengths(col: pa.ChunkedArray) -> pa.ChunkedArray:
        return pc.fill_null(pc.binary_length(col), 0).cast(pa.int64())
    sizes = pc.add(lengths(batch["key"]), lengths(batch["value"]))
    headers = batch["headers"].combine_chunks() if isinstance(batch["headers"], pa.ChunkedArray) else batch["headers"]
    flat = pc.list_flatten(headers)
    if len(flat):
        per_header = pc.add(lengths(pc.struct_field(flat, "key")), lengths(pc.struct_field(flat, "value")))
        parents = pc.list_parent_indices(headers).to_numpy()
        header_bytes = np.bincount(parents, weights=per_header.to_numpy(), minlength=batch.num_rows)
        sizes = pc.add(sizes, pa.array(header_bytes.astype(np.int64)))
    return pc.add(sizes, RECORD_OVERHEAD_BYTES)


def check_record_sizes(batch: pa.Table, *, max_message_bytes: int, topic: str) -> None:
    """Refuse the whole batch if any record exceeds ``max_message_bytes``.

    Raises:
        RecordTooLargeError: naming the first offending record's index, its size and the limit.
    """
    if batch.num_rows == 0 or batch.nbytes + RECORD_OVERHEAD_BYTES <= max_message_bytes:
        return  # the whole batch's buffers bound any one record: no per-record sizes needed
    sizes = record_sizes(batch)
    if pc.max(sizes).as_py() <= max_message_bytes:
        return
    too_large = pc.indices_nonzero(pc.greater(sizes, max_message_bytes))
    first = too_large[0].as_py()
    raise RecordTooLargeError(
        f"Record {first} of the request is {sizes[first].as_py()} bytes (key + value + headers + "
        f"{RECORD_OVERHEAD_BYTES} bytes of overhead), larger than max.message.bytes={max_message_bytes} "
        f"of topic '{topic}'; {len(too_large)} record(s) too large, nothing was written. Send smaller "
        f"records or raise the topic's max.message.bytes."
    )


def to_log_batch(records: pa.Table, *, base_offset: int, leader_epoch: int, now_ms: int,
                 timestamp_type: str = "CreateTime") -> pa.Table:
    """A produce batch as log rows (:data:`~lakelog.log_tables.schema.LOG_SCHEMA`), offsets from ``base_offset``.

    Args:
        records: a produce batch (normalised here).
        base_offset: offset of the first record; the rest follow densely.
        leader_epoch: stored on every record.
        now_ms: broker time, ms since the epoch: the timestamp of records without one (CreateTime)
            or of every record (``timestamp_type`` LogAppendTime).
        timestamp_type: the topic's ``message.timestamp.type``.

    Raises:
        ValueError: as :func:`normalize_produce_batch`.
        InvalidTimestampError: a timestamp outside :data:`TIMESTAMP_RANGE` (nothing is written).
        UnreadableBatchError: the rows would not have the log's exact types (never acknowledged).
    """
    records = normalize_produce_batch(records)
    n = records.num_rows
    if timestamp_type == "CreateTime":
        check_timestamps(records["timestamp"])
        ts = pc.fill_null(records["timestamp"], pa.scalar(now_ms, pa.int64()))
    else:
        ts = pa.array(np.full(n, now_ms, dtype=np.int64))
    batch = pa.Table.from_arrays([
        pa.array(np.arange(base_offset, base_offset + n, dtype=np.int64)),
        pc.multiply_checked(ts, 1000).cast(TIMESTAMP_TYPE),
        records["key"],
        records["value"],
        records["headers"],
        pa.array(np.full(n, leader_epoch, dtype=np.int32)),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int16()),
        pa.nulls(n, pa.int32()),
    ], schema=LOG_SCHEMA)
    check_log_batch(batch)
    return batch


def check_log_batch(batch: pa.Table) -> None:
    """A record the log cannot read back is never acknowledged: ``batch`` must have exactly
    :data:`LOG_SCHEMA` and timestamps within :data:`TIMESTAMP_RANGE` (as microseconds). Columnar: one
    min/max pass over the column.

    Raises:
        UnreadableBatchError: naming what is wrong.
    """
    if not batch.schema.equals(LOG_SCHEMA):
        raise UnreadableBatchError(f"Log rows have schema {batch.schema}, not the log's {LOG_SCHEMA}; nothing was written.")
    if batch.num_rows == 0:
        return
    us = batch["timestamp"].cast(pa.int64())
    bounds = pc.min_max(us)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or low < NO_TIMESTAMP * 1000 or high > MAX_TIMESTAMP_MS * 1000 or (
            low < 0 and pc.any(pc.and_(pc.less(us, 0), pc.not_equal(us, NO_TIMESTAMP * 1000))).as_py()):
        raise UnreadableBatchError(
            f"Log rows hold timestamps {low}..{high} us, outside {TIMESTAMP_RANGE}; nothing was written.")


def check_continues(offsets: np.ndarray, log_end_offset: int, *, topic: str, partition: int) -> None:
    """A replicated batch's ``offsets`` (int64, at least one) must be ``log_end_offset``, +1, +2, ...

    Raises:
        NonContiguousOffsetsError: they do not continue the log exactly.
    """
    n = len(offsets)
    if int(offsets[0]) != log_end_offset or int(offsets[-1]) != log_end_offset + n - 1 or (
            n > 1 and not (np.diff(offsets) == 1).all()):
        raise NonContiguousOffsetsError(
            f"Replicated batch for {topic}-{partition} holds offsets {int(offsets[0])}.."
            f"{int(offsets[-1])} ({n} records) but the log end offset is {log_end_offset}.")
