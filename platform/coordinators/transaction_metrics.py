"""The transaction coordinator's state as a Prometheus metric, read at scrape time.

``lakelog_transactional_ids{state}``: the transactional ids this broker coordinates (the
``__transaction_state`` partitions it leads), by transaction state; ``Ongoing`` counts open transactions.
Kafka's coordinator exports no such gauge (its ``__transaction_state`` partitions hold the same).
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from lakelog.coordinators.transaction_log import TransactionStateManager

__all__ = ["transaction_metrics"]


async def transaction_metrics(manager: TransactionStateManager) -> list[Metric]:
    """One family: the count of coordinated transactional ids per state (states with none are left out)."""
    family = GaugeMetricFamily("lakelog_transactional_ids", "Transactional ids this broker coordinates, by "
                               "transaction state (Ongoing: an open transaction).", labels=["state"])
    counts: dict[str, int] = {}
    for metadata in await manager.list_transactions():
        counts[metadata.state.value] = counts.get(metadata.state.value, 0) + 1
    for state, count in sorted(counts.items()):
        family.add_metric([state], count)
    return [family]
