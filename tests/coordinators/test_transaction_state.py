"""The transaction coordinator's state machine (Kafka's TransactionMetadata and TransactionCoordinator
decisions), pure: every transition, the refused ones, fencing, epoch overflow and timeouts."""

from __future__ import annotations

import pytest

from lakelog.coordinators.transaction_state import (
    VALID_PREVIOUS_STATES,
    TransactionMetadata,
    TransactionState,
    add_partitions,
    complete,
    end_transaction,
    expired,
    expired_transactional_ids,
    init_producer_id,
    is_epoch_exhausted,
    is_valid_transition,
)
from lakelog.producers.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
)

S = TransactionState


def meta(state: TransactionState = S.EMPTY, *, epoch: int = 3, partitions=(), start: int = -1, update: int = 100,
         timeout: int = 60_000, producer_id: int = 7, last_epoch: int = -1) -> TransactionMetadata:
    return TransactionMetadata("t1", producer_id, epoch, timeout, state, frozenset(partitions), start, update,
                               last_epoch)


def no_new_id() -> int:
    raise AssertionError("no producer id should be allocated")


# -- states ------------------------------------------------------------------------------------------

def test_states_have_kafkas_names_and_compare_as_strings():
    assert [s.value for s in TransactionState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    assert S.ONGOING == "Ongoing" and str(S.PREPARE_COMMIT) == "PrepareCommit"
    assert TransactionState("CompleteAbort") is S.COMPLETE_ABORT


def test_valid_previous_states_are_kafkas():
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    assert is_valid_transition(S.ONGOING, S.PREPARE_COMMIT)
    assert not is_valid_transition(S.EMPTY, S.PREPARE_COMMIT)
    assert not is_valid_transition(S.PREPARE_COMMIT, S.COMPLETE_ABORT)


def test_epoch_is_exhausted_at_short_max_value_minus_one():
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766)
    assert is_epoch_exhausted(32767)


def test_metadata_normalizes_state_and_partitions_and_refuses_nonsense():
    m = TransactionMetadata("t1", 7, 0, 1000, "Ongoing", [("a", 1), ("a", 1), ("b", 0)])
    assert m.state is S.ONGOING and m.partitions == frozenset({("a", 1), ("b", 0)})
    assert m.has_pending_transaction and not meta(S.COMPLETE_COMMIT).has_pending_transaction
    with pytest.raises(ValueError):
        TransactionMetadata("", 7, 0, 1000, S.EMPTY)
    with pytest.raises(ValueError):
        TransactionMetadata("t1", -1, 0, 1000, S.EMPTY)
    with pytest.raises(ValueError):
        TransactionMetadata("t1", 7, 32768, 1000, S.EMPTY)
    with pytest.raises(ValueError):
        TransactionMetadata("t1", 7, 0, 1000, "Running")


# -- init_producer_id --------------------------------------------------------------------------------

def test_init_of_a_new_transactional_id_allocates_a_producer_id_with_epoch_0():
    d = init_producer_id(None, transactional_id="t1", transaction_timeout_ms=60_000, now_ms=5000,
                         new_producer_id=lambda: 42)
    assert d.ok and not d.aborts_open_transaction
    assert d.metadata == TransactionMetadata("t1", 42, 0, 60_000, S.EMPTY, frozenset(), -1, 5000, -1)
    assert (d.producer_id, d.producer_epoch) == (42, 0)


def test_init_takes_a_producer_id_as_a_plain_int_too():
    d = init_producer_id(None, transactional_id="t1", transaction_timeout_ms=1000, now_ms=1, new_producer_id=9)
    assert (d.producer_id, d.producer_epoch) == (9, 0)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_init_of_an_idle_transactional_id_bumps_the_epoch_and_resets_the_transaction(state):
    current = meta(state, epoch=3, start=50, update=100)
    d = init_producer_id(current, transactional_id="t1", transaction_timeout_ms=30_000, now_ms=200,
                         new_producer_id=no_new_id)
    assert d.ok and not d.aborts_open_transaction
    assert d.metadata == TransactionMetadata("t1", 7, 4, 30_000, S.EMPTY, frozenset(), -1, 200, -1)
    assert (d.producer_id, d.producer_epoch) == (7, 4)


def test_init_with_the_epoch_at_short_max_minus_two_still_bumps_it():
    d = init_producer_id(meta(S.COMPLETE_COMMIT, epoch=32765), transactional_id="t1", transaction_timeout_ms=1000,
                         now_ms=200, new_producer_id=no_new_id)
    assert (d.producer_id, d.producer_epoch) == (7, 32766)


