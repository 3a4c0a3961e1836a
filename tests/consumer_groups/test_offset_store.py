"""The transactional offset store on a real Delta table."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from lakelog.consumer_groups.errors import IllegalGenerationError
from lakelog.consumer_groups.offset_store import OffsetStore


def test_commit_read_and_reload(tmp_path):
    store = OffsetStore(tmp_path / "__consumer_offsets")
    assert store.commit("g", [{"topic": "t", "partition": 0, "offset": 5}, {"topic": "t", "partition": 1, "offset": 7}])
    assert store.commit("g", [{"topic": "t", "partition": 0, "offset": 9, "metadata": "m"}])
    latest = {(c.topic, c.partition): (c.offset, c.metadata) for c in store.committed("g")}
    assert latest == {("t", 0): (9, "m"), ("t", 1): (7, None)}
    assert store.groups() == ["g"]
    reopened = OffsetStore(tmp_path / "__consumer_offsets")
    assert {(c.topic, c.partition): c.offset for c in reopened.committed("g")} == {("t", 0): 9, ("t", 1): 7}
    # one Delta transaction per commit
    assert DeltaTable(str(tmp_path / "__consumer_offsets")).version() == 2


def test_replayed_transaction_is_a_no_op(tmp_path):
    store = OffsetStore(tmp_path / "__consumer_offsets")
    assert store.commit("g", [{"topic": "t", "partition": 0, "offset": 10}], app_id="g/query-1", version=3)
    assert not store.commit("g", [{"topic": "t", "partition": 0, "offset": 99}], app_id="g/query-1", version=3)
    assert not store.commit("g", [{"topic": "t", "partition": 0, "offset": 99}], app_id="g/query-1", version=2)
    assert [c.offset for c in store.committed("g")] == [10]
    assert store.commit("g", [{"topic": "t", "partition": 0, "offset": 20}], app_id="g/query-1", version=4)
    assert [c.offset for c in store.committed("g")] == [20]
    # the txn action is in the Delta log, where delta-spark and delta-rs both see it
    assert DeltaTable(str(tmp_path / "__consumer_offsets")).transaction_version("g/query-1") == 4
    # and survives a restart
    assert not OffsetStore(tmp_path / "__consumer_offsets").commit(
        "g", [{"topic": "t", "partition": 0, "offset": 1}], app_id="g/query-1", version=4)


def test_commit_from_an_older_generation_is_refused(tmp_path):
    store = OffsetStore(tmp_path / "__consumer_offsets")
    store.commit("g", [{"topic": "t", "partition": 0, "offset": 3}], generation=2)
    with pytest.raises(IllegalGenerationError, match="generation 1, but the group is at generation 2") as e:
        store.commit("g", [{"topic": "t", "partition": 0, "offset": 100}], generation=1)
    assert e.value.error_code == 40904
    with pytest.raises(IllegalGenerationError):
        store.commit("g", [{"topic": "t", "partition": 0, "offset": 100}], generation=2, current_generation=3)
    assert [c.offset for c in store.committed("g")] == [3]
    # groups are separate: generation 1 is fine in another group, and neither group sees the other's offsets
    assert store.commit("other", [{"topic": "t", "partition": 0, "offset": 1}], generation=1)
    assert [c.offset for c in store.committed("other")] == [1]
    assert [c.offset for c in store.committed("g")] == [3]
