"""The ``lakelog`` source over a two-tier partition log: Delta up to the lake end offset, the rest from the leader.

A partition's Delta table holds the offsets below its lake end offset; the broker's flusher moves that
up behind the high watermark (HW) every ``lake.commit.interval.ms``. Without ``lakelog.read.tail`` (the
batch default) a read ends at the lake end offset; with it (the stream default) it ends at the HW and
tasks fetch the offsets past the lake end offset from the partition leader.

- Planning and splitting, as pure functions of :class:`PartitionLogInfo` values whose lake end offset
  lags the HW (no broker, no Spark).
- A task's read against a real broker: the partition is reported with a lake end offset below the HW
  (as the flusher would leave it), so the task reads part of its range from Delta and the rest with
  the leader's Arrow fetch, in small pages; data loss found by the fetch.
- Streams and batch reads on a real broker with a topic whose lake commit interval is 60 s.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.log_tables.schema import HEADERS_TYPE
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.spark import source
from lakelog.spark.source import (OffsetRangePartition, SourceOptions, TailFetch, batch_ranges, kafka_schema,
                                  latest_offsets, micro_batch_ranges, rate_limit, read_partition, readable_end,
                                  resolve_ending_offsets, resolve_starting_offsets, split_ranges)
from lakelog.spark.source.tail import tail_offset_for_timestamp

T0 = 1_700_000_000_000  # CreateTime of record i is T0 + 1000 * i


def info(partition: int, log_start: int, lake_end: int, hw: int) -> PartitionLogInfo:
    return PartitionLogInfo(topic="t", partition=partition, table_uri=f"/logs/t-{partition}",
                            log_start_offset=log_start, lake_end_offset=lake_end, log_end_offset=hw + 2,
                            high_watermark=hw, leader_epoch=0, timestamp_type=0)


# t-0: Delta holds [2, 6), the tail [6, 10); t-1: nothing flushed yet, tail [0, 4); t-2: empty at 5.
STATES = {("t", 0): info(0, 2, 6, 10), ("t", 1): info(1, 0, 0, 4), ("t", 2): info(2, 5, 5, 5)}


def options(*, streaming: bool, **more: str) -> SourceOptions:
    return SourceOptions.parse({"lakelog.bootstrap.servers": "localhost:1", "subscribe": "t", **more},
                               streaming=streaming)


# -- options -----------------------------------------------------------------------------------------

def test_read_tail_defaults_to_true_for_streams_and_false_for_batch_and_refuses_other_values():
    assert options(streaming=True).read_tail is True
    assert options(streaming=False).read_tail is False
    assert options(streaming=True, **{"lakelog.read.tail": "FALSE"}).read_tail is False
    assert options(streaming=False, **{"LakeLog.Read.Tail": " true "}).read_tail is True
    assert SourceOptions(bootstrap_servers="h:1", streaming=True).read_tail is True
    assert SourceOptions(bootstrap_servers="h:1", streaming=False).read_tail is False
    with pytest.raises(source.SourceOptionError,
                       match="Option 'lakelog.read.tail' must be 'true' or 'false', got 'yes'.*default true for streaming"):
        options(streaming=True, **{"lakelog.read.tail": "yes"})
    with pytest.raises(source.SourceOptionError, match="got '1'.*default false for batch"):
        options(streaming=False, **{"lakelog.read.tail": "1"})


# -- planning (pure) ---------------------------------------------------------------------------------

def test_latest_is_the_lake_end_offset_without_tail_and_the_high_watermark_with_it():
    assert {tp: readable_end(s, tail=False) for tp, s in STATES.items()} == {("t", 0): 6, ("t", 1): 0, ("t", 2): 5}
    assert {tp: readable_end(s, tail=True) for tp, s in STATES.items()} == {("t", 0): 10, ("t", 1): 4, ("t", 2): 5}
    # never below the log start offset (a lake end offset retention passed: an empty range, not a negative one)
    assert readable_end(info(0, 8, 6, 10), tail=False) == 8

    batch, batch_tail = options(streaming=False), options(streaming=False, **{"lakelog.read.tail": "true"})
    assert resolve_starting_offsets(batch, STATES) == {("t", 0): 2, ("t", 1): 0, ("t", 2): 5}
    assert resolve_ending_offsets(batch, STATES) == {("t", 0): 6, ("t", 1): 0, ("t", 2): 5}
    assert resolve_ending_offsets(batch_tail, STATES) == {("t", 0): 10, ("t", 1): 4, ("t", 2): 5}
    # JSON ending offsets are cut to latest; -1 is latest
    ending = '{"t": {"0": 9, "1": -1, "2": -1}}'
    assert resolve_ending_offsets(options(streaming=False, endingOffsets=ending), STATES) == {
        ("t", 0): 6, ("t", 1): 0, ("t", 2): 5}
    assert resolve_ending_offsets(options(streaming=False, endingOffsets=ending, **{"lakelog.read.tail": "true"}),
                                  STATES) == {("t", 0): 9, ("t", 1): 4, ("t", 2): 5}
    # streams: "latest" (their default start) is the HW with the tail (their default), else the lake end
    assert resolve_starting_offsets(options(streaming=True), STATES) == {("t", 0): 10, ("t", 1): 4, ("t", 2): 5}
    no_tail = options(streaming=True, **{"lakelog.read.tail": "false"})
    assert resolve_starting_offsets(no_tail, STATES) == {("t", 0): 6, ("t", 1): 0, ("t", 2): 5}
    json_latest = options(streaming=True, startingOffsets='{"t": {"0": -1, "1": -2, "2": 5}}', **{"lakelog.read.tail": "false"})
    assert resolve_starting_offsets(json_latest, STATES) == {("t", 0): 6, ("t", 1): 0, ("t", 2): 5}


def test_batch_ranges_read_delta_below_the_lake_end_offset_and_the_tail_above_it():
    start = {("t", 0): 2, ("t", 1): 0, ("t", 2): 5}
    lake_only = batch_ranges(STATES, start, {("t", 0): 6, ("t", 1): 0, ("t", 2): 5}, fail_on_data_loss=True, tail=False)
    assert lake_only[0] == OffsetRangePartition("t", 0, "/logs/t-0", 2, 6, 0, lake_end_offset=6)
    assert [(r.delta_range, r.tail_range) for r in lake_only] == [((2, 6), (6, 6)), ((0, 0), (0, 0)), ((5, 5), (5, 5))]

    with_tail = batch_ranges(STATES, start, {("t", 0): 10, ("t", 1): 4, ("t", 2): 5}, fail_on_data_loss=True, tail=True)
    assert [(r.start, r.end, r.lake_end_offset) for r in with_tail] == [(2, 10, 6), (0, 4, 0), (5, 5, 5)]
    assert [(r.delta_range, r.tail_range) for r in with_tail] == [((2, 6), (6, 10)), ((0, 0), (0, 4)), ((5, 5), (5, 5))]
    assert [r.partition for r in split_ranges(with_tail)] == [0, 1]  # the empty one is no task

    # a start past the lake end offset without the tail: Kafka's error, plus a hint at the option
    with pytest.raises(source.SourceError, match="Beginning offset 8 is after the ending offset 6.*"
                                                 "Offsets 6 to 9 are committed but not in the Delta table yet.*lakelog.read.tail"):
        batch_ranges(STATES, {**start, ("t", 0): 8}, {("t", 0): 6, ("t", 1): 0, ("t", 2): 5},
                     fail_on_data_loss=True, tail=False)
    # a start below the log start offset is data loss, as before
    with pytest.raises(source.SourceError, match="offset 1 \\(1 records\\) are no longer in the log"):
        batch_ranges(STATES, {**start, ("t", 0): 1}, {("t", 0): 10, ("t", 1): 4, ("t", 2): 5},
                     fail_on_data_loss=True, tail=True)


def test_split_ranges_keep_the_lake_end_offset_so_every_piece_reads_its_share_of_each_tier():
    r = OffsetRangePartition("t", 0, "/logs/t-0", 0, 100, lake_end_offset=30)
    pieces = split_ranges([r], max_records_per_partition=25)
    assert [(p.start, p.end, p.lake_end_offset) for p in pieces] == [(0, 25, 30), (25, 50, 30), (50, 75, 30), (75, 100, 30)]
    assert [(p.delta_range, p.tail_range) for p in pieces] == [
        ((0, 25), (25, 25)), ((25, 30), (30, 50)), ((50, 50), (50, 75)), ((75, 75), (75, 100))]
    pieces = split_ranges([r, OffsetRangePartition("t", 1, "/logs/t-1", 0, 4, lake_end_offset=0)], min_partitions=4)
    delta = [o for p in pieces for o in range(*p.delta_range) if p.partition == 0]
    tail = [o for p in pieces for o in range(*p.tail_range) if p.partition == 0]
    assert delta == list(range(30)) and tail == list(range(30, 100))
    assert all(p.lake_end_offset == (30 if p.partition == 0 else 0) for p in pieces)
    # a range made without a lake end offset is read from Delta only
    plain = OffsetRangePartition("t", 0, "/logs/t-0", 3, 9)
    assert (plain.delta_range, plain.tail_range) == ((3, 9), (9, 9))


def test_micro_batches_without_the_tail_wait_for_the_flusher_and_with_it_go_to_the_high_watermark():
    start = {("t", 0): 2, ("t", 1): 0, ("t", 2): 5}
    assert latest_offsets(STATES, start, tail=True) == {("t", 0): 10, ("t", 1): 4, ("t", 2): 5}
    assert latest_offsets(STATES, start, tail=False) == {("t", 0): 6, ("t", 1): 0, ("t", 2): 5}
    # a query that read the tail before (its position is past the lake end offset, not past the HW)
    # and runs on without it waits there: no batch end below its start, no false "truncated" report
    ahead = {("t", 0): 8, ("t", 1): 3, ("t", 2): 5}
    assert latest_offsets(STATES, ahead, tail=False) == {("t", 0): 8, ("t", 1): 3, ("t", 2): 5}
    assert micro_batch_ranges(STATES, ahead, latest_offsets(STATES, ahead, tail=False), fail_on_data_loss=True) == []
    # past the HW: truncated, reported as such
    past = {("t", 0): 12, ("t", 1): 0, ("t", 2): 5}
    with pytest.raises(source.SourceError, match="t-0's offset was changed from 12 to 6"):
        micro_batch_ranges(STATES, past, latest_offsets(STATES, past, tail=False), fail_on_data_loss=True)

    ranges = micro_batch_ranges(STATES, start, latest_offsets(STATES, start, tail=True), fail_on_data_loss=True)
    assert [(r.partition, r.delta_range, r.tail_range) for r in ranges] == [(0, (2, 6), (6, 10)), (1, (0, 0), (0, 4))]
    # maxOffsetsPerTrigger shares the backlog up to the HW; each share reads Delta first, then the tail
    capped = rate_limit(start, latest_offsets(STATES, start, tail=True), {tp: s.log_start_offset for tp, s in STATES.items()}, 6)
    assert capped == {("t", 0): 6, ("t", 1): 2, ("t", 2): 5}
    ranges = micro_batch_ranges(STATES, start, capped, fail_on_data_loss=True)
    assert [(r.partition, r.delta_range, r.tail_range) for r in ranges] == [(0, (2, 6), (6, 6)), (1, (0, 0), (0, 2))]


# -- a task's read against a real broker ------------------------------------------------------------

def produce(client, topic: str, start: int, n: int) -> None:
    """Records start..start+n-1 of partition 0: key k{i}, value v{i}, CreateTime T0+1000*i, a header on odd i."""
    client.produce_arrow(topic, 0, pa.table({
        "key": pa.array([b"k%d" % i for i in range(start, start + n)]),
        "value": pa.array([b"v%d" % i for i in range(start, start + n)]),
        "timestamp": pa.array([T0 + 1000 * i for i in range(start, start + n)], pa.int64()),
        "headers": pa.array([[{"key": "i", "value": b"%d" % i}] if i % 2 else [] for i in range(start, start + n)],
                            HEADERS_TYPE),
    }))


def read(part: OffsetRangePartition, fetch: TailFetch | None, **kwargs) -> pa.Table:
    schema = kafka_schema(include_headers=True)
    batches = list(read_partition(part, schema, tail=fetch, **kwargs))
    return pa.Table.from_batches(batches, schema=batches[0].schema) if batches else pa.table({})


def test_a_task_reads_delta_up_to_the_lake_end_offset_and_fetches_the_rest_from_the_leader(client, create_topic,
                                                                                           topic_name):
    t = topic_name
    create_topic(t)  # every record in Delta at once: the test chooses where the "lake end" is
    produce(client, t, 0, 25)
    produce(client, t, 25, 15)
    state = PartitionLogInfo.model_validate(client.topic_logs(t)[0])
    assert state.high_watermark == 40
    lagging = state.model_copy(update={"lake_end_offset": 7})  # as the flusher would leave it
    fetch = TailFetch(client.urls[0], max_bytes=300)  # a few records per page: many pages

    [part] = batch_ranges({(t, 0): lagging}, {(t, 0): 3}, {(t, 0): 33}, fail_on_data_loss=True, tail=True)
    assert (part.delta_range, part.tail_range) == ((3, 7), (7, 33))
    two_tier = read(part, fetch, fail_on_data_loss=True, batch_rows=4)
    assert two_tier["offset"].to_pylist() == list(range(3, 33))  # all of them, none at or past the end
    assert two_tier["value"].to_pylist() == [b"v%d" % i for i in range(3, 33)]
    assert two_tier["headers"].to_pylist()[:2] == [[{"key": "i", "value": b"3"}], None]  # null when none, as Kafka
    delta_only = read(OffsetRangePartition(t, 0, state.table_uri, 3, 33), None, fail_on_data_loss=True)
    assert two_tier.equals(delta_only)  # the same rows, types and values, from either tier
    all_tail = read(OffsetRangePartition(t, 0, state.table_uri, 3, 33, lake_end_offset=0), fetch, fail_on_data_loss=True)
    assert all_tail.equals(delta_only)
    # the end is never passed, even within a page
    short = read(OffsetRangePartition(t, 0, state.table_uri, 9, 11, lake_end_offset=0), TailFetch(client.urls[0]),
                 fail_on_data_loss=True)
    assert short["offset"].to_pylist() == [9, 10]
    with pytest.raises(source.SourceError, match="offsets 7 to 32 are not in the Delta table"):
        read(part, None, fail_on_data_loss=True)

    # timestamps: found in the tail when Delta (below the lake end offset) has none that recent
    assert tail_offset_for_timestamp(client, fetch, lagging, T0 + 20_500) == 21
    assert tail_offset_for_timestamp(client, fetch, lagging, T0 + 10**9) is None
    ts = {"lakelog.bootstrap.servers": client.urls[0], "subscribe": t, "startingTimestamp": str(T0 + 20_500)}
    assert resolve_starting_offsets(SourceOptions.parse(ts, streaming=True), {(t, 0): lagging}) == {(t, 0): 21}
    lake_only = SourceOptions.parse({**ts, "startingOffsetsByTimestampStrategy": "latest"}, streaming=False)
    assert resolve_starting_offsets(lake_only, {(t, 0): lagging}) == {(t, 0): 7}
    with pytest.raises(source.SourceError, match="below its lake end offset 7 .*lakelog.read.tail=false"):
        resolve_starting_offsets(SourceOptions.parse(ts, streaming=False), {(t, 0): lagging})


def test_the_leaders_fetch_reports_data_loss(broker, client, create_topic, topic_name, caplog):
    t = topic_name
    create_topic(t)
    produce(client, t, 0, 10)
    table_uri = client.topic_logs(t)[0]["table_uri"]
    broker.stop()  # one writer per table: retention's delete with delta-rs while the broker is down
    DeltaTable(table_uri).delete("offset < 5")
    broker.start()
    fetch = TailFetch(client.urls[0])

    gone = OffsetRangePartition(t, 0, table_uri, 2, 10, lake_end_offset=0)
    with pytest.raises(source.DataLossError, match=f"{t}-0: offsets 2 to 4 \\(3 records\\).*failOnDataLoss"):
        read(gone, fetch, fail_on_data_loss=True)
    with caplog.at_level("WARNING", logger="lakelog.spark.source"):
        assert read(gone, fetch, fail_on_data_loss=False)["offset"].to_pylist() == list(range(5, 10))
    assert "offsets 2 to 4" in caplog.text
    # a range planned past today's HW (the log was truncated since): what is there, then data loss
    truncated = OffsetRangePartition(t, 0, table_uri, 6, 14, lake_end_offset=0)
    with pytest.raises(source.DataLossError, match="offsets 10 to 13 \\(4 records\\) are missing at the end of the log"):
        read(truncated, fetch, fail_on_data_loss=True)
    assert read(truncated, fetch, fail_on_data_loss=False)["offset"].to_pylist() == list(range(6, 10))


# -- streams and batch reads with a 60 s lake commit interval (real broker, real Spark) ----------------

LONG_INTERVAL = {"lake.commit.interval.ms": "60000"}


def lake_ends(client, topic: str) -> dict[int, tuple[int, int]]:
    """``{partition: (lake end offset, high watermark)}`` as ``GET /lakelog/v1/topics/{t}/logs`` says now."""
    return {i["partition"]: (i["lake_end_offset"], i["high_watermark"]) for i in client.topic_logs(topic)}


def stream_rows(spark, client, topic: str, checkpoint, **opts) -> list[tuple[int, int]]:
    """``(partition, offset)`` of every row one ``availableNow`` stream from the earliest offsets reads."""
    got: list[tuple[int, int]] = []
    r = (spark.readStream.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0])
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in opts.items():
        r = r.option(k, v)
    q = (r.load().writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
         .foreachBatch(lambda df, _: got.extend((x.partition, x.offset) for x in df.collect())).start())
    try:
        assert q.awaitTermination(120), "the availableNow query did not finish in 120 s"
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    return sorted(got)


def batch_rows(spark, client, topic: str, **opts) -> list[tuple[int, int]]:
    r = spark.read.format("lakelog").option("lakelog.bootstrap.servers", client.urls[0]).option("subscribe", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return sorted((x.partition, x.offset) for x in r.load().select("partition", "offset").collect())


def below_some_lake_end(rows: list[tuple[int, int]], before: dict, after: dict) -> bool:
    """Whether ``rows`` are, per partition, exactly the offsets below some lake end offset the
    partition had while they were read (between ``before`` and ``after``; the flusher may move it)."""
    for p in before:
        offsets = [o for q, o in rows if q == p]
        if offsets != list(range(len(offsets))) or not before[p][0] <= len(offsets) <= after[p][0]:
            return False
    return not {q for q, _ in rows} - set(before)


@pytest.mark.spark
def test_a_stream_reads_up_to_the_high_watermark_and_without_the_tail_only_up_to_the_lake_end_offset(
        spark, client, topic_name, tmp_path):
    source.register(spark)
    t = topic_name
    client.create_topic(t, partitions=2, configs=LONG_INTERVAL)
    produce(client, t, 0, 15)
    produce(client, t, 15, 10)
    client.produce_arrow(t, 1, pa.table({"value": pa.array([b"x%d" % i for i in range(12)])}))
    everything = [(0, o) for o in range(25)] + [(1, o) for o in range(12)]

    before = lake_ends(client, t)
    assert {p: hw for p, (_, hw) in before.items()} == {0: 25, 1: 12}
    # the stream default (lakelog.read.tail=true): every committed record, none at or above the HW
    assert stream_rows(spark, client, t, tmp_path / "tail") == everything
    assert batch_rows(spark, client, t, **{"lakelog.read.tail": "true"}) == everything
    # without the tail: exactly the offsets below the lake end offset, from the Delta tables only
    lake_stream = stream_rows(spark, client, t, tmp_path / "lake", **{"lakelog.read.tail": "false"})
    lake_batch = batch_rows(spark, client, t)  # the batch default
    after = lake_ends(client, t)
    assert below_some_lake_end(lake_stream, before, after), (lake_stream, before, after)
    assert below_some_lake_end(lake_batch, before, after), (lake_batch, before, after)
    assert all(o < before[p][1] for p, o in lake_stream + lake_batch)


def test_lake_end_offset_lags_with_long_commit_interval(client, topic_name):
    """With ``lake.commit.interval.ms=60000`` the flusher has not committed records produced a moment
    ago: the lake end offset is below the HW. Fails until the two-tier log lands (today every append is
    a Delta commit, so the lake end offset is the HW); then the test above reads both tiers for real."""
    client.create_topic(topic_name, partitions=1, configs=LONG_INTERVAL)
    produce(client, topic_name, 0, 10)
    [(lake_end, hw)] = lake_ends(client, topic_name).values()
    assert hw == 10
    assert lake_end < hw, f"lake end offset {lake_end} should lag the high watermark {hw} with a 60 s commit interval"
