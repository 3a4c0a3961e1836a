"""Client quotas (a lakelog route; Kafka's DescribeClientQuotas / AlterClientQuotas, KIP-546, and
``kafka-configs --entity-type users|clients``):

- ``GET /lakelog/v1/client-quotas?user=&client_id=&strict=false``: ``{"entries": [{"entity": {"user": "alice",
  "client-id": null}, "values": {"producer_byte_rate": 1048576.0}}]}``: the entities with quotas that match
  (a filter left out matches any; ``<default>`` the default entity; ``strict``: no other entity part). As in
  Kafka's ``ClientQuotaEntity``, an entity maps ``user`` and/or ``client-id`` to a name, null for the default;
- ``POST /lakelog/v1/client-quotas:alter`` ``{"entries": [{"entity": {"user": "alice"}, "ops": [{"key":
  "producer_byte_rate", "value": 1048576}, {"key": "request_percentage", "remove": true}]}],
  "validate_only": false}``: every entry is checked first, then written; answers the entries' quotas after.

Quotas are kept in ZooKeeper (:class:`~lakelog.security.quotas.store.QuotaStore`) and enforced by every
broker (:mod:`~lakelog.ingest_api.client_quota_hooks`). With ``authorizer.enabled``, describing needs
``DescribeConfigs`` and altering ``AlterConfigs`` on the Cluster, as Kafka (403 / 40301). Errors: 400 / 40023
(an unknown quota, a value that is not > 0, an entity with no user nor client id, an unknown entity type).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.permissions import require_cluster_alter_configs, require_cluster_describe_configs
from lakelog.ingest_api.openapi_docs import error_responses
from lakelog.security.errors import InvalidQuotaError
from lakelog.requests.security_admin import ClientQuotaAlteration
from lakelog.security.quotas import DEFAULT, QuotaEntity

router = APIRouter(tags=["security"])

QUOTA_ERRORS = error_responses(400, 408, 422, 500, 503)
#: Kafka's ``ClientQuotaEntity`` types.
ENTITY_TYPES = ("user", "client-id")


class QuotaOp(BaseModel):
    """One change of a quota (Kafka's ``ClientQuotaAlteration.Op``)."""

    key: str = Field(description="producer_byte_rate, consumer_byte_rate or request_percentage.")
    value: float | None = Field(None, description="The new value (> 0); ignored with remove.")
    remove: bool = Field(False, description="Delete the quota (no limit from this entity).")


class QuotaAlteration(BaseModel):
    """The changes of one entity."""

    entity: dict[str, str | None] = Field(description='{"user": name, "client-id": name}, one or both; null or '
                                                      '"<default>" for the default entity.')
    ops: list[QuotaOp]


class AlterQuotasRequest(BaseModel):
    """An AlterClientQuotas request."""

    entries: list[QuotaAlteration]
    validate_only: bool = Field(False, description="Check the changes, write nothing.")


class QuotaEntry(BaseModel):
    """An entity and its quotas."""

    entity: dict[str, str | None]
    values: dict[str, float]


class QuotaEntries(BaseModel):
    """Entities and their quotas."""

    entries: list[QuotaEntry]


def entity_of(parts: dict[str, str | None]) -> QuotaEntity:
    """A :class:`QuotaEntity` of Kafka's entity map (null: the default).

    Raises:
        InvalidQuotaError: an unknown entity type, or neither type.
    """
    unknown = set(parts) - set(ENTITY_TYPES)
    if unknown or not parts:
        raise InvalidQuotaError(f"A quota entity maps user and/or client-id to a name (null for the default), "
                                f"not {sorted(parts) if parts else 'nothing'}")
    def name(key: str) -> str | None:
        return None if key not in parts else (DEFAULT if parts[key] is None else parts[key])
    return QuotaEntity(name("user"), name("client-id"))


def entity_map(entity: QuotaEntity) -> dict[str, str | None]:
    """Kafka's entity map of ``entity`` (the default entity as null)."""
    out: dict[str, str | None] = {}
    for key, value in (("user", entity.user), ("client-id", entity.client_id)):
        if value is not None:
            out[key] = None if value == DEFAULT else value
    return out


@router.get("/lakelog/v1/client-quotas", response_model=QuotaEntries, responses=QUOTA_ERRORS,
            summary="Describe client quotas", dependencies=[require_cluster_describe_configs])
async def describe_client_quotas(
    broker: BrokerDep, context: ContextDep,
    user: Annotated[str | None, Query(description="Only this user's entities (<default>: the default user).")] = None,
    client_id: Annotated[str | None, Query(description="Only this client id's (<default>: the default).")] = None,
    strict: Annotated[bool, Query(description="Only entities with no part other than those filtered.")] = False,
) -> QuotaEntries:
    """The entities with quotas that match the filter (Kafka's DescribeClientQuotas)."""
    found = await broker.requests.quotas.describe_client_quotas(context=context, user=user, client_id=client_id,
                                                                strict=strict)
    return QuotaEntries(entries=[QuotaEntry(entity=entity_map(e), values=v) for e, v in found])


@router.post("/lakelog/v1/client-quotas:alter", response_model=QuotaEntries, responses=QUOTA_ERRORS,
             summary="Alter client quotas", dependencies=[require_cluster_alter_configs])
async def alter_client_quotas(body: AlterQuotasRequest, broker: BrokerDep, context: ContextDep) -> QuotaEntries:
    """Set and remove quotas of entities; all entries are checked before any is written (Kafka's
    AlterClientQuotas)."""
    altered = await broker.requests.quotas.alter_client_quotas([ClientQuotaAlteration(
        entity=entity_of(entry.entity), set={op.key: op.value for op in entry.ops if not op.remove},
        remove=[op.key for op in entry.ops if op.remove]) for entry in body.entries], context=context,
        validate_only=body.validate_only)
    return QuotaEntries(entries=[QuotaEntry(entity=entity_map(e), values=v) for e, v in altered])
