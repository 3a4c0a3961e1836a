"""Kafka's ACL model and the authorizer's decision, as pure functions (no ZooKeeper, no HTTP).

An ACL binds a *resource pattern* (resource type, name, pattern type) to an *access control entry*
(principal, host, operation, permission), as Kafka's ``AclBinding``. :func:`authorize` decides one
request the way Kafka's ``AclAuthorizer.authorizeAction`` does (KIP-11, KIP-290 prefixed ACLs):

1. a super user (``super.users``) may do anything;
2. the ACLs that apply are those of the literal resource name, of the wildcard name ``*``, and of every
   prefixed pattern the name starts with;
3. none apply: allowed only with ``allow.everyone.if.no.acl.found`` (default false);
4. a matching Deny wins over any Allow;
5. else a matching Allow allows. Describe is implied by Read, Write, Delete and Alter, DescribeConfigs by
   AlterConfigs (Kafka's implied operations); operation ``All`` matches every operation.

An entry matches a request when its principal is the request's or ``User:*``, its host the client's
address or ``*``, and its operation the request's (or implying it, for Allow) or ``All``.

The stored forms follow Kafka: the ZooKeeper JSON of a resource's entries is
``{"version": 1, "acls": [{"principal", "permissionType", "operation", "host"}]}`` with Kafka's names
(``Allow``, ``Read``); the REST form is Confluent's v3 ACL data (upper-case names: ``TOPIC``, ``READ``,
``ALLOW``, ``LITERAL``). Names parse in either spelling, any case.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from lakelog.security.errors import InvalidAclError

__all__ = [
    "CLUSTER_NAME", "WILDCARD", "WILDCARD_PRINCIPAL", "AccessControlEntry", "AclBinding", "AclFilter", "Operation",
    "PatternType", "Permission", "ResourcePattern", "ResourceType", "authorize", "implied_operations",
    "matching_patterns", "parse_principal",
]

#: The resource name that matches every name of its type in a literal pattern (Kafka's ``WILDCARD_RESOURCE``).
WILDCARD = "*"
#: The principal that matches every principal (Kafka's ``WILDCARD_PRINCIPAL``).
WILDCARD_PRINCIPAL = "User:*"
#: The name of the one Cluster resource (Kafka's ``CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"


def _key(text: str) -> str:
    """``"DESCRIBE_CONFIGS"``, ``"DescribeConfigs"``, ``"describe-configs"`` -> ``"describeconfigs"``."""
    return re.sub(r"[_\-\s]", "", str(text)).lower()


class _Named(str, Enum):
    """An enum parsed from Kafka's (``DescribeConfigs``) or Confluent's (``DESCRIBE_CONFIGS``) spelling."""

    @classmethod
    def parse(cls, text: "str | _Named") -> "_Named":
        """The member named ``text`` in either spelling, any case.

        Raises:
            InvalidAclError: no such member; the message lists the valid names.
        """
        if isinstance(text, cls):
            return text
        for member in cls:
            if _key(member.value) == _key(text):
                return member
        raise InvalidAclError(f"Unknown {cls._what()} {text!r}: use one of {', '.join(m.value for m in cls)}")

    @classmethod
    def _what(cls) -> str:
        return re.sub(r"(?<!^)([A-Z])", r" \1", cls.__name__).lower()

    @property
    def rest_name(self) -> str:
        """Confluent's v3 spelling: ``DescribeConfigs`` -> ``DESCRIBE_CONFIGS``."""
        return re.sub(r"(?<!^)([A-Z])", r"_\1", self.value).upper()


class ResourceType(_Named):
    """Kafka's resource types that lakelog's routes check (``org.apache.kafka.common.resource.ResourceType``)."""

    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"
    TRANSACTIONAL_ID = "TransactionalId"


class PatternType(_Named):
    """How a pattern's name matches resource names (KIP-290): ``LITERAL`` (the name, or every name when it is
    ``*``) or ``PREFIXED`` (every name that starts with it)."""

    LITERAL = "Literal"
    PREFIXED = "Prefixed"


class Operation(_Named):
    """Kafka's ACL operations (``org.apache.kafka.common.acl.AclOperation``)."""

    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"


class Permission(_Named):
    """Allow or Deny (``AclPermissionType``); a matching Deny wins."""

    ALLOW = "Allow"
    DENY = "Deny"


#: The operations each resource type has (Kafka's ``AclEntry.supportedOperations``), ``All`` included.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
                                   Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS, Operation.ALL}),
    ResourceType.GROUP: frozenset({Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALL}),
    ResourceType.CLUSTER: frozenset({Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                                     Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER,
                                     Operation.DESCRIBE, Operation.ALL}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE, Operation.ALL}),
}


