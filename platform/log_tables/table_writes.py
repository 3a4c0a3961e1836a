"""The Delta commits a partition log makes: append, truncate, rewrite. Each is one atomic Delta transaction.

Every commit records the table's end offset after it (the *lake end offset*: the first offset not in
the table) in its commitInfo (:data:`LAKE_END_OFFSET_KEY`), so recovery finds the end of a table whose
newest records were removed (retention, truncation). Tables written before the two-tier log recorded it
as :data:`LOG_END_OFFSET_KEY` (then always equal); both are read.
The functions here only write; the caller (:class:`~lakelog.log_tables.partition_log.PartitionLog`)
holds the table's write lock and treats a failure as ambiguous (re-reads the table). Opening a table,
:func:`storage_errors` turns what delta-rs and pyarrow raise into a lakelog error.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import DeltaError

from lakelog.log_tables.errors import LogStorageError
from lakelog.log_tables.schema import LOG_SCHEMA
from lakelog.log_tables.typed_columns import conform_to_table

__all__ = ["LAKE_END_OFFSET_KEY", "LEADER_EPOCH_KEY", "LOG_END_OFFSET_KEY", "LOG_START_OFFSET_KEY", "OPERATION_KEY",
           "PARQUET_CODECS", "commit_append", "newer_leader_epoch", "commit_rewrite", "commit_truncation", "newest_commits",
           "open_log_table", "recorded_lake_end_offset", "recorded_log_start_offset", "storage_errors",
           "table_arrow_schema"]

#: commitInfo key holding the table's end offset (lake end offset) after the commit.
LAKE_END_OFFSET_KEY = "lakelog.lake_end_offset"
#: the same, as tables written before the two-tier log recorded it.
LOG_END_OFFSET_KEY = "lakelog.log_end_offset"
#: commitInfo key holding the log start offset (retention, and every flush since: a compacted head is no
#: data loss, the log start offset stays where retention put it).
LOG_START_OFFSET_KEY = "lakelog.log_start_offset"
#: commitInfo key holding the leader epoch of the replica that made the commit: a table in a shared lake
#: (``lake.uri``) is written by its partition's leader, and a deposed leader is fenced by the epochs here
#: (:func:`newer_leader_epoch`; the commit is made without delta-rs's rebase on a newer version).
LEADER_EPOCH_KEY = "lakelog.leader_epoch"
#: commitInfo key naming what a lakelog commit did (``truncate``, ``compact``, ``clean``, ``retention``, ...).
OPERATION_KEY = "lakelog.operation"

#: Kafka ``compression.type`` -> Parquet codec. ``producer`` keeps Parquet's usual default, snappy.
PARQUET_CODECS = {
    "producer": "SNAPPY",
    "uncompressed": "UNCOMPRESSED",
    "gzip": "GZIP",
    "snappy": "SNAPPY",
    "lz4": "LZ4_RAW",
    "zstd": "ZSTD",
}


@contextlib.contextmanager
def storage_errors(*, topic: str, partition: int, table_uri: str | Path) -> Iterator[None]:
    """Raise what delta-rs (``deltalake.exceptions.DeltaError`` and its subclasses) or pyarrow
    (``ArrowException``) raise inside the block as a :class:`~lakelog.log_tables.errors.LogStorageError`
    naming the partition's table (the library's error is its ``__cause__``)."""
    try:
        yield
    except (DeltaError, pa.ArrowException) as e:
        first_line = (str(e).strip().splitlines() or [""])[0]
        raise LogStorageError(f"The Delta table of {topic}-{partition} ({table_uri}) cannot be opened or read: "
                              f"{type(e).__name__}: {first_line}") from e


def open_log_table(table_uri: str | Path, *, topic: str, partition: int,
                   storage_options: dict[str, str] | None = None) -> tuple[str, DeltaTable]:
    """Open a partition's table, creating it (empty, with :data:`LOG_SCHEMA`) if missing.

    ``storage_options``: delta-rs storage options of an object-store URI (``AWS_ENDPOINT_URL``, ...); the
    table keeps them for its later commits. Default: none.

    Returns:
        ``(uri, table)``: a local path made absolute (its directory created), or the URI as given.

    Raises:
        deltalake.exceptions.DeltaError: the table exists with an incompatible schema or is unreadable.
    """
    uri = str(table_uri)
    if "://" not in uri:
        uri = os.path.abspath(uri)
        os.makedirs(uri, exist_ok=True)
    if DeltaTable.is_deltatable(uri, storage_options=storage_options):
        return uri, DeltaTable(uri, storage_options=storage_options)
    try:
        return uri, _create_log_table(uri, topic=topic, partition=partition, storage_options=storage_options)
    except DeltaError:
        # in a shared lake every replica opens the same table: another one created it first (the create
        # is a conditional put of version 0)
        if DeltaTable.is_deltatable(uri, storage_options=storage_options):
            return uri, DeltaTable(uri, storage_options=storage_options)
        raise


def _create_log_table(uri: str, *, topic: str, partition: int, storage_options: dict[str, str] | None) -> DeltaTable:
    return DeltaTable.create(
        uri, LOG_SCHEMA, mode="ignore", name=f"{topic}-{partition}", storage_options=storage_options,
        description=f"lakelog partition log of {topic}-{partition}",
        # Both engines must read it: no deletion vectors, no column mapping; stats on offset.
        configuration={"delta.dataSkippingNumIndexedCols": "9"},
    )


def table_arrow_schema(table: DeltaTable) -> pa.Schema:
    """The table's current schema as a pyarrow schema (the log columns plus any typed columns)."""
    return pa.schema(table.schema().to_arrow())


