"""REST Proxy v3 ACLs: list, create and delete the cluster's ACLs (Confluent's ``AclsResource``).

Shapes are Confluent REST Proxy v3's (``api/v3/openapi.yaml`` of confluentinc/kafka-rest: ``AclData``,
``AclDataList``, ``CreateAclRequestData``, ``DeleteAclsResponse``); names are upper-case (``TOPIC``,
``PREFIXED``, ``READ``, ``ALLOW``), Kafka's spelling (``Topic``, ``Read``) is accepted too:

- ``GET /v3/clusters/{cluster_id}/acls?resource_type=&resource_name=&pattern_type=&principal=&host=&operation=&permission=``:
  the ACLs that pass the filter; a parameter left out (or ``ANY``) matches anything; ``pattern_type=MATCH``
  with a ``resource_name`` lists every ACL that applies to that name (literal, ``*``, prefixes), as
  Kafka's DescribeAcls;
- ``POST /v3/clusters/{cluster_id}/acls`` ``{"resource_type", "resource_name", "pattern_type", "principal",
  "host", "operation", "permission"}``: 201; ``POST .../acls:batch`` ``{"data": [...]}``: 204, all or none
  (every ACL is checked before any is stored);
- ``DELETE /v3/clusters/{cluster_id}/acls?...``: removes the ACLs that pass the filter (``resource_type``
  required, as Kafka's DeleteAcls takes a filter per type or ``ANY``) and answers them ``{"data": [...]}``.

ACLs are kept in ZooKeeper (:class:`~lakelog.security.acl_store.AclStore`); every broker's authorizer
follows them. With ``authorizer.enabled``, listing needs ``Describe`` and changing ``Alter`` on the Cluster
(Kafka's DescribeAcls, CreateAcls, DeleteAcls): 403 / 40301. Errors: 404 / 40409 (not this cluster's id); 400 / 40021 (an unknown resource type,
operation, permission or pattern type, an operation the resource type does not have, an invalid principal).
"""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.permissions import require_cluster_alter, require_cluster_describe
from lakelog.ingest_api.errors import check_cluster
from lakelog.ingest_api.models import ResourceMetadata
from lakelog.ingest_api.openapi_docs import v3_read_errors
from lakelog.ingest_api.v3_models import ResourceCollectionMetadata
from lakelog.security.acls import (WILDCARD, AclBinding, AclFilter, Operation, PatternType, Permission,
                                   ResourceType, parse_principal)
from lakelog.security.errors import InvalidAclError

router = APIRouter(tags=["v3"])

#: 400: an invalid ACL or filter (40021); 404: not this cluster (40409).
ACL_ERRORS = v3_read_errors("cluster (40409)")


def _enum(kind) -> dict:
    """The OpenAPI ``enum`` of an ACL field: Confluent's spelling (``TRANSACTIONAL_ID``) of each value the
    server takes (it also takes Kafka's ``TransactionalId``; anything else is 400 / 40021)."""
    return {"enum": [member.name for member in kind]}


class CreateAclRequestData(BaseModel):
    """One ACL to create (Confluent's ``CreateAclRequestData``)."""

    resource_type: str = Field(description="TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID",
                               json_schema_extra=_enum(ResourceType))
    resource_name: str = Field(description="a name, * for every resource of the type, kafka-cluster for CLUSTER",
                               json_schema_extra={"minLength": 1})
    pattern_type: str = Field("LITERAL", description="LITERAL or PREFIXED", json_schema_extra=_enum(PatternType))
    principal: str = Field(description="User:name, or User:* for everyone",
                           json_schema_extra={"pattern": "^[^:]+:.+$"})
    host: str = Field(WILDCARD, description="the client's IP address, or * for any host",
                      json_schema_extra={"minLength": 1})
    operation: str = Field(description="ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, "
                                       "DESCRIBE_CONFIGS, ALTER_CONFIGS or IDEMPOTENT_WRITE",
                           json_schema_extra=_enum(Operation))
    permission: str = Field("ALLOW", description="ALLOW or DENY", json_schema_extra=_enum(Permission))

    def binding(self) -> AclBinding:
        """The checked ACL. Raises: InvalidAclError."""
        return AclBinding.of(resource_type=self.resource_type, name=self.resource_name, principal=self.principal,
                             operation=self.operation, permission=self.permission, host=self.host,
                             pattern_type=self.pattern_type)


class CreateAclBatchRequest(BaseModel):
    """Several ACLs to create at once (``POST .../acls:batch``)."""

    data: list[CreateAclRequestData]


class AclData(BaseModel):
    """One ACL (Confluent's ``AclData``)."""

    kind: str = "KafkaAcl"
    metadata: ResourceMetadata
    cluster_id: str
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


class AclDataList(BaseModel):
    """ACLs (Confluent's ``AclDataList``)."""

    kind: str = "KafkaAclList"
    metadata: ResourceCollectionMetadata
    data: list[AclData]


class DeleteAclsResponse(BaseModel):
    """The ACLs a delete removed (Confluent's ``DeleteAclsResponse``)."""

    data: list[AclData]


