"""A broker's enforcement of client quotas: Kafka's ``ClientQuotaManager`` (byte rates) and
``ClientRequestQuotaManager`` (``request_percentage``) for HTTP requests.

Per quota type and metric tags (:func:`~lakelog.security.quotas.entities.quota_metric_tags`) a
:class:`~lakelog.security.quotas.rate.SampledRate` measures what the entity used on this broker:

- ``producer_byte_rate``: the bytes of produce request bodies;
- ``consumer_byte_rate``: the bytes of fetch answers (v2 fetch, consumer instances' records);
- ``request_percentage``: the time its requests took, as a percentage of one second
  (Kafka's ``nanosToPercentage``: ``ns * 100 / 1e9``); a quota of 200 is two handlers' worth.

Kafka records a request and then delays the client for the throttle time; over HTTP the broker records a
request once answered (its size is known only then) and refuses the entity's next requests while the
throttle time (:func:`~lakelog.security.quotas.rate.throttle_time_ms`) is above zero: 429 / 42902
(:class:`~lakelog.security.errors.ClientQuotaExceededError`) with ``Retry-After`` = the throttle time in
whole seconds rounded up, before anything is done (a refused produce writes nothing). Clients wait and
retry (:class:`~lakelog.client.LakelogClient`), so over time an entity gets its quota.

Brokers' own requests are exempt (Kafka exempts inter-broker replication from client quotas).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric

from lakelog.security.errors import ClientQuotaExceededError
from lakelog.security.quotas.entities import QuotaEntity, resolve_quota
from lakelog.security.quotas.rate import SampledRate
from lakelog.security.quotas.store import QuotaCache

__all__ = ["ClientQuotaManager", "PRODUCE", "FETCH", "REQUEST"]

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
#: Rates not recorded for this long are dropped (Kafka expires quota sensors after an hour).
INACTIVE_RATE_EXPIRY_S = 3600.0


class ClientQuotaManager:
    """Measure and enforce the client quotas of one broker.

    Args:
        cache: the quotas (:class:`~lakelog.security.quotas.store.QuotaCache`, started by the caller).
        window_num: ``quota.window.num``. Default: 11 (Kafka's).
        window_size_s: ``quota.window.size.seconds``. Default: 1 (Kafka's).
        exempt_principals: principals never throttled (the brokers' ``User:{inter.broker.username}``).

    Attributes:
        throttled: quota type -> requests refused for it (for ``GET /metrics``).

    Used from the gateway's event loop only.
    """

    def __init__(self, cache: QuotaCache, *, window_num: int = 11, window_size_s: float = 1.0,
                 exempt_principals: Iterable[str] = ()) -> None:
        SampledRate(window_num=window_num, window_size_s=window_size_s)  # checks the settings
        self.cache = cache
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.exempt_principals = frozenset(exempt_principals)
        self.throttled: dict[str, int] = {PRODUCE: 0, FETCH: 0, REQUEST: 0}
        self._rates: dict[tuple[str, tuple[str, str]], tuple[SampledRate, list[float]]] = {}
        self._next_expiry_s = time.monotonic() + INACTIVE_RATE_EXPIRY_S

    @property
    def active(self) -> bool:
        """False while no entity has a quota: requests skip quota work."""
        return not self.cache.empty

    def _rate(self, quota_type: str, tags: tuple[str, str]) -> tuple[SampledRate, list[float]]:
        key = (quota_type, tags)
        entry = self._rates.get(key)
        if entry is None:
            entry = self._rates[key] = (SampledRate(window_num=self.window_num, window_size_s=self.window_size_s), [0.0])
        return entry

    def throttle_time_ms(self, quota_type: str, user: str, client_id: str, *, now_ms: float | None = None) -> int:
        """ms the entity must wait before its next request of ``quota_type`` (0: not over its quota)."""
        tags, quota = resolve_quota(self.cache.by_type[quota_type], user, client_id)
        if quota is None:
            return 0
        entry = self._rates.get((quota_type, tags))
        if entry is None:
            return 0
        return entry[0].throttle_time_ms(quota, now_ms=time.monotonic() * 1000 if now_ms is None else now_ms)

    def check(self, quota_types: Iterable[str], *, user: str, client_id: str, now_ms: float | None = None) -> None:
        """Refuse a request of ``user`` with ``client_id`` while it is over one of ``quota_types``.

        Raises:
            ClientQuotaExceededError: 429 / 42902, ``Retry-After`` the longest throttle time (whole seconds,
                rounded up), naming the quota and the entity.
        """
        now_ms = time.monotonic() * 1000 if now_ms is None else now_ms
        worst, worst_type = 0, ""
        for quota_type in quota_types:
            ms = self.throttle_time_ms(quota_type, user, client_id, now_ms=now_ms)
            if ms > worst:
                worst, worst_type = ms, quota_type
        if worst > 0:
            self.throttled[worst_type] += 1
            tags, quota = resolve_quota(self.cache.by_type[worst_type], user, client_id)
            entity = QuotaEntity(tags[0] or None, tags[1] or None).describe() or "client-id=<default>"
            raise ClientQuotaExceededError(
                f"Client quota {worst_type}={quota:g} of {entity} exceeded on this broker: throttled for {worst} ms; "
                f"retry after the Retry-After seconds (lakelog quotas describe shows the quotas)",
                retry_after_s=max(1, math.ceil(worst / 1000)))

    def record(self, quota_type: str, value: float, *, user: str, client_id: str, now_ms: float | None = None) -> None:
        """Add ``value`` (bytes; percent for ``request_percentage``) to the entity's rate of ``quota_type``;
        nothing when no quota applies to it."""
        tags, quota = resolve_quota(self.cache.by_type[quota_type], user, client_id)
        if quota is None:
            return
        now_s = time.monotonic()
        rate, last = self._rate(quota_type, tags)
        rate.record(value, now_ms=now_s * 1000 if now_ms is None else now_ms)
        last[0] = now_s
        if now_s >= self._next_expiry_s:
            self._next_expiry_s = now_s + INACTIVE_RATE_EXPIRY_S
            for key in [k for k, (_, seen) in self._rates.items() if now_s - seen[0] > INACTIVE_RATE_EXPIRY_S]:
                del self._rates[key]

    def is_exempt(self, principal: str) -> bool:
        """Whether ``principal`` is never throttled (a broker)."""
        return principal in self.exempt_principals

    def metric_families(self) -> list[Metric]:
        """``lakelog_client_quota_throttled_requests_total{quota_type}``: requests refused for each quota
        type (Kafka's per-quota ``throttle-time`` sensors count throttled requests the same way)."""
        family = CounterMetricFamily("lakelog_client_quota_throttled_requests",
                                     "Requests answered 429 / 42902 because their user or client id was over a "
                                     "client quota, by quota type (lakelog quotas).", labels=["quota_type"])
        for quota_type, count in self.throttled.items():
            family.add_metric([quota_type], count)
        return [family]
