"""The request layer serves produce, fetch, list offsets, topic admin, producer ids and transactions with no
HTTP app: a broker built in this process (real ZooKeeper, real Delta logs) driven only through
:class:`lakelog.requests.RequestHandler` — what a second front door (the Kafka wire protocol) calls — and
authorizing each caller itself (real ACLs in ZooKeeper), whatever that front door checked."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pyarrow as pa
import pytest

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.consumer_groups.offsets_admin import PartitionOffset
from lakelog.coordinators.transaction_state import TransactionState
from lakelog.log_tables.errors import OffsetOutOfRangeError, RecordTooLargeError
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.protocol.errors import (
    FieldOutOfRangeError,
    InvalidPartitionInRecordError,
    InvalidProducerHeadersError,
    MalformedBodyError,
)
from lakelog.protocol.partitioner import partitions_for_keys
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.errors import UnknownPartitionError, UnknownTopicError
from lakelog.runtime.zookeeper_server import free_port
from lakelog.requests import (
    CreateTopicRequest,
    EndTxnRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    ProduceRequest,
    RequestContext,
    RequestHandler,
    ResetOffsetsRequest,
    TxnOffsetCommitRequest,
)
from lakelog.producers.errors import TransactionalIdNotFoundError
from lakelog.security.acls import AclBinding, AclFilter, Operation, ResourceType
from lakelog.security.authentication import ANONYMOUS
from lakelog.security.errors import AuthorizationError
from tests.harness import CONDITION_WAIT_S

#: an anonymous client's requests from a second front door (authorizer.enabled is false unless a test sets it)
CLIENT = RequestContext(principal=ANONYMOUS, host="127.0.0.1", client_id="ops-test", listener="kafka")


def records(values: list[bytes], keys: list[bytes | None] | None = None) -> pa.Table:
    """A produce batch (broker timestamps, no headers)."""
    n = len(values)
    return pa.Table.from_pydict({"key": keys or [None] * n, "value": values, "headers": [None] * n,
                                 "timestamp": [None] * n}, schema=PRODUCE_SCHEMA)


def run_with_requests(zk_connect: str, log_dirs, scenario, **settings) -> None:
    """Start a broker in this process (no gateway app; ``settings``: more broker settings), run
    ``await scenario(broker.requests)``, stop it."""
    async def main() -> None:
        broker = Broker(BrokerSettings(broker_id=0, port=free_port(), log_dirs=log_dirs, zookeeper_connect=zk_connect,
                                       fetch_max_wait_ms=50, offsets_topic_num_partitions=1,
                                       transaction_state_log_num_partitions=1, **settings))
        await broker.start()
        try:
            await scenario(broker.requests)
        finally:
            await broker.stop()
    asyncio.run(main())


def test_topic_create_produce_fetch_and_delete_through_the_request_layer(zk_connect, tmp_path, topic_name):
    async def scenario(requests: RequestHandler) -> None:
        meta = await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=3,
                                                              replication_factor=1,
                                                              configs={"retention.ms": "3600000"}), context=CLIENT)
        assert meta.partitions_count == 3
        described = await requests.describe_topic(topic_name, context=CLIENT)
        assert described.config.to_kafka()["retention.ms"] == "3600000"
        assert topic_name in await requests.list_topics(context=CLIENT)

        # a topic-level produce: partitioned by murmur2 of the key, offsets dense per partition
        keys = [b"k%d" % i for i in range(30)]
        result = await requests.produce(ProduceRequest(topic=topic_name, records=records([b"v"] * 30, keys)),
                                        context=CLIENT)
        expected = partitions_for_keys(pa.array(keys, pa.binary()), 3).to_numpy(zero_copy_only=False)
        assert list(result.partitions) == list(expected) and not result.errors
        for p in range(3):
            assert list(result.offsets[result.partitions == p]) == list(range(int((expected == p).sum())))

        # one Arrow batch to partition 1, then a fetch of everything there
        before = int((expected == 1).sum())
        batch = await requests.produce(ProduceRequest(topic=topic_name, partition=1, layout="batch",
                                                      records=records([b"a", b"b", b"c"])), context=CLIENT)
        assert batch.base_offset == before
        fetched = await requests.fetch(FetchRequest(topic=topic_name, partition=1, offset=before, max_wait_ms=0),
                                       context=CLIENT)
        assert fetched.records["value"].to_pylist() == [b"a", b"b", b"c"]
        assert (fetched.next_offset, fetched.high_watermark, fetched.log_start_offset) == (before + 3, before + 3, 0)
        listed = await requests.list_offsets(ListOffsetsRequest(topic=topic_name, partition=1, timestamp_ms=0),
                                             context=CLIENT)
        assert listed.offsets.high_watermark == before + 3 and listed.offset_for_timestamp == 0

        # a long poll with nothing new answers empty after max_wait_ms (None: fetch.max.wait.ms)
        empty = await requests.fetch(FetchRequest(topic=topic_name, partition=1, offset=before + 3), context=CLIENT)
        assert empty.records.num_rows == 0 and empty.next_offset == before + 3

        await requests.delete_topic(topic_name, context=CLIENT)
        with pytest.raises(UnknownTopicError):
            await requests.describe_topic(topic_name, context=CLIENT)

    run_with_requests(zk_connect, tmp_path / "logs", scenario)


def test_every_rule_of_a_produce_and_a_fetch_is_checked_before_anything_is_done(zk_connect, tmp_path, topic_name):
    async def scenario(requests: RequestHandler) -> None:
        await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=2, replication_factor=1),
                                    context=CLIENT)
        refused = [
            (ProduceRequest(topic=topic_name, records=records([b"x", b"y"]),
                            record_partitions=pa.array([0, 7], pa.int32())), InvalidPartitionInRecordError),
            (ProduceRequest(topic=topic_name, partition=0, layout="batch", records=records([b"x"]),
                            record_partitions=pa.array([1], pa.int32())), InvalidPartitionInRecordError),
            (ProduceRequest(topic=topic_name, partition=0, layout="batch", records=records([])), MalformedBodyError),
            (ProduceRequest(topic=topic_name, partition=5, records=records([b"x"])), UnknownPartitionError),
            (ProduceRequest(topic=topic_name, partition=0, acks="0", records=records([b"x"]),
                            producer=ProducerBatch(1, 0, 0)), InvalidProducerHeadersError),
            (ProduceRequest(topic="no-such-topic", records=records([b"x"])), UnknownTopicError),
        ]
        for request, error in refused:
            with pytest.raises(error):
                await requests.produce(request, context=CLIENT)
        for p in range(2):
            offsets = await requests.list_offsets(ListOffsetsRequest(topic=topic_name, partition=p), context=CLIENT)
            assert offsets.offsets.log_end_offset == 0, "a refused request wrote records"
        with pytest.raises(OffsetOutOfRangeError):
            await requests.fetch(FetchRequest(topic=topic_name, partition=0, offset=5, max_wait_ms=0), context=CLIENT)
        for bounds in ({"offset": -1}, {"max_bytes": 0}, {"max_wait_ms": 60_001}):
            with pytest.raises(FieldOutOfRangeError):
                await requests.fetch(FetchRequest(topic=topic_name, partition=0, **{"offset": 0, **bounds}),
                                     context=CLIENT)

    run_with_requests(zk_connect, tmp_path / "logs", scenario)


def test_group_offsets_commit_fetch_lag_reset_and_delete_through_the_request_layer(zk_connect, tmp_path, topic_name):
    async def scenario(requests: RequestHandler) -> None:
        await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=1, replication_factor=1),
                                    context=CLIENT)
        await requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records([b"v"] * 10)),
                               context=CLIENT)
        group = f"g-{topic_name}"
        assert await requests.groups.commit_offsets(OffsetCommitRequest(
            group=group, offsets=[PartitionOffset(topic_name, 0, 4, "m")]), context=CLIENT)
        [committed] = await requests.groups.committed_offsets(group, context=CLIENT)
        assert (committed.topic, committed.partition, committed.offset, committed.metadata) == (topic_name, 0, 4, "m")
        assert group in await requests.groups.list_groups(context=CLIENT)
        lag = await requests.groups.group_lag(group, context=CLIENT)
        assert (lag.total_lag, lag.partitions[0].high_watermark) == (6, 10)
        reset = await requests.groups.reset_offsets(ResetOffsetsRequest(group=group, to="earliest"),
                                                     context=CLIENT)
        assert [(o.topic, o.partition, o.offset) for o in reset] == [(topic_name, 0, 0)]
        assert (await requests.groups.group_lag(group, context=CLIENT)).total_lag == 10
        deleted = await requests.groups.delete_offsets(group, topic=topic_name, context=CLIENT)
        assert deleted == [(topic_name, 0)]
        assert await requests.groups.committed_offsets(group, context=CLIENT) == []

    run_with_requests(zk_connect, tmp_path / "logs", scenario)


def test_the_broker_and_its_request_layer_load_without_the_http_gateway():
    """A second front door builds a broker and calls its operations without FastAPI in the process."""
    code = ("import sys, lakelog.broker, lakelog.requests; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'starlette') "
            "or m.startswith('lakelog.ingest_api')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_producer_ids_and_a_transaction_through_the_request_layer(zk_connect, tmp_path, topic_name):
    async def scenario(requests: RequestHandler) -> None:
        await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=1, replication_factor=1),
                                    context=CLIENT)
        idempotent = await requests.producers.init_producer_id(InitProducerIdRequest(), context=CLIENT)
        assert idempotent.producer_epoch == 0
        txn = f"txn-{topic_name}"
        first = await requests.producers.init_producer_id(InitProducerIdRequest(transactional_id=txn), context=CLIENT)
        producer = await requests.producers.init_producer_id(
            InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=30_000), context=CLIENT)
        assert (producer.producer_id, producer.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
        assert producer.producer_id != idempotent.producer_id

        # records and a group's offsets in one transaction, then its commit
        await requests.produce(ProduceRequest(
            topic=topic_name, partition=0, records=records([b"a", b"b"]),
            producer=ProducerBatch(producer.producer_id, producer.producer_epoch, 0, txn)), context=CLIENT)
        group = f"g-{topic_name}"
        await requests.transactions.commit_offsets(TxnOffsetCommitRequest(
            transactional_id=txn, producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
            group=group, offsets=[PartitionOffset(topic_name, 0, 2)]), context=CLIENT)
        ongoing = await requests.transactions.describe_transaction(txn, context=CLIENT)
        assert ongoing.metadata.state == TransactionState.ONGOING and (topic_name, 0) in ongoing.metadata.partitions
        listed = await requests.transactions.list_transactions(states=["Ongoing"], context=CLIENT)
        assert [t.metadata.transactional_id for t in listed] == [txn]
        ended = await requests.transactions.end_transaction(EndTxnRequest(
            transactional_id=txn, producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
            commit=True), context=CLIENT)
        assert ended.metadata.state == TransactionState.COMPLETE_COMMIT and ended.coordinator_id == 0
        assert await requests.transactions.list_transactions(states=["Ongoing"], context=CLIENT) == []

        read = await requests.fetch(FetchRequest(topic=topic_name, partition=0, offset=0, max_wait_ms=0,
                                                 isolation_level="read_committed"), context=CLIENT)
        assert read.records["value"].to_pylist() == [b"a", b"b"]
        [committed] = await requests.groups.committed_offsets(group, context=CLIENT)
        assert (committed.topic, committed.partition, committed.offset) == (topic_name, 0, 2)
        with pytest.raises(TransactionalIdNotFoundError):
            await requests.transactions.describe_transaction(f"never-{txn}", context=CLIENT)

    run_with_requests(zk_connect, tmp_path / "logs", scenario)


async def wait_until(condition, *, timeout_s: float = CONDITION_WAIT_S) -> None:
    """Poll ``condition()`` until it is true (AssertionError after ``timeout_s``)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def test_operations_authorize_their_caller_without_any_front_door(zk_connect, tmp_path, topic_name):
    """With ``authorizer.enabled``, each operation checks its caller's ACLs (real ACLs in ZooKeeper, the
    broker's authorizer following them): a principal without the ACL is refused and nothing is done; one
    with it is served."""
    alice = RequestContext(principal="User:alice", host="10.0.0.1", client_id="etl", listener="kafka")
    nobody = RequestContext(principal="User:nobody", host="10.0.0.1", client_id="etl", listener="kafka")
    txn = f"txn-{topic_name}"

    async def scenario(requests: RequestHandler) -> None:
        admin = requests.broker_context  # the brokers' own principal: a super user
        await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=1, replication_factor=1),
                                    context=admin)
        await requests.acls.create_acls(
            [AclBinding.of(resource_type="Topic", name=topic_name, principal="User:alice", operation=op)
             for op in ("Write", "Read")]
            + [AclBinding.of(resource_type="TransactionalId", name=txn, principal="User:alice", operation="Write")],
            context=admin)
        await wait_until(lambda: requests.permissions(alice).allows(
            Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn))

        refused = {
            "produce": lambda: requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records([b"x"])),
                                        context=nobody),
            "fetch": lambda: requests.fetch(FetchRequest(topic=topic_name, partition=0, offset=0, max_wait_ms=0),
                                    context=nobody),
            "list offsets": lambda: requests.list_offsets(ListOffsetsRequest(topic=topic_name, partition=0),
                                                          context=nobody),
            "describe topic": lambda: requests.describe_topic(topic_name, context=nobody),
            "partitions": lambda: requests.metadata.partition_summaries(topic_name, context=nobody),
            "create topic": lambda: requests.create_topic(CreateTopicRequest(name=f"{topic_name}-2"), context=nobody),
            "delete topic": lambda: requests.delete_topic(topic_name, context=nobody),
            "add partitions": lambda: requests.create_partitions(topic_name, partitions_count=2, context=nobody),
            "commit offsets": lambda: requests.groups.commit_offsets(OffsetCommitRequest(
                group="g", offsets=[PartitionOffset(topic_name, 0, 0)]), context=nobody),
            "idempotent producer id": lambda: requests.producers.init_producer_id(InitProducerIdRequest(),
                                                                                  context=nobody),
            "transactional producer id": lambda: requests.producers.init_producer_id(
                InitProducerIdRequest(transactional_id=txn), context=nobody),
            "end transaction": lambda: requests.transactions.end_transaction(
                EndTxnRequest(transactional_id=txn, producer_id=0, producer_epoch=0, commit=True), context=nobody),
            "describe ACLs": lambda: requests.acls.describe_acls(AclFilter(), context=nobody),
        }
        for what, call in refused.items():
            with pytest.raises(AuthorizationError, match="User:nobody is not authorized") as denied:
                await call()
            assert denied.value.http_status == 403 and denied.value.error_code == 40301, what
        assert topic_name not in await requests.list_topics(context=nobody)

        # nothing was done: the topic is there with one partition and no record
        meta = await requests.describe_topic(topic_name, context=alice)  # Describe: implied by Read and Write
        assert meta.partitions_count == 1
        assert (await requests.list_offsets(ListOffsetsRequest(topic=topic_name, partition=0),
                                            context=alice)).offsets.log_end_offset == 0

        # the principal with the ACLs is served by the same operations
        written = await requests.produce(ProduceRequest(topic=topic_name, partition=0, records=records([b"y"])),
                                         context=alice)
        assert written.base_offset == 0
        read = await requests.fetch(FetchRequest(topic=topic_name, partition=0, offset=0, max_wait_ms=0),
                                    context=alice)
        assert read.records["value"].to_pylist() == [b"y"]
        assert topic_name in await requests.list_topics(context=alice)
        idempotent = await requests.producers.init_producer_id(InitProducerIdRequest(), context=alice)  # KIP-679
        assert idempotent.producer_epoch == 0

    run_with_requests(zk_connect, tmp_path / "logs", scenario, authentication_methods="basic",
                      inter_broker_password="inter-broker-s3cret", authorizer_enabled=True)



