"""Produce batches: the columns a producer sends, normalised and checked before they reach a log.

A produce batch is an Arrow table with the columns of :data:`PRODUCE_SCHEMA`; any may be missing in
what a client sends (they become nulls). Checks here run on whole columns (Arrow compute), so a
rejected request is refused before anything is queued for a commit. :func:`to_log_batch` turns a
produce batch into the rows a log appends (offsets, final timestamps, leader epoch).

A follower's batches (the leader's replica fetch answers) keep the leader's offsets; where the leader's
log cleaner compacted the range they have gaps, and the answer says which offset range it covers
(:func:`with_fetched_range`, :func:`check_replicated`).
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
from lakelog.log_tables.zero_columns import nulls

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
            columns.append(nulls(n, field.type))  # not resident (zero_columns)
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


#: :func:`check_record_sizes` sizes this many records at a time.
SIZE_CHECK_ROWS = 65536


def check_record_sizes(batch: pa.Table, *, max_message_bytes: int, topic: str) -> None:
    """Refuse the whole batch if any record exceeds ``max_message_bytes``.

    Raises:
        RecordTooLargeError: naming the first offending record's index, its size and the limit.
    """
    if batch.num_rows == 0 or batch.nbytes + RECORD_OVERHEAD_BYTES <= max_message_bytes:
        return  # the whole batch's buffers bound any one record: no per-record sizes needed
    # :data:`SIZE_CHECK_ROWS` records at a time: the sizes' temporaries (~40 bytes a record) stay bounded
    for start in range(0, batch.num_rows, SIZE_CHECK_ROWS):
        if pc.max(record_sizes(batch.slice(start, SIZE_CHECK_ROWS))).as_py() > max_message_bytes:
            break
    else:
        return
    sizes = record_sizes(batch)
    too_large = pc.indices_nonzero(pc.greater(sizes, max_message_bytes))
    first = too_large[0].as_py()
    raise RecordTooLargeError(
        f"Record {first} of the request is {sizes[first].as_py()} bytes (key + value + headers + "
        f"{RECORD_OVERHEAD_BYTES} bytes of overhead), larger than max.message.bytes={max_message_bytes} "
        f"of topic '{topic}'; {len(too_large)} record(s) too large, nothing was written. Send smaller "
        f"records or raise the topic's max.message.bytes."
    )


def to_log_batch(records: pa.Table, *, base_offset: int, leader_epoch: int, now_ms: int,
                 timestamp_type: str = "CreateTime",
                 producer_columns: tuple[pa.Array, pa.Array, pa.Array] | None = None) -> pa.Table:
    """A produce batch as log rows (:data:`~lakelog.log_tables.schema.LOG_SCHEMA`), offsets from ``base_offset``.

    Args:
        records: a produce batch (normalised here).
        base_offset: offset of the first record; the rest follow densely.
        leader_epoch: stored on every record.
        now_ms: broker time, ms since the epoch: the timestamp of records without one (CreateTime)
            or of every record (``timestamp_type`` LogAppendTime).
        timestamp_type: the topic's ``message.timestamp.type``.
        producer_columns: ``producer_id`` (int64), ``producer_epoch`` (int16), ``sequence`` (int32), one
            value a record (null where a request was not idempotent). Default: all null.

    Raises:
        ValueError: as :func:`normalize_produce_batch`.
        InvalidTimestampError: a timestamp outside :data:`TIMESTAMP_RANGE` (nothing is written).
        UnreadableBatchError: the rows would not have the log's exact types (never acknowledged).
    """
    records = normalize_produce_batch(records)
    n = records.num_rows
    given = records["timestamp"]
    if timestamp_type == "CreateTime" and given.null_count < n:
        check_timestamps(given)
        timestamps = pc.multiply_checked(pc.fill_null(given, pa.scalar(now_ms, pa.int64())), 1000).cast(TIMESTAMP_TYPE)
    else:  # every record takes the broker time: one array, no temporaries
        timestamps = pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(np.full(n, now_ms * 1000, np.int64))])
    # the producer columns of a request that is not idempotent are all null: no resident memory for them
    batch = pa.Table.from_arrays([
        pa.array(np.arange(base_offset, base_offset + n, dtype=np.int64)),
        timestamps,
        records["key"],
        records["value"],
        records["headers"],
        pa.array(np.full(n, leader_epoch, dtype=np.int32)),
        *(producer_columns or (nulls(n, pa.int64()), nulls(n, pa.int16()), nulls(n, pa.int32()))),
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

    The rule for a batch that does not say which offset range it covers (:func:`fetched_range` is None);
    :func:`check_replicated` applies it.

    Raises:
        NonContiguousOffsetsError: they do not continue the log exactly.
    """
    n = len(offsets)
    if int(offsets[0]) != log_end_offset or int(offsets[-1]) != log_end_offset + n - 1 or (
            n > 1 and not (np.diff(offsets) == 1).all()):
        raise NonContiguousOffsetsError(
            f"Replicated batch for {topic}-{partition} holds offsets {int(offsets[0])}.."
            f"{int(offsets[-1])} ({n} records) but the log end offset is {log_end_offset}.")


# -- replicated batches with offset gaps (a range the leader's log cleaner compacted) ----------------------

#: Schema metadata of a replica fetch answer: the first offset of the range it covers (the fetch offset),
#: as Kafka's ``RecordBatch.baseOffset``.
BASE_OFFSET_KEY = b"lakelog.base_offset"
#: Schema metadata of a replica fetch answer: one past the range it covers, as Kafka's
#: ``RecordBatch.nextOffset()`` (``lastOffset + 1``): the follower's log end offset once it appended it.
NEXT_OFFSET_KEY = b"lakelog.next_offset"


