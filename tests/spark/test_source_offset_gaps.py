"""The ``lakelog`` source and the SQL views over partition logs with offset gaps, against a real broker.

Compaction (``cleanup.policy=compact``) replaces an offset range by the latest record per key with a
replaceWhere overwrite (``table_writes.commit_rewrite``): offsets never change, so gaps appear, also at
the end of the table (removed tombstones). Retention removes whole files from the start (a Delta
``delete("offset < X")``). Both are made here with the broker stopped (one writer per table), which
recovers the log when it starts again. As Spark's Kafka source: ranges are offset ranges, a gap is no
data loss, ``failOnDataLoss`` is about offsets below the log start offset only.
"""

from __future__ import annotations

import random
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.spark import source
from lakelog.spark.source import (OffsetRangePartition, SourceOptions, TailFetch, kafka_schema, read_partition,
                                  resolve_starting_offsets)
from lakelog.spark.source.tail import tail_offset_for_timestamp
from lakelog.spark.sql import partition_logs_from_gateway, register_topic_view, topic_dataframe
from tests.harness import compact_range

T0 = (int(time.time()) - 3600) * 1000  # CreateTime of record i is T0 + 1000 * i
#: the tests remove old records themselves: the broker's retention stays out of it
KEEP = {"retention.ms": "-1"}


def key_of(i: int) -> bytes:
    return b"k%d" % random.Random(i).randrange(5)


def produce(client, topic: str, start: int, n: int) -> None:
    client.produce_arrow(topic, 0, pa.table({
        "key": pa.array([key_of(i) for i in range(start, start + n)]),
        "value": pa.array([b"v%d" % i for i in range(start, start + n)]),
        "timestamp": pa.array([T0 + 1000 * i for i in range(start, start + n)], pa.int64()),
    }))




def gapped_topic(broker, client, create_topic, t: str) -> tuple[str, list[int]]:
    """Offsets 0..59 in six files; [20, 39] compacted to the latest record per key, and [50, 59] to
    offsets 51 and 54 (the table's files end at 54, its lake end offset is 60). Returns (table, offsets)."""
    create_topic(t, configs=KEEP)
    for start in range(0, 60, 10):
        produce(client, t, start, 10)
    uri = client.topic_logs(t)[0]["table_uri"]
    broker.stop()
    kept = compact_range(uri, 20, 39) + compact_range(uri, 50, 59, keep=[51, 54])
    broker.start()
    remaining = list(range(20)) + kept[:-2] + list(range(40, 50)) + [51, 54]
    assert sorted(DeltaTable(uri).to_pyarrow_table(columns=["offset"])["offset"].to_pylist()) == remaining
    return uri, remaining


def read(part: OffsetRangePartition, fetch: TailFetch | None, **kwargs) -> pa.Table:
    schema = kafka_schema(include_headers=True)
    batches = list(read_partition(part, schema, tail=fetch, **kwargs))
    return pa.Table.from_batches(batches, schema=batches[0].schema) if batches else pa.table({"offset": [], "value": []})


# -- tasks, without Spark ---------------------------------------------------------------------------------