@pytest.mark.parametrize("epoch", [32766, 32767])
def test_init_with_the_epoch_exhausted_rotates_to_a_new_producer_id(epoch):
    d = init_producer_id(meta(S.COMPLETE_ABORT, epoch=epoch), transactional_id="t1", transaction_timeout_ms=1000,
                         now_ms=200, new_producer_id=lambda: 8)
    assert d.metadata == TransactionMetadata("t1", 8, 0, 1000, S.EMPTY, frozenset(), -1, 200, -1)
    assert (d.producer_id, d.producer_epoch) == (8, 0)


def test_init_with_a_transaction_open_aborts_it_under_a_bumped_epoch_and_asks_for_a_retry():
    current = meta(S.ONGOING, epoch=3, partitions=[("a", 0), ("b", 1)], start=50, update=100, timeout=60_000)
    d = init_producer_id(current, transactional_id="t1", transaction_timeout_ms=30_000, now_ms=200,
                         new_producer_id=no_new_id)
    assert d.ok and d.aborts_open_transaction
    # Kafka's PrepareEpochFence is not written: the written state is PrepareAbort with epoch + 1; the open
    # transaction keeps its partitions, start and timeout
    assert d.metadata == TransactionMetadata("t1", 7, 4, 60_000, S.PREPARE_ABORT, frozenset({("a", 0), ("b", 1)}),
                                             50, 200, -1)
    assert (d.producer_id, d.producer_epoch) == (-1, -1)  # that epoch is never handed out


def test_init_retried_after_the_fencing_abort_completes_bumps_the_epoch_again():
    fenced = init_producer_id(meta(S.ONGOING, epoch=3, partitions=[("a", 0)], start=50),
                              transactional_id="t1", transaction_timeout_ms=1000, now_ms=200,
                              new_producer_id=no_new_id).metadata
    done = complete(fenced, now_ms=300)
    assert (done.state, done.producer_epoch, done.partitions) == (S.COMPLETE_ABORT, 4, frozenset())
    d = init_producer_id(done, transactional_id="t1", transaction_timeout_ms=1000, now_ms=400,
                         new_producer_id=no_new_id)
    assert (d.producer_id, d.producer_epoch, d.metadata.state) == (7, 5, S.EMPTY)


def test_init_fencing_at_the_last_handed_out_epoch_uses_short_max_value_then_rotates():
    fenced = init_producer_id(meta(S.ONGOING, epoch=32766, partitions=[("a", 0)], start=50),
                              transactional_id="t1", transaction_timeout_ms=1000, now_ms=200,
                              new_producer_id=no_new_id).metadata
    assert (fenced.state, fenced.producer_id, fenced.producer_epoch) == (S.PREPARE_ABORT, 7, 32767)
    d = init_producer_id(complete(fenced, now_ms=300), transactional_id="t1", transaction_timeout_ms=1000,
                         now_ms=400, new_producer_id=lambda: 8)
    assert (d.producer_id, d.producer_epoch) == (8, 0)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_a_transaction_is_being_completed_is_a_retriable_concurrent_transactions(state):
    d = init_producer_id(meta(state, partitions=[("a", 0)], start=50), transactional_id="t1",
                         transaction_timeout_ms=1000, now_ms=200, new_producer_id=no_new_id)
    assert d.metadata is None and isinstance(d.error, ConcurrentTransactionsError) and d.error.retriable
    assert (d.producer_id, d.producer_epoch) == (-1, -1)


def test_init_while_a_write_is_pending_is_concurrent_transactions():
    d = init_producer_id(meta(S.EMPTY), transactional_id="t1", transaction_timeout_ms=1000, now_ms=200,
                         new_producer_id=no_new_id, pending=True)
    assert isinstance(d.error, ConcurrentTransactionsError)


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_init_refuses_a_timeout_out_of_range(timeout_ms):
    d = init_producer_id(None, transactional_id="t1", transaction_timeout_ms=timeout_ms, now_ms=1,
                         new_producer_id=no_new_id)
    assert d.metadata is None and isinstance(d.error, InvalidTransactionTimeoutError) and not d.error.retriable


def test_init_accepts_the_maximum_timeout_and_a_configured_maximum():
    assert init_producer_id(None, transactional_id="t1", transaction_timeout_ms=900_000, now_ms=1,
                            new_producer_id=1).ok
    d = init_producer_id(None, transactional_id="t1", transaction_timeout_ms=60_001, now_ms=1, new_producer_id=1,
                         transaction_max_timeout_ms=60_000)
    assert isinstance(d.error, InvalidTransactionTimeoutError)


