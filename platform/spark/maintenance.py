"""Maintenance of topic tables with Spark: OPTIMIZE, VACUUM, log compaction, each under the committer lease.

``lakelog job optimize|vacuum|compact --topic T`` (and ``spark-submit jobs/maintenance.py ...``) run these on any
Spark cluster that reaches the tables. Each partition's job (:func:`run_job`):

1. asks a gateway for the partition's table (the leader's, ``GET /lakelog/v1/topics/{t}/logs``);
2. takes the partition's committer lease in ZooKeeper (:class:`~lakelog.replication.committer_lease.CommitterLease`):
   the brokers make no commit of their own on the table meanwhile (records stay in their segment tails,
   acknowledged and readable), so the job's commits and the broker's never race;
3. commits with delta-spark (:func:`optimize_table`, :func:`vacuum_table`, :func:`compact_table`); a commit that meets a
   concurrent one (a broker commit in flight when the lease was taken) is planned again from the new
   table version, at most :data:`MAX_CONFLICT_RETRIES` times (Delta's advice for its concurrency
   exceptions);
4. releases the lease; the brokers re-read the table before their next commit and flush what waited.

**Why OPTIMIZE here is not Delta's bin-packing.** Delta's ``OPTIMIZE`` groups a table's small files by
size, not by position, and writes each group's rows in the order of its files (measured with delta-spark
4.0.1: 20 files of a log table became one file whose offsets were out of order). A log table's readers
find records by offset (Kafka fetches, the broker's retention and cleaner, which remove and rewrite
whole files by offset range), so files must keep disjoint offset ranges with rows in offset order. The
optimize job therefore merges *runs of neighbouring small files* (the broker's own rule,
:func:`~lakelog.log_tables.file_merges.choose_run`), each run one commit: a ``replaceWhere`` over the run's
offset range, its rows range-partitioned and sorted by offset, as the broker's own merges commit. Delta's
documented way to compact files marks such a rewrite ``dataChange=false``, which Delta allows only for
partition filters (``DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET``); so, like the broker's merges,
it is a data change to Delta's change feed (lakelog's own readers go by offset and see nothing change).
``--zorder-by key|timestamp`` runs Delta's real ``OPTIMIZE ZORDER BY``, which puts records with near keys
(or times) together for SQL readers at the price of offset order: fetches then read every file of the
table, retention removes a file only when all of its records expired, and the log cleaner stops (it needs
disjoint files), so it is refused on a compacted topic.

**VACUUM** uses the table's own retention (``delta.deletedFileRetentionDuration``, which the broker keeps
equal to the topic's ``lake.vacuum.retention.ms``): files a reader of an older version may still open
are kept. The segment tail (``_lakelog_segments``) is out of its reach (Delta skips ``_`` directories).

Every commit of a job records ``userMetadata`` JSON ``{"lakelog.operation": "optimize" | "zorder"}`` in
its commitInfo; it never records a lake end offset (the broker's recovery reads that from its own
commits).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from deltalake import DeltaTable as RsDeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.file_merges import MERGE_TARGET_BYTES, choose_run
from lakelog.log_tables.data_files import DataFile, FileSnapshot
from lakelog.log_tables.table_writes import OPERATION_KEY
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.replication.committer_lease import CommitterLease

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from pyspark.sql import SparkSession

    from lakelog.client import LakelogClient

log = logging.getLogger(__name__)

__all__ = ["MAX_CONFLICT_RETRIES", "JobKind", "JobResult", "ZOrderColumn", "compact_table", "optimize_table",
           "plan_runs", "run_from_gateway", "run_job", "vacuum_table"]

JobKind = Literal["optimize", "vacuum", "compact"]
ZOrderColumn = Literal["key", "timestamp"]
#: How often a job plans a commit again after it met a concurrent commit.
MAX_CONFLICT_RETRIES = 5
#: Spark's setting whose value Delta records as a commit's ``userMetadata``.
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
T = TypeVar("T")


@dataclass(frozen=True)
class JobResult:
    """What a maintenance job did to one partition's table.

    Attributes:
        topic, partition, table_uri: the table.
        kind: ``optimize`` or ``vacuum`` (``optimize`` with ``zorder_by`` reports ``zorder``).
        version_before, version_after: the table versions around the job.
        files_before, files_after: live data files around the job.
        commits: commits the job made.
        files_deleted: files VACUUM deleted from storage (0 for the other kinds).
        seconds: how long it took, lease wait included.
    """

    topic: str
    partition: int
    table_uri: str
    kind: str
    version_before: int
    version_after: int
    files_before: int
    files_after: int
    commits: int
    files_deleted: int
    seconds: float

    def describe(self) -> str:
        """``"optimize orders-0: version 12 -> 15, files 40 -> 3, 3 commits, 0 files deleted, 9.1 s"``."""
        return (f"{self.kind} {self.topic}-{self.partition}: version {self.version_before} -> {self.version_after}, "
                f"files {self.files_before} -> {self.files_after}, {self.commits} commits, "
                f"{self.files_deleted} files deleted, {self.seconds:.1f} s")


def plan_runs(files: Sequence[DataFile], *, target_file_bytes: int,
              max_run_bytes: int | None = None) -> list[list[DataFile]]:
    """The runs of neighbouring small files an optimize merges, oldest first (pure).

    Each run is what :func:`~lakelog.log_tables.file_merges.choose_run` picks from the files after the
    previous run: two or more files with contiguous offsets, each under half of ``target_file_bytes``,
    together about ``target_file_bytes``.

    Args:
        files: the table's data files in offset order (:attr:`FileSnapshot.files`).
        target_file_bytes: bytes of a merged file.
        max_run_bytes: the most one run (one commit) takes. Default: 4 x ``target_file_bytes``.
    """
    runs: list[list[DataFile]] = []
    rest = list(files)
    while True:
        run = choose_run(rest, keep_newest=0, max_file_bytes=target_file_bytes,
                         max_run_bytes=max_run_bytes or 4 * target_file_bytes)
        if not run:
            return runs
        runs.append(run)
        rest = rest[rest.index(run[-1]) + 1:]


def _conflicts() -> tuple[type[BaseException], ...]:
    from delta.exceptions import (ConcurrentAppendException, ConcurrentDeleteDeleteException,
                                  ConcurrentDeleteReadException, ConcurrentTransactionException,
                                  ConcurrentWriteException, DeltaConcurrentModificationException,
                                  MetadataChangedException)
    return (ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
            ConcurrentTransactionException, ConcurrentWriteException, DeltaConcurrentModificationException,
            MetadataChangedException)


def _merge_run(spark: "SparkSession", table_uri: str, run: Sequence[DataFile], *, target_file_bytes: int) -> None:
    """Rewrite the files of ``run`` as about ``run bytes / target_file_bytes`` files in offset order: one
    commit, ``replaceWhere`` over the run's offsets."""
    lo, hi = run[0].min_offset, run[-1].max_offset
    predicate = f"offset >= {lo} AND offset <= {hi}"
    files_out = max(1, math.ceil(sum(f.size_bytes for f in run) / target_file_bytes))
    rows = spark.read.format("delta").load(table_uri).where(predicate)
    (rows.repartitionByRange(files_out, "offset").sortWithinPartitions("offset")
     .write.format("delta").mode("overwrite")
     .option("replaceWhere", predicate)
     .option("userMetadata", json.dumps({OPERATION_KEY: "optimize", "lakelog.offsets": [lo, hi]}))
     .save(table_uri))


