"""The transaction coordinator's durable state on one real in-process broker and ZooKeeper:
``__transaction_state`` is a compacted internal topic created on the first InitProducerId, every change
of a transactional id is one of its records, a restarted broker loads the state back and hands the
decided transactions it finds to the ``on_decided`` hook, timed-out transactions are aborted (fencing
their producer), and idle transactional ids expire as tombstones."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.coordinators.transaction_records import TRANSACTION_STATE_TOPIC, partition_for
from lakelog.coordinators.transaction_state import TransactionMetadata, TransactionState
from lakelog.producers.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
)
from lakelog.replication.errors import NotCoordinatorError, NotEnoughReplicasError
from lakelog.runtime.zookeeper_server import free_port

PARTITIONS = 4
S = TransactionState


def _tid() -> str:
    return f"tx-{uuid.uuid4().hex[:8]}"


def _broker(zk_connect: str, log_dirs: Path, **settings) -> Broker:
    return Broker(BrokerSettings(broker_id=0, port=free_port(), log_dirs=log_dirs, zookeeper_connect=zk_connect,
                                 transaction_state_log_num_partitions=PARTITIONS, **settings))


async def _records(broker: Broker, transactional_id: str) -> list[dict | None]:
    """The values (decoded; None for a tombstone) of the id's records in ``__transaction_state``."""
    table, _ = await broker.fetch(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, PARTITIONS), 0,
                                  max_bytes=16 << 20, max_wait_ms=0, columns=["key", "value"])
    return [None if v is None else json.loads(v) for k, v in zip(table["key"].to_pylist(), table["value"].to_pylist())
            if json.loads(k)["transactional_id"] == transactional_id]


def _complete_decided(broker: Broker) -> list[TransactionMetadata]:
    """Install an ``on_decided`` hook that completes every decided transaction at once (in place of the
    broker's marker writer: these tests are of the coordinator's state alone); returns the list the hook
    appends each decided metadata to."""
    handed: list[TransactionMetadata] = []

    async def carry_out(metadata: TransactionMetadata) -> None:
        handed.append(metadata)
        await broker.transaction_state_manager.complete(metadata.transactional_id)

    broker.transaction_state_manager.on_decided = carry_out
    return handed