def implied_operations(operation: Operation) -> frozenset[Operation]:
    """The operations whose Allow also allows ``operation`` (Kafka's implied operations), itself and ``All``
    included: Describe <- Read, Write, Delete, Alter; DescribeConfigs <- AlterConfigs."""
    if operation is Operation.DESCRIBE:
        return frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER,
                          Operation.ALL})
    if operation is Operation.DESCRIBE_CONFIGS:
        return frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.ALL})
    return frozenset({operation, Operation.ALL})


def parse_principal(text: str) -> str:
    """``"User:alice"`` checked and returned stripped; Kafka's ``KafkaPrincipal`` form ``Type:name``.

    Raises:
        InvalidAclError: no ``:``, or an empty type or name.
    """
    kind, sep, name = str(text).strip().partition(":")
    if not sep or not kind or not name:
        raise InvalidAclError(f"Invalid principal {text!r}: use Type:name, like User:alice (User:* for everyone)")
    return f"{kind}:{name}"


@dataclass(frozen=True)
class ResourcePattern:
    """A resource type, a name and how the name matches (Kafka's ``ResourcePattern``).

    Attributes:
        resource_type: :class:`ResourceType`.
        name: a resource name; ``*`` with ``LITERAL`` is every resource of the type; the Cluster's is
            ``kafka-cluster``.
        pattern_type: :class:`PatternType`. Default: LITERAL.
    """

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    @classmethod
    def of(cls, resource_type: "str | ResourceType", name: str,
           pattern_type: "str | PatternType" = PatternType.LITERAL) -> "ResourcePattern":
        """A checked pattern from names in either spelling.

        Raises:
            InvalidAclError: unknown type or pattern type, an empty name, a Cluster pattern not named
                ``kafka-cluster``.
        """
        rtype, ptype = ResourceType.parse(resource_type), PatternType.parse(pattern_type)
        if not name:
            raise InvalidAclError("A resource name must not be empty (use * for every resource of the type)")
        if rtype is ResourceType.CLUSTER and name != CLUSTER_NAME:
            raise InvalidAclError(f"The Cluster resource is named {CLUSTER_NAME!r}, not {name!r}")
        return cls(rtype, name, ptype)

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the resource ``resource_type`` / ``name``."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)

    def __str__(self) -> str:
        kind = "prefixed" if self.pattern_type is PatternType.PREFIXED else "literal"
        return f"{self.resource_type.value} {self.name!r} ({kind})"


@dataclass(frozen=True)
class AccessControlEntry:
    """Who may (not) do what from where (Kafka's ``AccessControlEntry``).

    Attributes:
        principal: ``User:name``, or ``User:*`` for everyone.
        host: the client's IP address, or ``*`` for any host.
        operation: :class:`Operation`.
        permission: :class:`Permission`.
    """

    principal: str
    host: str
    operation: Operation
    permission: Permission

    def matches(self, *, principal: str, host: str, operations: frozenset[Operation],
                permission: Permission) -> bool:
        """Whether this entry applies to a request by ``principal`` from ``host`` for one of ``operations``."""
        return (self.permission is permission and self.principal in (principal, WILDCARD_PRINCIPAL)
                and self.host in (host, WILDCARD) and (self.operation in operations or self.operation is Operation.ALL))

    def to_zookeeper(self) -> dict[str, str]:
        """Kafka's ZooKeeper JSON of one entry: ``{"principal", "permissionType", "operation", "host"}``."""
        return {"principal": self.principal, "permissionType": self.permission.value,
                "operation": self.operation.value, "host": self.host}

    @classmethod
    def from_zookeeper(cls, data: Mapping[str, str]) -> "AccessControlEntry":
        """The inverse of :meth:`to_zookeeper`. Raises: InvalidAclError."""
        return cls(parse_principal(data["principal"]), str(data["host"]), Operation.parse(data["operation"]),
                   Permission.parse(data["permissionType"]))


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and an entry (Kafka's ``AclBinding``)."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def of(cls, *, resource_type: "str | ResourceType", name: str, principal: str, operation: "str | Operation",
           permission: "str | Permission" = Permission.ALLOW, host: str = WILDCARD,
           pattern_type: "str | PatternType" = PatternType.LITERAL) -> "AclBinding":
        """A checked ACL from names in either spelling (Kafka's or Confluent's, any case).

        Raises:
            InvalidAclError: an unknown name, an invalid principal, an empty name or host, or an operation
                the resource type does not have (Describe on a TransactionalId, yes; Write on a Group, no).
        """
        pattern = ResourcePattern.of(resource_type, name, pattern_type)
        op = Operation.parse(operation)
        if op not in SUPPORTED_OPERATIONS[pattern.resource_type]:
            allowed = ", ".join(sorted(o.value for o in SUPPORTED_OPERATIONS[pattern.resource_type]))
            raise InvalidAclError(f"Operation {op.value} does not apply to a {pattern.resource_type.value}: "
                                  f"use one of {allowed}")
        if not host:
            raise InvalidAclError("The host must not be empty (use * for any host)")
        return cls(pattern, AccessControlEntry(parse_principal(principal), host, op, Permission.parse(permission)))

    def to_rest(self) -> dict[str, str]:
        """Confluent's v3 ACL data: ``{"resource_type": "TOPIC", "resource_name", "pattern_type": "LITERAL",
        "principal", "host", "operation": "READ", "permission": "ALLOW"}``."""
        return {"resource_type": self.pattern.resource_type.rest_name, "resource_name": self.pattern.name,
                "pattern_type": self.pattern.pattern_type.rest_name, "principal": self.entry.principal,
                "host": self.entry.host, "operation": self.entry.operation.rest_name,
                "permission": self.entry.permission.rest_name}

    def __str__(self) -> str:
        e = self.entry
        return f"{e.permission.value} {e.principal} {e.operation.value} from {e.host} on {self.pattern}"


