"""Kafka's client quotas (KIP-13 byte rates, KIP-55 user quotas, KIP-124 ``request_percentage``).

- :mod:`~lakelog.security.quotas.entities`: entities and Kafka's precedence (pure functions);
- :mod:`~lakelog.security.quotas.rate`: sampled-window rates and Kafka's throttle time;
- :mod:`~lakelog.security.quotas.store`: the quotas in ZooKeeper, and a broker's followed copy;
- :mod:`~lakelog.security.quotas.manager`: a broker's measurement and enforcement (429 / 42902).
"""

from lakelog.security.quotas.entities import DEFAULT, QUOTA_CONFIGS, QuotaEntity
from lakelog.security.quotas.manager import FETCH, PRODUCE, REQUEST, ClientQuotaManager
from lakelog.security.quotas.store import QuotaCache, QuotaStore

__all__ = ["DEFAULT", "FETCH", "PRODUCE", "QUOTA_CONFIGS", "REQUEST", "ClientQuotaManager", "QuotaCache",
           "QuotaEntity", "QuotaStore"]
