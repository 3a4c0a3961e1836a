"""Per-partition producer state on real partition logs: duplicates, fencing, sequences too old, expiry,
the producer columns in the log, snapshots and the rebuild after a restart and a truncation."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.group_commit import GroupCommitter
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.schema import TRANSACTIONAL_BIT
from lakelog.producers.errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError,
                                     UnknownProducerIdError)
from lakelog.producers.idempotence import ProducerStates
from lakelog.producers.producer_state import NUM_BATCHES_TO_RETAIN, SNAPSHOT_DIR, ProducerStateManager
from lakelog.protocol.producer_headers import ProducerBatch


def open_log(path, **configs) -> PartitionLog:
    config = TopicConfig.parse({k.replace("_", "."): str(v) for k, v in configs.items()})
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=config)


def values(n: int) -> pa.Table:
    return pa.table({"value": [b"v%d" % i for i in range(n)]})


async def produce(states: ProducerStates, state: ProducerStateManager, committer: GroupCommitter,
                  producer: ProducerBatch, n: int) -> tuple[int, int]:
    records = values(n)
    return await states.append(state, producer, n,
                               append=lambda check: committer.append(records, producer=producer, check=check))


def leader(plog: PartitionLog, states: ProducerStates) -> tuple[ProducerStateManager, GroupCommitter]:
    """A leader's state and committer wired as the replica manager wires them."""
    state = states.open(plog)

    def on_append(info):
        state.appended(info.producer_appends, end_offset=info.last_offset + 1)
        plog.advance_high_watermark(plog.log_end_offset)
    return state, GroupCommitter(plog, on_append=on_append)


def test_a_retry_is_answered_with_the_original_offsets_and_writes_nothing(tmp_path):
    async def main():
        plog = open_log(tmp_path)
        states = ProducerStates()
        state, committer = leader(plog, states)
        p = ProducerBatch(7, 0, 0)
        assert await produce(states, state, committer, ProducerBatch(9, 0, 0), 2) == (0, 2)
        assert await produce(states, state, committer, p, 3) == (2, 3)
        assert await produce(states, state, committer, p, 3) == (2, 3)  # the retry
        assert plog.log_end_offset == 5
        # concurrent: the original and its retry in flight together append once
        q = ProducerBatch(7, 0, 1)
        results = await asyncio.gather(produce(states, state, committer, q, 4), produce(states, state, committer, q, 4))
        assert results == [(5, 4), (5, 4)] and plog.log_end_offset == 9
        rows = plog.read(0, end_offset=9, columns=["offset", "producer_id", "producer_epoch", "sequence"])
        assert rows["producer_id"].to_pylist() == [9, 9, 7, 7, 7, 7, 7, 7, 7]
        assert rows["sequence"].to_pylist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
        assert rows["producer_epoch"].to_pylist() == [0] * 9
        await committer.close()
        plog.close()
    asyncio.run(main())


def test_fenced_epochs_sequences_too_old_and_expired_producers_are_refused(tmp_path):
    async def main():
        plog = open_log(tmp_path)
        states = ProducerStates(producer_id_expiration_ms=60_000)
        state, committer = leader(plog, states)
        for seq in range(NUM_BATCHES_TO_RETAIN + 2):
            await produce(states, state, committer, ProducerBatch(1, 3, seq * 2), 1)  # every other number
        end = plog.log_end_offset
        with pytest.raises(InvalidProducerEpochError):
            await produce(states, state, committer, ProducerBatch(1, 2, 99), 1)
        with pytest.raises(OutOfOrderSequenceError):
            await produce(states, state, committer, ProducerBatch(1, 3, 0), 1)  # forgotten
        # a number never sent at or above the oldest remembered one is new; one remembered is a duplicate
        assert await produce(states, state, committer, ProducerBatch(1, 3, 5), 1) == (end, 1)
        assert await produce(states, state, committer, ProducerBatch(1, 3, 6), 1) == (3, 1)
        # a newer epoch starts over
        assert await produce(states, state, committer, ProducerBatch(1, 4, 0), 1) == (end + 1, 1)
        state.entries[1].last_append_ms -= 61_000
        with pytest.raises(UnknownProducerIdError):
            await produce(states, state, committer, ProducerBatch(1, 4, 1), 1)
        assert plog.log_end_offset == end + 2
        assert state.remove_expired(now_ms=state.entries[1].last_append_ms + 61_000) == 1
        assert await produce(states, state, committer, ProducerBatch(1, 4, 1), 1) == (end + 2, 1)
        await committer.close()
        plog.close()
    asyncio.run(main())


