"""Planning on the driver: which partitions a read covers, the offsets it starts and ends at, its tasks.

:class:`_Cluster` asks a gateway (``lakelog.bootstrap.servers``) for the subscribed or assigned topics
and, per partition, a :class:`~lakelog.protocol.log_info.PartitionLogInfo` (its Delta table, log start
offset, lake end offset and high watermark, ``GET /lakelog/v1/topics/{t}/logs``).
:func:`resolve_starting_offsets` and :func:`resolve_ending_offsets` turn the starting/ending options
into offsets per partition; :func:`latest_offsets` is where a micro-batch may end, :func:`rate_limit`
caps it (``maxOffsetsPerTrigger``). :func:`batch_ranges` and :func:`micro_batch_ranges` make the
planned offset ranges (:class:`OffsetRangePartition`, checking for data loss), :func:`split_ranges`
cuts them into Spark tasks.

"Latest" depends on ``lakelog.read.tail`` (:func:`readable_end`): a partition's Delta table holds only
the offsets below its *lake end offset*, which the broker's flusher moves up behind the high watermark
(HW). With the tail option "latest" is the HW and a task reads its offsets at and above the lake end
offset (as the driver saw it) from the leader's Arrow fetch; without it "latest" is the lake end
offset, so Delta is never asked for offsets it does not hold yet. With ``isolation.level=read_committed``
"latest" with the tail option is the last stable offset (LSO: the first offset of a still-open
transaction) instead of the HW; the lake end offset never passes the LSO. Everything here except
:class:`_Cluster` and timestamp look-ups is a pure function of the ``PartitionLogInfo`` values.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from pyspark.sql.datasource import InputPartition

from lakelog.log_tables.reader import DataLoss, offset_for_timestamp
from lakelog.client import LakelogClient
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.replication.errors import UnknownTopicError
from lakelog.replication.metadata import INTERNAL_TOPICS  # Kafka's internal topics: a pattern subscription does not match them (exclude.internal.topics)
from lakelog.spark.errors import SourceError, SourceOptionError
from lakelog.spark.source.options import EARLIEST, LATEST, READ_TAIL, SourceOptions, TopicPartition
from lakelog.spark.source.tail import TailFetch, retry_remote, tail_fetch, tail_offset_for_timestamp
from lakelog.spark.sql import partition_logs_from_gateway

log = logging.getLogger(__name__)

__all__ = [
    "INTERNAL_TOPICS", "OffsetRangePartition", "batch_ranges", "lake_end", "latest_offsets", "micro_batch_ranges",
    "rate_limit", "readable_end", "report_data_loss", "resolve_ending_offsets", "resolve_starting_offsets",
    "split_ranges",
]

FAIL_ON_DATA_LOSS_HINT = (
    " Some data may have been lost because it is not available in the log any more: either retention "
    "removed it or the topic was deleted before all of it was processed. If you want your query to go "
    "on in such cases, set the source option 'failOnDataLoss' to 'false'.")


def report_data_loss(message: str, *, fail: bool) -> None:
    """Data loss the driver found while planning (``message`` says which offsets, ending with ".").

    Raises:
        SourceError: ``fail`` (``failOnDataLoss=true``), with the Kafka source's hint appended.

    Else logs a warning and returns.
    """
    if fail:
        raise SourceError(message + FAIL_ON_DATA_LOSS_HINT)
    log.warning("%s Some data may have been missed (failOnDataLoss=false).", message)


# -- which offsets are readable -------------------------------------------------------------------

def lake_end(state: PartitionLogInfo) -> int:
    """The first offset not in the partition's Delta table: ``min(lake_end_offset, high_watermark)``."""
    return min(state.lake_end_offset, state.high_watermark)


def readable_end(state: PartitionLogInfo, *, tail: bool, read_committed: bool = False) -> int:
    """"Latest" of a partition: the exclusive end of what a read may plan.

    Args:
        state: the partition as the gateway reported it.
        tail: ``lakelog.read.tail``.
        read_committed: ``isolation.level=read_committed`` (Kafka's consumer: the end is the LSO).

    Returns:
        With ``tail``, the high watermark, or the last stable offset with ``read_committed``; else the lake
        end offset (:func:`lake_end`; the table holds only decided, committed records, so it never passes
        the last stable offset), but not below the log start offset (a range from "earliest" to "latest"
        is then empty, not negative).
    """
    if tail:
        return min(state.last_stable_offset, state.high_watermark) if read_committed else state.high_watermark
    return max(state.log_start_offset, lake_end(state))