def optimize_table(spark: "SparkSession", table_uri: str, *, target_file_bytes: int = MERGE_TARGET_BYTES,
                   zorder_by: ZOrderColumn | None = None) -> int:
    """OPTIMIZE one partition table (see the module docstring); the caller holds the committer lease.

    Args:
        spark: a SparkSession with Delta (:func:`lakelog.spark.session`).
        table_uri: the partition's Delta table.
        target_file_bytes: bytes of a merged file. Default: the broker's own merge target (64 MiB).
        zorder_by: None = merge runs of neighbouring small files in offset order; ``key`` or
            ``timestamp`` = Delta's ``OPTIMIZE ZORDER BY`` over the whole table.

    Returns:
        Commits made.

    Raises:
        delta.exceptions.DeltaConcurrentModificationException (and its kin): still conflicting after
            :data:`MAX_CONFLICT_RETRIES` new plans.
    """
    from delta.tables import DeltaTable

    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # as delta-rs writes them
    if zorder_by is not None:
        def zorder() -> None:
            spark.conf.set(USER_METADATA_CONF, json.dumps({OPERATION_KEY: "zorder"}))
            try:
                DeltaTable.forPath(spark, table_uri).optimize().executeZOrderBy(zorder_by)
            finally:
                spark.conf.unset(USER_METADATA_CONF)
        _retrying(zorder, what=f"OPTIMIZE ZORDER BY {zorder_by} of {table_uri}")
        return 1
    commits = 0
    while True:
        # one run per plan: each commit changes the table the next plan reads (and a retry plans anew)
        def merge_next() -> bool:
            runs = plan_runs(FileSnapshot.of_table(RsDeltaTable(table_uri)).files, target_file_bytes=target_file_bytes)
            if runs:
                _merge_run(spark, table_uri, runs[0], target_file_bytes=target_file_bytes)
            return bool(runs)
        if not _retrying(merge_next, what=f"merging small files of {table_uri}"):
            return commits
        commits += 1