def test_init_refuses_an_empty_transactional_id_and_metadata_of_another_id():
    with pytest.raises(ValueError):
        init_producer_id(None, transactional_id="", transaction_timeout_ms=1000, now_ms=1, new_producer_id=1)
    with pytest.raises(ValueError):
        init_producer_id(meta(), transactional_id="t2", transaction_timeout_ms=1000, now_ms=1, new_producer_id=1)


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_decisions_refuse_states_that_are_never_current(state):
    with pytest.raises(ValueError):
        init_producer_id(meta(state), transactional_id="t1", transaction_timeout_ms=1000, now_ms=1, new_producer_id=1)
    with pytest.raises(ValueError):
        add_partitions(meta(state), producer_id=7, producer_epoch=3, partitions=[("a", 0)], now_ms=1)
    with pytest.raises(ValueError):
        end_transaction(meta(state), producer_id=7, producer_epoch=3, commit=True, now_ms=1)


# -- add_partitions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_add_partitions_to_an_idle_id_begins_a_transaction_at_now(state):
    d = add_partitions(meta(state, epoch=3, start=10, update=100), producer_id=7, producer_epoch=3,
                       partitions=[("b", 1), ("a", 0)], now_ms=500)
    assert d.ok
    assert d.metadata == TransactionMetadata("t1", 7, 3, 60_000, S.ONGOING, frozenset({("a", 0), ("b", 1)}),
                                             500, 500, -1)


def test_add_partitions_to_an_open_transaction_adds_the_union_and_keeps_its_start():
    d = add_partitions(meta(S.ONGOING, partitions=[("a", 0)], start=50, update=100), producer_id=7,
                       producer_epoch=3, partitions=[("a", 0), ("c", 2)], now_ms=700)
    assert d.metadata == TransactionMetadata("t1", 7, 3, 60_000, S.ONGOING, frozenset({("a", 0), ("c", 2)}),
                                             50, 700, -1)


def test_add_partitions_already_in_the_transaction_writes_nothing():
    d = add_partitions(meta(S.ONGOING, partitions=[("a", 0), ("b", 1)], start=50), producer_id=7,
                       producer_epoch=3, partitions=[("b", 1)], now_ms=700)
    assert d.ok and d.metadata is None and d.error is None


def test_add_partitions_of_an_unknown_transactional_id_is_invalid_producer_id_mapping():
    d = add_partitions(None, producer_id=7, producer_epoch=0, partitions=[("a", 0)], now_ms=1, transactional_id="t9")
    assert isinstance(d.error, InvalidProducerIdMappingError) and "t9" in d.error.message


def test_add_partitions_with_another_producer_id_is_invalid_producer_id_mapping():
    d = add_partitions(meta(S.ONGOING, start=1), producer_id=8, producer_epoch=3, partitions=[("a", 0)], now_ms=1)
    assert d.metadata is None and isinstance(d.error, InvalidProducerIdMappingError)


@pytest.mark.parametrize("epoch", [2, 4])
def test_add_partitions_with_another_epoch_is_fenced(epoch):
    d = add_partitions(meta(S.EMPTY, epoch=3), producer_id=7, producer_epoch=epoch, partitions=[("a", 0)], now_ms=1)
    assert d.metadata is None and isinstance(d.error, InvalidProducerEpochError) and not d.error.retriable


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_add_partitions_while_completing_is_concurrent_transactions(state):
    d = add_partitions(meta(state, partitions=[("a", 0)], start=1), producer_id=7, producer_epoch=3,
                       partitions=[("b", 0)], now_ms=1)
    assert d.metadata is None and isinstance(d.error, ConcurrentTransactionsError)


def test_add_partitions_fencing_is_checked_before_the_pending_write():
    d = add_partitions(meta(S.PREPARE_ABORT, epoch=4, start=1), producer_id=7, producer_epoch=3,
                       partitions=[("b", 0)], now_ms=1, pending=True)
    assert isinstance(d.error, InvalidProducerEpochError)
    d = add_partitions(meta(S.ONGOING, start=1), producer_id=7, producer_epoch=3, partitions=[("b", 0)], now_ms=1,
                       pending=True)
    assert isinstance(d.error, ConcurrentTransactionsError)


# -- end_transaction ---------------------------------------------------------------------------------

