"""Transactional offset commits on the group coordinator: pending until their producer's marker, applied once
(a marker seen twice changes nothing), and a marker written while the partition loads applied after the load."""

from __future__ import annotations

import asyncio

import pyarrow as pa

from lakelog.consumer_groups.group_metadata import OffsetsPartitionState, fold_offsets
from lakelog.consumer_groups.offset_records import commit_records, offsets_of
from lakelog.coordinators.coordinator_partitions import (
    CoordinatorPartitions,
    InternalTopic,
    LoadedPartition,
    capped_min_isr,
)
from lakelog.log_tables.schema import ATTRIBUTES, CONTROL_BIT, TRANSACTIONAL_BIT
from lakelog.log_tables.transaction_index import control_batch


def rows(records: pa.Table, *, producer_id: int | None, attributes: int, first: int) -> pa.Table:
    n = records.num_rows
    return pa.table({"offset": pa.array(range(first, first + n), pa.int64()), "key": records["key"],
                     "value": records["value"], "producer_id": pa.array([producer_id] * n, pa.int64()),
                     ATTRIBUTES: pa.array([attributes] * n, pa.int8())})


def commit(group: str, offset: int) -> pa.Table:
    return commit_records(offsets_of(group, [{"topic": "a", "partition": 0, "offset": offset}]))


def test_a_transactional_commit_counts_at_its_commit_marker_once_and_never_after_an_abort():
    state = OffsetsPartitionState()
    fold_offsets(state, rows(commit("g", 5), producer_id=None, attributes=0, first=0))
    fold_offsets(state, rows(commit("g", 9), producer_id=7, attributes=TRANSACTIONAL_BIT, first=1))
    fold_offsets(state, rows(commit("h", 3), producer_id=8, attributes=TRANSACTIONAL_BIT, first=2))
    assert state["g"].offsets[("a", 0)].offset == 5 and "h" not in state
    marker = control_batch(control="commit", coordinator_epoch=0, now_ms=0)
    fold_offsets(state, rows(marker, producer_id=7, attributes=TRANSACTIONAL_BIT | CONTROL_BIT, first=3))
    assert state["g"].offsets[("a", 0)].offset == 9
    assert state.end_transaction(7, commit=True) == 0  # the same marker again: nothing more
    abort = control_batch(control="abort", coordinator_epoch=0, now_ms=0)
    fold_offsets(state, rows(abort, producer_id=8, attributes=TRANSACTIONAL_BIT | CONTROL_BIT, first=4))
    assert "h" not in state and state.pending == {}


def test_a_change_during_a_load_is_applied_once_the_load_finished():
    async def main() -> None:
        topic = InternalTopic("__consumer_offsets", num_partitions=1, replication_factor=1,
                              replication_factor_key="offsets.topic.replication.factor",
                              min_isr=lambda rf: capped_min_isr(rf, min_isr=2), keys="groups", missing="none")
        partitions = CoordinatorPartitions(topic, broker_id=0, cache=None, writer=None, create_topic=None,
                                           new_state=OffsetsPartitionState, fold=fold_offsets)
        seen: list[str] = []
        partitions.apply_when_loaded(0, lambda state: seen.append("not led"))  # no such partition here: nothing
        entry = LoadedPartition(1, OffsetsPartitionState(), asyncio.get_running_loop().create_future())
        partitions._loaded[0] = entry  # a load under way
        partitions.apply_when_loaded(0, lambda state: seen.append(f"loading {len(state.pending)}"))
        assert seen == []
        loaded = OffsetsPartitionState()
        loaded.pending[7] = [commit("g", 1)]
        entry.state = loaded  # what the load read, then the load finishes
        entry.ready.set_result(None)
        await asyncio.sleep(0)
        assert seen == ["loading 1"]
        partitions.apply_when_loaded(0, lambda state: seen.append("loaded"))
        assert seen == ["loading 1", "loaded"]
    asyncio.run(main())
