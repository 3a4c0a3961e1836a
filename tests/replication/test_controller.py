"""The controller's decisions as pure functions: replica assignment, leader election, preferred leader."""

from __future__ import annotations

from collections import Counter

import pytest

from lakelog.replication.controller import state_after_broker_change, state_for_preferred_leader
from lakelog.replication.errors import InvalidReplicationFactorError
from lakelog.replication.metadata import PartitionState, assign_replicas


def test_assignment_spreads_leaders_and_followers_like_kafka():
    a = assign_replicas([0, 1, 2], 6, 3)
    assert all(len(set(r)) == 3 for r in a.values())
    assert Counter(r[0] for r in a.values()) == {0: 2, 1: 2, 2: 2}
    assert len({tuple(r) for r in a.values()}) > 3  # followers shift every n partitions
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([0, 1], 3, 3)


def test_dead_leader_is_replaced_by_the_first_live_isr_member():
    s = PartitionState(0, 4, [0, 1, 2], 1, 7)
    new = state_after_broker_change([0, 1, 2], s, {1, 2}, unclean_leader_election_enable=False, controller_epoch=2)
    assert (new.leader, new.leader_epoch, new.isr, new.controller_epoch, new.version) == (1, 5, [1, 2], 2, 7)


def test_dead_follower_leaves_the_isr_and_the_leader_and_epoch_stay():
    s = PartitionState(0, 4, [0, 1, 2], 1)
    new = state_after_broker_change([0, 1, 2], s, {0, 1}, unclean_leader_election_enable=False, controller_epoch=1)
    assert (new.leader, new.leader_epoch, new.isr) == (0, 4, [0, 1])
    assert state_after_broker_change([0, 1, 2], new, {0, 1}, unclean_leader_election_enable=False,
                                     controller_epoch=1) is None


def test_no_live_isr_member_means_offline_unless_unclean_election_is_enabled():
    s = PartitionState(0, 4, [0], 1)
    clean = state_after_broker_change([0, 1], s, {1}, unclean_leader_election_enable=False, controller_epoch=1)
    assert (clean.leader, clean.leader_epoch, clean.isr) == (-1, 5, [0])
    # the last ISR member returns: it leads again
    back = state_after_broker_change([0, 1], clean, {0, 1}, unclean_leader_election_enable=False, controller_epoch=1)
    assert (back.leader, back.leader_epoch) == (0, 6)
    unclean = state_after_broker_change([0, 1], s, {1}, unclean_leader_election_enable=True, controller_epoch=1)
    assert (unclean.leader, unclean.leader_epoch, unclean.isr) == (1, 5, [1])


def test_preferred_leader_returns_only_when_in_sync():
    s = PartitionState(1, 5, [1, 2], 1)
    assert state_for_preferred_leader([0, 1, 2], s, {0, 1, 2}, controller_epoch=1) is None
    s = PartitionState(1, 5, [1, 2, 0], 1)
    new = state_for_preferred_leader([0, 1, 2], s, {0, 1, 2}, controller_epoch=1)
    assert (new.leader, new.leader_epoch) == (0, 6)
