"""The records of the internal topic ``__consumer_offsets``: their keys and values, and which partition
holds a group.

Kafka keeps committed offsets as records of its compacted internal topic ``__consumer_offsets``
(``GroupMetadataManager``; Kafka-based offset storage since 0.8.2, the default since 0.9); lakelog does
the same, with JSON keys and values (a topic's Delta table is then readable in SQL with ``from_json``).
Two record types, told apart by the key's ``type``:

- ``"offset"``: key ``{"type": "offset", "group": g, "topic": t, "partition": p}``, value
  ``{"offset": o, "metadata": m, "generation": gen, "commit_timestamp_ms": ts, "app_id": a,
  "app_version": v}`` (the next offset the group reads; ``generation`` null outside group membership;
  ``app_id``/``app_version`` the idempotent commit it came with, else null);
- ``"app"``: key ``{"type": "app", "group": g, "app_id": a}``, value ``{"app_version": v,
  "commit_timestamp_ms": ts}``: the newest idempotent commit of an application (Delta's ``txn``
  action: a commit whose version is at or below it is a replay), kept as its own key so compaction of
  the offset records never forgets it.

A null value is a tombstone: the group's offset of that partition was deleted (compaction drops it
later). Keys are encoded deterministically (fixed field order, no spaces), so every record of one key has
the same bytes and the log cleaner keeps only the newest. All records of a group go to one partition,
:func:`partition_for` (Kafka's rule), so one append is atomic for a whole commit.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from lakelog.protocol import partitioner

log = logging.getLogger(__name__)

#: The internal topic's name (Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME``).
OFFSETS_TOPIC = "__consumer_offsets"


#: Java's ``String.hashCode`` (moved to :mod:`lakelog.protocol.partitioner`; kept here for importers).
java_string_hash = partitioner.java_string_hash


def partition_for(group: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group``: ``Utils.abs(group.hashCode) % num_partitions``
    (Kafka's ``GroupMetadataManager.partitionFor``;
    :func:`lakelog.protocol.partitioner.coordinator_partition`), so a group lands on the same partition
    number as in Kafka."""
    return partitioner.coordinator_partition(group, num_partitions)


@dataclass(frozen=True)
class CommittedOffset:
    """The latest committed offset of a group for one partition.

    Attributes:
        offset: the next offset the group reads (Kafka's committed offset).
        generation: the committer's group generation; None outside group membership (a Spark query, a tool).
        commit_timestamp_ms: broker time of the commit, ms since the epoch.
        app_id, app_version: the idempotent commit it came with (None without).
    """

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str | None
    generation: int | None
    commit_timestamp_ms: int
    app_id: str | None = None
    app_version: int | None = None


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def offset_key(group: str, topic: str, partition: int) -> bytes:
    """The key of a group's offset record for one partition (deterministic bytes)."""
    return _dump({"type": "offset", "group": group, "topic": topic, "partition": int(partition)})


def app_key(group: str, app_id: str) -> bytes:
    """The key of a group's record of an application's newest idempotent commit."""
    return _dump({"type": "app", "group": group, "app_id": app_id})


def commit_records(commits: Iterable[CommittedOffset]) -> pa.Table:
    """The records of one commit (``key``, ``value`` binary): an offset record per partition, then one
    ``app`` record per application it names. Every commit must be of one group."""
    keys, values, apps = [], [], {}
    for c in commits:
        keys.append(offset_key(c.group, c.topic, c.partition))
        values.append(_dump({"offset": c.offset, "metadata": c.metadata, "generation": c.generation,
                             "commit_timestamp_ms": c.commit_timestamp_ms, "app_id": c.app_id,
                             "app_version": c.app_version}))
        if c.app_id is not None and c.app_version is not None:
            apps[(c.group, c.app_id)] = (c.app_version, c.commit_timestamp_ms)
    for (group, app_id), (version, ts) in apps.items():
        keys.append(app_key(group, app_id))
        values.append(_dump({"app_version": version, "commit_timestamp_ms": ts}))
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})


def tombstone_records(group: str, partitions: Iterable[tuple[str, int]], *, app_ids: Iterable[str] = ()) -> pa.Table:
    """Tombstones (null values) deleting ``group``'s offsets of ``partitions`` and the records of the
    applications ``app_ids`` (their newest idempotent commit versions). Default: no application's."""
    keys = [offset_key(group, t, p) for t, p in partitions] + [app_key(group, a) for a in app_ids]
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.nulls(len(keys), pa.binary())})


@dataclass
class GroupOffsets:
    """What a coordinator knows of one group: its latest offset per partition, the highest generation
    that committed and the newest version of each application's idempotent commits."""

    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    generation: int | None = None
    app_versions: dict[str, int] = field(default_factory=dict)

    def apply(self, commits: Iterable[CommittedOffset]) -> None:
        """Fold in committed offsets (newer ones replace older ones)."""
        for c in commits:
            self.offsets[(c.topic, c.partition)] = c
            if c.generation is not None:
                self.generation = c.generation if self.generation is None else max(self.generation, c.generation)
            if c.app_id is not None and c.app_version is not None:
                self.app_versions[c.app_id] = max(self.app_versions.get(c.app_id, -1), c.app_version)


def apply_records(groups: dict[str, GroupOffsets], rows: pa.Table) -> int:
    """Fold log rows of ``__consumer_offsets`` (``key``, ``value``; in offset order) into ``groups``
    (group -> :class:`GroupOffsets`). A tombstone removes the partition's offset (and a group left with
    nothing is dropped); a record that is not one of the two types is skipped with a warning (it was
    produced by something else). Returns the records applied."""
    applied = 0
    for key, value in zip(rows["key"].to_pylist(), rows["value"].to_pylist()):
        try:
            k = json.loads(key)
            kind, group = k["type"], k["group"]
            if kind == "offset":
                tp = (k["topic"], int(k["partition"]))
                if value is None:
                    state = groups.get(group)
                    if state is not None:
                        state.offsets.pop(tp, None)
                        if not state.offsets and not state.app_versions:
                            del groups[group]
                else:
                    v = json.loads(value)
                    groups.setdefault(group, GroupOffsets()).apply([CommittedOffset(
                        group, tp[0], tp[1], int(v["offset"]), v.get("metadata"), v.get("generation"),
                        int(v["commit_timestamp_ms"]), v.get("app_id"), v.get("app_version"))])
            elif kind == "app":
                state = groups.setdefault(group, GroupOffsets())
                if value is None:
                    state.app_versions.pop(k["app_id"], None)
                    if not state.offsets and not state.app_versions:
                        del groups[group]
                else:
                    version = int(json.loads(value)["app_version"])
                    state.app_versions[k["app_id"]] = max(state.app_versions.get(k["app_id"], -1), version)
            else:
                raise ValueError(f"unknown record type {kind!r}")
            applied += 1
        except (TypeError, ValueError, KeyError) as e:
            log.warning("%s: a record that is not an offset commit was skipped (%s): key %r", OFFSETS_TOPIC, e,
                        key[:200] if key else key)
    return applied


def offsets_of(group: str, rows: Sequence[dict], *, generation: int | None = None, app_id: str | None = None,
               app_version: int | None = None, now_ms: int | None = None) -> list[CommittedOffset]:
    """:class:`CommittedOffset` s of one commit from ``[{"topic", "partition", "offset", "metadata"?}]``."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return [CommittedOffset(group, r["topic"], int(r["partition"]), int(r["offset"]), r.get("metadata"), generation,
                            now_ms, app_id, app_version) for r in rows]
