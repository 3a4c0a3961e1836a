"""Partition assignors: Kafka's range, round robin and sticky semantics (pure functions, no broker)."""

from __future__ import annotations

import pytest

from lakelog.consumer_groups.assignors import (
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    get_assignor,
)
from lakelog.consumer_groups.errors import InvalidConsumerConfigError


def _owners(assignment: dict) -> dict:
    owners = {}
    for member, tps in assignment.items():
        for tp in tps:
            assert tp not in owners, f"{tp} assigned twice"
            owners[tp] = member
    return owners


def test_range_is_per_topic_like_kafka():
    # Kafka's RangeAssignor javadoc example: 2 consumers, 2 topics of 3 partitions
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert got == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}


def test_roundrobin_like_kafka():
    # Kafka's RoundRobinAssignor javadoc example
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    got = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert got == {"C0": [("t0", 0), ("t0", 2), ("t1", 1)], "C1": [("t0", 1), ("t1", 0), ("t1", 2)]}


def test_roundrobin_skips_members_not_subscribed():
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    got = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    owners = _owners(got)
    assert len(owners) == 6
    assert all(tp[0] in subs[m] for tp, m in owners.items())


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor(), StickyAssignor()])
@pytest.mark.parametrize("members", [1, 2, 3, 4, 6, 7])
def test_every_partition_exactly_once_and_balanced(assignor, members):
    subs = {f"m{i}": ["a"] for i in range(members)}
    got = assignor.assign({"a": 6, "missing-topic-not-created": 0}, subs)
    owners = _owners(got)
    assert sorted(owners) == [("a", p) for p in range(6)]
    counts = [len(v) for v in got.values()]
    assert set(got) == set(subs) and max(counts) - min(counts) <= 1


def test_unknown_topics_get_nothing():
    got = RangeAssignor().assign({"a": 2}, {"m": ["a", "not-yet-created"]})
    assert got == {"m": [("a", 0), ("a", 1)]}


def test_sticky_keeps_partitions_of_the_remaining_members():
    sticky = StickyAssignor()
    subs = {"m0": ["t"], "m1": ["t"], "m2": ["t"]}
    first = sticky.assign({"t": 6}, subs)
    del subs["m1"]
    second = sticky.assign({"t": 6}, subs, previous=first)
    for m in ("m0", "m2"):
        assert set(first[m]) <= set(second[m])  # nothing moved away from a remaining member
    assert sorted(second["m0"] + second["m2"]) == [("t", p) for p in range(6)]
    # a member joins: only what balance needs moves to it
    subs["m3"] = ["t"]
    third = sticky.assign({"t": 6}, subs, previous=second)
    moved = sum(1 for m in ("m0", "m2") for tp in second[m] if tp not in third[m])
    assert moved == 2 and len(third["m3"]) == 2


def test_sticky_balances_unequal_subscriptions():
    subs = {"a": ["t0"], "b": ["t0", "t1"]}
    prev = {"b": [("t0", 0), ("t0", 1), ("t0", 2), ("t0", 3), ("t1", 0), ("t1", 1)]}
    got = StickyAssignor().assign({"t0": 4, "t1": 2}, subs, previous=prev)
    _owners(got)
    assert len(got["a"]) == 3 and len(got["b"]) == 3 and all(tp[0] == "t0" for tp in got["a"])


def test_get_assignor_names():
    assert get_assignor("range").name == "range"
    assert get_assignor("org.apache.kafka.clients.consumer.RoundRobinAssignor").name == "roundrobin"
    assert get_assignor("Sticky").name == "sticky"
    with pytest.raises(InvalidConsumerConfigError):
        get_assignor("cooperative-magic")