@pytest.mark.parametrize("commit, state", [(True, S.PREPARE_COMMIT), (False, S.PREPARE_ABORT)])
def test_end_of_an_open_transaction_prepares_its_outcome_with_its_partitions(commit, state):
    d = end_transaction(meta(S.ONGOING, partitions=[("a", 0), ("b", 1)], start=50, update=100), producer_id=7,
                        producer_epoch=3, commit=commit, now_ms=900)
    assert d.ok
    assert d.metadata == TransactionMetadata("t1", 7, 3, 60_000, state, frozenset({("a", 0), ("b", 1)}), 50, 900, -1)


@pytest.mark.parametrize("commit, state", [(True, S.COMPLETE_COMMIT), (False, S.COMPLETE_ABORT)])
def test_end_retried_after_the_same_outcome_completed_succeeds_without_a_write(commit, state):
    d = end_transaction(meta(state, start=50), producer_id=7, producer_epoch=3, commit=commit, now_ms=900)
    assert d.ok and d.metadata is None and d.error is None


@pytest.mark.parametrize("commit, state", [(True, S.PREPARE_COMMIT), (False, S.PREPARE_ABORT)])
def test_end_retried_while_the_same_outcome_completes_is_concurrent_transactions(commit, state):
    d = end_transaction(meta(state, partitions=[("a", 0)], start=50), producer_id=7, producer_epoch=3, commit=commit,
                        now_ms=900)
    assert d.metadata is None and isinstance(d.error, ConcurrentTransactionsError) and d.error.retriable


@pytest.mark.parametrize("commit, state", [
    (False, S.PREPARE_COMMIT), (True, S.PREPARE_ABORT), (False, S.COMPLETE_COMMIT), (True, S.COMPLETE_ABORT),
    (True, S.EMPTY), (False, S.EMPTY)])
def test_end_with_the_other_outcome_or_no_transaction_is_invalid_txn_state(commit, state):
    d = end_transaction(meta(state, start=50), producer_id=7, producer_epoch=3, commit=commit, now_ms=900)
    assert d.metadata is None and isinstance(d.error, InvalidTxnStateError) and not d.error.retriable
    assert state.value in d.error.message


def test_end_by_a_fenced_producer_is_refused():
    d = end_transaction(meta(S.ONGOING, epoch=4, start=1), producer_id=7, producer_epoch=3, commit=True, now_ms=1)
    assert isinstance(d.error, InvalidProducerEpochError)
    d = end_transaction(meta(S.ONGOING, start=1), producer_id=6, producer_epoch=3, commit=True, now_ms=1)
    assert isinstance(d.error, InvalidProducerIdMappingError)
    d = end_transaction(None, producer_id=7, producer_epoch=3, commit=False, now_ms=1, transactional_id="t1")
    assert isinstance(d.error, InvalidProducerIdMappingError)


def test_end_while_a_write_is_pending_is_concurrent_transactions():
    d = end_transaction(meta(S.ONGOING, start=1), producer_id=7, producer_epoch=3, commit=True, now_ms=1, pending=True)
    assert isinstance(d.error, ConcurrentTransactionsError)


def test_producer_fenced_by_init_cannot_commit_its_open_transaction():
    old = meta(S.ONGOING, epoch=3, partitions=[("a", 0)], start=50)
    fenced = init_producer_id(old, transactional_id="t1", transaction_timeout_ms=1000, now_ms=200,
                              new_producer_id=no_new_id).metadata
    d = end_transaction(fenced, producer_id=7, producer_epoch=3, commit=True, now_ms=300)
    assert isinstance(d.error, InvalidProducerEpochError)


# -- complete ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("prepared, completed", [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
                                                 (S.PREPARE_ABORT, S.COMPLETE_ABORT)])
def test_complete_clears_the_partitions_and_keeps_the_start(prepared, completed):
    done = complete(meta(prepared, partitions=[("a", 0)], start=50, update=100), now_ms=1000)
    assert done == TransactionMetadata("t1", 7, 3, 60_000, completed, frozenset(), 50, 1000, -1)


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_complete_of_an_undecided_or_finished_transaction_is_invalid_txn_state(state):
    with pytest.raises(InvalidTxnStateError):
        complete(meta(state, start=50), now_ms=1000)