def _shaped(table: DeltaTable, rows: pa.Table) -> tuple[pa.Table, dict]:
    """``rows`` conformed to the table's columns (:func:`~lakelog.log_tables.typed_columns.conform_to_table`)
    and the ``write_deltalake`` arguments that go with them (``schema_mode="merge"`` when the rows add
    typed columns or nested fields: a metadata-only schema change, no file is rewritten)."""
    if rows.num_columns == len(LOG_SCHEMA) and len(table.schema().fields) == len(LOG_SCHEMA):
        return rows, {}  # neither is typed (a topic without a subject): nothing to convert
    rows, merge = conform_to_table(rows, table_arrow_schema(table))
    return rows, ({"schema_mode": "merge"} if merge else {})


def commit_append(table: DeltaTable, batch: pa.Table, *, compression_type: str, lake_end_offset: int,
                  log_start_offset: int | None = None, leader_epoch: int | None = None) -> int:
    """Append ``batch`` (log schema, offsets assigned) as one Delta commit; return the new table version.

    With ``leader_epoch`` (a table in a shared lake, written by its partition's leader) the commit records
    it (:data:`LEADER_EPOCH_KEY`) and is made at the version after ``table``'s or not at all: delta-rs's
    conditional put refuses it when another commit took that version (a blind append would otherwise be
    rebased onto it), so a deposed leader cannot commit after its successor did, and two replicas never
    both append the same offsets. The caller then re-reads the table (:func:`newer_leader_epoch`).

    Args:
        table: the partition table (updated in place to the new version).
        batch: the rows, one data file (log columns, and the typed columns of a schema'd topic: the table's
            schema is merged when they add columns).
        compression_type: the topic's ``compression.type`` (a key of :data:`PARQUET_CODECS`).
        lake_end_offset: the table's end offset after the batch (recorded in commitInfo).
        log_start_offset: the log start offset, recorded too (:data:`LOG_START_OFFSET_KEY`), so a log
            whose first records were compacted away keeps its start after a restart. None = not recorded.
        leader_epoch: the committing leader's epoch (see above). None = a table of the replica's own.

    Raises:
        Exception: whatever delta-rs raises (``CommitFailedError`` when another commit took the version,
            with ``leader_epoch``); the outcome is ambiguous until the table is re-read.
    """
    metadata = {LAKE_END_OFFSET_KEY: str(lake_end_offset)}
    if log_start_offset is not None:
        metadata[LOG_START_OFFSET_KEY] = str(log_start_offset)
    if leader_epoch is not None:
        metadata[LEADER_EPOCH_KEY] = str(leader_epoch)
    batch, schema_mode = _shaped(table, batch)
    write_deltalake(
        table, batch, mode="append", **schema_mode,
        writer_properties=WriterProperties(compression=PARQUET_CODECS[compression_type]),
        commit_properties=CommitProperties(custom_metadata=metadata,
                                           max_commit_retries=None if leader_epoch is None else 0),
    )
    return table.version()


def newer_leader_epoch(table: DeltaTable, *, since_version: int, leader_epoch: int) -> int | None:
    """The highest leader epoch above ``leader_epoch`` that a commit after ``since_version`` recorded
    (:data:`LEADER_EPOCH_KEY`), or None: a replica that finds one was deposed and commits no more.
    ``table`` is brought to its newest version first. Reads the commitInfo of the newer versions only.

    Raises:
        deltalake.exceptions.DeltaError, OSError: the table is unreadable.
    """
    table.update_incremental()
    newer = table.version() - since_version
    if newer <= 0:
        return None
    epochs = [int(c[LEADER_EPOCH_KEY]) for c in table.history(newer) if LEADER_EPOCH_KEY in c]
    highest = max(epochs, default=-1)
    return highest if highest > leader_epoch else None