def test_a_producer_id_never_handed_out_is_refused(tmp_path):
    async def main():
        plog = open_log(tmp_path)
        states = ProducerStates(is_allocated=lambda pid: pid < 1000)
        state, committer = leader(plog, states)
        with pytest.raises(UnknownProducerIdError):
            await produce(states, state, committer, ProducerBatch(5000, 0, 0), 1)
        assert await produce(states, state, committer, ProducerBatch(999, 0, 0), 1) == (0, 1)
        await committer.close()
        plog.close()
    asyncio.run(main())


@pytest.mark.parametrize("snapshot", [True, False])
def test_the_state_is_rebuilt_on_open_from_the_snapshot_and_the_log(tmp_path, snapshot):
    async def main():
        plog = open_log(tmp_path, lake_commit_interval_ms=3_600_000)
        states = ProducerStates()
        state, committer = leader(plog, states)
        await produce(states, state, committer, ProducerBatch(1, 0, 0), 2)
        plog.flush_to_lake()  # the first request in Delta, the rest in the segment tail
        if snapshot:
            assert state.take_snapshot() is not None
        await produce(states, state, committer, ProducerBatch(1, 0, 1), 3)
        await produce(states, state, committer, ProducerBatch(2, 5, 0), 1)
        await committer.close()
        plog.close()

        plog = open_log(tmp_path, lake_commit_interval_ms=3_600_000)
        state, committer = leader(plog, states)
        assert bool(list((tmp_path / "t-0" / SNAPSHOT_DIR).glob("*.snapshot"))) == snapshot
        assert state.end_offset == 6
        for producer, n, original in ((ProducerBatch(1, 0, 0), 2, (0, 2)), (ProducerBatch(1, 0, 1), 3, (2, 3)),
                                      (ProducerBatch(2, 5, 0), 1, (5, 1))):
            assert await produce(states, state, committer, producer, n) == original
        assert plog.log_end_offset == 6
        with pytest.raises(InvalidProducerEpochError):
            await produce(states, state, committer, ProducerBatch(2, 4, 1), 1)
        await committer.close()
        plog.close()
    asyncio.run(main())


def test_the_leaders_state_from_its_group_commits_equals_the_state_read_from_the_log(tmp_path):
    """The leader folds in what its group committer says of each request; a replica that reads the rows
    (a follower, a rebuild) must come to the same state, here for commits that mix producers, epochs and
    requests without a producer."""
    async def main():
        plog = open_log(tmp_path)
        states = ProducerStates()
        state, committer = leader(plog, states)
        rounds = [[(ProducerBatch(1, 0, 0), 3), (None, 2), (ProducerBatch(2, 0, 0), 1), (ProducerBatch(1, 0, 1), 4),
                   (ProducerBatch(3, 1, 7), 2), (None, 1), (ProducerBatch(1, 0, 2), 1), (ProducerBatch(2, 1, 0), 2)],
                  [(ProducerBatch(1, 0, 10), 3), (None, 2), (ProducerBatch(2, 1, 10), 1), (ProducerBatch(1, 0, 11), 4),
                   (ProducerBatch(3, 1, 17), 2), (None, 1), (ProducerBatch(1, 0, 12), 1), (ProducerBatch(2, 1, 11), 2)]]
        for i, requests in enumerate(rounds):  # all at once (shared group commits), then one by one
            tasks = [committer.append(values(n)) if producer is None else
                     states.append(state, producer, n, append=lambda check, r=values(n), p=producer: committer.append(
                         r, producer=p, check=check))
                     for producer, n in requests]
            if i == 0:
                await asyncio.gather(*tasks)
            else:
                for t in tasks:
                    await t
        # epoch 1's request 0 of producer 2 is not epoch 0's request 0 (both in the first commit)
        assert [b.sequence for b in state.entries[2].batches] == [0, 10, 11]
        assert committer.commits < 2 * len(rounds[0])  # the first round shared commits
        await committer.close()
        read = ProducerStateManager(topic="t", partition=0, snapshot_dir=None)
        read.load(plog)
        assert read.end_offset == state.end_offset == plog.log_end_offset == 32
        assert {pid: (e.producer_epoch, e.batches) for pid, e in read.entries.items()} == \
            {pid: (e.producer_epoch, e.batches) for pid, e in state.entries.items()}
        assert [b.sequence for b in state.entries[1].batches] == [1, 2, 10, 11, 12]
        plog.close()
    asyncio.run(main())


