"""Planning on the driver: which partitions a read covers, and the offsets it starts and ends at.

:class:`_Cluster` asks a gateway (``lakelog.bootstrap.servers``) for the subscribed or assigned topics
and, per partition, a :class:`~lakelog.protocol.log_info.PartitionLogInfo` (its Delta table, log start
offset and high watermark, ``GET /lakelog/v1/topics/{t}/logs``). :func:`resolve_starting_offsets` and
:func:`resolve_ending_offsets` turn the starting/ending options into offsets per partition;
:func:`rate_limit` caps a micro-batch (``maxOffsetsPerTrigger``). Cutting the resulting offset ranges
into Spark tasks is :func:`lakelog.spark.source.read.split_ranges`.
"""

from __future__ import annotations

import logging
import math
import re
import time
from typing import Any, Mapping

from lakelog.protocol.http_client import LakelogClient
from lakelog.log_tables.reader import offset_for_timestamp
from lakelog.protocol.errors import RemoteError
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.replication.errors import UnknownTopicError
from lakelog.spark.errors import SourceError, SourceOptionError
from lakelog.spark.source.options import EARLIEST, LATEST, SourceOptions, TopicPartition
from lakelog.spark.sql import partition_logs_from_gateway

log = logging.getLogger(__name__)

__all__ = ["INTERNAL_TOPICS", "rate_limit", "resolve_ending_offsets", "resolve_starting_offsets"]

#: Kafka's internal topics; a pattern subscription does not match them (``exclude.internal.topics``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class _Cluster:
    """Driver-side metadata through the gateway: which partitions a read covers and their offsets.

    Holds one :class:`~lakelog.protocol.http_client.LakelogClient` of ``options.bootstrap_servers``, made on first
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
            self._client = LakelogClient(self.options.bootstrap_servers)
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
        return sorted(t for t in self.client.list_topics() if t not in INTERNAL_TOPICS and pattern.fullmatch(t))

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
        for attempt in range(opts.fetch_offset_retries + 1):
            try:
                return self._partitions()
            except (RemoteError, ConnectionError) as e:
                retriable = isinstance(e, ConnectionError) or e.retriable
                if not retriable or attempt == opts.fetch_offset_retries:
                    raise
                log.warning("fetching offsets from %s failed (%s); retrying", opts.bootstrap_servers, e)
                time.sleep(opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

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


def _timestamp_offset(state: PartitionLogInfo, timestamp_ms: int) -> int | None:
    """The first offset in ``[log start offset, HW)`` whose timestamp is >= ``timestamp_ms``; None if none."""
    if state.high_watermark <= state.log_start_offset:
        return None
    return offset_for_timestamp(state.table_uri, timestamp_ms, start=state.log_start_offset,
                                end=state.high_watermark)


def resolve_starting_offsets(options: SourceOptions, states: Mapping[TopicPartition, PartitionLogInfo]
                             ) -> dict[TopicPartition, int]:
    """The first offset to read per partition: ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets``.

    As Spark's Kafka source: ``earliest`` is the log start offset, ``latest`` the high watermark, a
    timestamp the first offset whose record timestamp (ms since the epoch) is >= it.

    Returns:
        ``{(topic, partition): offset}`` for every partition of ``states``.

    Raises:
        SourceOptionError: JSON offsets that do not name every partition read.
        SourceError: no record at or after a starting timestamp and
            ``startingOffsetsByTimestampStrategy=error``.
    """
    if options.starting_timestamp is not None or options.starting_offsets_by_timestamp is not None:
        if options.starting_timestamp is not None:
            wanted = {tp: options.starting_timestamp for tp in states}
            option = "startingTimestamp"
        else:
            wanted = options.starting_offsets_by_timestamp
            _check_all_partitions(wanted, states, "startingOffsetsByTimestamp")
            option = "startingOffsetsByTimestamp"
        out = {}
        for tp, ts in wanted.items():
            offset = _timestamp_offset(states[tp], ts)
            if offset is None:
                if options.starting_timestamp_strategy == "error":
                    raise SourceError(
                        f"No record of {tp[0]}-{tp[1]} has a timestamp >= {ts} ({option}); set "
                        "'startingOffsetsByTimestampStrategy' to 'latest' to start such partitions at their latest offset.")
                offset = states[tp].high_watermark
            out[tp] = offset
        return out
    spec = options.starting_offsets
    if spec == "earliest":
        return {tp: s.log_start_offset for tp, s in states.items()}
    if spec == "latest":
        return {tp: s.high_watermark for tp, s in states.items()}
    _check_all_partitions(spec, states, "startingOffsets")
    return {tp: (states[tp].log_start_offset if o == EARLIEST else states[tp].high_watermark if o == LATEST else o)
            for tp, o in spec.items()}


def resolve_ending_offsets(options: SourceOptions, states: Mapping[TopicPartition, PartitionLogInfo]
                           ) -> dict[TopicPartition, int]:
    """The exclusive end per partition of a batch read, never past the high watermark.

    ``endingTimestamp`` > ``endingOffsetsByTimestamp`` > ``endingOffsets``, as Spark's Kafka source; a
    timestamp no record reaches means latest (the high watermark).

    Returns:
        ``{(topic, partition): end offset}`` for every partition of ``states``.

    Raises:
        SourceOptionError: JSON offsets that do not name every partition read.
    """
    hw = {tp: s.high_watermark for tp, s in states.items()}
    if options.ending_timestamp is not None or options.ending_offsets_by_timestamp is not None:
        if options.ending_timestamp is not None:
            wanted = {tp: options.ending_timestamp for tp in states}
        else:
            wanted = options.ending_offsets_by_timestamp
            _check_all_partitions(wanted, states, "endingOffsetsByTimestamp")
        out = {}
        for tp, ts in wanted.items():
            offset = _timestamp_offset(states[tp], ts)
            out[tp] = hw[tp] if offset is None else offset  # no match: latest, as Kafka
        return out
    spec = options.ending_offsets
    if spec == "latest":
        return hw
    _check_all_partitions(spec, states, "endingOffsets")
    return {tp: hw[tp] if o == LATEST else min(o, hw[tp]) for tp, o in spec.items()}




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

