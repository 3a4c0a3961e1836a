"""Merging a partition table's oldest small data files (size-tiered), so commits stay cheap.

Every delta-rs commit costs time proportional to the files in the table's snapshot (about 0.1 ms per
file measured on 2 cores), so the many small files of group commits slow later commits. The log merges
the oldest run of small files into one file, in offset order, in one commit
(:meth:`LogLifecycle.merge_head <lakelog.log_tables.lifecycle.LogLifecycle.merge_head>`); this
module chooses the run and builds the merged rows.

Size-tiered, so no byte is rewritten more than a few times: among the files older than the
``keep_newest`` newest, a run is a sequence of files with contiguous offsets, each smaller than half of
``max_file_bytes`` (the target size), ending before the next file would take it over ``max_file_bytes``
(or ``max_run_bytes``): a merge never builds a file larger than the target. A run's leading file is left
out while it is larger than the rest of the run together (an earlier merge's output is only rewritten
once the run at least doubles it). The oldest run with two or more files is merged.

The data files are the log's segments for retention (:mod:`~lakelog.log_tables.lifecycle`): a file goes
only whole, so the log holds up to ``retention.bytes`` plus its oldest file, and a removed file stays
on disk until VACUUM. The target of a log's merges (:func:`merge_target_bytes`) is therefore at most
``segment.bytes`` (Kafka's segment size) and, with ``retention.bytes``, an eighth of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.table_writes import commit_rewrite
from lakelog.log_tables.typed_columns import log_columns

if TYPE_CHECKING:
    from lakelog.log_tables.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["MERGED_ROW_GROUP_ROWS", "MERGE_TARGET_BYTES", "RETENTION_BYTES_PER_FILE", "choose_run",
           "flush_commit_bytes", "merge_oldest_run", "merge_target_bytes", "merged_rows", "rewrite",
           "small_files", "tail_segment_bytes"]

#: Target size of a merged file: files under half of it are merged.
MERGE_TARGET_BYTES = 64 * 1024 * 1024
#: Rows per Parquet row group in merged files, so readers can skip row groups by offset statistics.
MERGED_ROW_GROUP_ROWS = 64 * 1024
#: A log with ``retention.bytes`` merges files of at most this share of it (1/8): retention removes whole
#: files, so its oldest file is the slack above ``retention.bytes`` (Kafka: one segment), and a merge's
#: inputs stay on disk until VACUUM (one more file's worth). With 50 MiB, files of at most 6.25 MiB.
RETENTION_BYTES_PER_FILE = 8


def merge_target_bytes(config: TopicConfig, *, default: int = MERGE_TARGET_BYTES) -> int:
    """The largest file a merge (or a cleaning) of a log with ``config`` builds, in bytes.

    ``default`` (:data:`MERGE_TARGET_BYTES`), at most ``segment.bytes`` (Kafka's segments never
    grow past it: the unit retention deletes by) and, when ``cleanup.policy`` has ``delete`` and
    ``retention.bytes`` is set, at most ``retention.bytes / RETENTION_BYTES_PER_FILE`` (Kafka's
    ``UnifiedLog.deleteRetentionSizeBreachedSegments`` removes whole segments only, so a file larger than
    ``retention.bytes`` would keep the log at twice that before it could go). At least 1.
    """
    target = min(default, config.segment_bytes)
    if config.deletes and config.retention_bytes >= 0:
        target = min(target, config.retention_bytes // RETENTION_BYTES_PER_FILE)
    return max(1, target)


def flush_commit_bytes(config: TopicConfig, *, commit_bytes: int | None = None) -> int:
    """The most tail bytes one flush commit takes: ``commit_bytes`` (default: the topic's
    ``lake.commit.bytes``), at most :func:`merge_target_bytes`, so a flushed file is never larger than a
    merge would build (:attr:`LakeFlusher.file_bytes <lakelog.log_tables.flusher.LakeFlusher.file_bytes>`)."""
    return min(config.lake_commit_bytes if commit_bytes is None else commit_bytes, merge_target_bytes(config))


def tail_segment_bytes(config: TopicConfig) -> int:
    """The size, in bytes, at which a segment of the tail rolls: ``segment.bytes``, at most
    :func:`flush_commit_bytes`.

    A flush round under load is several commits of that size; with segments no larger, each commit
    leaves the segments it covered wholly below the lake end offset and deletes them at once, so the
    tail on disk drains commit by commit instead of holding the whole round until its last commit.
    Kafka rolls only at ``segment.bytes`` (1 GiB): its segments are the log; ours are a transient tail.
    """
    return max(1, min(config.segment_bytes, flush_commit_bytes(config)))


def small_files(files: Sequence[DataFile], max_file_bytes: int = MERGE_TARGET_BYTES) -> int:
    """How many of ``files`` a merge may take: those smaller than half of ``max_file_bytes``."""
    return sum(1 for f in files if f.has_offset_stats and f.size_bytes < max_file_bytes // 2)


def choose_run(files: Sequence[DataFile], *, keep_newest: int, max_file_bytes: int = MERGE_TARGET_BYTES,
               max_run_bytes: int = 256 * 1024 * 1024) -> list[DataFile]:
    """The oldest run of small files worth merging (see the module docstring), or ``[]``.

    Args:
        files: the table's data files, in offset order (files without offset statistics are never taken).
        keep_newest: the newest files never taken.
        max_file_bytes: the target size in bytes: a run never holds more (so neither does the merged file).
        max_run_bytes: a run never grows beyond this many bytes either.

    Returns:
        Two or more files with contiguous offsets, or an empty list.
    """
    indexed = [f for f in files if f.has_offset_stats]
    candidates = indexed[:-keep_newest] if keep_newest else indexed
    small = max_file_bytes // 2
    limit = min(max_file_bytes, max_run_bytes)
    run: list[DataFile] = []
    size = 0
    for f in [*candidates, None]:
        ends = (f is None or f.size_bytes >= small or size + f.size_bytes > limit
                or (run and f.min_offset != run[-1].max_offset + 1))
        if ends:
            # leave out leading files larger than the rest of the run together
            while len(run) >= 2 and run[0].size_bytes > size - run[0].size_bytes:
                size -= run.pop(0).size_bytes
            if len(run) >= 2:
                return run
            run, size = [], 0
            if f is None or f.size_bytes >= small:
                continue
        run.append(f)
        size += f.size_bytes
    return []


def merged_rows(snapshot: FileSnapshot, run: Sequence[DataFile]) -> pa.Table:
    """Every row of the files of ``run``, in offset order, as one contiguous table (log schema; typed
    columns kept, null in the rows of files written before they existed)."""
    table = pa.concat_tables(
        (log_columns(pq.read_table(snapshot.path(f), filesystem=snapshot.fs)) for f in run),
        promote_options="permissive")
    return table.take(pc.sort_indices(table["offset"])).combine_chunks()


def rewrite(table: DeltaTable, snapshot: FileSnapshot, run: Sequence[DataFile], *, compression_type: str,
            lake_end_offset: int, max_run_bytes: int) -> int:
    """Replace the files of ``run`` by one file of their rows in offset order (row groups of
    :data:`MERGED_ROW_GROUP_ROWS` rows): one Delta commit; return the new table version.

    Raises:
        Exception: whatever delta-rs raises; the outcome is ambiguous until the table is re-read.
    """
    return commit_rewrite(table, merged_rows(snapshot, run), first=run[0].min_offset, last=run[-1].max_offset,
                          compression_type=compression_type, lake_end_offset=lake_end_offset,
                          target_file_size=max_run_bytes * 4, row_group_rows=MERGED_ROW_GROUP_ROWS)


def merge_oldest_run(table: DeltaTable, snapshot: FileSnapshot, *, name: str, keep_newest: int,
                       max_file_bytes: int, max_run_bytes: int, compression_type: str, lake_end_offset: int) -> int:
    """Merge the oldest run of small files of ``snapshot`` (:func:`choose_run`, :func:`rewrite`).

    Args:
        table: the partition table, at the version ``snapshot`` lists (the caller holds its write lock).
        name: ``topic-partition``, for the log.
        keep_newest, max_file_bytes, max_run_bytes: as :func:`choose_run` (sizes in bytes).
        compression_type, lake_end_offset: as :func:`rewrite`.

    Returns:
        The number of files replaced (0 when there was nothing worth merging).

    Raises:
        Exception: the commit failed (logged here); the outcome is ambiguous until the table is re-read.
    """
    run = choose_run(snapshot.files, keep_newest=keep_newest, max_file_bytes=max_file_bytes,
                     max_run_bytes=max_run_bytes)
    if len(run) < 2:
        return 0
    lo, hi, size = run[0].min_offset, run[-1].max_offset, sum(f.size_bytes for f in run)
    try:
        rewrite(table, snapshot, run, compression_type=compression_type, lake_end_offset=lake_end_offset,
                max_run_bytes=max_run_bytes)
    except Exception:
        log.exception("merging %s offsets %d..%d failed", name, lo, hi)
        raise
    log.info("merged %d files (offsets %d..%d, %d bytes) of %s", len(run), lo, hi, size, name)
    return len(run)


async def merge_if_needed(plog: "PartitionLog", *, segment_files_max: int | None) -> None:
    """Merge the oldest small files of ``plog`` when its table holds more than ``segment_files_max`` data
    files (each delta-rs commit costs time per file), keeping the newest quarter as they are; merged files
    are at most :func:`merge_target_bytes` of the log's topic config. The merge's inputs are recorded for
    VACUUM (:meth:`LogLifecycle.note_removal <lakelog.log_tables.lifecycle.LogLifecycle.note_removal>`).

    An optimisation: a failure is logged, never raised (the next append tries again); cancellation is
    passed on.
    """
    if segment_files_max is None:
        return
    try:
        target = merge_target_bytes(plog.config)
        if plog.lifecycle.needs_merge(max_files=segment_files_max, max_file_bytes=target):
            merged = await asyncio.to_thread(plog.lifecycle.merge_head, keep_newest=max(1, segment_files_max // 4),
                                             max_file_bytes=target)
            if merged:  # the merge's inputs leave the disk after lake.vacuum.retention.ms
                plog.lifecycle.note_removal()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("merging small files of %s-%d failed", plog.topic, plog.partition)
