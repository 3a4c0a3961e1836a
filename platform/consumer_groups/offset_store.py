"""The transactional offset store: committed offsets in the Delta table ``__consumer_offsets``.

Columns: ``group`` string, ``topic`` string, ``partition`` int, ``offset`` long (the next offset the
group will read, as Kafka commits it), ``metadata`` string, ``generation`` int (null when the
committer is not a group member, e.g. a Spark query), ``commit_timestamp`` timestamp.

Steps of one commit (mirrored by comments in :meth:`OffsetStore.commit`):

1. refuse a commit from an older generation than the group's (Kafka's ILLEGAL_GENERATION);
2. if it carries a transaction (``app_id``, ``version``) and the table already holds a ``txn``
   action for ``app_id`` at ``version`` or later, it is a replay: answer without writing;
3. append its rows in one Delta transaction, with the ``txn`` action when given (Delta's
   idempotent-writes mechanism, as delta-spark's ``txnAppId``/``txnVersion``);
4. update the in-memory view of the latest committed offset per (group, topic, partition).

The table is appended only (newest row wins); the broker that owns it is its only writer.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from lakelog.consumer_groups.errors import IllegalGenerationError

log = logging.getLogger(__name__)

OFFSETS_TABLE = "__consumer_offsets"

OFFSETS_SCHEMA = pa.schema([
    pa.field("group", pa.string(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("metadata", pa.string()),
    pa.field("generation", pa.int32()),
    pa.field("commit_timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
])


@dataclass(frozen=True)
class CommittedOffset:
    """The latest committed offset of a group for one partition."""

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str | None
    generation: int | None
    commit_timestamp_ms: int


class OffsetStore:
    """Committed offsets of every group, in one Delta table, with an in-memory view of the latest.

    Args:
        table_uri: where the ``__consumer_offsets`` table lives (``{log.dirs}/__consumer_offsets``).
    """

    def __init__(self, table_uri: str) -> None:
        uri = str(table_uri)
        if "://" not in uri:
            uri = os.path.abspath(uri)
            os.makedirs(uri, exist_ok=True)
        self.table_uri = uri
        if DeltaTable.is_deltatable(uri):
            self._table = DeltaTable(uri)
        else:
            self._table = DeltaTable.create(uri, OFFSETS_SCHEMA, mode="ignore", name=OFFSETS_TABLE,
                                            description="lakelog committed consumer group offsets")
        # _write_lock serializes commits (fence + Delta write); _lock guards the in-memory view only,
        # so reads never wait for a Delta write
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, str, int], CommittedOffset] = {}
        self._generations: dict[str, int] = {}
        self._load()

    def _load(self) -> None:
        table = self._table.to_pyarrow_table()
        if table.num_rows == 0:
            return
        # the newest row per (group, topic, partition) wins: sort by commit time (stable: ties keep
        # append order), number the rows, keep the highest number per key
        keys = ["group", "topic", "partition"]
        table = table.take(pc.sort_indices(table, [("commit_timestamp", "ascending")]))
        table = table.append_column("_row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
        newest = table.group_by(keys).aggregate([("_row", "max")])["_row_max"]
        latest = table.take(newest)
        ms = pc.divide(latest["commit_timestamp"].cast(pa.int64()), 1000)
        cols = [latest[k].to_pylist() for k in (*keys, "offset", "metadata", "generation")] + [ms.to_pylist()]
        generations = table.group_by("group").aggregate([("generation", "max")])
        with self._lock:
            for g, t, p, o, m, gen, ts in zip(*cols):
                self._latest[(g, t, p)] = CommittedOffset(g, t, p, o, m, gen, ts)
            for g, gen in zip(generations["group"].to_pylist(), generations["generation_max"].to_pylist()):
                if gen is not None:
                    self._generations[g] = gen

    # -- reads ----------------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """Groups that have committed offsets, sorted."""
        with self._lock:
            return sorted({g for g, _, _ in self._latest})

    def committed(self, group: str, topic: str | None = None) -> list[CommittedOffset]:
        """The latest committed offsets of ``group`` (optionally one topic), sorted by topic, partition."""
        with self._lock:
            rows = [c for (g, t, _), c in self._latest.items() if g == group and (topic is None or t == topic)]
        return sorted(rows, key=lambda c: (c.topic, c.partition))

    # -- commit ---------------------------------------------------------------------------------

    def commit(self, group: str, offsets: list[dict], *, generation: int | None = None,
               current_generation: int | None = None, app_id: str | None = None,
               version: int | None = None) -> bool:
        """Commit ``offsets`` (``[{"topic", "partition", "offset", "metadata"?}]``) for ``group``.

        Args:
            generation: the committer's generation (group members); None for committers outside
                group membership (Spark queries).
            current_generation: the group's generation now (from its coordinator); a commit with
                an older ``generation`` is refused. Default: the highest generation committed so far.
            app_id, version: Delta transaction identifiers making the commit idempotent: a commit
                with a version at or below the last one of ``app_id`` is a replay and a no-op.

        Returns:
            True if written, False for a replay.

        Raises:
            IllegalGenerationError: ``generation`` is older than the group's.
            deltalake.exceptions.DeltaError: the commit failed (nothing was written).
        """
        with self._write_lock:
            # 1. fence commits from an older generation (generations only change under _write_lock)
            if current_generation is not None:
                known = current_generation
            else:
                with self._lock:
                    known = self._generations.get(group)
            if generation is not None and known is not None and generation < known:
                raise IllegalGenerationError(
                    f"Offset commit for group '{group}' has generation {generation}, but the group is at "
                    f"generation {known}: the member was fenced by a rebalance and must rejoin.")
            # 2. a replayed transaction is a no-op
            if app_id is not None and version is not None:
                done = self._table.transaction_version(app_id)
                if done is not None and version <= done:
                    return False
            # 3. one Delta transaction, with the txn action when given
            now_us = int(time.time() * 1_000_000)
            n = len(offsets)
            batch = pa.Table.from_arrays([
                pa.array([group] * n, pa.string()),
                pa.array([o["topic"] for o in offsets], pa.string()),
                pa.array([int(o["partition"]) for o in offsets], pa.int32()),
                pa.array([int(o["offset"]) for o in offsets], pa.int64()),
                pa.array([o.get("metadata") for o in offsets], pa.string()),
                pa.array([generation] * n, pa.int32()),
                pa.array([now_us] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            ], schema=OFFSETS_SCHEMA)
            txns = [Transaction(app_id=app_id, version=version, last_updated=now_us // 1000)] \
                if app_id is not None and version is not None else None
            write_deltalake(self._table, batch, mode="append",
                            commit_properties=CommitProperties(app_transactions=txns,
                                                               custom_metadata={"lakelog.group": group}))
            # 4. the in-memory view of the latest offsets
            with self._lock:
                for o in offsets:
                    c = CommittedOffset(group, o["topic"], int(o["partition"]), int(o["offset"]), o.get("metadata"),
                                        generation, now_us // 1000)
                    self._latest[(group, c.topic, c.partition)] = c
                if generation is not None:
                    self._generations[group] = max(self._generations.get(group, -1), generation)
            return True