async def _eventually(probe, *, timeout_s: float = 15.0, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = await probe()
        if got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_changes_are_records_of_a_compacted_topic_and_a_restart_loads_them(zk_connect, tmp_path):
    log_dirs = tmp_path / "logs"
    tid, undecided = _tid(), _tid()

    async def first_life() -> None:
        broker = _broker(zk_connect, log_dirs)
        broker.transaction_state_manager.on_decided = None  # the manager alone: decisions wait in Prepare*
        await broker.start()
        tsm = broker.transaction_state_manager
        try:
            assert TRANSACTION_STATE_TOPIC not in broker.topics()
            assert await tsm.describe(tid) is None and await tsm.list_transactions() == []
            with pytest.raises(InvalidProducerIdMappingError):  # no InitProducerId yet
                await tsm.add_partitions(tid, producer_id=0, producer_epoch=0, partitions=[("a", 0)])

            first = await tsm.init_producer_id(tid, transaction_timeout_ms=60_000)
            assert first.producer_epoch == 0
            meta = await broker.topic_fresh(TRANSACTION_STATE_TOPIC)  # created on first need
            assert meta.partitions_count == PARTITIONS and meta.replication_factor == 1  # capped at 1 live broker
            assert meta.configs == {"cleanup.policy": "compact", "min.insync.replicas": "1"}

            again = await tsm.init_producer_id(tid, transaction_timeout_ms=60_000)
            assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
            with pytest.raises(InvalidProducerEpochError):  # epoch 0 is fenced
                await tsm.add_partitions(tid, producer_id=first.producer_id, producer_epoch=0, partitions=[("a", 0)])
            with pytest.raises(InvalidTransactionTimeoutError):  # above transaction.max.timeout.ms
                await tsm.init_producer_id(tid, transaction_timeout_ms=900_001)

            pid = first.producer_id
            ongoing = await tsm.add_partitions(tid, producer_id=pid, producer_epoch=1, partitions=[("a", 0), ("b", 1)])
            assert ongoing.state == S.ONGOING and ongoing.partitions == {("a", 0), ("b", 1)}
            with pytest.raises(InvalidTxnStateError):
                await tsm.complete(tid)  # nothing decided yet
            prepared = await tsm.end_transaction(tid, producer_id=pid, producer_epoch=1, commit=True)
            assert prepared.state == S.PREPARE_COMMIT and (await tsm.describe(tid)).state == S.PREPARE_COMMIT
            assert tsm.decided() == [prepared]
            with pytest.raises(ConcurrentTransactionsError):  # the commit is being carried out
                await tsm.init_producer_id(tid, transaction_timeout_ms=60_000)
            done = await tsm.complete(tid)
            assert done.state == S.COMPLETE_COMMIT and done.partitions == frozenset()
            assert await tsm.end_transaction(tid, producer_id=pid, producer_epoch=1, commit=True) is None  # a retry
            with pytest.raises(InvalidTxnStateError):
                await tsm.end_transaction(tid, producer_id=pid, producer_epoch=1, commit=False)

            values = await _records(broker, tid)
            assert [(v["state"], v["producer_id"], v["producer_epoch"]) for v in values] == [
                ("Empty", pid, 0), ("Empty", pid, 1), ("Ongoing", pid, 1), ("PrepareCommit", pid, 1),
                ("CompleteCommit", pid, 1)]
            assert values[3]["partitions"] == [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 1}]
            assert values[4]["partitions"] == [] and values[4]["txn_start_timestamp_ms"] > 0

            # a second id whose commit is decided but not carried out before the broker stops
            other = await tsm.init_producer_id(undecided, transaction_timeout_ms=60_000)
            assert other.producer_id != pid
            await tsm.add_partitions(undecided, producer_id=other.producer_id, producer_epoch=0, partitions=[("c", 2)])
            await tsm.end_transaction(undecided, producer_id=other.producer_id, producer_epoch=0, commit=True)
            assert [m.transactional_id for m in await tsm.list_transactions()] == sorted([tid, undecided])
        finally:
            await broker.stop()

    async def second_life() -> None:
        broker = _broker(zk_connect, log_dirs)
        handed = _complete_decided(broker)
        await broker.start()
        tsm = broker.transaction_state_manager
        try:
            # a restarted broker takes up its leaderships after it starts: retry, as a client does
            loaded = await _eventually(lambda: _describe_when_coordinator(tsm, tid), what="the coordinator")
            assert (loaded.state, loaded.producer_epoch, loaded.partitions) == (S.COMPLETE_COMMIT, 1, frozenset())
            await _eventually(lambda: _state_is(tsm, undecided, S.COMPLETE_COMMIT), what="the decided commit")
            assert [(m.transactional_id, m.state, m.partitions) for m in handed] == [
                (undecided, S.PREPARE_COMMIT, frozenset({("c", 2)}))]
            assert tsm.decided() == []
            # the restarted coordinator goes on from the loaded epoch
            assert (await tsm.init_producer_id(tid, transaction_timeout_ms=60_000)).producer_epoch == 2
        finally:
            await broker.stop()

    asyncio.run(first_life())
    asyncio.run(second_life())


async def _describe_when_coordinator(tsm, transactional_id: str) -> TransactionMetadata | None:
    try:
        return await tsm.describe(transactional_id)
    except NotCoordinatorError:
        return None


async def _state_is(tsm, transactional_id: str, state: TransactionState) -> TransactionMetadata | None:
    meta = await _describe_when_coordinator(tsm, transactional_id)  # its partition may load after another's
    return meta if meta is not None and meta.state == state else None


def test_timeouts_abort_init_fences_an_open_transaction_and_idle_ids_expire(zk_connect, tmp_path):
    async def main() -> None:
        broker = _broker(zk_connect, tmp_path / "logs", transaction_abort_timed_out_transaction_cleanup_interval_ms=200,
                         transactional_id_expiration_ms=4_000)
        handed = _complete_decided(broker)
        await broker.start()
        tsm = broker.transaction_state_manager
        try:
            # a transaction open longer than its timeout is aborted under a bumped epoch
            slow = _tid()
            p = await tsm.init_producer_id(slow, transaction_timeout_ms=300)
            await tsm.add_partitions(slow, producer_id=p.producer_id, producer_epoch=0, partitions=[("a", 0)])
            aborted = await _eventually(lambda: _state_is(tsm, slow, S.COMPLETE_ABORT), what="the timeout's abort")
            assert aborted.producer_epoch == 1
            assert [(v["state"], v["producer_epoch"]) for v in await _records(broker, slow)] == [
                ("Empty", 0), ("Ongoing", 0), ("PrepareAbort", 1), ("CompleteAbort", 1)]
            with pytest.raises(InvalidProducerEpochError):  # the producer that let it time out is fenced
                await tsm.add_partitions(slow, producer_id=p.producer_id, producer_epoch=0, partitions=[("a", 0)])

            # InitProducerId over an open transaction: PrepareAbort under epoch + 1, then retry
            busy = _tid()
            b = await tsm.init_producer_id(busy, transaction_timeout_ms=60_000)
            await tsm.add_partitions(busy, producer_id=b.producer_id, producer_epoch=0, partitions=[("a", 1)])
            with pytest.raises(ConcurrentTransactionsError):
                await tsm.init_producer_id(busy, transaction_timeout_ms=60_000)
            values = await _records(broker, busy)
            assert (values[2]["state"], values[2]["producer_epoch"], values[2]["partitions"]) == (
                "PrepareAbort", 1, [{"topic": "a", "partition": 1}])
            await _eventually(lambda: _state_is(tsm, busy, S.COMPLETE_ABORT), what="the fence's abort")
            assert (await tsm.init_producer_id(busy, transaction_timeout_ms=60_000)).producer_epoch == 2
            assert {(m.transactional_id, m.state) for m in handed} == {(slow, S.PREPARE_ABORT),
                                                                       (busy, S.PREPARE_ABORT)}

            # an idle transactional id expires: a tombstone, and its coordinator forgets it
            idle = _tid()
            await tsm.init_producer_id(idle, transaction_timeout_ms=60_000)
            await _eventually(lambda: _forgotten(tsm, idle), timeout_s=20, what="the id's expiration")
            assert (await _records(broker, idle))[-1] is None
            with pytest.raises(InvalidProducerIdMappingError):
                await tsm.add_partitions(idle, producer_id=0, producer_epoch=0, partitions=[("a", 0)])
        finally:
            await broker.stop()

    asyncio.run(main())