def _retrying(commit: Callable[[], T], *, what: str) -> T:
    """Run ``commit()``; on a Delta concurrency exception run it again (it plans from the new version)."""
    conflicts = _conflicts()
    for attempt in range(MAX_CONFLICT_RETRIES + 1):
        try:
            return commit()
        except conflicts as e:
            if attempt == MAX_CONFLICT_RETRIES:
                raise
            log.warning("%s met a concurrent commit (%s); planning it again", what, type(e).__name__)
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def compact_table(spark: "SparkSession", table_uri: str, *, config: TopicConfig, now_ms: int | None = None,
                  target_file_bytes: int = MERGE_TARGET_BYTES) -> int:
    """Kafka's log cleaning of one partition table, done by Spark; the caller holds the committer lease.

    The broker's cleaner decides (:mod:`~lakelog.log_tables.cleaner`: the cleanable range ends at the first
    file newer than ``min.compaction.lag.ms``; the cleaned offset comes from the table's history), Spark
    does the work: the latest record of each key in the cleanable range is kept (records without a key
    too), tombstones only once they lie below the previous cleaned offset and are older than
    ``delete.retention.ms``; the range's files are replaced by the kept rows in offset order (one
    ``replaceWhere``), recording the new cleaned offset in ``userMetadata`` (``lakelog.cleaned_offset``,
    read back by the broker). Offsets never change. Unlike the broker, which rewrites only the files that
    lose a record, it rewrites the whole cleanable range: Spark is for tables too large for the broker.

    Args:
        config: the topic's config (``cleanup.policy`` must compact).
        now_ms: the time, ms since the epoch. Default: now.
        target_file_bytes: bytes per written file (estimated from the input).

    Returns:
        Commits made (0 or 1).

    Raises:
        ValueError: the topic's ``cleanup.policy`` does not compact.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    from lakelog.log_tables.cleaner import CLEANED_OFFSET_KEY, cleanable_end_offset, cleaned_offset

    if not config.compacts:
        raise ValueError(f"compact needs cleanup.policy compact or compact,delete, not {config.cleanup_policy}")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")

    def clean_once() -> int:
        table = RsDeltaTable(table_uri)
        snapshot = FileSnapshot.of_table(table)
        if not snapshot.files or not snapshot.disjoint:
            return 0
        cleaned = cleaned_offset(table)
        end = cleanable_end_offset(snapshot.files, lake_end_offset=snapshot.end_offset or 0, now_ms=now_ms,
                                   min_compaction_lag_ms=config.min_compaction_lag_ms)
        cleanable = [f for f in snapshot.files if f.max_offset < end]
        if not cleanable:
            return 0
        first = cleanable[0].min_offset
        predicate = f"offset >= {first} AND offset < {end}"
        rows = spark.read.format("delta").load(table_uri).where(predicate)
        latest = F.max("offset").over(Window.partitionBy("key"))
        expired = (F.col("value").isNull() & (F.col("offset") < cleaned)
                   & (F.col("timestamp") < F.timestamp_millis(F.lit(now_ms - config.delete_retention_ms))))
        kept = (rows.withColumn("_latest", latest)
                .where(F.col("key").isNull() | ((F.col("offset") == F.col("_latest")) & ~expired)).drop("_latest"))
        files_out = max(1, math.ceil(sum(f.size_bytes for f in cleanable) / target_file_bytes))
        (kept.repartitionByRange(files_out, "offset").sortWithinPartitions("offset")
         .write.format("delta").mode("overwrite").option("replaceWhere", predicate)
         .option("userMetadata", json.dumps({OPERATION_KEY: "clean", CLEANED_OFFSET_KEY: max(cleaned, end)}))
         .save(table_uri))
        return 1

    return _retrying(clean_once, what=f"cleaning {table_uri}")


def vacuum_table(spark: "SparkSession", table_uri: str) -> int:
    """VACUUM one partition table with its own retention (``delta.deletedFileRetentionDuration``).

    Returns:
        Files deleted from storage (counted on a local table; 0 on an object store, where they are not listed).
    """
    from delta.tables import DeltaTable

    before = _parquet_files(table_uri)
    DeltaTable.forPath(spark, table_uri).vacuum()
    return max(0, before - _parquet_files(table_uri))


def _parquet_files(table_uri: str) -> int:
    if "://" in table_uri and not table_uri.startswith("file://"):
        return 0
    root = Path(table_uri.removeprefix("file://"))
    return sum(1 for p in root.rglob("*.parquet") if "_delta_log" not in p.parts and not any(
        part.startswith("_") for part in p.relative_to(root).parts[:-1]))


def run_job(kind: JobKind, *, spark: "SparkSession", client: "LakelogClient", zk: "KazooClient", topic: str,
            partitions: Sequence[int] | None = None, zorder_by: ZOrderColumn | None = None,
            target_file_bytes: int = MERGE_TARGET_BYTES, lease_wait_s: float = 300.0) -> list[JobResult]:
    """Run a maintenance job over a topic's partitions, one at a time, each under its committer lease.

    Args:
        kind: ``optimize``, ``vacuum`` or ``compact`` (:func:`compact_table`).
        spark: a SparkSession with Delta.
        client: a gateway client (the partitions' tables and the topic's config).
        zk: a started kazoo client on the cluster's ZooKeeper (``zookeeper.connect``, chroot included).
        topic: the topic.
        partitions: which partitions. Default: all.
        zorder_by: for ``optimize``: ``key`` or ``timestamp`` for Delta's ZORDER BY (refused on a
            compacted topic).
        target_file_bytes: for ``optimize``: bytes per merged file.
        lease_wait_s: how long to wait for a lease another job holds.

    Returns:
        One :class:`JobResult` per partition, in partition order.

    Raises:
        ValueError: an unknown partition, ZORDER BY on a topic whose ``cleanup.policy`` compacts, or
            ``compact`` on one whose policy does not.
        lakelog.replication.errors.CommitterLeaseHeldError: another job held a lease all along.
        lakelog.replication.errors.UnknownTopicError: no such topic.
    """
    config = TopicConfig.parse({name: entry["value"] for name, entry in client.admin.topic_configs(topic).items()
                                if entry.get("value") is not None})
    if kind == "optimize" and zorder_by is not None and config.compacts:
        raise ValueError(f"ZORDER BY refused on {topic}: its cleanup.policy={config.cleanup_policy} needs files with "
                         "disjoint offset ranges, which ZORDER BY mixes; run optimize without --zorder-by")
    if kind == "compact" and not config.compacts:
        raise ValueError(f"compact refused on {topic}: its cleanup.policy is {config.cleanup_policy}; "
                         "set cleanup.policy=compact (lakelog topics alter) first")
    infos = {p.partition: p for p in (PartitionLogInfo.model_validate(x) for x in client.topic_logs(topic))}
    chosen = sorted(infos) if partitions is None else list(partitions)
    unknown = [p for p in chosen if p not in infos]
    if unknown:
        raise ValueError(f"{topic} has no partition {unknown[0]} (it has {len(infos)})")
    holder = f"lakelog job {kind} (Spark app {spark.sparkContext.applicationId})"
    results = []
    for p in chosen:
        uri, began = infos[p].table_uri, time.monotonic()
        with CommitterLease(zk, topic=topic, partition=p, holder=holder, wait_s=lease_wait_s):
            before = RsDeltaTable(uri)
            files_before, version_before = len(before.file_uris()), before.version()
            commits, deleted = 0, 0
            if kind == "optimize":
                commits = optimize_table(spark, uri, target_file_bytes=target_file_bytes, zorder_by=zorder_by)
            elif kind == "compact":
                commits = compact_table(spark, uri, config=config, target_file_bytes=target_file_bytes)
            else:
                deleted = vacuum_table(spark, uri)
            after = RsDeltaTable(uri)
        results.append(JobResult(topic=topic, partition=p, table_uri=uri,
                                 kind="zorder" if zorder_by and kind == "optimize" else kind,
                                 version_before=version_before, version_after=after.version(),
                                 files_before=files_before, files_after=len(after.file_uris()), commits=commits,
                                 files_deleted=deleted, seconds=time.monotonic() - began))
        log.info("%s of %s-%d: %s", kind, topic, p, results[-1])
    return results


def run_from_gateway(kind: JobKind, *, bootstrap_server: str, zookeeper_connect: str, topic: str,
                     partitions: Sequence[int] | None = None, zorder_by: ZOrderColumn | None = None,
                     target_file_bytes: int = MERGE_TARGET_BYTES, lease_wait_s: float = 300.0,
                     master: str | None = None, client_options: dict | None = None) -> list[JobResult]:
    """:func:`run_job` with its own SparkSession (:func:`lakelog.spark.session`), gateway client and
    ZooKeeper client, all stopped at the end: what ``lakelog job`` and ``jobs/maintenance.py`` run.

    Args:
        bootstrap_server: gateway(s), ``host:port[,host:port]``.
        zookeeper_connect: the cluster's ``zookeeper.connect`` (``host:port[,host:port][/chroot]``).
        master: ``spark.master``. Default: as :func:`lakelog.spark.session` (``local[*]``, or
            ``spark-submit``'s when run under it).
        client_options: more :class:`LakelogClient` keyword arguments: ``auth``, ``ssl_cafile``, ... (a secured
            cluster; ``lakelog.cli.common.client_settings``). Default: none.
        Others: as :func:`run_job`.

    Raises:
        kazoo.handlers.threading.KazooTimeoutError: ZooKeeper not reachable in 15 s; others as :func:`run_job`.
    """
    from kazoo.client import KazooClient

    from lakelog.client import LakelogClient
    from lakelog.spark.session import session

    zk = KazooClient(hosts=zookeeper_connect)
    zk.start(timeout=15)
    spark = session(master=master, app_name=f"lakelog-job-{kind}")
    try:
        with LakelogClient(bootstrap_server, **(client_options or {})) as client:
            return run_job(kind, spark=spark, client=client, zk=zk, topic=topic, partitions=partitions,
                           zorder_by=zorder_by, target_file_bytes=target_file_bytes, lease_wait_s=lease_wait_s)
    finally:
        spark.stop()
        zk.stop()
        zk.close()