def _any(value: Optional[str]) -> Optional[str]:
    """A filter parameter: None when left out or ``ANY`` (any case)."""
    return None if value is None or value.strip().upper() == "ANY" else value.strip()


def acl_filter(*, resource_type: Optional[str], resource_name: Optional[str], pattern_type: Optional[str],
               principal: Optional[str], host: Optional[str], operation: Optional[str],
               permission: Optional[str]) -> AclFilter:
    """The filter of the query parameters (``ANY`` or absent: any; ``pattern_type=MATCH``: applies to the name).

    Raises:
        InvalidAclError: an unknown name in a parameter, or an invalid principal.
    """
    ptype = _any(pattern_type)
    return AclFilter(
        resource_type=None if _any(resource_type) is None else ResourceType.parse(_any(resource_type)),
        name=resource_name or None,
        pattern_type=None if ptype is None else ("match" if ptype.upper() == "MATCH" else PatternType.parse(ptype)),
        principal=parse_principal(principal) if principal else None,
        host=host or None,
        operation=None if _any(operation) is None else Operation.parse(_any(operation)),
        permission=None if _any(permission) is None else Permission.parse(_any(permission)))


def _acls_url(request: Request, cluster_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/v3/clusters/{cluster_id}/acls"


def _data(request: Request, cluster_id: str, acls: list[AclBinding]) -> list[AclData]:
    url = _acls_url(request, cluster_id)
    return [AclData(metadata=ResourceMetadata(self=url), cluster_id=cluster_id, **a.to_rest()) for a in acls]


FilterParam = Annotated[Optional[str], Query()]
_FILTER_DOC = ("Each parameter narrows the ACLs; left out or ANY: anything. pattern_type=MATCH with a resource_name: "
               "every ACL that applies to that name.")


@router.get("/v3/clusters/{cluster_id}/acls", response_model=AclDataList, responses=ACL_ERRORS,
            dependencies=[require_cluster_describe],
            summary="List ACLs", description=_FILTER_DOC)
async def list_acls(cluster_id: str, request: Request, broker: BrokerDep, context: ContextDep,
                    resource_type: FilterParam = None, resource_name: FilterParam = None, pattern_type: FilterParam = None,
                    principal: FilterParam = None, host: FilterParam = None, operation: FilterParam = None,
                    permission: FilterParam = None) -> AclDataList:
    """The ACLs that pass the filter (DescribeAcls)."""
    check_cluster(broker, cluster_id)
    flt = acl_filter(resource_type=resource_type, resource_name=resource_name, pattern_type=pattern_type,
                     principal=principal, host=host, operation=operation, permission=permission)
    acls = await broker.requests.acls.describe_acls(flt, context=context)
    return AclDataList(metadata=ResourceCollectionMetadata(self=_acls_url(request, cluster_id), next=None),
                       data=_data(request, cluster_id, acls))


@router.post("/v3/clusters/{cluster_id}/acls", status_code=201, response_class=Response,
             dependencies=[require_cluster_alter],
             responses=ACL_ERRORS, summary="Create an ACL")
async def create_acl(cluster_id: str, body: CreateAclRequestData, broker: BrokerDep, context: ContextDep) -> Response:
    """Store one ACL (CreateAcls); storing one that exists changes nothing."""
    check_cluster(broker, cluster_id)
    await broker.requests.acls.create_acls([body.binding()], context=context)
    return Response(status_code=201)


@router.post("/v3/clusters/{cluster_id}/acls:batch", status_code=204, response_class=Response,
             dependencies=[require_cluster_alter],
             responses=ACL_ERRORS, summary="Create several ACLs")
async def create_acls(cluster_id: str, body: CreateAclBatchRequest, broker: BrokerDep, context: ContextDep) -> Response:
    """Store several ACLs; every one is checked before any is stored."""
    check_cluster(broker, cluster_id)
    await broker.requests.acls.create_acls([item.binding() for item in body.data], context=context)
    return Response(status_code=204)


@router.delete("/v3/clusters/{cluster_id}/acls", response_model=DeleteAclsResponse, responses=ACL_ERRORS,
               dependencies=[require_cluster_alter],
               summary="Delete ACLs", description=_FILTER_DOC + " resource_type is required (ANY for every type).")
async def delete_acls(cluster_id: str, request: Request, broker: BrokerDep, context: ContextDep,
                      resource_type: Annotated[str, Query()], resource_name: FilterParam = None,
                      pattern_type: FilterParam = None, principal: FilterParam = None, host: FilterParam = None,
                      operation: FilterParam = None, permission: FilterParam = None) -> DeleteAclsResponse:
    """Remove the ACLs that pass the filter (DeleteAcls) and answer them."""
    check_cluster(broker, cluster_id)
    if not resource_type.strip():
        raise InvalidAclError("resource_type must be given to delete ACLs (ANY for every resource type)")
    flt = acl_filter(resource_type=resource_type, resource_name=resource_name, pattern_type=pattern_type,
                     principal=principal, host=host, operation=operation, permission=permission)
    removed = await broker.requests.acls.delete_acls(flt, context=context)
    return DeleteAclsResponse(data=_data(request, cluster_id, removed))
