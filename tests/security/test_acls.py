"""Kafka's ACL authorizer decisions (lakelog.security.acls), without ZooKeeper."""

from __future__ import annotations

import pytest

from lakelog.security.acls import (AclBinding, AclFilter, Operation, PatternType, Permission, ResourcePattern,
                                   ResourceType, authorize)
from lakelog.security.errors import InvalidAclError

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def acls_of(*bindings: AclBinding) -> dict:
    out: dict = {}
    for b in bindings:
        out.setdefault(b.pattern, set()).add(b.entry)
    return out


def allowed(acls, principal, operation, name, *, resource_type=TOPIC, host="10.0.0.1", **kwargs) -> bool:
    return authorize(acls, principal=principal, host=host, operation=operation, resource_type=resource_type,
                     name=name, **kwargs)


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found():
    assert not allowed({}, "User:alice", Operation.READ, "orders")
    assert allowed({}, "User:alice", Operation.READ, "orders", allow_everyone_if_no_acl_found=True)
    # an ACL on the resource, for someone else: no longer "no ACL found"
    acls = acls_of(AclBinding.of(resource_type="Topic", name="orders", principal="User:bob", operation="Read"))
    assert not allowed(acls, "User:alice", Operation.READ, "orders", allow_everyone_if_no_acl_found=True)
    assert allowed(acls, "User:alice", Operation.READ, "payments", allow_everyone_if_no_acl_found=True)


def test_literal_wildcard_and_prefixed_patterns():
    acls = acls_of(
        AclBinding.of(resource_type="TOPIC", name="orders", principal="User:alice", operation="READ"),
        AclBinding.of(resource_type="TOPIC", name="*", principal="User:carol", operation="WRITE"),
        AclBinding.of(resource_type="TOPIC", name="team-a.", principal="User:dave", operation="ALL",
                      pattern_type="PREFIXED"),
    )
    assert allowed(acls, "User:alice", Operation.READ, "orders")
    assert not allowed(acls, "User:alice", Operation.READ, "orders2")  # literal is exact
    assert not allowed(acls, "User:alice", Operation.WRITE, "orders")
    assert allowed(acls, "User:carol", Operation.WRITE, "anything")  # the wildcard name
    assert allowed(acls, "User:dave", Operation.DELETE, "team-a.clicks")  # prefixed, operation All
    assert not allowed(acls, "User:dave", Operation.DELETE, "team-b.clicks")
    assert not allowed(acls, "User:dave", Operation.READ, "team-a.x", resource_type=GROUP)  # another type


def test_deny_wins_and_principal_and_host_wildcards():
    acls = acls_of(
        AclBinding.of(resource_type="Topic", name="orders", principal="User:*", operation="Read"),
        AclBinding.of(resource_type="Topic", name="ord", principal="User:mallory", operation="Read",
                      permission="Deny", pattern_type="Prefixed"),
        AclBinding.of(resource_type="Topic", name="orders", principal="User:erin", operation="Write",
                      host="10.0.0.7"),
    )
    assert allowed(acls, "User:anyone", Operation.READ, "orders")
    assert not allowed(acls, "User:mallory", Operation.READ, "orders")  # Deny (prefixed) over Allow (User:*)
    assert allowed(acls, "User:erin", Operation.WRITE, "orders", host="10.0.0.7")
    assert not allowed(acls, "User:erin", Operation.WRITE, "orders", host="10.0.0.8")
    # super users pass even a Deny
    assert allowed(acls, "User:mallory", Operation.READ, "orders", super_users=frozenset({"User:mallory"}))
    # a Deny of All denies every operation
    deny_all = acls_of(AclBinding.of(resource_type="Topic", name="*", principal="User:x", operation="All",
                                     permission="Deny"),
                       AclBinding.of(resource_type="Topic", name="t", principal="User:x", operation="Describe"))
    assert not allowed(deny_all, "User:x", Operation.DESCRIBE, "t")


def test_implied_operations():
    acls = acls_of(
        AclBinding.of(resource_type="Topic", name="t", principal="User:r", operation="Read"),
        AclBinding.of(resource_type="Topic", name="t", principal="User:c", operation="AlterConfigs"),
        AclBinding.of(resource_type="Topic", name="t", principal="User:d", operation="Read"),
        AclBinding.of(resource_type="Topic", name="t", principal="User:d", operation="Describe", permission="Deny"),
    )
    assert allowed(acls, "User:r", Operation.DESCRIBE, "t")  # Describe <- Read
    assert not allowed(acls, "User:r", Operation.DESCRIBE_CONFIGS, "t")
    assert allowed(acls, "User:c", Operation.DESCRIBE_CONFIGS, "t")  # DescribeConfigs <- AlterConfigs
    assert not allowed(acls, "User:c", Operation.DESCRIBE, "t")
    assert not allowed(acls, "User:d", Operation.DESCRIBE, "t")  # an explicit Deny is not overridden by Read
    assert allowed(acls, "User:d", Operation.READ, "t")  # a Deny of Describe does not deny Read