def test_a_whole_transaction_runs_empty_ongoing_prepare_commit_complete_commit():
    m = init_producer_id(None, transactional_id="t1", transaction_timeout_ms=60_000, now_ms=1000,
                         new_producer_id=lambda: 5).metadata
    m = add_partitions(m, producer_id=5, producer_epoch=0, partitions=[("a", 0)], now_ms=1100).metadata
    m = add_partitions(m, producer_id=5, producer_epoch=0, partitions=[("b", 2)], now_ms=1200).metadata
    m = end_transaction(m, producer_id=5, producer_epoch=0, commit=True, now_ms=1300).metadata
    assert (m.state, m.partitions, m.txn_start_timestamp_ms) == (S.PREPARE_COMMIT, {("a", 0), ("b", 2)}, 1100)
    m = complete(m, now_ms=1400)
    assert m == TransactionMetadata("t1", 5, 0, 60_000, S.COMPLETE_COMMIT, frozenset(), 1100, 1400, -1)
    # the next transaction begins from CompleteCommit under the same epoch
    m = add_partitions(m, producer_id=5, producer_epoch=0, partitions=[("c", 0)], now_ms=1500).metadata
    assert (m.state, m.partitions, m.txn_start_timestamp_ms) == (S.ONGOING, {("c", 0)}, 1500)


# -- timeouts and expiration -------------------------------------------------------------------------

def test_expired_aborts_ongoing_transactions_older_than_their_timeout_with_a_bumped_epoch():
    old = TransactionMetadata("old", 1, 3, 1000, S.ONGOING, frozenset({("a", 0)}), 10_000, 10_500)
    edge = TransactionMetadata("edge", 2, 0, 1000, S.ONGOING, frozenset({("a", 1)}), 11_000, 11_000)  # 11000+1000 == now
    young = TransactionMetadata("young", 3, 0, 5000, S.ONGOING, frozenset({("a", 2)}), 9_000, 9_000)
    idle = TransactionMetadata("idle", 4, 0, 1000, S.COMPLETE_COMMIT, frozenset(), 1_000, 1_000)
    preparing = TransactionMetadata("preparing", 5, 0, 1000, S.PREPARE_COMMIT, frozenset({("b", 0)}), 1_000, 1_000)
    aborts = expired([old, edge, young, idle, preparing], now_ms=12_000)
    assert aborts == [TransactionMetadata("old", 1, 4, 1000, S.PREPARE_ABORT, frozenset({("a", 0)}), 10_000, 12_000, -1)]


def test_expired_skips_transactional_ids_with_a_pending_write():
    old = TransactionMetadata("old", 1, 3, 1000, S.ONGOING, frozenset({("a", 0)}), 10_000, 10_500)
    assert expired([old], now_ms=20_000, pending={"old"}) == []


def test_the_producer_of_a_timed_out_transaction_is_fenced_and_its_next_init_bumps_again():
    old = TransactionMetadata("t1", 1, 3, 1000, S.ONGOING, frozenset({("a", 0)}), 10_000, 10_500)
    [abort] = expired([old], now_ms=12_000)
    assert isinstance(end_transaction(abort, producer_id=1, producer_epoch=3, commit=True, now_ms=12_001).error,
                      InvalidProducerEpochError)
    done = complete(abort, now_ms=12_100)
    assert isinstance(add_partitions(done, producer_id=1, producer_epoch=3, partitions=[("a", 0)], now_ms=12_200).error,
                      InvalidProducerEpochError)
    d = init_producer_id(done, transactional_id="t1", transaction_timeout_ms=1000, now_ms=12_300,
                         new_producer_id=no_new_id)
    assert (d.producer_id, d.producer_epoch) == (1, 5)


def test_expired_transactional_ids_are_idle_ones_not_updated_for_the_expiration():
    day = 86_400_000
    ms = [TransactionMetadata("empty", 1, 0, 1000, S.EMPTY, frozenset(), -1, 1_000),
          TransactionMetadata("committed", 2, 0, 1000, S.COMPLETE_COMMIT, frozenset(), 5, 1_000),
          TransactionMetadata("aborted", 3, 0, 1000, S.COMPLETE_ABORT, frozenset(), 5, 1_000),
          TransactionMetadata("recent", 4, 0, 1000, S.EMPTY, frozenset(), -1, 1_001),
          TransactionMetadata("open", 5, 0, 1000, S.ONGOING, frozenset({("a", 0)}), 5, 1_000),
          TransactionMetadata("deciding", 6, 0, 1000, S.PREPARE_ABORT, frozenset({("a", 0)}), 5, 1_000)]
    assert expired_transactional_ids(ms, now_ms=1_000 + 7 * day) == ["empty", "committed", "aborted"]
    assert expired_transactional_ids(ms, now_ms=1_000 + 7 * day, pending=["committed"]) == ["empty", "aborted"]
    assert expired_transactional_ids(ms, now_ms=1_000 + day, transactional_id_expiration_ms=day) == [
        "empty", "committed", "aborted"]
    assert expired_transactional_ids(ms, now_ms=999 + day, transactional_id_expiration_ms=day) == []
