"""``GET /ready``'s decision as a pure function (no ZooKeeper): registration, partitions opened, followers
caught up; a partition without a leader is not held against a broker."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.replication.metadata import PartitionState, TopicMetadata
from lakelog.replication.readiness import readiness_problems


@dataclass
class Replica:
    """What the decision reads of a local replica (``Partition``'s topic, partition and watched state)."""

    topic: str
    partition: int
    state: PartitionState | None


TOPICS = {"orders": TopicMetadata("orders", "id-1", {0: [1, 2], 1: [2, 3], 2: [3, 1]}, {})}


def test_ready_when_registered_opened_and_in_every_followed_isr():
    local = [Replica("orders", 0, PartitionState(1, 0, [1, 2])), Replica("orders", 2, PartitionState(3, 0, [3, 1]))]
    assert readiness_problems(broker_id=1, registered=True, session_lost=False, topics=TOPICS, local=local) == []


def test_each_problem_is_named():
    local = [Replica("orders", 2, PartitionState(3, 4, [3]))]  # follows 2 out of the ISR; 0 not opened
    problems = readiness_problems(broker_id=1, registered=False, session_lost=False, topics=TOPICS, local=local)
    assert problems == ["broker 1 is not registered in ZooKeeper",
                        "1 partition(s) assigned here not opened yet: orders-0",
                        "1 followed partition(s) not caught up (not in the ISR): orders-2"]
    lost = readiness_problems(broker_id=1, registered=True, session_lost=True, topics=TOPICS,
                              local=[Replica("orders", 0, None), Replica("orders", 2, PartitionState(3, 0, [3, 1]))])
    assert lost == ["broker 1 is not registered in ZooKeeper (its session expired)",
                    "1 partition(s) assigned here not opened yet: orders-0"]  # opened but no role yet


def test_an_offline_partition_does_not_keep_a_broker_unready():
    local = [Replica("orders", 0, PartitionState(1, 0, [1])), Replica("orders", 2, PartitionState(-1, 5, [3]))]
    assert readiness_problems(broker_id=1, registered=True, session_lost=False, topics=TOPICS, local=local) == []


def test_many_partitions_are_counted_and_a_few_named():
    topics = {"t": TopicMetadata("t", "id-2", {p: [0] for p in range(8)}, {})}
    (problem,) = readiness_problems(broker_id=0, registered=True, session_lost=False, topics=topics, local=[])
    assert problem == "8 partition(s) assigned here not opened yet: t-0, t-1, t-2, t-3, t-4, ..."


def test_a_broker_disconnected_from_zookeeper_is_not_ready():
    local = [Replica("orders", 0, PartitionState(1, 0, [1, 2])), Replica("orders", 2, PartitionState(3, 0, [3, 1]))]
    problems = readiness_problems(broker_id=1, registered=True, session_lost=False, topics=TOPICS, local=local,
                                  zookeeper_connected=False)
    assert problems == ["broker 1 is not connected to ZooKeeper (reconnecting; no quorum?): it serves the partitions "
                        "it leads, but refuses topic and ISR changes"]
