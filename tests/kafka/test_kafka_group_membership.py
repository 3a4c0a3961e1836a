"""Kafka consumer groups over the Kafka listener: unchanged kafka-python, confluent-kafka (librdkafka) and
aiokafka consumers ``subscribe()``, split the partitions of a topic through JoinGroup / SyncGroup, take
over the partitions of a member that leaves or stops heartbeating, commit and resume; the group's members
and lag show over HTTP (``lakelog groups describe``'s data)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from lakelog.client import LakelogClient
from tests.cluster.test_replication import FAST, create_topic
from tests.harness import CONDITION_WAIT_S, wait_for
from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

PARTITIONS = 4

#: the first rebalance of an empty group waits this long for more members (Kafka's default is 3000)
GROUP_ENV = {**KAFKA_LISTENER_ENV, "LAKELOG_GROUP_INITIAL_REBALANCE_DELAY_MS": "200"}


@pytest.fixture
def group_broker(broker_factory, zk_client, topic_name):
    """A broker with a Kafka listener and a 4-partition topic: ``(broker, bootstrap, topic)``."""
    broker = broker_factory(extra_env=dict(GROUP_ENV))
    with LakelogClient(broker.url) as c:
        c.create_topic(topic_name, partitions=PARTITIONS, replication_factor=1)
    return broker, kafka_bootstrap(zk_client, 0), topic_name


def _produce(bootstrap: str, topic: str, per_partition: int, *, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for p in range(PARTITIONS):
        for i in range(start, start + per_partition):
            producer.send(topic, value=f"p{p}-{i}".encode(), partition=p)
    producer.flush()
    producer.close()


class _PollingConsumer:
    """A kafka-python consumer subscribed to ``topic``, polled in its own thread (as an application runs
    it): its current assignment and every record it read."""

    def __init__(self, bootstrap: str, topic: str, group: str, **config) -> None:
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                      enable_auto_commit=False, heartbeat_interval_ms=500, **config)
        self.consumer.subscribe([topic])
        self.records: list = []
        self.assignment: set = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for records in self.consumer.poll(timeout_ms=200).values():
                    self.records.extend(records)
                self.assignment = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def partitions(self) -> set:
        assert self.error is None, self.error
        return self.assignment

    def close(self) -> None:
        """Stop polling and leave the group (LeaveGroup)."""
        self._stop.set()
        self._thread.join(timeout=CONDITION_WAIT_S)
        self.consumer.close()


def _all(topic: str) -> set:
    return {(topic, p) for p in range(PARTITIONS)}


def test_two_consumers_split_the_partitions_and_one_takes_all_when_the_other_leaves(group_broker):
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    _produce(bootstrap, topic, 5)
    first = _PollingConsumer(bootstrap, topic, group)
    second = _PollingConsumer(bootstrap, topic, group)
    try:
        wait_for(lambda: first.partitions() and second.partitions()
                 and first.partitions() | second.partitions() == _all(topic)
                 and not first.partitions() & second.partitions(), what="the partitions split between two members")
        with LakelogClient(broker.url) as http:
            members = http.groups.group_members(group)
            assert members["state"] == "Stable" and members["assignor"] == "range"
            assert len(members["members"]) == 2
            assert {m["client_host"] for m in members["members"]} == {"127.0.0.1"}
            assert all(m["client_id"].startswith("kafka-python") for m in members["members"])
            assert all(m["subscription"] == [topic] for m in members["members"])
            assert sorted((a["topic"], a["partition"]) for m in members["members"] for a in m["assignment"]) == \
                sorted(_all(topic))
        second.close()
        wait_for(lambda: first.partitions() == _all(topic), what="the remaining member owning every partition")
        wait_for(lambda: {(r.partition, r.offset) for r in first.records + second.records}
                 >= {(p, o) for p in range(PARTITIONS) for o in range(5)}, what="every record read")
    finally:
        first.close()
        second.close()


def test_a_new_consumer_resumes_at_the_offsets_the_group_committed(group_broker):
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    _produce(bootstrap, topic, 3)
    reader = _PollingConsumer(bootstrap, topic, group)
    try:
        wait_for(lambda: len(reader.records) >= 3 * PARTITIONS, what="the first records")
        reader._stop.set()
        reader._thread.join(timeout=CONDITION_WAIT_S)
        reader.consumer.commit()  # the positions: offset 3 of every partition, fenced by member id and generation
    finally:
        reader.close()
    with LakelogClient(broker.url) as http:
        assert sorted((o["partition"], o["offset"]) for o in http.groups.committed_offsets(group)) == [
            (p, 3) for p in range(PARTITIONS)]
    _produce(bootstrap, topic, 2, start=3)
    resumed = _PollingConsumer(bootstrap, topic, group)
    try:
        wait_for(lambda: len(resumed.records) >= 2 * PARTITIONS, what="the records after the committed offsets")
        assert sorted((r.partition, r.offset) for r in resumed.records) == [
            (p, o) for p in range(PARTITIONS) for o in (3, 4)]
    finally:
        resumed.close()


_DYING_CONSUMER = textwrap.dedent("""
    import sys
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], session_timeout_ms=6000,
                             heartbeat_interval_ms=500, enable_auto_commit=False)
    consumer.subscribe([sys.argv[3]])
    announced = False
    while True:
        consumer.poll(timeout_ms=200)
        if consumer.assignment() and not announced:
            print("assigned", flush=True)
            announced = True
