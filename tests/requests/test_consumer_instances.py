"""The request layer serves consumer instances and the views of their groups with no HTTP app: a broker
built in this process (real ZooKeeper, real Delta logs), which owns its consumer instances, driven only
through :class:`lakelog.requests.RequestHandler`'s ``consumers`` and ``group_views`` — what a second
front door calls — each operation checking its caller itself."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.consumer_groups.errors import (
    ConsumerInstanceNotFoundError,
    IllegalConsumerStateError,
    InvalidGroupIdError,
)
from lakelog.errors import InvalidSubscriptionError, InvalidTopicError
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.requests import (
    CreateConsumerInstanceRequest,
    CreateTopicRequest,
    ProduceRequest,
    RequestContext,
    RequestHandler,
    SubscribeRequest,
)
from lakelog.runtime.zookeeper_server import free_port
from lakelog.security.acls import AclBinding, Operation, ResourceType
from lakelog.security.authentication import ANONYMOUS
from lakelog.security.errors import AuthorizationError

#: the instances' owner, by a second front door; another principal may not use them
OWNER = RequestContext(principal=ANONYMOUS, host="127.0.0.1", client_id="ops-test", listener="kafka")
OTHER = RequestContext(principal="User:mallory", host="127.0.0.1", listener="kafka")


def broker_settings(zk_connect: str, log_dirs, **settings) -> BrokerSettings:
    return BrokerSettings(broker_id=0, port=free_port(), log_dirs=log_dirs, zookeeper_connect=zk_connect,
                          fetch_max_wait_ms=50, offsets_topic_num_partitions=1, transaction_state_log_num_partitions=1,
                          **settings)


async def wait_until(condition) -> None:
    """Poll ``condition()`` until it holds (a bound far above any machine's need: a hang still ends)."""
    deadline = asyncio.get_running_loop().time() + 300
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met"
        await asyncio.sleep(0.02)


def records(values: list[bytes]) -> pa.Table:
    n = len(values)
    return pa.Table.from_pydict({"key": [None] * n, "value": values, "headers": [None] * n,
                                 "timestamp": [None] * n}, schema=PRODUCE_SCHEMA)


async def poll_until(requests: RequestHandler, group: str, name: str, count: int) -> list[bytes]:
    """Poll ``name`` until ``count`` values were read (each poll waits up to its timeout for records)."""
    values: list[bytes] = []
    while len(values) < count:
        result = await requests.consumers.poll(group, name, timeout_ms=200, context=OWNER)
        values += [v for p in result.partitions for v in p.records["value"].to_pylist()]
    return values


def test_consumer_instances_and_group_views_through_the_request_layer(zk_connect, tmp_path, topic_name):
    group = f"{topic_name}-group"

    async def main() -> None:
        broker = Broker(broker_settings(zk_connect, tmp_path / "logs"))
        await broker.start()
        try:
            requests = broker.requests
            await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=1, replication_factor=1),
                                        context=OWNER)
            await requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records([b"a", b"b", b"c"])),
                                   context=OWNER)

            # rules checked by the operations, nothing created when refused
            with pytest.raises(InvalidGroupIdError):
                await requests.consumers.create_instance(CreateConsumerInstanceRequest(group="a/b"), context=OWNER)
            name = await requests.consumers.create_instance(CreateConsumerInstanceRequest(
                group=group, auto_offset_reset="earliest", auto_commit=False), context=OWNER)
            assert name.startswith("rest-consumer-")
            assert [i.name for i in broker.consumer_instances.instances(group)] == [name]
            with pytest.raises(InvalidSubscriptionError):
                await requests.consumers.subscribe(group, name, SubscribeRequest(), context=OWNER)
            with pytest.raises(InvalidSubscriptionError):
                await requests.consumers.subscribe(group, name, SubscribeRequest(topic_pattern="("), context=OWNER)
            with pytest.raises(InvalidTopicError):  # a topic name outside Kafka's rule, whatever the front door
                await requests.consumers.subscribe(group, name, SubscribeRequest(topics=["../evil"]), context=OWNER)
            with pytest.raises(IllegalConsumerStateError):  # nothing to read yet
                await requests.consumers.poll(group, name, context=OWNER)

            # the instance is its creator's only
            for denied in (requests.consumers.poll(group, name, context=OTHER),
                           requests.consumers.delete_instance(group, name, context=OTHER)):
                with pytest.raises(AuthorizationError):
                    await denied
            with pytest.raises(AuthorizationError):
                requests.consumers.assignment(group, name, context=OTHER)

            # subscribe, read everything as the group's one member, commit what was read
            await requests.consumers.subscribe(group, name, SubscribeRequest(topics=[topic_name]), context=OWNER)
            assert await requests.consumers.subscription(group, name, context=OWNER) == [topic_name]
            assert await poll_until(requests, group, name, 3) == [b"a", b"b", b"c"]
            assert requests.consumers.assignment(group, name, context=OWNER) == [(topic_name, 0)]
            await requests.consumers.commit_offsets(group, name, context=OWNER)
            committed = await requests.consumers.committed_offsets(group, name, context=OWNER)
            assert [(c.topic, c.partition, c.offset) for c in committed] == [(topic_name, 0, 3)]

            # seek back and read again; an explicit commit (the next offset to read, Kafka's)
            await requests.consumers.seek_to_beginning(group, name, [(topic_name, 0)], context=OWNER)
            assert await poll_until(requests, group, name, 3) == [b"a", b"b", b"c"]
            await requests.consumers.commit_offsets(group, name, {(topic_name, 0): (2, "m")}, context=OWNER)

            # the group as any broker describes it
            view = await requests.group_views.describe_group(group, context=OWNER)
            assert view.state == "STABLE" and [m.member_id for m in view.members] == [name]
            assert group in [v.group for v in await requests.group_views.list_groups(context=OWNER)]
            member = await requests.group_views.describe_member(group, name, context=OWNER)
            assert member.assignment == [(topic_name, 0)]
            lag = await requests.group_views.partition_lag(group, topic=topic_name, partition=0, context=OWNER)
            assert (lag.current_offset, lag.log_end_offset, lag.lag, lag.consumer_id) == (2, 3, 1, name)
            summary = await requests.group_views.lag_summary(group, context=OWNER)
            assert (summary.total_lag, summary.max_lag_consumer_id) == (1, name)
            assert (await requests.group_views.group_members(group, context=OWNER)).members[0].member_id == name

            await requests.consumers.delete_instance(group, name, context=OWNER)
            with pytest.raises(ConsumerInstanceNotFoundError):
                await requests.consumers.poll(group, name, context=OWNER)

            # an instance left open is closed with the broker (it leaves its group)
            await requests.consumers.create_instance(CreateConsumerInstanceRequest(group=group, name="left-open"),
                                                     context=OWNER)
        finally:
            await broker.stop()
        assert broker.consumer_instances.instances() == []

    asyncio.run(main())