def test_a_truncation_forgets_the_requests_it_removed(tmp_path):
    async def main():
        plog = open_log(tmp_path, lake_commit_interval_ms=3_600_000)
        states = ProducerStates()
        state, committer = leader(plog, states)
        for seq in range(NUM_BATCHES_TO_RETAIN + 3):
            await produce(states, state, committer, ProducerBatch(1, 0, seq), 1)
        state.take_snapshot()  # at offset 8: removed by the truncation
        await committer.close()
        plog.truncate_to(5)
        state.truncated(plog)
        assert [b.sequence for b in state.entries[1].batches] == [0, 1, 2, 3, 4]  # 0 and 1 remembered again
        assert state.end_offset == 5 and not list((tmp_path / "t-0" / SNAPSHOT_DIR).glob("*.snapshot"))
        committer = GroupCommitter(plog, on_append=lambda info: state.appended(info.producer_appends,
                                                                               end_offset=info.last_offset + 1))
        assert await produce(states, state, committer, ProducerBatch(1, 0, 0), 1) == (0, 1)
        assert await produce(states, state, committer, ProducerBatch(1, 0, 5), 1) == (5, 1)  # appended again
        await committer.close()
        plog.close()
    asyncio.run(main())


def test_followers_fold_in_replicated_batches_and_the_delta_table_keeps_the_producer_columns(tmp_path):
    async def main():
        plog = open_log(tmp_path / "leader", lake_commit_interval_ms=0)
        states = ProducerStates()
        state, committer = leader(plog, states)
        await produce(states, state, committer, ProducerBatch(3, 1, 10), 4)
        await produce(states, state, committer, ProducerBatch(3, 1, 11), 2)
        await committer.close()
        rows = plog.read(0, end_offset=6)
        follower = ProducerStateManager(topic="t", partition=0, snapshot_dir=None)
        follower.update(rows.slice(0, 3), end_offset=3)  # a request split over two fetches
        follower.update(rows.slice(3), end_offset=6)
        follower.update(rows.slice(3), end_offset=6)  # the same rows again change nothing
        assert [(b.sequence, b.base_offset, b.count) for b in follower.entries[3].batches] == [(10, 0, 4), (11, 4, 2)]
        table = DeltaTable(plog.table_uri).to_pyarrow_table(columns=["producer_id", "producer_epoch", "sequence"])
        assert table.sort_by("sequence")["sequence"].to_pylist() == [10] * 4 + [11] * 2
        assert set(table["producer_id"].to_pylist()) == {3} and set(table["producer_epoch"].to_pylist()) == {1}
        plog.close()
    asyncio.run(main())


def test_a_transaction_marker_with_a_newer_epoch_fences_the_older_epoch(tmp_path):
    """Kafka's appendEndTxnMarker: the marker's epoch becomes the producer's epoch on the partition."""
    log = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=TopicConfig.parse({}))
    state = ProducerStateManager(topic="t", partition=0, snapshot_dir=None)
    log.append(pa.table({"value": [b"old"]}), producer_columns=(
        pa.array([4], pa.int64()), pa.array([0], pa.int16()), pa.array([0], pa.int32())),
        attributes=pa.array([TRANSACTIONAL_BIT], pa.int8()))
    # the coordinator bumped the epoch (InitProducerId of a new instance) and aborted with it
    log.transactions.append_control(control="abort", producer_id=4, producer_epoch=1, coordinator_epoch=0)
    state.load(log)
    assert state.entries[4].producer_epoch == 1 and state.entries[4].batches == []
    with pytest.raises(InvalidProducerEpochError):
        state.check(ProducerBatch(4, 0, 1), now_ms=0)
    assert state.check(ProducerBatch(4, 1, 0), now_ms=0) is None


