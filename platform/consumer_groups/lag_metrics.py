"""Consumer group lag as Prometheus metrics, as kafka-lag-exporter exports it.

Each broker exports the groups it coordinates (the ``__consumer_offsets`` partitions it leads), so
scraping every broker covers every group exactly once. A group's lag is computed at scrape time by
:func:`~lakelog.consumer_groups.offsets_admin.group_lag` (each partition's offsets from its leader,
wherever it is): nothing is counted on the hot path.

Families (kafka-lag-exporter's names with ``lakelog_`` in front of ``consumergroup``):

- ``lakelog_consumergroup_group_lag{group, topic, partition}``: high watermark minus committed offset
  (from the log start offset when none is committed);
- ``lakelog_consumergroup_group_offset{group, topic, partition}``: the committed offset;
- ``lakelog_consumergroup_group_sum_lag{group}``: the group's lag over every partition.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from lakelog.consumer_groups.broker_api import OffsetsAdminBroker
from lakelog.consumer_groups.offsets_admin import GroupLagInfo, group_lag

log = logging.getLogger(__name__)

__all__ = ["group_lag_metrics"]

#: How long one group's lag may take (seconds) before the scrape leaves the group out.
GROUP_LAG_TIMEOUT_S = 5.0


async def group_lag_metrics(broker: OffsetsAdminBroker, *, timeout_s: float = GROUP_LAG_TIMEOUT_S) -> list[Metric]:
    """The lag families of the groups this broker coordinates.

    Args:
        broker: the started broker (its group coordinator; partition offsets from their leaders).
        timeout_s: per group; a group whose partitions' leaders do not answer in time is left out of
            this scrape (logged at debug level). Default: 5.

    Returns:
        The three families above (empty when this broker coordinates no group with committed offsets).
    """
    groups = broker.coordinator.manager.groups_local()
    answers = await asyncio.gather(*(asyncio.wait_for(group_lag(broker, g), timeout_s) for g in groups),
                                   return_exceptions=True)
    lag = GaugeMetricFamily("lakelog_consumergroup_group_lag", "A group's lag on a partition: high watermark minus "
                            "committed offset (kafka-lag-exporter's kafka_consumergroup_group_lag).",
                            labels=["group", "topic", "partition"])
    offset = GaugeMetricFamily("lakelog_consumergroup_group_offset", "A group's committed offset on a partition "
                               "(kafka-lag-exporter's kafka_consumergroup_group_offset).",
                               labels=["group", "topic", "partition"])
    sum_lag = GaugeMetricFamily("lakelog_consumergroup_group_sum_lag", "A group's lag over all its partitions "
                                "(kafka-lag-exporter's kafka_consumergroup_group_sum_lag).", labels=["group"])
    for group, answer in zip(groups, answers):
        if not isinstance(answer, GroupLagInfo):
            log.debug("lag of group %s left out of this scrape: %r", group, answer)
            continue
        for p in answer.partitions:
            labels = [group, p.topic, str(p.partition)]
            lag.add_metric(labels, p.lag)
            if p.committed_offset is not None:
                offset.add_metric(labels, p.committed_offset)
        sum_lag.add_metric([group], answer.total_lag)
    return [lag, offset, sum_lag]
