"""Whether a broker is ready to serve: the decision of ``GET /ready``, as a pure function.

Kafka has no readiness endpoint; operators (Strimzi, Confluent for Kubernetes) ask the same three
questions of a broker before they send it traffic or roll the next one: is it registered, has it opened
every partition assigned to it, and has every partition it follows caught up (is it in the ISR).
:func:`readiness_problems` answers them from the metadata cache and the replica manager's memory; no
ZooKeeper read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.partition import Partition

__all__ = ["readiness_problems"]

#: At most this many partitions are named per problem (the count is always given).
NAMED_MAX = 5


def _named(what: str, names: list[str]) -> str:
    shown = ", ".join(names[:NAMED_MAX]) + (", ..." if len(names) > NAMED_MAX else "")
    return f"{len(names)} {what}: {shown}"


def readiness_problems(*, broker_id: int, registered: bool, session_lost: bool,
                       topics: Mapping[str, TopicMetadata], local: Iterable[Partition],
                       zookeeper_connected: bool = True) -> list[str]:
    """Why the broker is not ready; empty when it is.

    Args:
        broker_id: this broker.
        registered: its ``/lakelog/brokers/ids/{id}`` znode was written (by this ZooKeeper session).
        session_lost: the ZooKeeper session expired and no new one registered yet.
        topics: the cached topics (replica assignments).
        local: the partition replicas open on this broker.
        zookeeper_connected: its ZooKeeper client is connected now (a dropped connection keeps the
            session for ``zookeeper.session.timeout.ms`` while kazoo tries the other servers; without a
            quorum it stays dropped). Default: True.

    Returns:
        One sentence per problem: not registered; not connected to ZooKeeper; partitions assigned here not opened yet (or opened
        without a role); followed partitions whose ISR does not hold this broker (catching up; a partition
        without a leader is not held against it: there is nothing to catch up from).
    """
    problems = []
    if not registered or session_lost:
        problems.append(f"broker {broker_id} is not registered in ZooKeeper"
                        + (" (its session expired)" if session_lost else ""))
    elif not zookeeper_connected:
        problems.append(f"broker {broker_id} is not connected to ZooKeeper (reconnecting; no quorum?): it serves "
                        "the partitions it leads, but refuses topic and ISR changes")
    opened = {(p.topic, p.partition): p for p in local}
    not_open, catching_up = [], []
    for name, meta in sorted(topics.items()):
        for partition, replicas in sorted(meta.replicas.items()):
            if broker_id not in replicas:
                continue
            part = opened.get((name, partition))
            if part is None or part.state is None:
                not_open.append(f"{name}-{partition}")
            elif part.state.leader >= 0 and part.state.leader != broker_id and broker_id not in part.state.isr:
                catching_up.append(f"{name}-{partition}")  # an offline partition (no leader) has none to catch up
    if not_open:
        problems.append(_named("partition(s) assigned here not opened yet", not_open))
    if catching_up:
        problems.append(_named("followed partition(s) not caught up (not in the ISR)", catching_up))
    return problems
