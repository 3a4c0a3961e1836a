"""Kafka's log cleaner (``cleanup.policy=compact``) for a partition's Delta table.

Semantics follow Kafka's "Log Compaction" documentation and its cleaner (``kafka.log.LogCleaner`` /
``LogCleanerManager`` in apache/kafka, ``Cleaner.cleanSegments``, ``shouldRetainRecord``,
``LogCleanerManager.cleanableOffsets`` and ``maxCompactionDelay``):

- **What is kept.** The record with the highest offset of each key; every other record of that key in
  the cleaned range is dropped. Offsets never change (the table gets gaps), kept records stay in offset
  order. Records without a key are never produced to a compacted topic
  (:func:`check_keys_for_compaction`); a table that has some (the topic became compacted later) keeps
  them all, where Kafka's cleaner drops them (``stats.invalidMessage()``): lakelog never loses a record
  it once acknowledged to a configuration change.
- **The cleanable range** (Kafka's ``cleanableOffsets``): from the table's first offset up to the
  *cleanable end*, which is the first offset of the first data file whose ``max.timestamp`` statistic is
  newer than ``now - min.compaction.lag.ms`` (Kafka: the first segment whose ``largestTimestamp`` is
  within the lag; checked only when the lag is above 0, as Kafka), and never beyond the lake end offset
  (Kafka: never the active segment, never past the first unstable offset -- the table holds only records
  below the HW and LSO, so the lake end offset plays both parts). Records beyond it are not looked at:
  a newer record of a key there does not remove the older one yet (Kafka's offset map is built from the
  dirty section up to the same point).
- **The cleaned offset** (Kafka's cleaner checkpoint, ``cleaner-offset-checkpoint``): every offset below
  it has been cleaned once. It is recorded in the cleaning's Delta commit (:data:`CLEANED_OFFSET_KEY`) and
  read back with :func:`cleaned_offset`. Files at or after it are *dirty*.
- **When to clean** (Kafka's ``grabFilthiestCompactedLog``): when the dirty ratio (dirty bytes / all
  bytes of the cleanable range, :func:`dirty_ratio`) is above ``min.cleanable.dirty.ratio``, or when a
  dirty file of the cleanable range is older than ``max.compaction.lag.ms`` (KIP-354). Kafka measures a
  dirty segment's age from its first batch's timestamp; a Delta file's statistics here give only its
  newest timestamp, so a file counts once all of its records are older than the lag (later than Kafka by
  at most the time span of one file).
- **Tombstones** (a record whose value is null): the latest record of its key is dropped only once it
  lies below the previous cleaned offset (it has been through one cleaning, so a consumer had the chance
  to read it, as Kafka keeps tombstones of the dirty section) and its record timestamp is older than
  ``now - delete.retention.ms``. Kafka (since KIP-534) stamps a batch with a *delete horizon*
  (``cleaning time + delete.retention.ms``) the first time the cleaner sees its tombstones and drops them
  at a cleaning after that horizon (``batch.deleteHorizonMs``); lakelog does not rewrite batch headers, so
  the clock starts at the record's own timestamp instead. With ``CreateTime`` timestamps far in the past
  a tombstone may therefore go at the second cleaning that sees it, sooner than in Kafka; with
  ``LogAppendTime`` (or timely producers) the two agree within one cleaning interval.

A cleaning is one Delta commit (:func:`clean`): the replaceWhere of
:func:`~lakelog.log_tables.table_writes.commit_rewrite` over the offsets of the data files that lose a
record, with their kept rows, recording the lake end offset, the new cleaned offset and
``"lakelog.operation": "clean"``. Readers of older versions keep their files; VACUUM removes them later.

Memory: the decision reads only the ``offset``, ``key`` and ``timestamp`` columns and the null flags of
``value`` (one row group at a time); then the full rows of the changed files are read file by file and
only their kept rows stay. delta-rs keeps the order of rows only for a single contiguous input (a chunked
input is written out of order, measured with deltalake 1.6.6), so the kept rows of the rewritten range
are held in memory together, as :func:`~lakelog.log_tables.file_merges.merged_rows` does.

The caller (the log's writer) holds the table's write lock, passes the snapshot of the table's current
version and treats an exception as an ambiguous commit outcome (re-read the table).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.file_merges import MERGED_ROW_GROUP_ROWS, MERGE_TARGET_BYTES
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.errors import RecordWithoutKeyError
from lakelog.log_tables.schema import LOG_SCHEMA, timestamps_us
from lakelog.log_tables.typed_columns import log_columns
from lakelog.log_tables.table_writes import LAKE_END_OFFSET_KEY, OPERATION_KEY, commit_rewrite, newest_commits

log = logging.getLogger(__name__)

__all__ = ["CLEANED_FILE_TARGET_BYTES", "CLEANED_OFFSET_KEY", "CleanResult", "check_keys_for_compaction",
           "clean", "cleanable_end_offset", "cleaned_offset", "dirty_ratio", "kept_mask", "kept_rows",
           "needs_cleaning"]

#: commitInfo key of a cleaning commit: the cleaned offset after it (Kafka's cleaner checkpoint).
CLEANED_OFFSET_KEY = "lakelog.cleaned_offset"
#: Bytes per data file written by a cleaning (delta-rs splits larger outputs): four merge targets,
#: so cleaned files are left alone by the small-file merge (:mod:`~lakelog.log_tables.file_merges`).
CLEANED_FILE_TARGET_BYTES = 4 * MERGE_TARGET_BYTES

_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _us(ms: int) -> int:
    """Milliseconds (any Python int) as microseconds clamped to int64."""
    return min(max(ms * 1000, _INT64_MIN), _INT64_MAX)


@dataclass(frozen=True)
class CleanResult:
    """What one cleaning did.

    Attributes:
        first, last: the cleaned range, inclusive offsets: after the commit it holds only the latest
            record of each key (and the tombstones still kept).
        records_before: records of the cleaned range before the cleaning.
        records_after: records of the cleaned range after it.
        tombstones_dropped: of the records dropped, tombstones that were the latest of their key.
        files_replaced: data files the commit removed (0: no record was dropped, the commit only
            recorded the cleaned offset).
        new_cleaned_offset: the cleaned offset recorded (one past :attr:`last`).
        version: the table version of the cleaning commit.
    """

    first: int
    last: int
    records_before: int
    records_after: int
    tombstones_dropped: int
    files_replaced: int
    new_cleaned_offset: int
    version: int


def check_keys_for_compaction(batch: pa.Table, *, topic: str, partition: int) -> None:
    """Refuse a produce batch holding a record without a key (for a topic whose policy compacts).

    Kafka's ``LogValidator`` answers INVALID_RECORD, "Compacted topic cannot accept message without key".

    Args:
        batch: the records to append; a ``key`` column (binary, nullable).
        topic, partition: for the message.

    Raises:
        RecordWithoutKeyError: some ``key`` is null (422 / 42223); nothing may be written.
    """
    missing = batch["key"].null_count if "key" in batch.column_names else batch.num_rows
    if missing:
        raise RecordWithoutKeyError(topic=topic, partition=partition, count=missing)


def cleaned_offset(table: DeltaTable) -> int:
    """The cleaned offset recorded by the newest cleaning commit (:data:`CLEANED_OFFSET_KEY`), or 0.

    Like Kafka's ``maybeTruncateCheckpoint``, a truncation committed after that cleaning
    (``"lakelog.operation": "truncate"``) lowers it to the truncation offset. Walks the history the Delta
    log still holds, newest first (:func:`~lakelog.log_tables.table_writes.newest_commits`); once the log's cleanup has
    removed the cleaning commit the answer is 0, which is safe (the next cleaning reads the whole range,
    tombstones stay one cleaning longer) -- the caller keeps the value in memory between cleanings.
    """
    truncated_to: int | None = None
    for commit in newest_commits(table):
        value = commit.get(CLEANED_OFFSET_KEY)
        if value is not None:
            found = int(value)
            return found if truncated_to is None else min(found, truncated_to)
        if commit.get(OPERATION_KEY) == "truncate" and commit.get(LAKE_END_OFFSET_KEY) is not None:
            at = int(commit[LAKE_END_OFFSET_KEY])
            truncated_to = at if truncated_to is None else min(truncated_to, at)
    return 0


def cleanable_end_offset(files: Sequence[DataFile], *, lake_end_offset: int, now_ms: int,
                         min_compaction_lag_ms: int) -> int:
    """The first offset the cleaner may not touch (exclusive end of the cleanable range).

    The first offset of the first data file that ends at or beyond ``lake_end_offset`` or (when
    ``min_compaction_lag_ms > 0``) whose newest timestamp is after ``now_ms - min_compaction_lag_ms``
    or unknown; ``lake_end_offset`` when there is none (Kafka's ``firstUncleanableDirtyOffset``).

    Args:
        files: the table's data files in offset order (:attr:`FileSnapshot.files`); every file must have
            offset statistics (see :func:`clean`).
        lake_end_offset: the first offset not in the table.
        now_ms: the current time, milliseconds since the epoch.
        min_compaction_lag_ms: ``min.compaction.lag.ms``.

    Returns:
        An offset ``<= lake_end_offset``.
    """
    horizon_us = _us(now_ms - min_compaction_lag_ms)
    for f in files:
        if f.max_offset >= lake_end_offset:
            return min(f.min_offset, lake_end_offset)
        if min_compaction_lag_ms > 0 and (f.max_timestamp_us is None or f.max_timestamp_us > horizon_us):
            return f.min_offset
    return lake_end_offset


def _cleanable(files: Sequence[DataFile], cleanable_end: int) -> list[DataFile]:
    return [f for f in files if f.max_offset < cleanable_end]


def dirty_ratio(files: Sequence[DataFile], *, cleaned_offset: int, cleanable_end: int) -> float:
    """Kafka's ``cleanableRatio``: bytes of the dirty files of the cleanable range over all its bytes.

    Args:
        files: the table's data files in offset order, with offset statistics.
        cleaned_offset: the cleaned offset; a file is dirty when it holds an offset at or after it.
        cleanable_end: :func:`cleanable_end_offset`.

    Returns:
        A ratio in ``[0, 1]``; 0.0 when the cleanable range holds no file.
    """
    cleanable = _cleanable(files, cleanable_end)
    total = sum(f.size_bytes for f in cleanable)
    if total <= 0:
        return 0.0
    dirty = sum(f.size_bytes for f in cleanable if f.max_offset >= cleaned_offset)
    return dirty / total


def needs_cleaning(files: Sequence[DataFile], *, config: TopicConfig, cleaned_offset: int, lake_end_offset: int,
                   now_ms: int) -> bool:
    """True when the log cleaner should clean the table now (Kafka's ``grabFilthiestCompactedLog``).

    The topic's ``cleanup.policy`` has ``compact`` and the cleanable range has a dirty file, and either
    :func:`dirty_ratio` is above ``min.cleanable.dirty.ratio`` or a dirty file of the range is older than
    ``max.compaction.lag.ms`` (all of its records; see the module docstring).

    Args:
        files: the table's data files in offset order (:attr:`FileSnapshot.files`).
        config: the topic's config.
        cleaned_offset: the current cleaned offset (:func:`cleaned_offset`).
        lake_end_offset: the first offset not in the table.
        now_ms: the current time, milliseconds since the epoch.
    """
    if not config.compacts or any(not f.has_offset_stats for f in files):
        return False
    end = cleanable_end_offset(files, lake_end_offset=lake_end_offset, now_ms=now_ms,
                               min_compaction_lag_ms=config.min_compaction_lag_ms)
    dirty = [f for f in _cleanable(files, end) if f.max_offset >= cleaned_offset]
    if not dirty:
        return False
    if dirty_ratio(files, cleaned_offset=cleaned_offset, cleanable_end=end) > config.min_cleanable_dirty_ratio:
        return True
    overdue_us = _us(now_ms - config.max_compaction_lag_ms)
    return any(f.max_timestamp_us is not None and f.max_timestamp_us < overdue_us for f in dirty)


def kept_mask(offsets: pa.Array | pa.ChunkedArray, keys: pa.Array | pa.ChunkedArray,
              tombstone: pa.Array | pa.ChunkedArray, timestamps_us: pa.Array | pa.ChunkedArray, *,
              now_ms: int, delete_retention_ms: int, cleaned_offset: int) -> tuple[np.ndarray, int]:
    """Which records of a cleaned range the cleaner keeps (columnar: one hash group-by, one ``is_in``).

    Args:
        offsets: int64, unique, any order.
        keys: binary (null: a record without a key, always kept).
        tombstone: bool, true where the value is null.
        timestamps_us: int64 record timestamps, microseconds since the epoch.
        now_ms: the current time, milliseconds since the epoch.
        delete_retention_ms: ``delete.retention.ms``.
        cleaned_offset: the cleaned offset before this cleaning.

    Returns:
        ``(mask, tombstones_dropped)``: a numpy bool array aligned with the inputs, and how many latest
        records were dropped because they are expired tombstones.
    """
    offsets, keys, tombstone, timestamps_us = (
        pa.chunked_array([c]) if isinstance(c, pa.Array) else c for c in (offsets, keys, tombstone, timestamps_us))
    grouped = pa.table({"key": keys, "offset": offsets}).group_by("key", use_threads=True).aggregate(
        [("offset", "max")])
    latest = pc.is_in(offsets, value_set=grouped["offset_max"].combine_chunks())
    expired = pc.and_(pc.and_(tombstone, pc.less(timestamps_us, pa.scalar(_us(now_ms - delete_retention_ms)))),
                      pc.less(offsets, pa.scalar(cleaned_offset, pa.int64())))
    dropped_tombstones = pc.and_(latest, expired)
    keep = pc.or_(pc.and_not(latest, dropped_tombstones), pc.is_null(keys))
    mask = np.asarray(keep.to_numpy(), dtype=bool)
    return mask, int(pc.sum(pc.and_not(dropped_tombstones, pc.is_null(keys))).as_py() or 0)


def kept_rows(rows: pa.Table, *, now_ms: int, delete_retention_ms: int, cleaned_offset: int) -> pa.Table:
    """The rows of a cleaned range the cleaner keeps, in offset order (pure; :func:`kept_mask`).

    Args:
        rows: records with at least ``offset``, ``key``, ``value`` and ``timestamp`` (any order).
        now_ms, delete_retention_ms, cleaned_offset: as :func:`kept_mask`.

    Returns:
        The kept rows with the columns of ``rows``, sorted by offset.
    """
    mask, _ = kept_mask(rows["offset"], rows["key"], pc.is_null(rows["value"]), timestamps_us(rows["timestamp"]),
                        now_ms=now_ms, delete_retention_ms=delete_retention_ms, cleaned_offset=cleaned_offset)
    kept = rows.filter(pa.array(mask))
    return kept.take(pc.sort_indices(kept["offset"]))


def _decision_columns(snapshot: FileSnapshot, f: DataFile) -> tuple[pa.Table, pa.ChunkedArray]:
    """``offset``, ``key``, ``timestamp`` (int64 us) of ``f``, and its value null flags (bool).

    A row group whose Parquet statistics count no null value (or only nulls) is answered from them;
    other row groups' values are read one row group at a time, so no value is held longer than that.
    """
    pf = pq.ParquetFile(snapshot.path(f), filesystem=snapshot.fs)
    cols = pf.read(columns=["offset", "key", "timestamp"])
    cols = cols.set_column(2, "timestamp", timestamps_us(cols["timestamp"]))
    value_index = pf.schema_arrow.get_field_index("value")
    nulls: list[pa.Array] = []
    for i in range(pf.num_row_groups):
        group = pf.metadata.row_group(i)
        stats = group.column(value_index).statistics
        null_count = stats.null_count if stats is not None and stats.has_null_count else None
        if null_count in (0, group.num_rows):
            nulls.append(pa.array(np.full(group.num_rows, null_count != 0)))
        else:
            nulls.extend(pc.is_null(pf.read_row_group(i, columns=["value"])["value"]).chunks)
    return cols, pa.chunked_array(nulls, pa.bool_())


def _kept_file_rows(snapshot: FileSnapshot, f: DataFile, mask: np.ndarray) -> pa.Table:
    """The rows of ``f`` where ``mask`` (aligned with the file's row order) is true, in offset order.

    Only the row groups holding a kept row are read."""
    pf = pq.ParquetFile(snapshot.path(f), filesystem=snapshot.fs)
    sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    groups = [i for i in range(len(sizes)) if mask[starts[i]:starts[i + 1]].any()]
    if not groups:
        return LOG_SCHEMA.empty_table()
    rows = log_columns(pf.read_row_groups(groups))  # typed columns kept
    kept = rows.filter(pa.array(np.concatenate([mask[starts[i]:starts[i + 1]] for i in groups])))
    offsets = kept["offset"].to_numpy()
    if len(offsets) > 1 and not bool(np.all(offsets[1:] > offsets[:-1])):
        kept = kept.take(pc.sort_indices(kept["offset"]))
    return kept


def clean(table: DeltaTable, snapshot: FileSnapshot, *, config: TopicConfig, cleaned_offset: int,
          lake_end_offset: int, now_ms: int, name: str, force: bool = False,
          target_file_size: int = CLEANED_FILE_TARGET_BYTES) -> CleanResult | None:
    """Clean the cleanable range of the table: one Delta commit (see the module docstring).

    Call when :func:`needs_cleaning` says so (the writer holding the table's write lock). Data files
    before the first file that loses a record and after the last one are left as they are; the commit
    replaces the files in between with their kept rows (a replaceWhere on that offset range) and records
    :data:`CLEANED_OFFSET_KEY`, the lake end offset and ``"lakelog.operation": "clean"``. When no record
    is dropped the commit replaces nothing and only records the new cleaned offset.

    Args:
        table: the partition table, at the version ``snapshot`` lists (updated in place to the new one).
        snapshot: ``FileSnapshot.of_table(table)``.
        config: the topic's config (``delete.retention.ms``, ``min.compaction.lag.ms``,
            ``compression.type``).
        cleaned_offset: the current cleaned offset (:func:`cleaned_offset`, or the caller's copy).
        lake_end_offset: the first offset not in the table (recorded again in the commit).
        now_ms: the current time, milliseconds since the epoch.
        name: ``topic-partition``, for the log.
        force: clean even when no file of the cleanable range is dirty (e.g. to drop tombstones that
            expired since the last cleaning, which Kafka does since KIP-534).
        target_file_size: bytes per written data file.

    Returns:
        What was done, or None when there is nothing to clean (no cleanable file, or none dirty and not
        ``force``), or when a data file has no offset statistics or files overlap (logged; never
        guessed at).

    Raises:
        Exception: whatever delta-rs or pyarrow raises; after a failed commit the outcome is ambiguous
            until the table is re-read.
    """
    files = snapshot.files
    if any(not f.has_offset_stats for f in files):
        log.warning("not cleaning %s: a data file has no offset statistics", name)
        return None
    if not snapshot.disjoint:
        log.warning("not cleaning %s: data files with overlapping offsets", name)
        return None
    end = cleanable_end_offset(files, lake_end_offset=lake_end_offset, now_ms=now_ms,
                               min_compaction_lag_ms=config.min_compaction_lag_ms)
    cleanable = _cleanable(files, end)
    if not cleanable or not (force or any(f.max_offset >= cleaned_offset for f in cleanable)):
        return None
    new_cleaned_offset = max(cleaned_offset, end)

    parts = [_decision_columns(snapshot, f) for f in cleanable]
    counts = np.array([p[0].num_rows for p in parts], dtype=np.int64)
    cols = pa.concat_tables([p[0] for p in parts])
    tombstone = pa.chunked_array([c for p in parts for c in p[1].chunks], pa.bool_())
    del parts
    mask, tombstones_dropped = kept_mask(cols["offset"], cols["key"], tombstone, cols["timestamp"], now_ms=now_ms,
                                         delete_retention_ms=config.delete_retention_ms,
                                         cleaned_offset=cleaned_offset)
    del cols, tombstone
    bounds = np.concatenate([[0], np.cumsum(counts)])
    kept_before = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
    kept_counts = kept_before[bounds[1:]] - kept_before[bounds[:-1]]
    changed = np.flatnonzero(kept_counts < counts)
    records_before, records_after = int(counts.sum()), int(kept_counts.sum())
    first, last = cleanable[0].min_offset, end - 1
    metadata = {CLEANED_OFFSET_KEY: str(new_cleaned_offset), OPERATION_KEY: "clean"}

    if len(changed) == 0:
        # nothing to drop: an empty replaceWhere (no file matches) records the cleaned offset only
        rows, lo, hi, replaced = LOG_SCHEMA.empty_table(), end, end - 1, 0
    else:
        i, j = int(changed[0]), int(changed[-1])
        kept = [_kept_file_rows(snapshot, cleanable[k], mask[bounds[k]:bounds[k + 1]]) for k in range(i, j + 1)]
        rows = pa.concat_tables(kept, promote_options="permissive").combine_chunks()  # delta-rs keeps row order only for one chunk
        del kept
        lo, hi, replaced = cleanable[i].min_offset, cleanable[j].max_offset, j - i + 1
    del mask
    try:
        version = commit_rewrite(table, rows, first=lo, last=hi, compression_type=config.compression_type,
                                 lake_end_offset=lake_end_offset, target_file_size=target_file_size,
                                 row_group_rows=MERGED_ROW_GROUP_ROWS, extra_metadata=metadata)
    except Exception:
        log.exception("cleaning %s offsets %d..%d failed", name, first, last)
        raise
    result = CleanResult(first=first, last=last, records_before=records_before, records_after=records_after,
                         tombstones_dropped=tombstones_dropped, files_replaced=replaced,
                         new_cleaned_offset=new_cleaned_offset, version=version)
    log.info("cleaned %s offsets %d..%d: %d -> %d records (%d tombstones dropped), %d files replaced, "
             "cleaned offset %d", name, first, last, records_before, records_after, tombstones_dropped, replaced,
             new_cleaned_offset)
    return result