def test_consumer_operations_authorize_their_caller_without_any_front_door(zk_connect, tmp_path, topic_name):
    """With ``authorizer.enabled``, the consumer instance and group view operations check their caller's
    ACLs (real ACLs in ZooKeeper): Read on the group to have an instance, Read on each topic it reads,
    Describe to see a group; a principal without them is refused and nothing is created."""
    group, hidden = f"{topic_name}-group", f"{topic_name}-hidden"
    alice = RequestContext(principal="User:alice", host="10.0.0.1", listener="kafka")
    nobody = RequestContext(principal="User:nobody", host="10.0.0.1", listener="kafka")

    async def main() -> None:
        broker = Broker(broker_settings(zk_connect, tmp_path / "logs", authentication_methods="basic",
                                        inter_broker_password="inter-broker-s3cret", authorizer_enabled=True))
        await broker.start()
        try:
            requests = broker.requests
            admin = requests.broker_context  # the brokers' own principal: a super user
            for name in (topic_name, hidden):
                await requests.create_topic(CreateTopicRequest(name=name, partitions_count=1, replication_factor=1),
                                            context=admin)
            await requests.acls.create_acls(
                [AclBinding.of(resource_type="Topic", name=topic_name, principal="User:alice", operation="Read"),
                 AclBinding.of(resource_type="Group", name=group, principal="User:alice", operation="Read")],
                context=admin)
            await wait_until(lambda: requests.permissions(alice).allows(Operation.READ, ResourceType.GROUP, group))

            with pytest.raises(AuthorizationError, match="User:nobody is not authorized"):
                await requests.consumers.create_instance(CreateConsumerInstanceRequest(group=group, name="n"),
                                                         context=nobody)
            assert broker.consumer_instances.instances(group) == []
            with pytest.raises(AuthorizationError, match="User:nobody is not authorized"):
                await requests.group_views.group_members(group, context=nobody)

            name = await requests.consumers.create_instance(CreateConsumerInstanceRequest(group=group, name="a"),
                                                            context=alice)
            with pytest.raises(AuthorizationError, match=f"Read on Topic '{hidden}'"):
                await requests.consumers.subscribe(group, name, SubscribeRequest(topics=[topic_name, hidden]),
                                                   context=alice)
            with pytest.raises(AuthorizationError, match=f"Read on Topic '{hidden}'"):
                await requests.consumers.assign(group, name, [(hidden, 0)], context=alice)
            assert requests.consumers.assignment(group, name, context=alice) == []
            # a pattern matches only the topics the principal may Read
            await requests.consumers.subscribe(group, name, SubscribeRequest(topic_pattern=f"{topic_name}.*"),
                                               context=alice)
            assert await requests.consumers.subscription(group, name, context=alice) == [topic_name]
            # Read on the group implies Describe: alice sees her group; nobody's lists leave it out
            assert (await requests.group_views.group_members(group, context=alice)).members[0].member_id == name
            assert group not in [v.group for v in await requests.group_views.list_groups(context=nobody)]
        finally:
            await broker.stop()

    asyncio.run(main())