@pytest.mark.parametrize("marker_epoch", [5, 6], ids=["same-epoch commit", "epoch-bumping abort"])
def test_a_request_whose_transaction_ended_while_it_waited_in_the_group_commit_writes_nothing(tmp_path, marker_epoch):
    """A transactional request checked before its transaction's marker but appended after it would open a
    transaction no marker closes (the LSO stuck, the flusher stopped) or join the producer's next one
    (KIP-890's hanging transaction). The group commit runs the admission check right before the append."""
    async def main():
        plog = open_log(tmp_path)
        states = ProducerStates()
        state = states.open(plog)
        added: list[int] = []

        async def add_partition(producer, topic, partition):  # the coordinator takes the partition (Ongoing)
            added.append(producer.producer_epoch)
        states.add_partition = add_partition

        def on_append(info):
            state.appended(info.producer_appends, end_offset=info.last_offset + 1)
            plog.advance_high_watermark(plog.log_end_offset)
        committer = GroupCommitter(plog, linger_ms=50, on_append=on_append)  # requests wait 50 ms for more

        def request(epoch: int, sequence: int, value: bytes):
            producer = ProducerBatch(1000, epoch, sequence, transactional_id="tx")
            records = pa.table({"value": [value]})
            return states.append(state, producer, 1, append=lambda check: committer.append(
                records, producer=producer, check=check))

        assert await request(5, 0, b"t1-a") == (0, 1)
        late = asyncio.create_task(request(5, 1, b"t1-late"))   # checked, then waits in the group commit
        await asyncio.sleep(0.01)
        control = "commit" if marker_epoch == 5 else "abort"
        info = plog.transactions.append_control(control=control, producer_id=1000, producer_epoch=marker_epoch,
                                                coordinator_epoch=0)
        state.marker_appended(1000, marker_epoch, end_offset=info.last_offset + 1)
        plog.advance_high_watermark(plog.log_end_offset)
        with pytest.raises(InvalidTxnStateError if marker_epoch == 5 else InvalidProducerEpochError):
            await late
        assert plog.log_end_offset == 2                        # the record and the marker: nothing after
        assert plog.transactions.view().first_unstable_offset is None and plog.last_stable_offset == 2
        # the producer's next transaction on the partition is its own, with the late record nowhere
        assert await request(marker_epoch, 2, b"t2-a") == (2, 1)
        info = plog.transactions.append_control(control="commit", producer_id=1000, producer_epoch=marker_epoch,
                                                coordinator_epoch=0)
        state.marker_appended(1000, marker_epoch, end_offset=info.last_offset + 1)
        plog.advance_high_watermark(plog.log_end_offset)
        rows = plog.read(0, isolation_level="read_committed")
        assert rows["value"].to_pylist() == ([b"t1-a", b"t2-a"] if control == "commit" else [b"t2-a"])
        assert added == [5, marker_epoch]
        await committer.close()
        plog.close()
    asyncio.run(main())


def test_concurrent_requests_of_one_new_transaction_share_its_admission(tmp_path):
    """Two requests that both joined the partition to the same transaction at the coordinator pass the
    admission check: the second does not replace the transaction the first was admitted to."""
    async def main():
        plog = open_log(tmp_path)
        states = ProducerStates()
        state, committer = leader(plog, states)

        async def add_partition(producer, topic, partition):
            await asyncio.sleep(0.01)
        states.add_partition = add_partition
        requests = [ProducerBatch(1000, 0, seq, transactional_id="tx") for seq in range(3)]
        results = await asyncio.gather(*(produce(states, state, committer, p, 2) for p in requests))
        assert sorted(results) == [(0, 2), (2, 2), (4, 2)]
        await committer.close()
        plog.close()
    asyncio.run(main())


