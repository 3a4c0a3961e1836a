"""Histograms of one broker's partition logs: segment appends, Delta commits, group-commit sizes.

Observed once per append or commit, never per record: :class:`~lakelog.log_tables.group_commit.GroupCommitter`
observes each group commit's append time and record count, :class:`~lakelog.log_tables.flusher.LakeFlusher`
each Delta commit's time. The instruments are prometheus-client histograms kept outside any registry
(one set per broker, so brokers sharing a process never mix); the gateway's ``GET /metrics`` exports
them through :meth:`LogMetrics.collect`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

__all__ = ["LogMetrics", "bytes_on_disk"]

#: Seconds: 50 us to 10 s (an append of a small frame is sub-millisecond; a Delta commit tens of ms).
LATENCY_BUCKETS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                     1.0, 2.5, 5.0, 10.0)
#: Records in one group commit: 1 to 1,000,000.
RECORDS_BUCKETS = (1, 2, 5, 10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000)


class LogMetrics:
    """The log layer's histograms of one broker.

    Attributes:
        append_seconds: time of one group commit's append (offsets assigned, one frame written to the
            segment tail, or one Delta commit for a log without a tail). Kafka's ``LogFlushRateAndTimeMs``
            is the nearest (Kafka appends to the page cache; this is the append itself).
        lake_commit_seconds: time of one flush's Delta commit (the tail read, the Parquet file, the commit).
        group_commit_records: records in one group commit (Kafka's ``kafka.server:type=BrokerTopicMetrics``
            has none; the producer's ``batch-size-avg`` is the nearest).
    """

    def __init__(self) -> None:
        self.append_seconds = Histogram(
            "lakelog_log_append_seconds", "Time of one group commit's append to a partition log: the segment "
            "tail's frame write, or a Delta commit without a tail (nearest Kafka metric: "
            "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs).", buckets=LATENCY_BUCKETS_S, registry=None)
        self.lake_commit_seconds = Histogram(
            "lakelog_lake_commit_seconds", "Time of one Delta commit of the flusher (segment tail to the partition's "
            "Delta table; no Kafka equivalent: Kafka's tiered storage copy is the nearest, "
            "kafka.log.remote:type=RemoteLogManager).", buckets=LATENCY_BUCKETS_S, registry=None)
        self.group_commit_records = Histogram(
            "lakelog_group_commit_records", "Records in one group commit (the produce requests of a partition "
            "appended together; nearest Kafka metric: the producer's batch-size-avg).", buckets=RECORDS_BUCKETS,
            registry=None)

    def collect(self) -> Iterator[Metric]:
        """The three histograms' metric families, for a collector, and (when called in the broker's event
        loop) ``lakelog_asyncio_tasks``: the tasks of that loop, so what each partition costs while idle shows
        (``bench/partition_scale.py``)."""
        for histogram in (self.append_seconds, self.lake_commit_seconds, self.group_commit_records):
            yield from histogram.collect()
        try:
            tasks = len(asyncio.all_tasks())
        except RuntimeError:  # no running event loop
            return
        yield GaugeMetricFamily("lakelog_asyncio_tasks", "asyncio tasks of the broker's event loop (timers, group "
                                "commits, fetchers, requests in flight; no Kafka equivalent: the nearest is the "
                                "JVM's thread count).", value=tasks)


def bytes_on_disk(table_uri: str) -> int | None:
    """Bytes of every file under a partition's local table directory (its Parquet files, ``_delta_log`` and
    the segment tail inside it; Kafka's ``kafka.log:type=Log,name=Size``); None for an object-store table.
    Blocking (a directory walk): call from a worker thread."""
    if "://" in table_uri:
        return None
    total = 0
    for root, _, files in os.walk(table_uri):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # removed meanwhile (VACUUM, a rolled segment)
                continue
    return total
