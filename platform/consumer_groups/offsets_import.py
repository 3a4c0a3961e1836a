"""The one-time import of an old per-broker ``__consumer_offsets`` Delta table into the internal topic.

Before the group coordinator, every broker kept its groups' commits in a Delta table of its own,
``{log.dirs}/__consumer_offsets`` (columns ``group, topic, partition, offset, metadata, generation,
commit_timestamp``; idempotent commits as Delta ``txn`` actions). A broker that finds one at start:

1. reads it and keeps the newest row per (group, topic, partition);
2. commits each group's offsets through its coordinator, keeping only those newer than what the
   coordinator has (``commit_timestamp``: another broker's import, or a commit since, may be newer);
   the group's idempotent-commit version (``txn`` of app id = the group, what lakelog's Spark source
   uses) goes along, so a replayed Spark batch still writes nothing;
3. renames the table to ``__consumer_offsets.imported-{ms}``, so it is imported once, and says so in its log.

A failure leaves the table in place: the next start imports again (step 2 keeps it idempotent).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pyarrow.compute as pc
from deltalake import DeltaTable

from lakelog.consumer_groups.coordinator import GroupCoordinator
from lakelog.consumer_groups.offset_records import OFFSETS_TOPIC, CommittedOffset

log = logging.getLogger(__name__)


def read_old_offsets(table_dir: Path) -> dict[str, list[CommittedOffset]]:
    """Step 1: the newest committed offset per (group, topic, partition) of an old table, by group, each
    with the group's ``txn`` version for app id = the group (None without). Blocking."""
    table = DeltaTable(str(table_dir))
    rows = table.to_pyarrow_table()
    if rows.num_rows == 0:
        return {}
    rows = rows.take(pc.sort_indices(rows, [("commit_timestamp", "ascending")]))  # stable: ties keep append order
    newest: dict[tuple[str, str, int], dict] = {}
    for r in rows.to_pylist():
        newest[(r["group"], r["topic"], int(r["partition"]))] = r
    versions = {g: table.transaction_version(g) for g in {g for g, _, _ in newest}}
    out: dict[str, list[CommittedOffset]] = {}
    for (group, topic, partition), r in sorted(newest.items()):
        ts = r["commit_timestamp"]
        ms = int(ts.timestamp() * 1000) if hasattr(ts, "timestamp") else int(ts) // 1000
        out.setdefault(group, []).append(CommittedOffset(
            group, topic, partition, int(r["offset"]), r["metadata"], r["generation"], ms,
            group if versions[group] is not None else None, versions[group]))
    return out


async def import_old_offsets(coordinator: GroupCoordinator, log_dir: Path) -> int:
    """Steps 1-3 for ``{log_dir}/__consumer_offsets`` if it is an old table; returns the groups imported
    (0 when there is none). Raises what a commit raises (the table stays for the next start)."""
    table_dir = Path(log_dir) / OFFSETS_TOPIC
    if not (table_dir / "_delta_log").is_dir():
        return 0
    # 1. the newest row per partition
    groups = await asyncio.to_thread(read_old_offsets, table_dir)
    # 2. through each group's coordinator, only what is newer there
    written = 0
    for group, offsets in groups.items():
        if await coordinator.commit(group, offsets, only_newer=True):
            written += 1
    # 3. once
    moved = table_dir.with_name(f"{OFFSETS_TOPIC}.imported-{int(time.time() * 1000)}")
    os.replace(table_dir, moved)
    log.warning("imported the committed offsets of %d group(s) (%d with offsets newer than the coordinators') from "
                "the old per-broker table %s into the internal topic %s; the old table is now %s", len(groups),
                written, table_dir, OFFSETS_TOPIC, moved)
    return len(groups)