# -- planned offset ranges and Spark tasks ----------------------------------------------------------

@dataclass
class OffsetRangePartition(InputPartition):
    """One Spark task: offsets ``start <= offset < end`` of one partition.

    Attributes:
        topic, partition: the partition; table_uri: its Delta table (as the gateway reported it).
        start, end: the offsets read, ``start`` inclusive, ``end`` exclusive (never past the HW the
            driver planned with).
        timestamp_type: 0 = CreateTime, 1 = LogAppendTime (the ``timestampType`` column). Default 0.
        lake_end_offset: the partition's lake end offset when the driver planned: offsets below it are
            read from the Delta table (:attr:`delta_range`), the rest from the leader's Arrow fetch
            (:attr:`tail_range`). It may be stale when the task runs; the table only grows and the
            leader serves any offset, so that is fine. Default None: the whole range from Delta.
        table_id: the leader's Delta table's id (``PartitionLogInfo.table_id``): ``lakelog.read.mode=auto``
            reads a table it opens at ``table_uri`` only when it is this one. Default None: not known.
    """

    topic: str
    partition: int
    table_uri: str
    start: int
    end: int
    timestamp_type: int = 0
    lake_end_offset: int | None = None
    table_id: str | None = None

    @property
    def size(self) -> int:
        """Offsets in the range (``end - start``; records may be fewer where compaction left gaps)."""
        return self.end - self.start

    @property
    def delta_range(self) -> tuple[int, int]:
        """``(start, end)`` of the offsets read from the Delta table: ``[start, min(end, lake end))``
        (empty when ``start >= end``)."""
        if self.lake_end_offset is None:
            return self.start, self.end
        return self.start, max(self.start, min(self.end, self.lake_end_offset))

    @property
    def tail_range(self) -> tuple[int, int]:
        """``(start, end)`` of the offsets fetched from the leader: ``[max(start, lake end), end)``
        (empty when ``start >= end``)."""
        if self.lake_end_offset is None:
            return self.end, self.end
        return min(self.end, max(self.start, self.lake_end_offset)), self.end


def _range(state: PartitionLogInfo, start: int, end: int) -> OffsetRangePartition:
    return OffsetRangePartition(state.topic, state.partition, state.table_uri, start, end, state.timestamp_type,
                                lake_end(state), table_id=state.table_id)


def _divide(r: OffsetRangePartition, parts: int) -> list[OffsetRangePartition]:
    """``r`` cut into ``parts`` ranges of (almost) equal size; empty ones dropped."""
    out, remaining, start = [], r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        out.append(replace(r, start=start, end=end))
        start = end
    return [x for x in out if x.size > 0]


