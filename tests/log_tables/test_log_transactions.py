"""Transactions in the partition log: control records, the last stable offset, read_committed reads, the
flush of decided records only, recovery and replication of the transaction index (KIP-98)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import NonContiguousOffsetsError, TransactionsNeedTailError
from lakelog.log_tables.fetch import read_end_offset
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.records import with_fetched_range
from lakelog.log_tables.schema import ATTRIBUTES, CONTROL_BIT, TAIL_SCHEMA, TRANSACTIONAL_BIT
from lakelog.log_tables.transaction_index import control_type


def open_log(path, name: str = "t-0", *, replicated: bool = False, **configs) -> PartitionLog:
    config = TopicConfig.parse({k.replace("_", "."): str(v) for k, v in configs.items()})
    return PartitionLog.open(topic="t", partition=0, table_uri=path / name, config=config,
                             initial_high_watermark=0 if replicated else None)


def values(n: int, tag: str) -> pa.Table:
    return pa.table({"value": [f"{tag}{i}".encode() for i in range(n)]})


def produce(log: PartitionLog, n: int, tag: str, *, producer_id: int | None = None, epoch: int = 0,
            transactional: bool = False) -> int:
    """Append ``n`` records (of a producer, in its transaction) and move the HW; returns the base offset."""
    producers = attributes = None
    if producer_id is not None:
        producers = (pa.array([producer_id] * n, pa.int64()), pa.array([epoch] * n, pa.int16()),
                     pa.array([0] * n, pa.int32()))
    if transactional:
        attributes = pa.array([TRANSACTIONAL_BIT] * n, pa.int8())
    info = log.append(values(n, tag), producer_columns=producers, attributes=attributes)
    log.advance_high_watermark(log.log_end_offset)
    return info.base_offset


def end(log: PartitionLog, producer_id: int, control: str, *, epoch: int = 0) -> int:
    info = log.transactions.append_control(control=control, producer_id=producer_id, producer_epoch=epoch, coordinator_epoch=7)
    log.advance_high_watermark(log.log_end_offset)
    return info.base_offset


def read_values(log: PartitionLog, **kw) -> list[bytes]:
    out, offset = [], log.log_start_offset
    while True:
        rows = log.read(offset, max_bytes=1 << 20, **kw)
        out += rows["value"].to_pylist()
        nxt = read_end_offset(rows) or (rows["offset"][-1].as_py() + 1 if rows.num_rows else offset)
        if nxt == offset:
            return out
        offset = nxt


def delta_values(log: PartitionLog) -> list[bytes]:
    table = DeltaTable(log.table_uri).to_pyarrow_table(columns=["offset", "value"]).sort_by("offset")
    return table["value"].to_pylist()


def test_an_open_transaction_holds_the_last_stable_offset_and_a_commit_releases_it(tmp_path):
    log = open_log(tmp_path)
    produce(log, 3, "plain")
    first = produce(log, 2, "tx", producer_id=5, transactional=True)
    produce(log, 2, "after")
    assert log.high_watermark == 7 and log.last_stable_offset == first == 3
    # read_uncommitted sees the open transaction; read_committed stops at the LSO
    assert read_values(log) == [b"plain0", b"plain1", b"plain2", b"tx0", b"tx1", b"after0", b"after1"]
    assert read_values(log, isolation_level="read_committed") == [b"plain0", b"plain1", b"plain2"]
    assert log.read(5, isolation_level="read_committed").num_rows == 0  # past the LSO: nothing, no error
    marker = end(log, 5, "commit")
    assert marker == 7 and log.last_stable_offset == log.high_watermark == 8
    committed = [b"plain0", b"plain1", b"plain2", b"tx0", b"tx1", b"after0", b"after1"]
    assert read_values(log, isolation_level="read_committed") == committed
    assert read_values(log) == committed  # a consumer never receives the marker
    # a read ending on the marker says where it ended, so the consumer's position moves past it
    tail = log.read(7)
    assert tail.num_rows == 0 and read_end_offset(tail) == 8
    # the replica fetch keeps it, with its attributes and Kafka's encoding
    raw = log.read(7, end_offset=8, columns=TAIL_SCHEMA.names, control_records=True)
    assert raw[ATTRIBUTES].to_pylist() == [TRANSACTIONAL_BIT | CONTROL_BIT]
    assert control_type(raw["key"][0].as_py()) == "commit" and raw["value"][0].as_py() == b"\x00\x00\x00\x00\x00\x07"
    assert raw["sequence"].to_pylist() == [-1] and raw["producer_id"].to_pylist() == [5]


def test_aborted_records_are_hidden_from_read_committed_and_never_reach_the_table(tmp_path):
    log = open_log(tmp_path)
    produce(log, 2, "a", producer_id=1, transactional=True)
    produce(log, 2, "b", producer_id=2, transactional=True)
    produce(log, 1, "plain")
    produce(log, 1, "a-more", producer_id=1, transactional=True)
    end(log, 1, "abort")
    assert log.last_stable_offset == 2  # producer 2's transaction is still open
    assert log.flush_to_lake() == 2  # the flush stays below the LSO
    assert log.lake_end_offset == 2 and delta_values(log) == []  # aborted records dropped
    end(log, 2, "commit")
    assert log.last_stable_offset == log.high_watermark == 8
    assert read_values(log, isolation_level="read_committed") == [b"b0", b"b1", b"plain0"]
    assert read_values(log) == [b"a0", b"a1", b"b0", b"b1", b"plain0", b"a-more0"]
    while log.flush_to_lake():
        pass
    assert log.lake_end_offset == 8  # past both markers
    assert delta_values(log) == [b"b0", b"b1", b"plain0"]
    assert read_values(log, isolation_level="read_committed") == [b"b0", b"b1", b"plain0"]
    log.close()
    log = open_log(tmp_path)  # from the table alone now: no tail, no cache
    assert log.lake_end_offset == log.log_end_offset == 8
    assert log.transactions.view().aborted == () and log.transactions.view().control_offsets == ()
    assert read_values(log, isolation_level="read_committed") == read_values(log) == [b"b0", b"b1", b"plain0"]
    assert DeltaTable(log.table_uri).schema().to_arrow().names == [f.name for f in TAIL_SCHEMA][:-1]


def test_a_flush_that_holds_only_aborted_records_and_markers_moves_the_lake_end_offset(tmp_path):
    log = open_log(tmp_path)
    produce(log, 3, "x", producer_id=9, transactional=True)
    end(log, 9, "abort")
    version = log.version
    assert log.flush_to_lake() == 4
    assert log.lake_end_offset == log.log_end_offset == 4 and log.version == version + 1
    assert delta_values(log) == [] and read_values(log, isolation_level="read_committed") == []
    assert read_values(log) == [b"x0", b"x1", b"x2"]  # still in the tail cache: read_uncommitted sees them
    produce(log, 1, "later")
    assert read_values(log, isolation_level="read_committed") == [b"later0"]


def test_recovery_rebuilds_open_and_aborted_transactions_from_the_tail(tmp_path):
    log = open_log(tmp_path)
    produce(log, 2, "gone", producer_id=3, transactional=True)
    end(log, 3, "abort")
    produce(log, 1, "plain")
    produce(log, 2, "open", producer_id=4, transactional=True)
    log.close()
    log = open_log(tmp_path)
    assert log.log_end_offset == 6 and log.last_stable_offset == 4
    assert read_values(log, isolation_level="read_committed") == [b"plain0"]
    end(log, 4, "commit")
    assert read_values(log, isolation_level="read_committed") == [b"plain0", b"open0", b"open1"]


def test_a_follower_derives_the_same_transactions_from_the_replica_fetch(tmp_path):
    leader = open_log(tmp_path)
    follower = open_log(tmp_path, "f-0", replicated=True)
    produce(leader, 2, "tx", producer_id=8, transactional=True)
    produce(leader, 1, "plain")
    end(leader, 8, "abort")
    produce(leader, 1, "open", producer_id=6, transactional=True)
    rows = leader.read(0, end_offset=leader.log_end_offset, columns=TAIL_SCHEMA.names, control_records=True)
    follower.append_replicated(with_fetched_range(rows, 0, leader.log_end_offset))
    follower.advance_high_watermark(follower.log_end_offset)
    assert follower.last_stable_offset == leader.last_stable_offset == 4
    assert follower.transactions.view().aborted == leader.transactions.view().aborted
    assert read_values(follower, isolation_level="read_committed") == [b"plain0"]


def test_a_follower_with_an_open_transaction_below_a_compacted_range_fetches_it_again(tmp_path):
    follower = open_log(tmp_path, "f-0", replicated=True)
    leader = open_log(tmp_path)
    produce(leader, 2, "p")
    produce(leader, 2, "tx", producer_id=8, transactional=True)
    rows = leader.read(0, end_offset=4, columns=TAIL_SCHEMA.names, control_records=True)
    follower.append_replicated(with_fetched_range(rows, 0, 4))
    follower.advance_high_watermark(4)
    end(leader, 8, "abort")
    produce(leader, 1, "q")
    while leader.flush_to_lake():
        pass  # the leader's table: p0 p1, a gap where the aborted records and the marker were, q0
    leader.close()
    leader = open_log(tmp_path)  # read from the table, not the tail cache
    gapped = leader.read(4, end_offset=leader.log_end_offset, columns=TAIL_SCHEMA.names, control_records=True)
    assert gapped["value"].to_pylist() == [b"q0"]
    with pytest.raises(NonContiguousOffsetsError):
        follower.append_replicated(with_fetched_range(gapped, 4, leader.log_end_offset))
    assert follower.log_end_offset == 2  # cut back to where the open transaction began
    again = leader.read(2, end_offset=leader.log_end_offset, columns=TAIL_SCHEMA.names, control_records=True)
    follower.append_replicated(with_fetched_range(again, 2, leader.log_end_offset))
    follower.advance_high_watermark(follower.log_end_offset)
    assert follower.last_stable_offset == follower.log_end_offset == 6
    assert read_values(follower, isolation_level="read_committed") == [b"p0", b"p1", b"q0"]


def test_a_log_without_a_tail_refuses_transactional_records(tmp_path):
    log = open_log(tmp_path, lake_commit_interval_ms=0)
    with pytest.raises(TransactionsNeedTailError):
        produce(log, 1, "tx", producer_id=1, transactional=True)
    with pytest.raises(TransactionsNeedTailError):
        end(log, 1, "commit")
    assert log.log_end_offset == 0
    produce(log, 1, "plain", producer_id=1)
    assert read_values(log) == [b"plain0"]

