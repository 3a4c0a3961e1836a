"""Group membership and rebalancing against a real broker and ZooKeeper: members split the partitions,
a deleted or expired member's partitions move to the others, every record is consumed at least once,
two groups each get every record, and no partition is read by two members of one generation."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from lakelog.client import GatewayError, HttpConsumer, LakelogClient
from tests.harness import wait_for

PARTITIONS = 6


class Worker(threading.Thread):
    """Polls one consumer instance, logs (member, generation, partition, offset), commits after processing."""

    def __init__(self, consumer: HttpConsumer, log: list) -> None:
        super().__init__(daemon=True)
        self.consumer = consumer
        self.log = log
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                records = self.consumer.poll(timeout_ms=200)
                generation = self.consumer.last_generation
                for r in records:  # "processing"
                    self.log.append((self.consumer.instance_id, generation, r["partition"], r["offset"]))
                if records:
                    try:
                        self.consumer.commit()  # commit after processing: at-least-once
                    except GatewayError as e:
                        if e.error_code != 40904:  # fenced by a rebalance: the records come again
                            raise
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)
        assert not self.is_alive(), "the worker did not stop"
        assert self.error is None, self.error


class Producer(threading.Thread):
    """Produces small batches to every partition until stopped."""

    def __init__(self, url: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.client = LakelogClient(url)
        self.topic = topic
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            while not self.stop_event.is_set():
                for p in range(PARTITIONS):
                    self.client.produce_binary(self.topic, [(None, f"{p}-{n}-{i}".encode()) for i in range(10)],
                                               partition=p)
                n += 1
                time.sleep(0.02)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)
        assert not self.is_alive(), "the producer did not stop"
        self.client.close()
        assert self.error is None, self.error


def high_watermarks(api: LakelogClient, topic: str) -> dict[int, int]:
    return {p: api.partition_offsets(topic, p)["end_offset"] for p in range(PARTITIONS)}


def owned_counts(consumers: list[HttpConsumer]) -> dict[str, int] | None:
    """Partitions each consumer reads now, if they add up to the whole topic, each exactly once."""
    owned = {c.instance_id: c.assignment() for c in consumers}
    everything = [tp for tps in owned.values() for tp in tps]
    if len(everything) != PARTITIONS or len(set(everything)) != PARTITIONS:
        return None
    return {m: len(tps) for m, tps in owned.items()}


def check_log(log: list, hw: dict[int, int]) -> None:
    consumed = {(p, o) for _, _, p, o in log}
    missing = [(p, o) for p, end in hw.items() for o in range(end) if (p, o) not in consumed]
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:5]}"
    readers = defaultdict(set)
    for member, generation, p, _ in log:
        readers[(generation, p)].add(member)
    shared = {k: v for k, v in readers.items() if len(v) > 1}
    assert not shared, f"partitions read by two members of one generation: {shared}"


def test_members_split_rebalance_on_delete_and_expiry(api, gw, topic_name, group):
    api.create_topic(topic_name, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        api.produce_binary(topic_name, [(None, b"before")] * 50, partition=p)
    consumers = [api.groups.create_consumer(group, name=f"m{i}", auto_offset_reset="earliest", auto_commit=False)
                 for i in range(3)]
    log: list = []
    workers = [Worker(c, log) for c in consumers]
    for c, w in zip(consumers, workers):
        c.subscribe([topic_name])
        w.start()
    producer = Producer(gw.url, topic_name)
    producer.start()
    try:
        # 3 members, 6 partitions: 2 each
        wait_for(lambda: owned_counts(consumers) == {"m0": 2, "m1": 2, "m2": 2}, what="3 x 2 partitions")
        described = api.groups.group_members(group)
        assert described["state"] == "Stable" and described["assignor"] == "range"
        assert [len(m["assignment"]) for m in described["members"]] == [2, 2, 2]
        time.sleep(0.3)
        # deleting a member moves its partitions to the other two
        workers[2].stop()
        consumers[2].close()
        wait_for(lambda: owned_counts(consumers[:2]) == {"m0": 3, "m1": 3}, what="2 x 3 partitions")
        time.sleep(0.3)
        # a member that stops fetching expires after consumer.instance.timeout.ms; its partitions move
        workers[1].stop()
        wait_for(lambda: owned_counts(consumers[:1]) == {"m0": 6}, what="1 x 6 partitions")
        time.sleep(0.3)
    finally:
        producer.stop()
    hw = high_watermarks(api, topic_name)
    # the remaining member catches up and commits everything
    wait_for(lambda: {o["partition"]: o["offset"] for o in api.committed_offsets(group)} == hw,
             what="commits up to the high watermarks")
    workers[0].stop()
    consumers[0].close()
    check_log(log, hw)
    generations = {g for _, g, _, _ in log}
    assert len(generations) >= 3  # initial split, after the delete, after the expiry


def test_two_groups_each_get_every_record(api, gw, topic_name, group):
    api.create_topic(topic_name, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        api.produce_binary(topic_name, [(None, b"x")] * 40, partition=p)
    logs = {f"{group}-a": [], f"{group}-b": []}
    consumers, workers = [], []
    for g, log in logs.items():
        for i in range(2):
            c = api.groups.create_consumer(g, name=f"m{i}", auto_offset_reset="earliest", auto_commit=False,
                                    assignor="roundrobin" if g.endswith("a") else "sticky")
            c.subscribe([topic_name])
            consumers.append(c)
            workers.append(Worker(c, log))
            workers[-1].start()
    producer = Producer(gw.url, topic_name)
    producer.start()
    time.sleep(1.0)
    producer.stop()
    hw = high_watermarks(api, topic_name)
    for g in logs:
        wait_for(lambda g=g: {o["partition"]: o["offset"] for o in api.committed_offsets(g)} == hw,
                 what=f"group {g} caught up")
    # within a group the members split the partitions (queue)
    assert owned_counts(consumers[:2]) == {"m0": 3, "m1": 3}
    assert owned_counts(consumers[2:]) == {"m0": 3, "m1": 3}
    for w in workers:
        w.stop()
    for c in consumers:
        c.close()
    for g, log in logs.items():
        check_log(log, hw)  # each group received every record (publish-subscribe)


def test_partitions_added_to_a_subscribed_topic_are_assigned(api, gw, topic_name, group):
    """Kafka's consumers rebalance when their metadata shows a topic grew; so do lakelog's groups, and the
    new partitions' records are consumed."""
    api.create_topic(topic_name, partitions=1)
    consumers = [api.groups.create_consumer(group, name=f"m{i}", auto_offset_reset="earliest", auto_commit=False)
                 for i in range(2)]
    for c in consumers:
        c.subscribe([topic_name])

    def assigned() -> set[tuple[str, int]]:
        for c in consumers:
            c.poll(timeout_ms=50)
        return {tuple(tp) for c in consumers for tp in c.assignment()}

    wait_for(lambda: assigned() == {(topic_name, 0)}, what="the first assignment")
    api.admin.add_partitions(topic_name, partitions_count=3)
    wait_for(lambda: assigned() == {(topic_name, p) for p in range(3)}, what="the new partitions assigned")
    api.produce_binary(topic_name, [(None, b"new")], partition=2)
    seen: list[dict] = []
    wait_for(lambda: seen.extend(r for c in consumers for r in c.poll(timeout_ms=100)) or
             any(r["partition"] == 2 for r in seen), what="a record of partition 2 consumed")
    for c in consumers:
        c.close()