def test_cluster_and_transactional_id_resources():
    acls = acls_of(AclBinding.of(resource_type="Cluster", name="kafka-cluster", principal="User:broker-1",
                                 operation="ClusterAction"),
                   AclBinding.of(resource_type="TransactionalId", name="spark-", principal="User:etl",
                                 operation="Write", pattern_type="Prefixed"))
    assert allowed(acls, "User:broker-1", Operation.CLUSTER_ACTION, "kafka-cluster", resource_type=CLUSTER)
    assert not allowed(acls, "User:alice", Operation.CLUSTER_ACTION, "kafka-cluster", resource_type=CLUSTER)
    assert allowed(acls, "User:etl", Operation.WRITE, "spark-q1-0", resource_type=ResourceType.TRANSACTIONAL_ID)
    assert allowed(acls, "User:etl", Operation.DESCRIBE, "spark-q1-0", resource_type=ResourceType.TRANSACTIONAL_ID)


def test_invalid_acls_are_refused_with_what_to_fix():
    with pytest.raises(InvalidAclError, match="Operation Write does not apply to a Group: use one of"):
        AclBinding.of(resource_type="Group", name="g", principal="User:a", operation="Write")
    with pytest.raises(InvalidAclError, match="Unknown operation 'Fly': use one of All, Read"):
        AclBinding.of(resource_type="Topic", name="t", principal="User:a", operation="Fly")
    with pytest.raises(InvalidAclError, match="Invalid principal 'alice': use Type:name"):
        AclBinding.of(resource_type="Topic", name="t", principal="alice", operation="Read")
    with pytest.raises(InvalidAclError, match="Cluster resource is named 'kafka-cluster'"):
        AclBinding.of(resource_type="Cluster", name="c", principal="User:a", operation="Alter")
    with pytest.raises(InvalidAclError, match="must not be empty"):
        AclBinding.of(resource_type="Topic", name="", principal="User:a", operation="Read")
    with pytest.raises(InvalidAclError, match="Unknown resource type 'Table'"):
        ResourcePattern.of("Table", "t")


def test_rest_shape_and_filters():
    acl = AclBinding.of(resource_type="transactional_id", name="tx", principal="User:a",
                        operation="describe", pattern_type="literal")
    assert acl.to_rest() == {"resource_type": "TRANSACTIONAL_ID", "resource_name": "tx", "pattern_type": "LITERAL",
                             "principal": "User:a", "host": "*", "operation": "DESCRIBE", "permission": "ALLOW"}
    lit = AclBinding.of(resource_type="Topic", name="orders", principal="User:a", operation="Read")
    pre = AclBinding.of(resource_type="Topic", name="ord", principal="User:b", operation="Read", pattern_type="Prefixed")
    star = AclBinding.of(resource_type="Topic", name="*", principal="User:c", operation="Read")
    other = AclBinding.of(resource_type="Topic", name="payments", principal="User:a", operation="Write")
    every = [lit, pre, star, other]
    assert [a for a in every if AclFilter(name="orders").matches(a)] == [lit]
    assert [a for a in every if AclFilter(name="orders", pattern_type="match").matches(a)] == [lit, pre, star]
    assert [a for a in every if AclFilter(principal="User:a").matches(a)] == [lit, other]
    assert [a for a in every if AclFilter(pattern_type=PatternType.PREFIXED).matches(a)] == [pre]
    assert [a for a in every if AclFilter(operation=Operation.WRITE, permission=Permission.ALLOW).matches(a)] == [other]


def test_super_users_and_a_disabled_authorizer():
    from lakelog.security.authorizer import Authorizer, parse_super_users

    assert parse_super_users("User:admin; User:ops ;") == frozenset({"User:admin", "User:ops"})
    assert parse_super_users("") == frozenset()
    with pytest.raises(InvalidAclError, match="Invalid principal 'admin'"):
        parse_super_users("admin")
    off = Authorizer(enabled=False, zk=None)  # type: ignore[arg-type] - never started: no ZooKeeper needed
    off.check(principal="User:anyone", host="h", operation=Operation.CLUSTER_ACTION, resource_type=CLUSTER)
