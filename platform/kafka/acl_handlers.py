"""The Kafka listener's ACL APIs: DescribeAcls, CreateAcls and DeleteAcls (v1-3), translated onto the
request layer's :class:`~lakelog.requests.security_admin.AclAdmin` (the same ACLs in ZooKeeper that
``lakelog acls``, the HTTP routes and the authorizer use; Describe on the cluster to list them, Alter to
change them: CLUSTER_AUTHORIZATION_FAILED otherwise).

The wire's enums are Kafka's (``org.apache.kafka.common.resource.ResourceType``, ``PatternType``,
``acl.AclOperation``, ``acl.AclPermissionType``). A filter naming a resource type lakelog has no ACLs for
(DELEGATION_TOKEN, USER) matches nothing; a creation naming one, or an UNKNOWN value, answers
INVALID_REQUEST with the values to use.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lakelog.errors import InvalidAclError
from lakelog.kafka import errors as codes
from lakelog.kafka.codec import response_class
from lakelog.kafka.errors import kafka_error_code
from lakelog.requests import RequestContext, RequestHandler
from lakelog.security.acls import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

__all__ = ["AclApis"]

log = logging.getLogger(__name__)

_ANY = 1
_MATCH = 2
#: Kafka's enum values (the ANY and MATCH filters apart)
_RESOURCE_TYPES = {2: ResourceType.TOPIC, 3: ResourceType.GROUP, 4: ResourceType.CLUSTER,
                   5: ResourceType.TRANSACTIONAL_ID}
_UNSERVED_RESOURCE_TYPES = {6, 7}  # DELEGATION_TOKEN, USER
_PATTERN_TYPES = {3: PatternType.LITERAL, 4: PatternType.PREFIXED}
_OPERATIONS = {2: Operation.ALL, 3: Operation.READ, 4: Operation.WRITE, 5: Operation.CREATE, 6: Operation.DELETE,
               7: Operation.ALTER, 8: Operation.DESCRIBE, 9: Operation.CLUSTER_ACTION, 10: Operation.DESCRIBE_CONFIGS,
               11: Operation.ALTER_CONFIGS, 12: Operation.IDEMPOTENT_WRITE}
_PERMISSIONS = {2: Permission.DENY, 3: Permission.ALLOW}


def _ids(table: dict) -> dict:
    return {v: k for k, v in table.items()}


_RESOURCE_TYPE_IDS, _PATTERN_TYPE_IDS = _ids(_RESOURCE_TYPES), _ids(_PATTERN_TYPES)
_OPERATION_IDS, _PERMISSION_IDS = _ids(_OPERATIONS), _ids(_PERMISSIONS)

Handler = Callable[[Any, int, RequestContext], Awaitable[Any]]


class _MatchesNothing(Exception):
    """A filter on a resource type lakelog keeps no ACLs of."""


def _lookup(table: dict, value: int, what: str, *, any_ok: bool) -> Any:
    """``table[value]``; None for ANY when ``any_ok``. Raises InvalidAclError naming the values to use."""
    if any_ok and value == _ANY:
        return None
    try:
        return table[value]
    except KeyError:
        allowed = ", ".join(f"{k} ({v.value})" for k, v in table.items())
        raise InvalidAclError(f"{what} {value} is not served: use one of {allowed}"
                              + (" or 1 (ANY)" if any_ok else "")) from None


def _filter(f: Any) -> AclFilter:
    """A DescribeAcls / DeleteAcls filter as lakelog's :class:`AclFilter`.

    Raises: InvalidAclError (an UNKNOWN or unserved value), _MatchesNothing."""
    if f.resource_type_filter in _UNSERVED_RESOURCE_TYPES:
        raise _MatchesNothing
    pattern = getattr(f, "pattern_type_filter", 3)
    return AclFilter(
        resource_type=_lookup(_RESOURCE_TYPES, f.resource_type_filter, "Resource type", any_ok=True),
        name=f.resource_name_filter,
        pattern_type="match" if pattern == _MATCH else _lookup(_PATTERN_TYPES, pattern, "Pattern type", any_ok=True),
        principal=f.principal_filter, host=f.host_filter,
        operation=_lookup(_OPERATIONS, f.operation, "Operation", any_ok=True),
        permission=_lookup(_PERMISSIONS, f.permission_type, "Permission type", any_ok=True))


def _code(error: Exception, what: str) -> int:
    code = kafka_error_code(error, authorization=codes.CLUSTER_AUTHORIZATION_FAILED)
    if code == codes.UNKNOWN_SERVER_ERROR:
        log.error("%s failed", what, exc_info=error)
    return code


class AclApis:
    """DescribeAcls, CreateAcls and DeleteAcls of one listener.

    Args:
        requests: the broker's request layer.
    """

    def __init__(self, *, requests: RequestHandler) -> None:
        self.requests = requests

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler of every API here."""
        return {29: self.describe_acls, 30: self.create_acls, 31: self.delete_acls}

    async def describe_acls(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DescribeAcls: the ACLs passing the filter, grouped by resource pattern."""
        cls = response_class(29)
        resource_cls = cls.DescribeAclsResource
        try:
            acls = await self.requests.acls.describe_acls(_filter(body), context=context)
        except _MatchesNothing:
            acls = []
        except Exception as e:
            return cls(version=version, throttle_time_ms=0, error_code=_code(e, "DescribeAcls"), error_message=str(e),
                       resources=[])
        by_pattern: dict = {}
        for acl in acls:
            by_pattern.setdefault(acl.pattern, []).append(acl.entry)
        return cls(version=version, throttle_time_ms=0, error_code=codes.NONE, error_message=None, resources=[
            resource_cls(version=version, resource_type=_RESOURCE_TYPE_IDS[p.resource_type], resource_name=p.name,
                         pattern_type=_PATTERN_TYPE_IDS[p.pattern_type], acls=[resource_cls.AclDescription(
                             version=version, principal=e.principal, host=e.host, operation=_OPERATION_IDS[e.operation],
                             permission_type=_PERMISSION_IDS[e.permission]) for e in entries])
            for p, entries in by_pattern.items()])

    async def create_acls(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's CreateAcls: each creation checked on its own (an invalid one answers INVALID_REQUEST and
        is not stored); the valid ones stored together (their error, if the store refuses, on each)."""
        cls = response_class(30)
        results: list[tuple[int, str | None]] = []
        valid: list[AclBinding] = []
        for c in body.creations:
            try:
                if c.resource_type in _UNSERVED_RESOURCE_TYPES:
                    raise InvalidAclError(f"Resource type {c.resource_type} has no ACLs in lakelog: use TOPIC (2), "
                                          "GROUP (3), CLUSTER (4) or TRANSACTIONAL_ID (5)")
                valid.append(AclBinding.of(
                    resource_type=_lookup(_RESOURCE_TYPES, c.resource_type, "Resource type", any_ok=False),
                    name=c.resource_name, principal=c.principal, host=c.host,
                    operation=_lookup(_OPERATIONS, c.operation, "Operation", any_ok=False),
                    permission=_lookup(_PERMISSIONS, c.permission_type, "Permission type", any_ok=False),
                    pattern_type=_lookup(_PATTERN_TYPES, getattr(c, "resource_pattern_type", 3), "Pattern type",
                                         any_ok=False)))
                results.append((codes.NONE, None))
            except InvalidAclError as e:
                results.append((codes.INVALID_REQUEST, str(e)))
        if valid:
            try:
                await self.requests.acls.create_acls(valid, context=context)
            except Exception as e:
                failed = (_code(e, "CreateAcls"), str(e))
                results = [failed if code == codes.NONE else (code, message) for code, message in results]
        return cls(version=version, throttle_time_ms=0, results=[
            cls.AclCreationResult(version=version, error_code=code, error_message=message) for code, message in results])

    async def delete_acls(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DeleteAcls: per filter, the ACLs it removed."""
        cls = response_class(31)
        result_cls = cls.DeleteAclsFilterResult
        acl_cls = result_cls.DeleteAclsMatchingAcl
        results = []
        for f in body.filters:
            try:
                removed = await self.requests.acls.delete_acls(_filter(f), context=context)
            except _MatchesNothing:
                removed = []
            except Exception as e:
                results.append(result_cls(version=version, error_code=_code(e, "DeleteAcls"), error_message=str(e),
                                          matching_acls=[]))
                continue
            results.append(result_cls(version=version, error_code=codes.NONE, error_message=None, matching_acls=[
                acl_cls(version=version, error_code=codes.NONE, error_message=None,
                        resource_type=_RESOURCE_TYPE_IDS[a.pattern.resource_type], resource_name=a.pattern.name,
                        pattern_type=_PATTERN_TYPE_IDS[a.pattern.pattern_type], principal=a.entry.principal,
                        host=a.entry.host, operation=_OPERATION_IDS[a.entry.operation],
                        permission_type=_PERMISSION_IDS[a.entry.permission]) for a in removed]))
        return cls(version=version, throttle_time_ms=0, filter_results=results)