def test_a_task_reads_a_gapped_range_from_delta_and_from_the_leader(broker, client, create_topic, topic_name, caplog):
    t = topic_name
    uri, remaining = gapped_topic(broker, client, create_topic, t)
    state = PartitionLogInfo.model_validate(client.topic_logs(t)[0])
    assert (state.log_start_offset, state.lake_end_offset, state.high_watermark) == (0, 60, 60)
    fetch = TailFetch(client.urls[0], max_bytes=100)  # a few records per page: pages start inside gaps
    for start, end in [(0, 60), (20, 60), (21, 40), (22, 23), (40, 60), (52, 60), (55, 60), (5, 55)]:
        expected = [o for o in remaining if start <= o < end]
        delta = read(OffsetRangePartition(t, 0, uri, start, end), None, fail_on_data_loss=True, batch_rows=3)
        assert delta["offset"].to_pylist() == expected, (start, end)  # no data loss reported for a gap
        assert delta["value"].to_pylist() == [b"v%d" % o for o in expected]
        leader = read(OffsetRangePartition(t, 0, uri, start, end, lake_end_offset=0), fetch, fail_on_data_loss=True)
        assert leader["offset"].to_pylist() == expected, (start, end)
        if expected:
            assert leader.equals(delta)
    # timestamps inside a gap: the next record's offset, in Delta and in the leader's fetch
    options = SourceOptions.parse({"lakelog.bootstrap.servers": client.urls[0], "subscribe": t,
                                   "startingTimestamp": str(T0 + 1000 * 21)}, streaming=False)
    first_after_21 = next(o for o in remaining if o >= 21)
    assert resolve_starting_offsets(options, {(t, 0): state}) == {(t, 0): first_after_21}
    assert tail_offset_for_timestamp(client, fetch, state.model_copy(update={"lake_end_offset": 0}),
                                     T0 + 1000 * 21) == first_after_21
    assert tail_offset_for_timestamp(client, fetch, state.model_copy(update={"lake_end_offset": 0}),
                                     T0 + 1000 * 55) is None

    # retention at a file boundary: offsets below 10 are lost, the gaps after it are not
    broker.stop()
    DeltaTable(uri).delete("offset < 10")
    broker.start()
    assert client.partition_offsets(t, 0) == {"beginning_offset": 10, "end_offset": 60, "last_stable_offset": 60}
    after = [o for o in remaining if o >= 10]
    for fetch_ in (None, fetch):
        part = OffsetRangePartition(t, 0, uri, 5, 60, lake_end_offset=None if fetch_ is None else 0)
        with pytest.raises(source.DataLossError, match=f"{t}-0: offsets 5 to 9 \\(5 records\\).*failOnDataLoss"):
            read(part, fetch_, fail_on_data_loss=True)
        caplog.clear()
        with caplog.at_level("WARNING", logger="lakelog.spark.source"):
            assert read(part, fetch_, fail_on_data_loss=False)["offset"].to_pylist() == after
        assert "offsets 5 to 9 " in caplog.text and "offsets 2" not in caplog.text and "offset 5" not in caplog.text


# -- batch, stream and SQL on Spark -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lakelog_spark(spark):
    source.register(spark)
    return spark


def reader(spark, client, **options):
    r = spark.read.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
    for k, v in options.items():
        r = r.option(k, v)
    return r


def offsets(df) -> list[int]:
    return sorted(r.offset for r in df.select("offset").collect())


def stream(spark, client, checkpoint, **options) -> tuple[list[list[tuple[int, bytes]]], Exception | None]:
    """One ``availableNow`` query (or one per processing-time trigger until all is read): the rows of each
    micro-batch as ``(offset, value)``, and the query's exception."""
    batches: list[list[tuple[int, bytes]]] = []
    r = spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().writeStream.option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds")
         .foreachBatch(lambda df, _: batches.append(sorted((x.offset, bytes(x.value)) for x in df.collect())))
         .start())
    error = None
    try:
        q.processAllAvailable()
    except Exception as e:  # noqa: BLE001 - returned to the test
        error = e
    finally:
        q.stop()
    return batches, error


