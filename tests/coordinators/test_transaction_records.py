"""The records of ``__transaction_state``: Kafka's partition rule for a transactional id, deterministic keys
and values, and the fold of records, tombstones and foreign records into the coordinator's view."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pytest

from lakelog.coordinators.transaction_records import (
    TRANSACTION_STATE_TOPIC,
    apply_records,
    metadata_of,
    partition_for,
    record_of,
    records_table,
    tombstone_of,
    transaction_key,
)
from lakelog.coordinators.transaction_state import TransactionMetadata, TransactionState

S = TransactionState

ONGOING = TransactionMetadata("t1", 42, 3, 60_000, S.ONGOING, frozenset({("orders", 2), ("audit", 0), ("orders", 10)}),
                              1_700_000_000_000, 1_700_000_000_500, -1)


def test_topic_name_is_kafkas():
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"


def test_partition_for_is_kafkas_rule_for_transactional_ids():
    # String.hashCode on a JVM: "t1" 3645, "my-transactional-id" -959806496, "polygenelubricants" Integer.MIN_VALUE
    assert partition_for("t1", 50) == 45
    assert partition_for("my-transactional-id", 50) == 46
    assert partition_for("polygenelubricants", 50) == 0


def test_key_is_deterministic_bytes():
    assert transaction_key("t1") == b'{"type":"transaction","transactional_id":"t1"}'
    assert transaction_key("tx-é") == '{"type":"transaction","transactional_id":"tx-é"}'.encode()


def test_value_has_a_fixed_field_order_and_sorted_partitions():
    key, value = record_of(ONGOING)
    assert key == b'{"type":"transaction","transactional_id":"t1"}'
    assert value == (b'{"producer_id":42,"producer_epoch":3,"last_producer_epoch":-1,"transaction_timeout_ms":60000,'
                     b'"state":"Ongoing","partitions":[{"topic":"audit","partition":0},'
                     b'{"topic":"orders","partition":2},{"topic":"orders","partition":10}],'
                     b'"txn_start_timestamp_ms":1700000000000,"txn_last_update_timestamp_ms":1700000000500}')


def test_value_reads_back_as_the_same_metadata():
    assert metadata_of("t1", record_of(ONGOING)[1]) == ONGOING


def test_tombstone_is_the_key_with_a_null_value():
    assert tombstone_of("t1") == (b'{"type":"transaction","transactional_id":"t1"}', None)


def test_records_table_holds_records_then_tombstones():
    empty = TransactionMetadata("t2", 43, 0, 1000, S.EMPTY, frozenset(), -1, 5)
    table = records_table([ONGOING, empty], tombstones=["t3"])
    assert table.schema == pa.schema([("key", pa.binary()), ("value", pa.binary())])
    assert [json.loads(k)["transactional_id"] for k in table["key"].to_pylist()] == ["t1", "t2", "t3"]
    assert json.loads(table["value"][1].as_py()) == {
        "producer_id": 43, "producer_epoch": 0, "last_producer_epoch": -1, "transaction_timeout_ms": 1000,
        "state": "Empty", "partitions": [], "txn_start_timestamp_ms": -1, "txn_last_update_timestamp_ms": 5}
    assert table["value"][2].as_py() is None
    assert records_table().num_rows == 0


def test_a_transaction_round_trips_through_the_log_and_the_latest_record_wins():
    committed = TransactionMetadata("t1", 42, 3, 60_000, S.COMPLETE_COMMIT, frozenset(), 1_700_000_000_000,
                                    1_700_000_001_000, -1)
    other = TransactionMetadata("t2", 43, 0, 1000, S.EMPTY, frozenset(), -1, 5)
    table = pa.concat_tables([records_table([ONGOING, other]), records_table([committed])])
    state: dict[str, TransactionMetadata] = {}
    assert apply_records(state, table["key"], table["value"]) == 3
    assert state == {"t1": committed, "t2": other}


def test_a_tombstone_removes_the_transactional_id_and_a_later_record_brings_it_back():
    state = {"stale": TransactionMetadata("stale", 1, 0, 1000, S.EMPTY, frozenset(), -1, 1)}
    keys, values = zip(record_of(ONGOING), tombstone_of("t1"), tombstone_of("stale"), tombstone_of("never-seen"))
    assert apply_records(state, keys, values) == 4
    assert state == {}
    assert apply_records(state, *zip(record_of(ONGOING))) == 1
    assert state == {"t1": ONGOING}


def test_a_dead_value_removes_the_transactional_id_like_a_tombstone():
    dead = TransactionMetadata("t1", 42, 3, 60_000, S.DEAD, frozenset(), 5, 6)
    state = {"t1": ONGOING}
    assert apply_records(state, *zip(record_of(dead))) == 1
    assert state == {}


def test_foreign_and_garbled_records_are_skipped_with_a_warning(caplog):
    good_key, good_value = record_of(ONGOING)
    fence = record_of(TransactionMetadata("t2", 1, 1, 1000, S.PREPARE_EPOCH_FENCE, frozenset({("a", 0)}), 5, 6))
    keys = [b"not json", None, b'{"type":"offset","group":"g","topic":"t","partition":0}',
            b'{"type":"transaction","transactional_id":""}', b'["a list"]', good_key, good_key, good_key, fence[0],
            good_key, good_key]
    values = [b"x", b"y", b'{"offset":1}', good_value, good_value, b"{garbled", b'{"producer_id":1}',
              good_value.replace(b'"Ongoing"', b'"Running"'), fence[1],
              good_value.replace(b'"producer_epoch":3', b'"producer_epoch":true'), good_value]
    state: dict[str, TransactionMetadata] = {}
    with caplog.at_level(logging.WARNING, logger="lakelog.coordinators.transaction_records"):
        assert apply_records(state, pa.array(keys, pa.binary()), pa.array(values, pa.binary())) == 1
    assert state == {"t1": ONGOING}
    assert len(caplog.records) == 10
    assert all("__transaction_state" in r.getMessage() for r in caplog.records)


def test_apply_records_refuses_keys_and_values_of_different_lengths():
    with pytest.raises(ValueError):
        apply_records({}, [b"k"], [])
