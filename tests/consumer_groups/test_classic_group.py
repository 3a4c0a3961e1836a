"""Kafka's classic group state machine (no I/O): the two-step join, generations, protocol selection,
fencing, the leader's assignment, leaving and session expiry."""

from __future__ import annotations

import pytest

from lakelog.consumer_groups.classic_group import ClassicGroup
from lakelog.consumer_groups.consumer_protocol import assigned_partitions, subscribed_topics
from lakelog.consumer_groups.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

SESSION_MS = 10_000


def _join(group: ClassicGroup, member_id: str = "", *, now_ms: int = 0, protocols=(("range", b"m"),),
          protocol_type: str = "consumer", v4: bool = True):
    return group.join(member_id=member_id, group_instance_id=None, client_id="c", client_host="10.0.0.1",
                      session_timeout_ms=SESSION_MS, rebalance_timeout_ms=30_000, protocol_type=protocol_type,
                      protocols=list(protocols), require_known_member_id=v4, now_ms=now_ms)


def _new_member(group: ClassicGroup, *, now_ms: int = 0, **kwargs) -> str:
    with pytest.raises(MemberIdRequiredError) as e:
        _join(group, now_ms=now_ms, **kwargs)
    member_id = e.value.member_id
    assert member_id.startswith("c-") and member_id in group.pending
    assert _join(group, member_id, now_ms=now_ms, **kwargs) == (member_id, None)
    return member_id


def _stable_pair() -> tuple[ClassicGroup, str, str]:
    group = ClassicGroup("g", initial_rebalance_delay_ms=0)
    a = _new_member(group)
    group.complete_join(0)
    group.sync(member_id=a, generation_id=1, protocol_type=None, protocol_name=None, assignments={a: b"A"}, now_ms=0)
    b = _new_member(group, now_ms=1)
    assert group.state == "PreparingRebalance" and not group.join_can_complete(1)
    assert _join(group, a, now_ms=2) == (a, None)
    assert group.join_can_complete(2)
    results = {r.member_id: r for r in group.complete_join(2)}
    assert results[a].generation_id == results[b].generation_id == 2
    assert [m for m, _, _ in results[a].members] == [a, b] and results[b].members == []
    assert group.sync(member_id=b, generation_id=2, protocol_type="consumer", protocol_name="range", assignments={},
                      now_ms=3) is None
    answered = group.sync(member_id=a, generation_id=2, protocol_type=None, protocol_name=None,
                          assignments={a: b"A", b: b"B"}, now_ms=3)
    assert {w.member_id: w.assignment for w in answered} == {a: b"A", b: b"B"} and group.state == "Stable"
    return group, a, b


def test_a_new_member_gets_its_id_then_the_first_generation_with_itself_as_leader():
    group = ClassicGroup("g", generation_id=4, initial_rebalance_delay_ms=0)
    a = _new_member(group)
    (result,) = group.complete_join(0)
    assert (result.member_id, result.leader_id, result.generation_id, result.protocol_name) == (a, a, 5, "range")
    assert result.members == [(a, None, b"m")]
    assert group.state == "CompletingRebalance"


def test_an_empty_group_waits_the_initial_delay_for_more_members():
    group = ClassicGroup("g", initial_rebalance_delay_ms=3000)
    _new_member(group, now_ms=0)
    assert not group.join_can_complete(2999)
    _new_member(group, now_ms=2000)  # extends the delay
    assert not group.join_can_complete(4999) and group.join_can_complete(5000)
    assert len(group.complete_join(5000)) == 2


def test_the_protocol_every_member_supports_with_most_first_choices_wins():
    group = ClassicGroup("g", initial_rebalance_delay_ms=0)
    _new_member(group, protocols=[("roundrobin", b""), ("range", b"")])
    _new_member(group, protocols=[("range", b""), ("roundrobin", b"")])
    _new_member(group, protocols=[("range", b""), ("sticky", b"")])
    group.complete_join(0)
    assert group.protocol_name == "range"
    with pytest.raises(InconsistentGroupProtocolError):
        _join(group, protocols=[("sticky", b"")])
    with pytest.raises(InconsistentGroupProtocolError):
        _join(group, protocol_type="connect")


