"""The exactly-once streaming sink's task and driver steps against a real broker process, without Spark
(issue 15, part 5): :func:`~lakelog.spark.source.sink.write_transaction` as a write task of a micro-batch
runs it, :func:`~lakelog.spark.source.sink.commit_transactions` as the driver's commit and abort.

A task's records stay invisible to read_committed readers until the driver commits; a micro-batch committed
before writes nothing when replayed; a re-run of an uncommitted micro-batch aborts the first attempt's
records; a task attempt fenced by a newer one cannot be committed.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.spark.errors import SourceError, SourceOptionError
from lakelog.spark.source.sink_options import SinkOptions
from lakelog.spark.source.sink import (BATCHES_TOPIC, StreamTask, commit_transactions, sink_group,
                                       write_transaction)


def read_values(client, topic: str, partitions: int, isolation_level: str) -> list[bytes]:
    """Every value of the topic's partitions, read with ``isolation_level`` up to the last stable offset
    (read_committed) or the high watermark."""
    out: list[bytes] = []
    for p in range(partitions):
        offsets = client.partition_offsets(topic, p)
        end = offsets["last_stable_offset"] if isolation_level == "read_committed" else offsets["end_offset"]
        position = offsets["beginning_offset"]
        while position < end:
            page = client.fetch_page(topic, p, position, form="arrow", isolation_level=isolation_level)
            out.extend(page.records["value"].to_pylist())
            if page.next_offset <= position:
                break
            position = page.next_offset
        assert position >= end, (p, position, end)
    return out


def rows(values: list[str]) -> list[pa.RecordBatch]:
    """Kafka-sink rows (``key``, ``value`` strings) in two Arrow batches, as Spark hands them to a task."""
    table = pa.table({"key": [f"k{v}" for v in values], "value": values})
    return table.to_batches(max_chunksize=max(1, len(values) // 2 + 1))


def sink_options(client, topic: str, **extra: str) -> SinkOptions:
    return SinkOptions.parse({"lakelog.bootstrap.servers": client.urls[0], "topic": topic, **extra})


def batch_offsets(client, query_id: str) -> dict[int, int]:
    return {o["partition"]: o["offset"] for o in client.committed_offsets(sink_group(query_id), BATCHES_TOPIC)}


def test_a_micro_batch_is_invisible_until_the_driver_commits_and_a_replay_writes_nothing(client, topic_name):
    client.create_topic(topic_name, partitions=2)
    options = sink_options(client, topic_name)
    query = "q-" + topic_name
    first = [write_transaction(options, rows([f"b0-t{t}-{i}" for i in range(5)]), StreamTask(query, 0, t))
             for t in range(2)]
    assert [m.transactional_id for m in first] == [f"spark-{query}-0", f"spark-{query}-1"]
    assert all(m.open_transaction and m.count == 5 and not m.already_committed for m in first)
    assert read_values(client, topic_name, 2, "read_committed") == []
    assert len(read_values(client, topic_name, 2, "read_uncommitted")) == 10
    assert batch_offsets(client, query) == {}  # the pseudo offsets count only with the commit

    assert commit_transactions(options, first, commit=True) == 2
    expected = sorted(f"b0-t{t}-{i}" for t in range(2) for i in range(5))
    assert sorted(v.decode() for v in read_values(client, topic_name, 2, "read_committed")) == expected
    assert batch_offsets(client, query) == {0: 1, 1: 1}

    # Spark replays batch 0 (the driver died before its commit log): both tasks find it committed
    ends = [client.partition_offsets(topic_name, p)["end_offset"] for p in range(2)]
    replay = [write_transaction(options, rows([f"b0-t{t}-{i}" for i in range(5)]), StreamTask(query, 0, t))
              for t in range(2)]
    assert all(m.already_committed and not m.open_transaction and m.count == 0 for m in replay)
    assert commit_transactions(options, replay, commit=True) == 0
    assert [client.partition_offsets(topic_name, p)["end_offset"] for p in range(2)] == ends
    assert sorted(v.decode() for v in read_values(client, topic_name, 2, "read_committed")) == expected


def test_a_rerun_of_an_uncommitted_batch_aborts_the_first_attempt_and_a_partial_commit_is_completed(
        client, topic_name):
    client.create_topic(topic_name, partitions=1)
    options = sink_options(client, topic_name, **{"lakelog.transactional.id.prefix": f"{topic_name}-tx"})
    query = "q-" + topic_name
    values = {t: [f"b3-t{t}-{i}" for i in range(4)] for t in range(3)}
    # batch 3's first run: three tasks write; the driver commits task 0's transaction, then dies
    first = [write_transaction(options, rows(values[t]), StreamTask(query, 3, t)) for t in range(3)]
    assert first[0].transactional_id == f"{topic_name}-tx-0"
    commit_transactions(options, first[:1], commit=True)
    assert sorted(v.decode() for v in read_values(client, topic_name, 1, "read_committed")) == values[0]
    # the re-run: task 0 skips, tasks 1 and 2 abort their first attempts (InitProducerId) and write again
    rerun = [write_transaction(options, rows(values[t]), StreamTask(query, 3, t)) for t in range(3)]
    assert rerun[0].already_committed and [m.count for m in rerun[1:]] == [4, 4]
    commit_transactions(options, rerun, commit=True)
    committed = sorted(v.decode() for v in read_values(client, topic_name, 1, "read_committed"))
    assert committed == sorted(values[0] + values[1] + values[2])  # each record once
    # the aborted first attempts are in the log, invisible to read_committed
    assert len(read_values(client, topic_name, 1, "read_uncommitted")) == 4 + 2 * 8
    assert batch_offsets(client, query) == {0: 4, 1: 4, 2: 4}
    # batch 4 with fewer tasks: task 0 writes, its transaction aborted by the driver; nothing to see
    aborted = write_transaction(options, rows(["b4"]), StreamTask(query, 4, 0))
    assert commit_transactions(options, [aborted], commit=False) == 1
    assert sorted(v.decode() for v in read_values(client, topic_name, 1, "read_committed")) == committed
    assert batch_offsets(client, query)[0] == 4


def test_a_retried_task_fences_the_older_attempt_whose_transaction_cannot_be_committed(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    options = sink_options(client, topic_name)
    query = "q-" + topic_name
    zombie = write_transaction(options, rows(["old-1", "old-2"]), StreamTask(query, 0, 0))
    retry = write_transaction(options, rows(["new-1", "new-2"]), StreamTask(query, 0, 0))
    assert retry.producer_id == zombie.producer_id and retry.producer_epoch > zombie.producer_epoch
    with pytest.raises(SourceError, match="not committed"):
        commit_transactions(options, [zombie], commit=True)
    commit_transactions(options, [retry], commit=True)
    assert sorted(v.decode() for v in read_values(client, topic_name, 1, "read_committed")) == ["new-1", "new-2"]


def test_an_empty_task_leaves_no_transaction_and_a_failing_task_aborts_its_own(client, topic_name):
    client.create_topic(topic_name, partitions=1)
    options = sink_options(client, topic_name)
    query = "q-" + topic_name
    empty = write_transaction(options, [], StreamTask(query, 0, 0))
    assert not empty.open_transaction and empty.count == 0
    bad = pa.record_batch({"value": ["x"], "partition": pa.array([7], pa.int32())})
    with pytest.raises(SourceError, match="Partition 7 does not exist"):
        write_transaction(options, [pa.record_batch({"value": ["first"]}), bad], StreamTask(query, 1, 0))
    described = client.transactions.describe_transaction(f"spark-{query}-0")
    assert described["state"] == "CompleteAbort" and described["partitions"] == []
    assert read_values(client, topic_name, 1, "read_committed") == []


def test_sink_options_of_the_transactions():
    base = {"lakelog.bootstrap.servers": "h:1"}
    parsed = SinkOptions.parse(base)
    assert parsed.transactional_id_prefix is None and parsed.transaction_timeout_ms == 60_000
    parsed = SinkOptions.parse({**base, "Lakelog.Transactional.Id.Prefix": " p ", "kafka.transaction.timeout.ms": "9000"})
    assert parsed.transactional_id_prefix == "p" and parsed.transaction_timeout_ms == 9000
    assert StreamTask("q", 2, 5).transactional_id(parsed) == "p-5"
    assert StreamTask("q", 2, 5).transactional_id(SinkOptions.parse(base)) == "spark-q-5"
    with pytest.raises(SourceOptionError, match="differ"):
        SinkOptions.parse({**base, "transaction.timeout.ms": "1", "kafka.transaction.timeout.ms": "2"})
    with pytest.raises(SourceOptionError, match="must be >= 1"):
        SinkOptions.parse({**base, "transaction.timeout.ms": "0"})
    with pytest.raises(SourceOptionError, match="is empty"):
        SinkOptions.parse({**base, "lakelog.transactional.id.prefix": " "})