def split_ranges(ranges: Sequence[OffsetRangePartition], *, min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[OffsetRangePartition]:
    """Split offset ranges into Spark tasks as Spark's ``KafkaOffsetRangeCalculator`` does.

    Without options one task per non-empty partition range. ``maxRecordsPerPartition`` first cuts each
    range into pieces of at most that many offsets; ``minPartitions`` then, if there are fewer pieces
    than it, divides the large ranges in proportion to their size so that there are about that many.
    Every piece keeps its range's ``lake_end_offset``, so each reads its own share of the Delta table
    and of the tail.
    """
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records_per_partition is None:
        return list(ranges)
    if max_records_per_partition is not None:
        ranges = [x for r in ranges for x in _divide(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, total_size: int, parts: int) -> int:
        return max(int(math.floor(size / total_size * parts + 0.5)), 1)

    unsplit = [i for i, r in enumerate(ranges) if part_count(r.size, total, min_partitions) == 1]
    unsplit_total = sum(ranges[i].size for i in unsplit)
    split_total = total - unsplit_total
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for i, r in enumerate(ranges):
        parts = 1 if i in unsplit or split_total <= 0 else part_count(r.size, split_total, split_min)
        out.extend(_divide(r, parts))
    return out


# -- the gateway --------------------------------------------------------------------------------------

class _Cluster:
    """Driver-side metadata through the gateway: which partitions a read covers and their offsets.

    Holds one :class:`~lakelog.client.LakelogClient` of ``options.bootstrap_servers``, made on first
    use and dropped when pickled (Spark ships readers to its Python workers) or closed.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client: LakelogClient | None = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "_client": None}

    @property
    def client(self) -> LakelogClient:
        if self._client is None:
            self._client = LakelogClient(self.options.bootstrap_servers, auth=self.options.auth, **self.options.tls)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _topics(self) -> list[str]:
        opts = self.options
        if opts.subscribe is not None:
            return list(dict.fromkeys(opts.subscribe))
        if opts.assign is not None:
            return sorted(opts.assign)
        pattern = re.compile(opts.subscribe_pattern)
        return sorted(t for t in self.client.admin.list_topics() if t not in INTERNAL_TOPICS and pattern.fullmatch(t))

    def partitions(self) -> dict[TopicPartition, PartitionLogInfo]:
        """The partitions of the subscribed/assigned topics that exist now, with their offsets.

        Retriable gateway errors (no leader during a failover, an unreachable gateway) are retried
        ``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart (the Kafka source's
        options of the same name).

        Returns:
            ``{(topic, partition): PartitionLogInfo}`` sorted by topic and partition. A subscribed topic
            that does not exist (yet) has no entries, as with Kafka's ``subscribe``.

        Raises:
            SourceError: an assigned topic or partition does not exist.
            lakelog.protocol.errors.RemoteError: a gateway error that is not retriable, or still
                there after the retries; ConnectionError: no gateway reachable after the retries.
        """
        opts = self.options
        return retry_remote(self._partitions, retries=opts.fetch_offset_retries,
                            retry_interval_ms=opts.fetch_offset_retry_interval_ms, what=str(opts.bootstrap_servers))

    def _partitions(self) -> dict[TopicPartition, PartitionLogInfo]:
        out: dict[TopicPartition, PartitionLogInfo] = {}
        for topic in self._topics():
            try:
                logs = partition_logs_from_gateway(self.client, topic)
            except UnknownTopicError as e:
                if self.options.assign is None:
                    continue  # subscribed topic that does not exist (yet): like Kafka, nothing to read
                raise SourceError(f"Assigned topic '{topic}' does not exist ({e})") from e
            for info in logs:
                out[(topic, info.partition)] = info
        if self.options.assign is not None:
            wanted = {(t, p) for t, ps in self.options.assign.items() for p in ps}
            missing = sorted(wanted - out.keys())
            if missing:
                raise SourceError(f"Assigned partitions do not exist: {', '.join(f'{t}-{p}' for t, p in missing)}")
            out = {tp: s for tp, s in out.items() if tp in wanted}
        return dict(sorted(out.items()))


def _check_all_partitions(specified: Mapping[TopicPartition, int], states: Mapping[TopicPartition, Any],
                          option: str) -> None:
    """Refuse JSON offsets that do not name exactly the partitions read (Kafka's check and message)."""
    if set(specified) != set(states):
        fmt = lambda tps: "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"  # noqa: E731
        raise SourceOptionError(
            f"If {option} contains specific offsets, you must specify all topic partitions.\n"
            f"Use -1 for latest, -2 for earliest.\nSpecified: {fmt(specified)} Assigned: {fmt(states)}")


def _timestamp_offset(state: PartitionLogInfo, timestamp_ms: int, *, tail: bool,
                      client: LakelogClient | None, fetch: TailFetch | None,
                      storage_options: dict[str, str] | None = None) -> int | None:
    """The first readable offset whose timestamp is >= ``timestamp_ms``; None if none.

    Searches the Delta table in ``[log start offset, lake end offset)``; with ``tail`` and nothing
    found there, the leader's tail ``[lake end offset, HW)`` too (:func:`tail_offset_for_timestamp`,
    with ``client`` and ``fetch``). ``storage_options``: delta-rs's, to open an ``s3://`` table
    (``lakelog.lake.storage.*``).
    """
    delta_end = lake_end(state)
    found = None
    if delta_end > state.log_start_offset:
        found = offset_for_timestamp(state.table_uri, timestamp_ms, start=state.log_start_offset, end=delta_end,
                                     storage_options=storage_options)
    if found is None and tail and state.high_watermark > max(delta_end, state.log_start_offset):
        if client is None or fetch is None:
            raise ValueError("a timestamp look-up in the tail needs a gateway client and a TailFetch")
        found = tail_offset_for_timestamp(client, fetch, state, timestamp_ms)
    return found


class _TimestampLookup:
    """Timestamp look-ups of one resolve call: a gateway client for the tail, made on first use."""

    def __init__(self, options: SourceOptions, client: LakelogClient | None) -> None:
        self.options, self.client, self._own = options, client, None
        self.fetch = tail_fetch(options)

    def __call__(self, state: PartitionLogInfo, timestamp_ms: int) -> int | None:
        client = self.client
        if client is None and self.options.read_tail and state.high_watermark > lake_end(state):
            client = self._own = self._own or self.fetch.client()
        return _timestamp_offset(state, timestamp_ms, tail=bool(self.options.read_tail), client=client,
                                 fetch=self.fetch, storage_options=self.options.lake_storage.for_uri(state.table_uri))

    def close(self) -> None:
        if self._own is not None:
            self._own.close()


def resolve_starting_offsets(options: SourceOptions, states: Mapping[TopicPartition, PartitionLogInfo], *,
                             client: LakelogClient | None = None) -> dict[TopicPartition, int]:
    """The first offset to read per partition: ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets``.

    As Spark's Kafka source: ``earliest`` is the log start offset, ``latest`` the partition's
    :func:`readable_end` (the high watermark with ``lakelog.read.tail``, else the lake end offset), a
    timestamp the first readable offset whose record timestamp (ms since the epoch) is >= it.

    Args:
        options: the parsed options.
        states: ``{(topic, partition): PartitionLogInfo}`` of the partitions read.
        client: a gateway client for timestamp look-ups in the leaders' tails (``lakelog.read.tail``
            and a timestamp option). Default None: one is made (and closed) when needed.

    Returns:
        ``{(topic, partition): offset}`` for every partition of ``states``.

    Raises:
        SourceOptionError: JSON offsets that do not name every partition read.
        SourceError: no record at or after a starting timestamp and
            ``startingOffsetsByTimestampStrategy=error``.
    """
    tail = bool(options.read_tail)
    committed = options.isolation_level == "read_committed"
    latest = {tp: readable_end(s, tail=tail, read_committed=committed) for tp, s in states.items()}
    if options.starting_timestamp is not None or options.starting_offsets_by_timestamp is not None:
        if options.starting_timestamp is not None:
            wanted = {tp: options.starting_timestamp for tp in states}
            option = "startingTimestamp"
        else:
            wanted = options.starting_offsets_by_timestamp
            _check_all_partitions(wanted, states, "startingOffsetsByTimestamp")
            option = "startingOffsetsByTimestamp"
        lookup = _TimestampLookup(options, client)
        out = {}
        try:
            for tp, ts in wanted.items():
                offset = lookup(states[tp], ts)
                if offset is None:
                    if options.starting_timestamp_strategy == "error":
                        where = "" if tail else f" below its lake end offset {latest[tp]} ({READ_TAIL}=false)"
                        raise SourceError(
                            f"No record of {tp[0]}-{tp[1]}{where} has a timestamp >= {ts} ({option}); set "
                            "'startingOffsetsByTimestampStrategy' to 'latest' to start such partitions at their latest offset.")
                    offset = latest[tp]
                out[tp] = offset
        finally:
            lookup.close()
        return out
    spec = options.starting_offsets
    if spec == "earliest":
        return {tp: s.log_start_offset for tp, s in states.items()}
    if spec == "latest":
        return latest
    _check_all_partitions(spec, states, "startingOffsets")
    return {tp: (states[tp].log_start_offset if o == EARLIEST else latest[tp] if o == LATEST else o)
            for tp, o in spec.items()}


def resolve_ending_offsets(options: SourceOptions, states: Mapping[TopicPartition, PartitionLogInfo], *,
                           client: LakelogClient | None = None) -> dict[TopicPartition, int]:
    """The exclusive end per partition of a batch read, never past the partition's :func:`readable_end`.

    ``endingTimestamp`` > ``endingOffsetsByTimestamp`` > ``endingOffsets``, as Spark's Kafka source; a
    timestamp no readable record reaches means latest. Latest is the high watermark with
    ``lakelog.read.tail``, else the lake end offset, and JSON offsets past it are cut to it.

    Args:
        options, states, client: as for :func:`resolve_starting_offsets`.

    Returns:
        ``{(topic, partition): end offset}`` for every partition of ``states``.

    Raises:
        SourceOptionError: JSON offsets that do not name every partition read.
    """
    committed = options.isolation_level == "read_committed"
    latest = {tp: readable_end(s, tail=bool(options.read_tail), read_committed=committed) for tp, s in states.items()}
    if options.ending_timestamp is not None or options.ending_offsets_by_timestamp is not None:
        if options.ending_timestamp is not None:
            wanted = {tp: options.ending_timestamp for tp in states}
        else:
            wanted = options.ending_offsets_by_timestamp
            _check_all_partitions(wanted, states, "endingOffsetsByTimestamp")
        lookup = _TimestampLookup(options, client)
        try:
            found = {tp: lookup(states[tp], ts) for tp, ts in wanted.items()}
        finally:
            lookup.close()
        return {tp: latest[tp] if offset is None else min(offset, latest[tp])  # no match: latest, as Kafka
                for tp, offset in found.items()}
    spec = options.ending_offsets
    if spec == "latest":
        return latest
    _check_all_partitions(spec, states, "endingOffsets")
    return {tp: latest[tp] if o == LATEST else min(o, latest[tp]) for tp, o in spec.items()}


def latest_offsets(states: Mapping[TopicPartition, PartitionLogInfo], start: Mapping[TopicPartition, int], *,
                   tail: bool, read_committed: bool = False) -> dict[TopicPartition, int]:
    """Where the next micro-batch may end at most, per partition (before ``maxOffsetsPerTrigger``).

    Args:
        states: the partitions now.
        start: where the micro-batch starts (partitions missing from it are new: no constraint).
        tail: ``lakelog.read.tail``.
        read_committed: ``isolation.level=read_committed``.

    Returns:
        ``{(topic, partition): offset}``: :func:`readable_end` (with ``tail`` the HW, read_committed the
        LSO; else the lake end offset). A partition whose start lies between that end and its HW (a query
        that read the tail before, or read uncommitted) ends at its start, i.e. waits; only a
        start past the HW gives an end below the start, which the next batch reports as a truncated
        log, as Kafka's source does.
    """
    out = {}
    for tp, state in states.items():
        latest = readable_end(state, tail=tail, read_committed=read_committed)
        begin = start.get(tp)
        if begin is not None and latest < begin <= state.high_watermark:
            latest = begin
        out[tp] = latest
    return out


def batch_ranges(states: Mapping[TopicPartition, PartitionLogInfo], start: Mapping[TopicPartition, int],
                 end: Mapping[TopicPartition, int], *, fail_on_data_loss: bool,
                 tail: bool) -> list[OffsetRangePartition]:
    """The offset ranges of a batch read (one per partition, before :func:`split_ranges`).

    Args:
        states: the partitions read; start, end: their resolved starting and ending offsets
            (:func:`resolve_starting_offsets`, :func:`resolve_ending_offsets`).
        fail_on_data_loss: ``failOnDataLoss``: a start below the log start offset raises, else it is
            moved up to the log start offset with a warning.
        tail: ``lakelog.read.tail`` (only for the hint of the error below).

    Returns:
        :class:`OffsetRangePartition` s carrying each partition's lake end offset, empty ones included.

    Raises:
        SourceError: a starting offset past its ending offset; data loss with ``fail_on_data_loss``.
    """
    ranges = []
    for tp, state in states.items():
        s, e = start[tp], end[tp]
        if s < state.log_start_offset:
            loss = DataLoss(state.table_uri, s, min(e, state.log_start_offset), state.log_start_offset)
            report_data_loss(f"{tp[0]}-{tp[1]}: {loss.describe()}.", fail=fail_on_data_loss)
            s = min(state.log_start_offset, max(e, s))
        if s > e:
            hint = ""
            if not tail and s <= state.high_watermark:
                hint = (f" Offsets {e} to {state.high_watermark - 1} are committed but not in the Delta table yet; "
                        f"set the option '{READ_TAIL}' to 'true' to read them from the partition leader.")
            raise SourceError(
                f"Beginning offset {s} is after the ending offset {e} for topic {tp[0]} partition {tp[1]}. "
                f"You either provided an invalid starting offset, or the topic has been damaged.{hint}")
        ranges.append(_range(state, s, e))
    return ranges


def micro_batch_ranges(states: Mapping[TopicPartition, PartitionLogInfo], start: Mapping[TopicPartition, int],
                       end: Mapping[TopicPartition, int], *, fail_on_data_loss: bool,
                       first_batch_rerun: bool = False) -> list[OffsetRangePartition]:
    """The offset ranges of the micro-batch ``start`` to ``end`` (before :func:`split_ranges`).

    A partition new since ``start`` is read from offset 0 (what retention removed of it is data
    loss, found by the task). Ranges carry the lake end offsets of ``states``: a range planned with
    ``lakelog.read.tail`` (or before a restart that turned it off) reads what is past the lake end
    offset from the leader.

    Args:
        states: the partitions now; start, end: the micro-batch's offsets.
        fail_on_data_loss: ``failOnDataLoss``.
        first_batch_rerun: Spark re-runs the query's first batch, whose start the reader computed
            again: an end before the start is then skipped quietly (see the stream reader).

    Returns:
        The non-empty ranges, in the order of ``end``.

    Raises:
        SourceError: with ``fail_on_data_loss``, partitions that are gone (topic deleted) or whose end
            lies before their start (log truncated). Else a warning and nothing read of them.
    """
    gone = sorted(start.keys() - end.keys())
    if gone:
        report_data_loss(f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone (topic deleted?).",
                         fail=fail_on_data_loss)
    ranges = []
    for tp, until in end.items():
        frm = start.get(tp, 0)
        state = states.get(tp)
        if state is None:
            report_data_loss(f"{tp[0]}-{tp[1]} is gone (topic deleted?); offsets {frm} to {until - 1} were not read.",
                             fail=fail_on_data_loss)
            continue
        if until < frm and first_batch_rerun:
            log.warning("%s-%d: the first batch ends at %d, before the recomputed starting offset %d; "
                        "nothing read from it in this batch", tp[0], tp[1], until, frm)
            continue
        if until < frm:
            report_data_loss(f"{tp[0]}-{tp[1]}'s offset was changed from {frm} to {until} (the log was truncated).",
                             fail=fail_on_data_loss)
            continue
        if until > frm:
            ranges.append(_range(state, frm, until))
    return ranges


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               log_start: Mapping[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
    """End offsets covering at most ``limit`` offsets from ``start``, split across partitions by their backlog.

    Like Spark's Kafka source (``maxOffsetsPerTrigger``) each partition gets a share proportional to
    its backlog (``latest - start``, counted from its log start offset if retention moved past the
    start; new partitions start at 0). Unlike Kafka, which rounds small shares up to 1 and can exceed
    the limit, the shares are rounded by largest remainder so the batch never exceeds ``limit``.
    """
    begins, sizes = {}, {}
    for tp, end in latest.items():
        begin = max(start.get(tp, 0), log_start.get(tp, 0))
        if end - begin > 0:
            begins[tp], sizes[tp] = begin, end - begin
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    quotas = {tp: limit * size / total for tp, size in sizes.items()}
    shares = {tp: int(math.floor(q)) for tp, q in quotas.items()}
    left = limit - sum(shares.values())
    for tp in sorted(sizes, key=lambda t: (-(quotas[t] - shares[t]), -sizes[t], t))[:left]:
        shares[tp] += 1
    out = dict(latest)
    for tp in sizes:
        out[tp] = min(latest[tp], begins[tp] + shares[tp])
    return out