def test_a_marker_written_while_the_coordinator_adds_the_partition_refuses_the_request(tmp_path):
    """The open transaction is in place before the coordinator is asked (Kafka's VerificationGuard): a
    marker written while AddPartitionsToTxn is on its way removes it, and the request writes nothing."""
    async def main():
        plog = open_log(tmp_path)
        states = ProducerStates()
        state, committer = leader(plog, states)
        asked = asyncio.Event()

        async def add_partition(producer, topic, partition):
            asked.set()
            await asyncio.sleep(0.05)
        states.add_partition = add_partition
        producer = ProducerBatch(1000, 3, 0, transactional_id="tx")
        late = asyncio.create_task(produce(states, state, committer, producer, 1))
        await asyncio.wait_for(asked.wait(), 5)
        info = plog.transactions.append_control(control="commit", producer_id=1000, producer_epoch=3,
                                                coordinator_epoch=0)
        state.marker_appended(1000, 3, end_offset=info.last_offset + 1)
        with pytest.raises(InvalidTxnStateError):
            await late
        assert plog.log_end_offset == 1 and plog.transactions.view().first_unstable_offset is None
        await committer.close()
        plog.close()
    asyncio.run(main())


def test_the_upkeep_round_snapshots_every_changed_state_and_a_failed_write_stops_no_other(tmp_path, caplog):
    """One upkeep round writes the snapshots of the states whose log moved since their last one (all of them,
    in one worker call), none for an unchanged state, and a state whose write fails is logged while the
    others' snapshots are still written."""
    states = [ProducerStateManager(topic="t", partition=p, snapshot_dir=tmp_path / f"t-{p}") for p in range(4)]
    for p, state in enumerate(states):
        state.end_offset = 10 + p
    states[1].snapshot_offset = states[1].end_offset  # unchanged since its last snapshot
    (tmp_path / "t-2").write_text("a file where the snapshot dir should be")  # its write fails

    async def one_round() -> None:
        upkeep = ProducerStates(snapshot_interval_ms=20)
        upkeep.start(lambda: states)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if states[0].snapshot_offset == 10 and states[3].snapshot_offset == 13:
                break
        await upkeep.close([])

    asyncio.run(one_round())
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == [f"{10:020d}.snapshot"]
    assert sorted(p.name for p in (tmp_path / "t-3").iterdir()) == [f"{13:020d}.snapshot"]
    assert not (tmp_path / "t-1").exists()
    assert states[2].snapshot_offset == -1 and "producer state snapshot of t-2 failed" in caplog.text


def test_close_waits_for_the_rounds_writes_before_it_snapshots(tmp_path, monkeypatch, caplog):
    """A clean shutdown while a round's snapshots are being written in a worker waits for them, so one snapshot
    never has two writers (their temp files would collide), and writes nothing twice."""
    import threading
    import time as time_module

    from lakelog.producers import idempotence

    started, calls = threading.Event(), []

    def slow_writes(changed):
        calls.append([state.partition for state, _ in changed])
        started.set()
        time_module.sleep(0.3)
        real_write(changed)

    real_write = idempotence._write_snapshots
    monkeypatch.setattr(idempotence, "_write_snapshots", slow_writes)
    written: list[int] = []
    real_write_snapshot = ProducerStateManager.write_snapshot

    def counted_write_snapshot(self, body):
        written.append(self.partition)
        return real_write_snapshot(self, body)

    monkeypatch.setattr(ProducerStateManager, "write_snapshot", counted_write_snapshot)
    states = [ProducerStateManager(topic="t", partition=p, snapshot_dir=tmp_path / f"t-{p}") for p in range(3)]
    for state in states:
        state.end_offset = 5

    async def close_mid_round() -> None:
        upkeep = ProducerStates(snapshot_interval_ms=10)
        upkeep.start(lambda: states)
        while not started.is_set():
            await asyncio.sleep(0.005)
        await upkeep.close(states)

    asyncio.run(close_mid_round())
    assert calls == [[0, 1, 2]] and sorted(written) == [0, 1, 2]  # each written once: close found nothing left
    assert all(state.snapshot_offset == 5 for state in states) and "failed" not in caplog.text
    assert all(sorted(p.name for p in (tmp_path / f"t-{n}").iterdir()) == [f"{5:020d}.snapshot"] for n in range(3))