@pytest.mark.spark
def test_batch_stream_and_sql_over_a_compacted_topic(lakelog_spark, broker, client, create_topic, topic_name,
                                                       tmp_path):
    spark, t = lakelog_spark, topic_name
    uri, remaining = gapped_topic(broker, client, create_topic, t)

    # batch: exactly the remaining records, no error, the right offsets and values, however split
    df = reader(spark, client, subscribe=t, startingOffsets="earliest", endingOffsets="latest").load()
    got = sorted((r.offset, bytes(r.value)) for r in df.collect())
    assert got == [(o, b"v%d" % o) for o in remaining]
    assert offsets(reader(spark, client, subscribe=t, minPartitions="4").load()) == remaining
    assert offsets(reader(spark, client, subscribe=t, maxRecordsPerPartition="7").load()) == remaining
    # starting and ending offsets inside gaps
    df = reader(spark, client, subscribe=t, startingOffsets=f'{{"{t}": {{"0": 21}}}}',
                endingOffsets=f'{{"{t}": {{"0": 56}}}}').load()
    assert offsets(df) == [o for o in remaining if 21 <= o < 56]
    df = reader(spark, client, subscribe=t, startingTimestamp=str(T0 + 1000 * 22)).load()
    assert offsets(df) == [o for o in remaining if o >= 22]

    # a stream capped by maxOffsetsPerTrigger: batches of offset ranges, some of them all gap
    batches, error = stream(spark, client, tmp_path / "ckpt", subscribe=t, startingOffsets="earliest",
                            maxOffsetsPerTrigger="8")
    assert error is None, error
    assert [row for b in batches for row in b] == [(o, b"v%d" % o) for o in remaining]  # once each, in order
    assert all(len(b) <= 8 for b in batches) and len([b for b in batches if b]) >= 4

    # SQL views: counts and reads
    partitions = partition_logs_from_gateway(client, t)
    assert topic_dataframe(spark, partitions).count() == len(remaining)
    view = register_topic_view(spark, t, partitions, view_name=f"gaps_{t.replace('-', '_')}")
    row = spark.sql(f"SELECT count(*) AS n, min(offset) AS lo, max(offset) AS hi, "
                    f"count(DISTINCT key) AS keys FROM {view}").collect()[0]
    assert (row.n, row.lo, row.hi) == (len(remaining), 0, 54)
    assert sorted(r.offset for r in spark.sql(f"SELECT offset FROM {view} WHERE offset BETWEEN 15 AND 39").collect()) \
        == [o for o in remaining if 15 <= o <= 39]


@pytest.mark.spark
def test_fail_on_data_loss_after_retention_of_a_compacted_topic(lakelog_spark, broker, client, create_topic,
                                                                 topic_name, tmp_path):
    spark, t = lakelog_spark, topic_name
    create_topic(t, configs=KEEP)
    for start in range(0, 30, 10):
        produce(client, t, start, 10)
    batches, error = stream(spark, client, tmp_path / "ckpt", subscribe=t, startingOffsets="earliest")
    assert error is None and [o for b in batches for o, _ in b] == list(range(30))

    # while the query is down: more records, compaction of [40, 49], retention of everything below 40
    for start in range(30, 60, 10):
        produce(client, t, start, 10)
    uri = client.topic_logs(t)[0]["table_uri"]
    broker.stop()
    kept = compact_range(uri, 40, 49, keep=[40, 43, 47])  # the first record stays: the log starts at 40
    DeltaTable(uri).delete("offset < 40")
    broker.start()
    assert client.partition_offsets(t, 0) == {"beginning_offset": 40, "end_offset": 60, "last_stable_offset": 60}
    remaining = kept + list(range(50, 60))

    # batch: the driver names the lost offsets (not the gaps)
    start30 = f'{{"{t}": {{"0": 30}}}}'
    with pytest.raises(Exception, match="offsets 30 to 39 \\(10 records\\) are no longer in the log"):
        reader(spark, client, subscribe=t, startingOffsets=start30).load().collect()
    df = reader(spark, client, subscribe=t, startingOffsets=start30, failOnDataLoss="false").load()
    assert offsets(df) == remaining

    # stream: the restarted query needs 30..59; the tasks find 30..39 gone, the gaps are no loss
    batches, error = stream(spark, client, tmp_path / "ckpt", subscribe=t)
    assert error is not None and "offsets 30 to 39 (10 records) are no longer in the log" in str(error)
    batches, error = stream(spark, client, tmp_path / "ckpt", subscribe=t, failOnDataLoss="false")
    assert error is None, error
    assert [o for b in batches for o, _ in b] == remaining