def commit_truncation(table: DeltaTable, offset: int) -> int:
    """Remove every record at or above ``offset``: one commit, replaceWhere ``offset >= X`` with no rows.

    Files holding offsets below ``offset`` are rewritten with just those rows; ``offset`` is recorded as
    the log end offset. Returns the new table version.

    Raises:
        Exception: whatever delta-rs raises (ambiguous outcome).
    """
    write_deltalake(
        table, table_arrow_schema(table).empty_table(), mode="overwrite", predicate=f"offset >= {offset}",
        commit_properties=CommitProperties(custom_metadata={
            LAKE_END_OFFSET_KEY: str(offset), OPERATION_KEY: "truncate"}),
    )
    return table.version()


def commit_rewrite(table: DeltaTable, rows: pa.Table, *, first: int, last: int, compression_type: str,
                   lake_end_offset: int, target_file_size: int, row_group_rows: int,
                   extra_metadata: dict[str, str] | None = None) -> int:
    """Replace the files holding offsets ``[first, last]`` by ``rows`` (a merge, a cleaning): one commit.

    An ``overwrite`` with ``predicate = offset in [first, last]`` (Delta's replaceWhere), so readers of an
    older version keep their files; a later VACUUM removes them.

    Args:
        rows: every record of those files, in offset order (log schema, typed columns kept: rows of files
            written before a typed column existed read null there).
        first, last: the offsets replaced (inclusive).
        target_file_size: bytes per output file (delta-rs splits larger outputs).
        row_group_rows: rows per Parquet row group, so readers can skip row groups by offset statistics.
        extra_metadata: more commitInfo entries (e.g. the log cleaner's ``lakelog.cleaned_offset`` and
            ``"lakelog.operation": "clean"``); they override the defaults of the same key.

    Returns:
        The new table version.

    Raises:
        Exception: whatever delta-rs raises (ambiguous outcome).
    """
    rows, schema_mode = _shaped(table, rows)
    write_deltalake(
        table, rows, mode="overwrite", predicate=f"offset >= {first} AND offset <= {last}", **schema_mode,
        target_file_size=target_file_size,
        writer_properties=WriterProperties(compression=PARQUET_CODECS[compression_type],
                                           max_row_group_size=row_group_rows),
        commit_properties=CommitProperties(custom_metadata={
            LAKE_END_OFFSET_KEY: str(lake_end_offset), OPERATION_KEY: "compact", **(extra_metadata or {})}),
    )
    return table.version()


def newest_commits(table: DeltaTable) -> Iterator[dict]:
    """The commitInfo of the table's commits, newest first, each once.

    Read in growing windows (the newest commit, then 32, then all the Delta log still holds): the value
    looked for is usually in the newest commit, so the whole history is rarely read. Spark can record only
    a ``userMetadata`` string in a commit: when it is a JSON object (lakelog's Spark maintenance jobs,
    :mod:`lakelog.spark.maintenance`), its ``lakelog.*`` keys are merged in as if delta-rs had written them.
    """
    if table.version() <= 0:
        return
    seen = 0
    for limit in (1, 32, None):
        commits = table.history(limit)
        yield from map(_with_user_metadata, commits[seen:])
        if limit is None or len(commits) < limit:
            return
        seen = len(commits)


def _with_user_metadata(commit: dict) -> dict:
    text = commit.get("userMetadata")
    if not isinstance(text, str) or not text.startswith("{"):
        return commit
    try:
        extra = json.loads(text)
    except ValueError:
        return commit
    if not isinstance(extra, dict):
        return commit
    return {**commit, **{k: str(v) for k, v in extra.items() if k.startswith("lakelog.") and k not in commit}}


def recorded_lake_end_offset(table: DeltaTable) -> int:
    """The newest lake end offset recorded in the table's commits (:data:`LAKE_END_OFFSET_KEY`, or
    :data:`LOG_END_OFFSET_KEY` of older commits), or 0.

    Usually the newest commit is an append and carries it; maintenance commits (OPTIMIZE by Spark) may
    not, so older commits are looked at too (:func:`newest_commits`).
    """
    for commit in newest_commits(table):
        value = commit.get(LAKE_END_OFFSET_KEY, commit.get(LOG_END_OFFSET_KEY))
        if value is not None:
            return int(value)
    return 0


def recorded_log_start_offset(table: DeltaTable) -> int | None:
    """The newest log start offset recorded in the table's commits (:data:`LOG_START_OFFSET_KEY`), or None
    when no commit the Delta log still holds has one, or when a ``DELETE`` by another writer (one that
    records none) came after it: then the first offset of the files is the start."""
    for commit in newest_commits(table):
        value = commit.get(LOG_START_OFFSET_KEY)
        if value is not None:
            return int(value)
        if commit.get("operation") == "DELETE":
            return None
    return None