@dataclass(frozen=True)
class AclFilter:
    """Which ACLs to list or remove (Kafka's ``AclBindingFilter``): every field left None matches anything.

    ``pattern_type`` None matches both pattern types of the exact name given; ``"match"`` matches every
    pattern that covers ``name`` (the literal name, the wildcard ``*`` and the prefixes of ``name``), as
    Kafka's ``PatternType.MATCH``.
    """

    resource_type: ResourceType | None = None
    name: str | None = None
    pattern_type: "PatternType | str | None" = None
    principal: str | None = None
    host: str | None = None
    operation: Operation | None = None
    permission: Permission | None = None

    def matches(self, acl: AclBinding) -> bool:
        """Whether ``acl`` passes this filter."""
        p, e = acl.pattern, acl.entry
        if self.resource_type is not None and p.resource_type is not self.resource_type:
            return False
        if self.pattern_type == "match":
            if self.name is not None and not p.matches(p.resource_type, self.name):
                return False
        else:
            if self.pattern_type is not None and p.pattern_type is not self.pattern_type:
                return False
            if self.name is not None and p.name != self.name:
                return False
        return ((self.principal is None or e.principal == self.principal)
                and (self.host is None or e.host == self.host)
                and (self.operation is None or e.operation is self.operation)
                and (self.permission is None or e.permission is self.permission))


def matching_patterns(resource_type: ResourceType, name: str) -> list[ResourcePattern]:
    """The patterns whose ACLs apply to resource ``resource_type`` / ``name``: the literal name, the literal
    wildcard ``*``, and each prefix of the name as a prefixed pattern (``len(name)`` of them)."""
    out = [ResourcePattern(resource_type, name), ResourcePattern(resource_type, WILDCARD)]
    out += [ResourcePattern(resource_type, name[:i], PatternType.PREFIXED) for i in range(1, len(name) + 1)]
    return out


def authorize(acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]], *, principal: str, host: str,
              operation: Operation, resource_type: ResourceType, name: str,
              super_users: frozenset[str] = frozenset(), allow_everyone_if_no_acl_found: bool = False) -> bool:
    """Whether ``principal`` connecting from ``host`` may do ``operation`` on resource ``resource_type`` /
    ``name``: Kafka's ``AclAuthorizer.authorizeAction``, steps 1-5 of the module docstring.

    Args:
        acls: every ACL, by resource pattern (as the store caches them).
        principal: ``User:name`` of the request.
        host: the client's IP address.
        operation: what the request does.
        resource_type, name: the resource it does it on (the Cluster's name is ``kafka-cluster``).
        super_users: principals allowed everything (``super.users``). Default: none.
        allow_everyone_if_no_acl_found: the decision when no ACL applies to the resource
            (``allow.everyone.if.no.acl.found``). Default: False, as Kafka.
    """
    if principal in super_users:  # 1.
        return True
    entries = [e for pattern in matching_patterns(resource_type, name) for e in acls.get(pattern, ())]  # 2.
    if not entries:  # 3.
        return allow_everyone_if_no_acl_found
    denied = frozenset({operation})
    if any(e.matches(principal=principal, host=host, operations=denied, permission=Permission.DENY)
           for e in entries):  # 4.
        return False
    allowing = implied_operations(operation)
    return any(e.matches(principal=principal, host=host, operations=allowing, permission=Permission.ALLOW)
               for e in entries)  # 5.