""")


def test_a_member_that_stops_heartbeating_is_removed_and_its_partitions_reassigned(group_broker):
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    survivor = _PollingConsumer(bootstrap, topic, group, session_timeout_ms=6000)
    dying = subprocess.Popen([sys.executable, "-c", _DYING_CONSUMER, bootstrap, group, topic],
                             stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: survivor.partitions() and survivor.partitions() != _all(topic),
                 what="the partitions split with the member in the child process")
        with LakelogClient(broker.url) as http:
            assert len(http.groups.group_members(group)["members"]) == 2
        os.kill(dying.pid, signal.SIGKILL)  # no LeaveGroup: only its session timeout removes it
        dying.wait()
        wait_for(lambda: survivor.partitions() == _all(topic), what="every partition back to the survivor")
        with LakelogClient(broker.url) as http:
            wait_for(lambda: len(http.groups.group_members(group)["members"]) == 1, what="one member left")
    finally:
        if dying.poll() is None:
            os.kill(dying.pid, signal.SIGKILL)
            dying.wait()
        survivor.close()


def test_librdkafka_group_consumer_commits_closes_and_resumes(group_broker):
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    _produce(bootstrap, topic, 3)

    def consume(count: int) -> list:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200})
        consumer.subscribe([topic])
        got: list = []
        try:
            def more() -> bool:
                msg = consumer.poll(0.5)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append((msg.partition(), msg.offset()))
                return len(got) >= count

            wait_for(more, what=f"{count} records read by librdkafka in the group")
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()  # LeaveGroup
        return got

    assert sorted(consume(3 * PARTITIONS)) == [(p, o) for p in range(PARTITIONS) for o in range(3)]
    with LakelogClient(broker.url) as http:
        assert sorted((o["partition"], o["offset"]) for o in http.groups.committed_offsets(group)) == [
            (p, 3) for p in range(PARTITIONS)]
    _produce(bootstrap, topic, 1, start=3)
    assert sorted(consume(PARTITIONS)) == [(p, 3) for p in range(PARTITIONS)]


def test_aiokafka_group_consumer_commits_and_resumes(group_broker):
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    _produce(bootstrap, topic, 2)

    async def consume(count: int) -> list:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=200)
        await consumer.start()
        got: list = []
        try:
            while len(got) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend((r.partition, r.offset) for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    first = asyncio.run(asyncio.wait_for(consume(2 * PARTITIONS), timeout=CONDITION_WAIT_S))
    assert sorted(first) == [(p, o) for p in range(PARTITIONS) for o in range(2)]
    _produce(bootstrap, topic, 1, start=2)
    second = asyncio.run(asyncio.wait_for(consume(PARTITIONS), timeout=CONDITION_WAIT_S))
    assert sorted(second) == [(p, 2) for p in range(PARTITIONS)]
    with LakelogClient(broker.url) as http:
        lag = http.groups.group_lag(group)
        assert lag["total_lag"] == 0 and len(lag["partitions"]) == PARTITIONS


def test_a_group_of_http_consumer_instances_refuses_a_kafka_consumer(group_broker):
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    with LakelogClient(broker.url) as http, http.groups.create_consumer(group, name="http-member") as instance:
        instance.subscribe([topic])
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            consumer.subscribe([topic])
            with pytest.raises(KafkaError, match="InconsistentGroupProtocol"):
                for _ in range(50):
                    consumer.poll(timeout_ms=200)
        finally:
            consumer.close()


def test_kafka_admin_lists_describes_and_deletes_the_group(group_broker):
    """DescribeGroups shows the live member (client id, host, its partitions); ListGroups lists the group
    in its state; once the member left, DeleteGroups removes the group's committed offsets."""
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    _produce(bootstrap, topic, 1)
    member = _PollingConsumer(bootstrap, topic, group, client_id="admin-test-client")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_for(lambda: member.partitions() == _all(topic) and len(member.records) >= PARTITIONS,
                 what="the member owning every partition")
        member._stop.set()
        member._thread.join(timeout=CONDITION_WAIT_S)
        member.consumer.commit()
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable" and described["protocol_type"] == "consumer"
        (m,) = described["members"]
        assert (m["client_id"], m["client_host"]) == ("admin-test-client", "127.0.0.1")
        cluster_id = httpx.get(f"{broker.url}/v3/clusters").json()["data"][0]["cluster_id"]
        consumers = httpx.get(f"{broker.url}/v3/clusters/{cluster_id}/consumer-groups/{group}/consumers").json()
        assert [(c["consumer_id"], c["client_id"]) for c in consumers["data"]] == [(m["member_id"], "admin-test-client")]
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["group_state"] == "Stable"
        assert group in {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
        member.close()
        wait_for(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", what="the group empty")
        assert {g: getattr(e, "errno", 0) for g, e in admin.delete_groups([group]).items()} == {group: 0}
        with LakelogClient(broker.url) as http:
            assert http.groups.committed_offsets(group) == []
    finally:
        member.close()
        admin.close()


class _Wire:
    """One connection sending raw requests (kafka-python's message classes) and decoding their answers."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.correlation_id = 0

    def call(self, request_cls, response_cls, version: int, **fields):
        self.correlation_id += 1
        request = request_cls(version=version, **fields)
        request.with_header(correlation_id=self.correlation_id, client_id="wire-test")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", self._read(4))
        return response_cls.decode(self._read(size), version=version, header=True)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def test_join_sync_heartbeat_and_commit_are_fenced_by_member_and_generation(group_broker):
    """Raw JoinGroup v5: a new member gets its id with MEMBER_ID_REQUIRED, joins with it and leads
    generation 1; SyncGroup hands it its assignment; Heartbeat and OffsetCommit with another generation
    answer ILLEGAL_GENERATION, with an unknown member UNKNOWN_MEMBER_ID; a session timeout under
    group.min.session.timeout.ms answers INVALID_SESSION_TIMEOUT; a rejected commit writes nothing."""
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    protocol = JoinGroupRequest.JoinGroupRequestProtocol
    wire = _Wire(bootstrap)
    try:
        def join(member_id: str, session_timeout_ms: int = 10_000):
            return wire.call(JoinGroupRequest, JoinGroupResponse, 5, group_id=group, session_timeout_ms=session_timeout_ms,
                             rebalance_timeout_ms=10_000, member_id=member_id, group_instance_id=None,
                             protocol_type="consumer", protocols=[protocol(version=5, name="range", metadata=b"m")])

        assert join("", session_timeout_ms=1000).error_code == 26
        first = wait_for(lambda: (r := join("")).error_code == 79 and r, what="MEMBER_ID_REQUIRED")  # coordinator ready
        member_id = first.member_id
        joined = join(member_id)
        assert (joined.error_code, joined.generation_id, joined.leader, joined.member_id) == (0, 1, member_id, member_id)
        assert [(m.member_id, m.metadata) for m in joined.members] == [(member_id, b"m")]
        synced = wire.call(SyncGroupRequest, SyncGroupResponse, 3, group_id=group, generation_id=1, member_id=member_id,
                           group_instance_id=None, assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                               version=3, member_id=member_id, assignment=b"mine")])
        assert (synced.error_code, synced.assignment) == (0, b"mine")

        def heartbeat(member: str, generation: int) -> int:
            return wire.call(HeartbeatRequest, HeartbeatResponse, 3, group_id=group, generation_id=generation,
                             member_id=member, group_instance_id=None).error_code

        assert (heartbeat(member_id, 1), heartbeat(member_id, 0), heartbeat("stranger", 1)) == (0, 22, 25)

        def commit(member: str, generation: int, offset: int) -> int:
            topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
            answer = wire.call(OffsetCommitRequest, OffsetCommitResponse, 7, group_id=group,
                               generation_id_or_member_epoch=generation, member_id=member, group_instance_id=None,
                               topics=[topic_cls(version=7, name=topic, partitions=[
                                   topic_cls.OffsetCommitRequestPartition(version=7, partition_index=0,
                                                                          committed_offset=offset,
                                                                          committed_leader_epoch=-1,
                                                                          committed_metadata="")])])
            return answer.topics[0].partitions[0].error_code

        assert (commit(member_id, 0, 5), commit("stranger", 1, 6), commit("", -1, 7)) == (22, 25, 25)
        assert commit(member_id, 1, 3) == 0
        with LakelogClient(broker.url) as http:
            assert [(o["partition"], o["offset"]) for o in http.groups.committed_offsets(group)] == [(0, 3)]
        left = wire.call(LeaveGroupRequest, LeaveGroupResponse, 1, group_id=group, member_id=member_id)
        assert left.error_code == 0
        assert heartbeat(member_id, 1) == 25
    finally:
        wire.close()


@pytest.mark.cluster
def test_on_three_brokers_the_group_lives_on_its_coordinator_and_others_answer_not_coordinator(
        broker_factory, zk_client, topic_name):
    """Consumers bootstrapped on broker 0 find the group's coordinator (the leader of its
    __consumer_offsets partition) and split the partitions led by three brokers; a JoinGroup or Heartbeat
    sent to another broker answers NOT_COORDINATOR (16)."""
    env = {**FAST, **GROUP_ENV}
    brokers = {i: broker_factory(broker_id=i, extra_env=dict(env)) for i in range(3)}
    endpoints = {i: kafka_bootstrap(zk_client, i) for i in brokers}
    assert create_topic(brokers[0].url, topic_name, partitions=3, rf=1).status_code == 201
    group = f"g-{topic_name}"
    first = _PollingConsumer(endpoints[0], topic_name, group)
    second = _PollingConsumer(endpoints[0], topic_name, group)
    try:
        wait_for(lambda: first.partitions() and second.partitions()
                 and first.partitions() | second.partitions() == {(topic_name, p) for p in range(3)},
                 what="three partitions split between two members")
        with LakelogClient(brokers[1].url) as http:
            members = http.groups.group_members(group)["members"]
        coordinator = members[0]["broker_id"]
        other = next(i for i in brokers if i != coordinator)
        wire = _Wire(endpoints[other])
        try:
            joined = wire.call(JoinGroupRequest, JoinGroupResponse, 5, group_id=group, session_timeout_ms=10_000,
                               rebalance_timeout_ms=10_000, member_id="", group_instance_id=None,
                               protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                   version=5, name="range", metadata=b"")])
            assert joined.error_code == 16
            beat = wire.call(HeartbeatRequest, HeartbeatResponse, 3, group_id=group, generation_id=1,
                             member_id=members[0]["member_id"], group_instance_id=None)
            assert beat.error_code == 16
        finally:
            wire.close()
    finally:
        first.close()
        second.close()


def test_offset_delete_is_refused_while_a_member_subscribes_to_the_topic(group_broker):
    """OffsetDelete (the Kafka admin client's delete_group_offsets) answers GROUP_SUBSCRIBED_TO_TOPIC while
    a member subscribes to the topic, and deletes the offsets once the group is empty."""
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    _produce(bootstrap, topic, 1)
    member = _PollingConsumer(bootstrap, topic, group)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    partitions = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
    try:
        wait_for(lambda: len(member.records) >= PARTITIONS, what="a record of each partition")
        member._stop.set()
        member._thread.join(timeout=CONDITION_WAIT_S)
        member.consumer.commit()
        answered = admin.delete_group_offsets(group, partitions)
        assert {getattr(e, "errno", 0) for e in answered.values()} == {86}
        member.close()
        wait_for(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", what="the group empty")
        answered = admin.delete_group_offsets(group, partitions)
        assert {getattr(e, "errno", 0) for e in answered.values()} == {0}
        with LakelogClient(broker.url) as http:
            assert http.groups.committed_offsets(group) == []
    finally:
        member.close()
        admin.close()


def test_a_join_waiting_for_a_rebalance_answers_not_coordinator_when_the_broker_shuts_down(group_broker):
    """Raw JoinGroup v5: a second member's join waits for the first member to rejoin (up to the rebalance
    timeout); the broker stopped with SIGTERM meanwhile answers it NOT_COORDINATOR (16), as Kafka's
    coordinator does when it resigns its groups, instead of closing the connection on it."""
    broker, bootstrap, topic = group_broker
    group = f"g-{topic}"
    protocol = JoinGroupRequest.JoinGroupRequestProtocol
    first, second = _Wire(bootstrap), _Wire(bootstrap)
    try:
        def join(wire: _Wire, member_id: str):
            return wire.call(JoinGroupRequest, JoinGroupResponse, 5, group_id=group, session_timeout_ms=30_000,
                             rebalance_timeout_ms=60_000, member_id=member_id, group_instance_id=None,
                             protocol_type="consumer", protocols=[protocol(version=5, name="range", metadata=b"m")])

        member = wait_for(lambda: (r := join(first, "")).error_code == 79 and r, what="MEMBER_ID_REQUIRED").member_id
        assert join(first, member).error_code == 0  # generation 1, one member
        other = join(second, "").member_id  # MEMBER_ID_REQUIRED hands the second its id
        answers: list = []
        waiting = threading.Thread(target=lambda: answers.append(join(second, other)), daemon=True)
        waiting.start()  # the rebalance waits for the first member, which does not rejoin
        waiting.join(1.0)
        assert not answers  # still waiting
        assert broker.stop() is not None  # a graceful stop (SIGTERM), not a kill after the timeout
        waiting.join(30)
        assert [a.error_code for a in answers] == [16]
    finally:
        first.close()
        second.close()