def test_produce_each_answers_every_record_and_produces_the_others_as_one_request(zk_connect, tmp_path, topic_name):
    """REST Proxy v3's streaming produce through the request layer: a record that breaks a rule gets its
    own error, the others are appended (one request: offsets dense per partition), in request order."""
    async def scenario(requests: RequestHandler) -> None:
        await requests.create_topic(CreateTopicRequest(name=topic_name, partitions_count=2, replication_factor=1,
                                                       configs={"max.message.bytes": "200"}), context=CLIENT)
        request = ProduceRequest(topic=topic_name, records=records([b"a", b"x" * 500, b"b", b"c", b"d"]),
                                 record_partitions=pa.array([0, 0, 7, 1, 0], pa.int32()))
        outcomes = await requests.produce_each(request, context=CLIENT)
        assert outcomes[0] == (0, 0) and outcomes[3] == (1, 0) and outcomes[4] == (0, 1)
        assert isinstance(outcomes[1], RecordTooLargeError) and isinstance(outcomes[2], InvalidPartitionInRecordError)
        fetched = await requests.fetch(FetchRequest(topic=topic_name, partition=0, offset=0, max_wait_ms=0),
                                       context=CLIENT)
        assert fetched.records["value"].to_pylist() == [b"a", b"d"]
        # every record valid: one produce, as produce()
        clean = await requests.produce_each(ProduceRequest(topic=topic_name, records=records([b"e"]),
                                                           record_partitions=pa.array([1], pa.int32())), context=CLIENT)
        assert clean == [(1, 1)]
        with pytest.raises(UnknownTopicError):
            await requests.produce_each(ProduceRequest(topic="no-such-topic", records=records([b"x"])), context=CLIENT)

    run_with_requests(zk_connect, tmp_path / "logs", scenario)
