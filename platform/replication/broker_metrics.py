"""A broker's replication metrics, read at scrape time: partitions, roles, offsets, ISR, controller.

Nothing here runs on the hot path: :func:`replication_metrics` reads what the replica manager, the ISR
manager and the controller already keep in memory (plus one directory walk per partition for its bytes
on disk, in a worker thread) when ``GET /metrics`` is scraped, and turns it into Prometheus metric
families. Each family's help text names the Kafka metric it mirrors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from lakelog.log_tables.log_metrics import bytes_on_disk
from lakelog.replication.broker_topic_stats import BrokerTopicStats
from lakelog.replication.partition import Partition
from lakelog.replication.replica_manager import ReplicaManager

__all__ = ["replication_metrics"]

_PARTITION = ["topic", "partition"]


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _under_min_isr(part: Partition) -> bool:
    return part.state is not None and len(part.state.isr) < part.log.config.min_insync_replicas


async def replication_metrics(rm: ReplicaManager, *, controller_active: bool,
                              offline_partitions: int) -> list[Metric]:
    """The replication families of this broker.

    Args:
        rm: the broker's replica manager (its partitions, ISR manager, counters and log histograms).
        controller_active: whether this broker is the active controller.
        offline_partitions: partitions without a leader, as the active controller last saw them
            (reported as 0 by the other brokers, as Kafka's ``OfflinePartitionsCount``).

    Returns:
        Metric families: broker-level gauges and counters, per-partition gauges (``topic``,
        ``partition`` labels) of every replica open here, per-topic counters (``topic``), the log
        histograms.
    """
    parts = sorted(rm.partitions(), key=lambda p: (p.topic, p.partition))
    leaders = [p for p in parts if p.is_leader]
    sizes = await asyncio.to_thread(lambda: [bytes_on_disk(p.log.table_uri) for p in parts])
    families: list[Metric] = [
        _gauge("lakelog_active_controller", "1 on the active controller, else 0 (Kafka's "
               "kafka.controller:type=KafkaController,name=ActiveControllerCount).", int(controller_active)),
        _gauge("lakelog_offline_partitions", "Partitions without a leader, on the active controller (Kafka's "
               "kafka.controller:type=KafkaController,name=OfflinePartitionsCount).",
               offline_partitions if controller_active else 0),
        _gauge("lakelog_partitions", "Partition replicas on this broker (Kafka's "
               "kafka.server:type=ReplicaManager,name=PartitionCount).", len(parts)),
        _gauge("lakelog_leader_partitions", "Partitions this broker leads (Kafka's "
               "kafka.server:type=ReplicaManager,name=LeaderCount).", len(leaders)),
        _gauge("lakelog_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica "
               "set (Kafka's kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions).",
               sum(1 for p in leaders if p.state is not None and len(p.state.isr) < len(p.replicas))),
        _gauge("lakelog_under_min_isr_partitions", "Partitions led here whose ISR is smaller than "
               "min.insync.replicas: acks=all produce is refused (Kafka's "
               "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount).",
               sum(1 for p in leaders if _under_min_isr(p))),
        CounterMetricFamily("lakelog_isr_shrinks", "ISR shrinks written by this broker as leader (Kafka's "
                            "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec).", value=rm.isr.shrinks),
        CounterMetricFamily("lakelog_isr_expands", "ISR expansions written by this broker as leader (Kafka's "
                            "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec).", value=rm.isr.expands),
        _gauge("lakelog_producer_ids", "Producer ids in the producer state of the partitions led here (Kafka's "
               "kafka.server:type=ReplicaManager,name=ProducerIdCount).",
               sum(len(p.producer_state.entries) for p in leaders)),
    ]
    families.extend(_partition_families(parts, sizes))
    if rm.topic_stats is not None:
        families.extend(_topic_families(rm.topic_stats))
    if rm.log_metrics is not None:
        families.extend(rm.log_metrics.collect())
    return families


def _partition_families(parts: list[Partition], sizes: list[int | None]) -> Iterable[Metric]:
    """Per replica: offsets (Kafka's ``kafka.log:type=Log`` LogStartOffset, LogEndOffset, Size), the
    HW and LSO where this broker leads, the lake end offset and lake lag."""
    specs = {
        "log_start_offset": "First offset of the replica's log (Kafka's kafka.log:type=Log,name=LogStartOffset).",
        "log_end_offset": "Offset after the replica's last record (Kafka's kafka.log:type=Log,name=LogEndOffset).",
        "high_watermark": "The partition's high watermark as this replica knows it (Kafka's "
                          "kafka.cluster:type=Partition HW, from the leader on followers).",
        "last_stable_offset": "First offset of the oldest open transaction, else the high watermark (Kafka's "
                              "LastStableOffsetLag is the high watermark minus this).",
        "lake_end_offset": "Offset after the last record committed to the partition's Delta table.",
        "lake_lag_records": "Records in the log not yet in its Delta table: log end offset minus lake end offset.",
        "log_size_bytes": "Bytes on disk of the replica: Parquet files, _delta_log and segment tail (Kafka's "
                          "kafka.log:type=Log,name=Size).",
    }
    families = {key: GaugeMetricFamily(f"lakelog_partition_{key}", doc, labels=_PARTITION)
                for key, doc in specs.items()}
    for part, size in zip(parts, sizes):
        log, labels = part.log, [part.topic, str(part.partition)]
        leo = log.log_end_offset
        values = {"log_start_offset": log.log_start_offset, "log_end_offset": leo,
                  "high_watermark": log.high_watermark, "last_stable_offset": log.last_stable_offset,
                  "lake_end_offset": log.lake_end_offset, "lake_lag_records": max(0, leo - log.lake_end_offset),
                  "log_size_bytes": size}
        for key, value in values.items():
            if value is not None:
                families[key].add_metric(labels, value)
    return families.values()


def _topic_families(stats: BrokerTopicStats) -> Iterable[Metric]:
    """Per topic: Kafka's ``kafka.server:type=BrokerTopicMetrics`` meters as counters."""
    specs = {
        "messages_in": ("lakelog_messages_in", "Records appended by this broker as leader (Kafka's MessagesInPerSec)."),
        "bytes_in": ("lakelog_bytes_in", "Arrow bytes of the records appended as leader (Kafka's BytesInPerSec)."),
        "bytes_out": ("lakelog_bytes_out", "Arrow bytes of the records answered to consumer fetches (Kafka's "
                      "BytesOutPerSec)."),
        "produce_requests": ("lakelog_produce_requests", "Produce requests to partitions led here (Kafka's "
                             "TotalProduceRequestsPerSec)."),
        "failed_produce_requests": ("lakelog_failed_produce_requests", "Produce requests that failed (Kafka's "
                                    "FailedProduceRequestsPerSec)."),
        "fetch_requests": ("lakelog_fetch_requests", "Consumer fetches of partitions led here (Kafka's "
                           "TotalFetchRequestsPerSec)."),
        "failed_fetch_requests": ("lakelog_failed_fetch_requests", "Consumer fetches that failed (Kafka's "
                                  "FailedFetchRequestsPerSec)."),
    }
    families = {key: CounterMetricFamily(name, doc, labels=["topic"]) for key, (name, doc) in specs.items()}
    for topic, counters in sorted(stats.topics.items()):
        for key, family in families.items():
            family.add_metric([topic], getattr(counters, key))
    return families.values()