def with_fetched_range(rows: pa.Table, base_offset: int, end_offset: int) -> pa.Table:
    """The leader's replica fetch answer: ``rows`` read from ``base_offset`` (below ``end_offset``)
    labelled with the offset range they cover (schema metadata :data:`BASE_OFFSET_KEY` and
    :data:`NEXT_OFFSET_KEY`, which travel in the Arrow IPC stream as Kafka's batch header fields do).

    The range is ``[base_offset, last row + 1)``, or ``[base_offset, end_offset)`` when there are no rows:
    a read returns at least one record of its range when it holds any (KIP-74), so an empty answer says
    the whole range was compacted away. Offsets of the range without a row are gaps the leader's log
    cleaner left (its Delta table; its segment tail is dense). A gap at the end of an answer that was
    cut by the byte limit shows in the next answer, which starts there.

    Args:
        rows: what :meth:`PartitionLog.read` returned for ``[base_offset, end_offset)`` (log schema).
        base_offset: the fetch offset (the follower's log end offset).
        end_offset: the exclusive end of the read (the leader's log end offset when it read).

    Returns:
        ``rows`` with the metadata (zero-copy), or ``rows`` as they are when the range is empty.
    """
    next_offset = rows["offset"][-1].as_py() + 1 if rows.num_rows else end_offset
    if next_offset <= base_offset:
        return rows
    return rows.replace_schema_metadata({**(rows.schema.metadata or {}), BASE_OFFSET_KEY: str(base_offset).encode(),
                                         NEXT_OFFSET_KEY: str(next_offset).encode()})


def fetched_range(batch: pa.Table) -> tuple[int, int] | None:
    """``(base offset, next offset)`` a replica fetch answer covers (:func:`with_fetched_range`), or None
    when ``batch`` does not say (a batch that must be dense, :func:`check_continues`)."""
    meta = batch.schema.metadata or {}
    if BASE_OFFSET_KEY not in meta or NEXT_OFFSET_KEY not in meta:
        return None
    return int(meta[BASE_OFFSET_KEY]), int(meta[NEXT_OFFSET_KEY])


def has_gaps(offsets: np.ndarray, fetched: tuple[int, int] | None) -> bool:
    """True when a replicated batch (``offsets``: int64, strictly increasing) covering ``fetched``
    (:func:`fetched_range`) has offsets without a record: before its first row, between rows or after its
    last row; an empty batch covering a non-empty range is all gap. O(1): first, last and count only."""
    if fetched is None:
        return False
    base, next_offset = fetched
    n = len(offsets)
    if n == 0:
        return next_offset > base
    first, last = int(offsets[0]), int(offsets[-1])
    return first != base or last + 1 != next_offset or last - first + 1 != n


def check_replicated(offsets: np.ndarray, log_end_offset: int, fetched: tuple[int, int] | None, *, topic: str,
                     partition: int) -> int:
    """Check that a replicated batch continues the log; return the log end offset after it.

    A batch covering ``fetched = (base, next)`` (:func:`fetched_range`, what the leader's answer says)
    must start at the log end offset (``base == log_end_offset``) and hold strictly increasing offsets in
    ``[base, next)``; the offsets in between without a row are gaps (Kafka's follower takes compacted
    batches as they are, ``UnifiedLog.appendAsFollower``: offsets kept, the log end offset becomes the
    batch's ``lastOffset + 1``). A batch without a range must be dense from the log end offset
    (:func:`check_continues`).

    Args:
        offsets: the batch's offsets (int64), possibly none when ``fetched`` is a non-empty range.
        log_end_offset: the replica's log end offset.
        fetched: the range, or None.

    Returns:
        The next offset: ``fetched``'s end, or ``log_end_offset + len(offsets)``.

    Raises:
        NonContiguousOffsetsError: the batch does not continue the log (the follower truncates and fetches
            again), or its offsets are not strictly increasing inside its range.
    """
    n = len(offsets)
    if fetched is None:
        check_continues(offsets, log_end_offset, topic=topic, partition=partition)
        return log_end_offset + n
    base, next_offset = fetched
    if base != log_end_offset or next_offset < base + n or (n and (
            int(offsets[0]) < base or int(offsets[-1]) >= next_offset
            or (n > 1 and not (np.diff(offsets) > 0).all()))):
        held = f"offsets {int(offsets[0])}..{int(offsets[-1])}" if n else "no offsets"
        raise NonContiguousOffsetsError(
            f"Replicated batch for {topic}-{partition} covers offsets {base}..{next_offset - 1} and holds {held} "
            f"({n} records, strictly increasing inside the range required) but the log end offset is "
            f"{log_end_offset}.")
    return next_offset


def dense_tail_start(offsets: np.ndarray, next_offset: int) -> int:
    """The row where the dense run ending a replicated batch begins: ``offsets[k:]`` is
    ``offsets[k], +1, ..., next_offset - 1``. ``len(offsets)`` when the batch ends in a gap (or is
    empty); 0 when it is dense throughout. Vectorised (one diff)."""
    n = len(offsets)
    if n == 0 or int(offsets[-1]) + 1 != next_offset:
        return n
    breaks = np.flatnonzero(np.diff(offsets) != 1)
    return int(breaks[-1]) + 1 if len(breaks) else 0