async def _forgotten(tsm, transactional_id: str) -> bool:
    return await tsm.describe(transactional_id) is None


def test_adds_of_a_round_share_one_write_and_later_ones_the_next(zk_connect, tmp_path):
    """The partitions of one round (three leaders' implicit AddPartitionsToTxn at once) go in one Ongoing
    record; adds that come while it is written go in one more; a fenced epoch among them fails alone."""
    async def main() -> None:
        broker = _broker(zk_connect, tmp_path / "logs")
        _complete_decided(broker)
        await broker.start()
        tsm = broker.transaction_state_manager
        tid = _tid()
        try:
            p = await tsm.init_producer_id(tid, transaction_timeout_ms=60_000)
            add = lambda topic, partition, epoch=0: tsm.add_partitions(  # noqa: E731
                tid, producer_id=p.producer_id, producer_epoch=epoch, partitions=[(topic, partition)])
            round_one = await asyncio.gather(add("a", 0), add("a", 1), add("a", 2))
            assert {m.partitions for m in round_one} == {frozenset({("a", 0), ("a", 1), ("a", 2)})}
            first = asyncio.ensure_future(add("b", 0))
            for _ in range(10):  # the first write is under way: these wait and share the next one
                await asyncio.sleep(0)
            later = await asyncio.gather(add("b", 1), add("b", 2), add("b", 3, epoch=7), return_exceptions=True)
            await first
            assert later[0].partitions == later[1].partitions == frozenset(
                {("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)})
            assert isinstance(later[2], InvalidProducerEpochError)  # epoch 7 is not the producer's
            ongoing = [v for v in await _records(broker, tid) if v["state"] == "Ongoing"]
            assert [len(v["partitions"]) for v in ongoing] in ([3, 4, 6], [3, 6])  # b-0 alone, or with b-1, b-2
        finally:
            await broker.stop()

    asyncio.run(main())


def test_a_failed_complete_write_is_written_again(zk_connect, tmp_path):
    """Every marker is written but CompleteCommit's write fails (the ISR shrank, a timeout): the marker
    writer writes it again, so the id does not stay in PrepareCommit (refusing its producer) until a
    coordinator failover."""
    async def main() -> None:
        broker = _broker(zk_connect, tmp_path / "logs")
        await broker.start()
        tsm = broker.transaction_state_manager
        complete, failed = tsm.complete, []

        async def fails_once(transactional_id: str) -> TransactionMetadata:
            if not failed:
                failed.append(transactional_id)
                raise NotEnoughReplicasError("injected: the ISR of __transaction_state shrank")
            return await complete(transactional_id)

        tsm.complete = fails_once
        try:
            tid = _tid()
            p = await tsm.init_producer_id(tid, transaction_timeout_ms=60_000)
            # a partition of a topic that does not exist (any more) needs no marker
            await tsm.add_partitions(tid, producer_id=p.producer_id, producer_epoch=0, partitions=[("gone", 0)])
            await tsm.end_transaction(tid, producer_id=p.producer_id, producer_epoch=0, commit=True)
            await _eventually(lambda: _state_is(tsm, tid, S.COMPLETE_COMMIT), what="CompleteCommit written again")
            assert failed == [tid]
            assert [v["state"] for v in await _records(broker, tid)] == [
                "Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
        finally:
            await broker.stop()

    asyncio.run(main())
