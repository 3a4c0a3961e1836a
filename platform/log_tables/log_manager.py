"""Opening and dropping a broker's partition logs under ``log.dirs`` (Kafka's ``LogManager``).

Each replica's log is ``{log.dirs}/{topic}-{partition}/``, a Delta table. A topic id file inside the
table (``_lakelog_topic_id``) tells a table of a deleted-and-re-created topic of the same name apart: it
is removed before the new topic's log is created there.

The log manager owns the broker's one :class:`~lakelog.log_tables.log_scheduler.LogScheduler` (Kafka's
``LogManager`` and its ``KafkaScheduler``) and the clock it runs on: every log it opens gets them
(``lifecycle.scheduler``; the clock of its appends and timers), and the log's flusher runs its flush
rounds, retention, cleaning, VACUUM and merges as a job there, not as tasks of its own.

:func:`~lakelog.log_tables.file_merges.merge_if_needed` runs after Delta commits: the flusher's
(:mod:`~lakelog.log_tables.flusher`), or, for a log without a segment tail, the leader's group commit
and the follower's replicated append (through :meth:`LogManager.merge_files_after_append`).

With a shared lake (``lake.uri``, e.g. ``s3://bucket/prefix``) a partition's Delta table is one for all its
replicas, at ``{lake.uri}/{topic}-{topic id}/{partition}`` (the topic id in the path: a deleted and
re-created topic starts a new table), written by the partition's leader only; each replica keeps its
segment tail (and producer snapshots, topic id file) in ``{log.dirs}/{topic}-{partition}/``.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from pathlib import Path

from lakelog.clock import SYSTEM_TIME, Time
from lakelog.config import TopicConfig
from lakelog.log_tables.committer_leases import LeasedTables
from lakelog.log_tables.file_merges import merge_if_needed
from lakelog.log_tables.log_scheduler import LogScheduler
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.schema import table_dir_name
from lakelog.log_tables.typed_columns import RecordDecoder

log = logging.getLogger(__name__)

#: The file inside a partition table that names the topic id the table belongs to.
TOPIC_ID_FILE = "_lakelog_topic_id"
#: Suffix of a deleted log's directory until a background task has removed it (Kafka renames a deleted
#: log to ``{topic}-{partition}.{id}-delete`` and removes it later): deleting a topic of thousands of
#: partitions answers after the renames, not after every file is gone.
DELETED_DIR_SUFFIX = ".deleted"


class LogManager:
    """The partition logs of one broker.

    Args:
        log_dirs: the broker's ``log.dirs`` (created if missing).
        tail_cache_max_bytes: per-log tail cache (``log.tail.cache.max.bytes``).
        segment_files_max: data files per table after which the oldest small ones are merged
            (``log.segment.files.max``); None = never.
        clock: the clock of the logs' timers (Kafka's ``Time``; tests pass a
            :class:`~lakelog.clock.MockTime`). Default: the system clock.
        lake_uri: ``lake.uri``: the shared lake the partition tables live in (``s3://bucket/prefix``);
            None = each replica's own table under ``log_dirs``. Default: None.
        lake_storage_options: delta-rs storage options of the lake (``lake.storage.*``; holds the secret:
            never logged). Default: none.
    """

    def __init__(self, log_dirs: str | Path, *, tail_cache_max_bytes: int, segment_files_max: int | None,
                 clock: Time = SYSTEM_TIME, lake_uri: str | None = None,
                 lake_storage_options: dict[str, str] | None = None) -> None:
        self.log_dirs = Path(log_dirs).resolve()
        self.lake_uri = lake_uri.rstrip("/") if lake_uri else None
        self._lake_storage_options = dict(lake_storage_options or {})
        self.clock = clock
        #: the one timer loop of every log opened here
        self.scheduler = LogScheduler(clock=clock)
        self.tail_cache_max_bytes = tail_cache_max_bytes
        self.segment_files_max = segment_files_max
        #: partitions whose table an outside committer (a Spark maintenance job) holds the lease of; every
        #: log opened here makes no commit of its own but appends meanwhile (a ZooKeeper watch fills it)
        self.leased_tables = LeasedTables()
        self._deletions: set[asyncio.Task] = set()
        #: decodes schema'd topics' records into typed table columns at flush (the broker sets it to the
        #: schema registry's decoder before it opens a log; :mod:`~lakelog.log_tables.typed_columns`).
        #: None = no typed columns.
        self.record_decoder: RecordDecoder | None = None

    def ensure_dirs(self) -> None:
        """Create ``log.dirs`` if missing; remove the directories of deleted logs a previous run left."""
        self.log_dirs.mkdir(parents=True, exist_ok=True)
        for leftover in self.log_dirs.glob("*" + DELETED_DIR_SUFFIX):
            shutil.rmtree(leftover, ignore_errors=True)

    def local_dir(self, topic: str, partition: int) -> Path:
        """This broker's directory of the partition's replica: its Delta table (without a shared lake) or its
        segment tail (with one)."""
        return self.log_dirs / table_dir_name(topic, partition)

    def table_uri(self, topic: str, partition: int, topic_id: str | None = None) -> str:
        """Where the partition's Delta table is: ``{lake.uri}/{topic}-{topic_id}/{partition}`` in a shared lake
        (``topic_id`` required then), else this broker's own :meth:`local_dir`."""
        if self.lake_uri is None:
            return str(self.local_dir(topic, partition))
        if not topic_id:
            raise ValueError(f"the table of {topic}-{partition} in the lake {self.lake_uri} needs the topic id")
        return f"{self.lake_uri}/{topic}-{topic_id}/{partition}"

    def open_log(self, *, topic: str, partition: int, topic_id: str, config: TopicConfig,
                 replicated: bool) -> PartitionLog:
        """Open (or create) the partition's log; a table left by an older topic of that name is removed.

        A replicated partition's high watermark starts at the log start offset: the ISR moves it up.
        In a shared lake the log commits nothing until its replica leads (:meth:`PartitionLog.set_lake_leader`).
        Blocking (Delta I/O): call from a worker thread.
        """
        local = self.local_dir(topic, partition)
        id_file = local / TOPIC_ID_FILE
        if id_file.exists() and id_file.read_text().strip() != topic_id:
            log.info("removing the log of an older topic %s-%d", topic, partition)
            shutil.rmtree(local)
        uri = self.table_uri(topic, partition, topic_id)
        lake = {} if self.lake_uri is None else {"local_dir": local, "storage_options": self._lake_storage_options}
        if self.lake_uri is not None:
            local.mkdir(parents=True, exist_ok=True)
        plog = PartitionLog.open(topic=topic, partition=partition, table_uri=uri, config=config,
                                 tail_cache_max_bytes=self.tail_cache_max_bytes,
                                 initial_high_watermark=0 if replicated else None, clock=self.clock, **lake)
        if not id_file.exists():
            id_file.write_text(topic_id)
        plog.honour_leases(self.leased_tables)
        plog.lifecycle.scheduler = self.scheduler
        plog.record_decoder = self.record_decoder
        return plog

    async def drop_log(self, plog: PartitionLog, *, delete_data: bool) -> None:
        """Close a log and, with ``delete_data`` (its topic was deleted), delete its data: the directory is
        renamed (:data:`DELETED_DIR_SUFFIX`) at once, so a re-created topic starts empty, and removed by a
        background task (or at the next start); a table in a shared lake is removed from the object store
        by a background task too (by every broker that held a replica: whichever comes first removes it;
        a re-created topic has another topic id, so another table)."""
        plog.close()
        if not delete_data:
            return
        doomed = await asyncio.to_thread(_rename_for_deletion, plog.local_dir or Path(plog.table_uri))
        if doomed is not None:
            self._in_background(asyncio.to_thread(shutil.rmtree, doomed, True))
        if plog.shared_lake:
            self._in_background(asyncio.to_thread(_delete_shared_table, plog))

    def _in_background(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._deletions.add(task)
        task.add_done_callback(self._deletions.discard)

    async def merge_files_after_append(self, plog: PartitionLog) -> None:
        """After a follower's append: a log without a segment tail made a Delta commit, so run
        :func:`merge_if_needed` (small files merged, not log compaction) with this broker's
        ``log.segment.files.max``; a log with a tail has its files merged by its flusher after the flusher's
        commits."""
        if not plog.tiered:
            await merge_if_needed(plog, segment_files_max=self.segment_files_max)


#: The longest file name most file systems take (ext4, XFS, APFS: 255 bytes).
MAX_FILE_NAME_BYTES = 255


def _delete_shared_table(plog: PartitionLog) -> None:
    try:
        removed = plog.delete_shared_table()
    except Exception as e:  # the store is unreachable: the table stays (a broker restart does not retry it)
        log.warning("removing the table %s of a deleted topic from the lake failed: %s", plog.table_uri, e)
        return
    if removed:
        log.info("removed the table %s of a deleted topic from the lake (%d objects)", plog.table_uri, removed)


def _rename_for_deletion(table_dir: Path) -> Path | None:
    """Rename a deleted log's directory out of the way; None when there is none.

    The name keeps as much of ``{topic}-{partition}`` as fits beside the suffix in 255 bytes, as Kafka's
    ``UnifiedLog.logDeleteDirName`` does: a 249-character topic name leaves no room for the suffix."""
    suffix = f".{uuid.uuid4().hex}{DELETED_DIR_SUFFIX}"
    doomed = table_dir.with_name(table_dir.name[:MAX_FILE_NAME_BYTES - len(suffix)] + suffix)
    try:
        table_dir.rename(doomed)
    except FileNotFoundError:
        return None
    return doomed