def test_sync_heartbeat_and_commit_are_fenced_by_member_and_generation():
    group, a, b = _stable_pair()
    group.heartbeat(member_id=a, generation_id=2, now_ms=4)
    group.check_commit(member_id=b, generation_id=2, now_ms=4)
    with pytest.raises(UnknownMemberIdError):
        group.heartbeat(member_id="nobody", generation_id=2, now_ms=4)
    with pytest.raises(IllegalGenerationError):
        group.check_commit(member_id=a, generation_id=1, now_ms=4)
    with pytest.raises(UnknownMemberIdError):
        group.check_commit(member_id="", generation_id=-1, now_ms=4)  # a simple commit into an active group
    with pytest.raises(InconsistentGroupProtocolError):
        group.sync(member_id=a, generation_id=2, protocol_type="consumer", protocol_name="sticky", assignments={},
                   now_ms=4)


def test_a_member_leaving_starts_a_rebalance_the_others_learn_by_heartbeat():
    group, a, b = _stable_pair()
    group.leave(b, 10)
    assert group.state == "PreparingRebalance"
    with pytest.raises(RebalanceInProgressError):
        group.heartbeat(member_id=a, generation_id=2, now_ms=11)
    _join(group, a, now_ms=12)
    (result,) = group.complete_join(12)
    assert (result.member_id, result.leader_id, result.generation_id) == (a, a, 3)
    with pytest.raises(UnknownMemberIdError):
        group.leave(b, 13)


def test_a_member_without_heartbeats_for_its_session_timeout_expires():
    group, a, b = _stable_pair()
    group.heartbeat(member_id=a, generation_id=2, now_ms=SESSION_MS)
    assert group.next_deadline_ms() == 3 + SESSION_MS  # b's last sync + its session timeout
    assert group.expired_members(SESSION_MS + 2) == []
    assert group.expired_members(SESSION_MS + 3) == [b]
    group.leave(b, SESSION_MS + 3)
    _join(group, a, now_ms=SESSION_MS + 4)
    assert [r.member_id for r in group.complete_join(SESSION_MS + 4)] == [a]


def test_a_rebalance_during_the_sync_phase_fails_the_waiting_syncs():
    group = ClassicGroup("g", initial_rebalance_delay_ms=0)
    a = _new_member(group)
    b = _new_member(group)
    group.complete_join(0)
    assert group.sync(member_id=b, generation_id=1, protocol_type=None, protocol_name=None, assignments={},
                      now_ms=1) is None
    _new_member(group, now_ms=2)
    assert [(w.member_id, type(w.error)) for w in group.failed_syncs] == [(b, RebalanceInProgressError)]
    with pytest.raises(RebalanceInProgressError):
        group.sync(member_id=a, generation_id=1, protocol_type=None, protocol_name=None, assignments={}, now_ms=3)


def test_the_consumer_protocol_subscription_and_assignment_are_read():
    subscription = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bb" + b"\xff\xff\xff\xff"
    assert subscribed_topics(subscription) == ["a", "bb"]
    assignment = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01a" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x03" \
        + b"\x00\x00\x00\x01" + b"\xff\xff\xff\xff"
    assert assigned_partitions(assignment) == [("a", 1), ("a", 3)]
    assert assigned_partitions(b"") == [] and subscribed_topics(b"\x00\x00\x7f\xff\xff\xff") == []


def test_a_restarted_static_member_takes_its_place_without_a_rebalance_and_fences_the_old_id():
    group = ClassicGroup("g", initial_rebalance_delay_ms=0)
    kwargs = dict(client_id="c", client_host="h", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=30_000,
                  protocol_type="consumer", protocols=[("range", b"m")], require_known_member_id=True)
    old, result = group.join(member_id="", group_instance_id="i-1", now_ms=0, **kwargs)
    assert result is None and old.startswith("i-1-")  # no two-step join for a static member
    group.complete_join(0)
    group.sync(member_id=old, generation_id=1, protocol_type=None, protocol_name=None, assignments={old: b"A"},
               now_ms=1, group_instance_id="i-1")
    new, result = group.join(member_id="", group_instance_id="i-1", now_ms=2, **kwargs)
    assert (result.member_id, result.generation_id, group.state) == (new, 1, "Stable")
    assert group.members[new].assignment == b"A" and old not in group.members
    with pytest.raises(FencedInstanceIdError):
        group.heartbeat(member_id=old, generation_id=1, now_ms=3, group_instance_id="i-1")
    assert group.leave("", 4, group_instance_id="i-1") == new
    assert group.static_members == {} and not group.members
