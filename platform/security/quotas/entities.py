"""Client quota entities and Kafka's resolution of the quota that applies to a request (pure functions).

A quota entity is ``(user, client_id)``: either part a name, :data:`DEFAULT` (``<default>``, Kafka's
default entity) or None (the part is not in the entity). Kafka's eight levels, highest precedence first
(Kafka docs "Quotas", KIP-55), each a separate znode:

1. ``/config/users/<user>/clients/<client-id>``
2. ``/config/users/<user>/clients/<default>``
3. ``/config/users/<user>``
4. ``/config/users/<default>/clients/<client-id>``
5. ``/config/users/<default>/clients/<default>``
6. ``/config/users/<default>``
7. ``/config/clients/<client-id>``
8. ``/config/clients/<default>``

Each quota type (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``) resolves on its
own: an entity may have its producer quota from its user's znode and its request quota from its client id's.

Requests share a rate measurement when they resolve to the same metric tags (:func:`quota_metric_tags`,
Kafka's ``DefaultQuotaCallback.quotaMetricTags``): a quota of ``/config/users/alice`` is shared by all of
alice's client ids (tags ``(alice, "")``), ``/config/users/<default>`` gives each user their own quota (tags
``(user, "")``), and ``/config/clients/<client-id>`` one shared by the client id's users (``("", client)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["DEFAULT", "QUOTA_CONFIGS", "QuotaEntity", "quota_limit", "quota_metric_tags", "resolve_quota",
           "user_name"]

#: Kafka's name of a default entity (``ConfigEntityName.DEFAULT``): ``/config/users/<default>``.
DEFAULT = "<default>"

#: The client quota configs (Kafka's ``QuotaConfigs``), with their units.
QUOTA_CONFIGS: dict[str, str] = {
    "producer_byte_rate": "bytes/s of produce request bodies",
    "consumer_byte_rate": "bytes/s of fetch answers",
    "request_percentage": "percent of one request handler's time per quota window",
}


class QuotaEntity(NamedTuple):
    """A quota entity: ``user`` and ``client_id`` each a name, :data:`DEFAULT` or None (not part of it)."""

    user: str | None = None
    client_id: str | None = None

    def describe(self) -> str:
        """``user=alice, client-id=<default>`` (Kafka's kafka-configs wording)."""
        parts = []
        if self.user is not None:
            parts.append(f"user={self.user}")
        if self.client_id is not None:
            parts.append(f"client-id={self.client_id}")
        return ", ".join(parts)


def user_name(principal: str) -> str:
    """The user of a principal: ``User:alice`` -> ``alice`` (``User:ANONYMOUS`` -> ``ANONYMOUS``, as Kafka)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


def quota_metric_tags(quotas: Mapping[QuotaEntity, float], user: str, client_id: str) -> tuple[str, str]:
    """The ``(user, client-id)`` tags of the rate a request of ``user`` with ``client_id`` is measured in
    for one quota type (``""``: not part of the tags). Kafka's ``DefaultQuotaCallback.quotaMetricTags``.

    Args:
        quotas: the entities that set this quota type -> its value.
        user: the request's user name (``ANONYMOUS`` without authentication).
        client_id: the request's client id (``""`` when it sent none).
    """
    has = quotas.__contains__
    if has(QuotaEntity(user, client_id)) or has(QuotaEntity(user, DEFAULT)):
        return user, client_id
    if has(QuotaEntity(user, None)):
        return user, ""
    if has(QuotaEntity(DEFAULT, client_id)) or has(QuotaEntity(DEFAULT, DEFAULT)):
        return user, client_id
    if has(QuotaEntity(DEFAULT, None)):
        return user, ""
    return "", client_id


def quota_limit(quotas: Mapping[QuotaEntity, float], tags: tuple[str, str]) -> float | None:
    """The quota of the rate with these metric tags (:func:`quota_metric_tags`); None: no quota (unlimited).
    Kafka's ``DefaultQuotaCallback.quotaLimit``."""
    user, client_id = tags
    get = quotas.get
    if user and client_id:
        for entity in (QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT), QuotaEntity(DEFAULT, client_id),
                       QuotaEntity(DEFAULT, DEFAULT)):
            if (value := get(entity)) is not None:
                return value
        return None
    if user:
        value = get(QuotaEntity(user, None))
        return value if value is not None else get(QuotaEntity(DEFAULT, None))
    if client_id:
        value = get(QuotaEntity(None, client_id))
        return value if value is not None else get(QuotaEntity(None, DEFAULT))
    return get(QuotaEntity(None, DEFAULT))


def resolve_quota(quotas: Mapping[QuotaEntity, float], user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
    """``(metric tags, quota)`` of a request of ``user`` with ``client_id`` for one quota type; the quota
    None when no entity limits it."""
    if not quotas:
        return ("", client_id), None
    tags = quota_metric_tags(quotas, user, client_id)
    return tags, quota_limit(quotas, tags)
