"""The ACL APIs and the admin APIs' authorization over the Kafka listener, with the authorizer on:
kafka-python's and confluent-kafka's admin clients create, describe and delete lakelog's ACLs (the same
ones the store in ZooKeeper holds and the authorizer follows); a principal without permission is refused
with Kafka's error code and nothing is written."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient
from confluent_kafka.admin import ConfigResource as RdConfigResource
from confluent_kafka.admin import ResourcePatternType as RdPatternType
from confluent_kafka.admin import ResourceType as RdResourceType
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from lakelog.replication.metadata import TOPICS_PATH
from lakelog.security.acl_store import AclStore
from lakelog.security.acls import AclFilter
from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

_TOPIC_AUTHORIZATION_FAILED, _CLUSTER_AUTHORIZATION_FAILED = 29, 31
#: the authorizer on (it needs authentication: the HTTP gateway asks for basic credentials); the PLAINTEXT
#: Kafka listener's principal is User:ANONYMOUS, as Kafka's
AUTHORIZER = {**KAFKA_LISTENER_ENV, "LAKELOG_AUTHORIZER_ENABLED": "true", "LAKELOG_AUTHENTICATION_METHODS": "basic",
              "LAKELOG_INTER_BROKER_PASSWORD": "inter-broker-s3cret"}


def _stored(zk_client) -> set[str]:
    return {str(acl) for acl in AclStore(zk_client).list(AclFilter())}


def test_acls_created_described_and_deleted_over_kafka(broker_factory, zk_client, topic_name):
    """A super user's CreateAcls, DescribeAcls (literal, prefixed and MATCH filters) and DeleteAcls, with
    both clients, on the ACLs in ZooKeeper."""
    broker_factory(extra_env={**AUTHORIZER, "LAKELOG_SUPER_USERS": "User:ANONYMOUS"})
    bootstrap = kafka_bootstrap(zk_client, 0)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
    try:
        read = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                   ResourcePattern(ResourceType.TOPIC, topic_name, ACLResourcePatternType.LITERAL))
        write = ACL("User:alice", "10.0.0.1", ACLOperation.WRITE, ACLPermissionType.DENY,
                    ResourcePattern(ResourceType.TOPIC, "orders-", ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([read, write])
        assert (len(result["succeeded"]), result["failed"]) == (2, [])
        assert _stored(zk_client) == {
            f"Allow User:alice Read from * on Topic '{topic_name}' (literal)",
            "Deny User:alice Write from 10.0.0.1 on Topic 'orders-' (prefixed)"}

        match = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.TOPIC, "orders-eu", ACLResourcePatternType.MATCH))
        found, error = admin.describe_acls(match)
        assert error.errno == 0
        assert [(a.principal, a.host, a.operation, a.permission_type, a.resource_pattern.resource_name)
                for a in found] == [("User:alice", "10.0.0.1", ACLOperation.WRITE, ACLPermissionType.DENY, "orders-")]
        everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        assert len(admin.describe_acls(everything)[0]) == 2

        ((_, deleted, error),) = admin.delete_acls([ACLFilter(
            "User:alice", None, ACLOperation.WRITE, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))])
        assert error.errno == 0 and [a.resource_pattern.resource_name for a in deleted] == ["orders-"]
        assert _stored(zk_client) == {f"Allow User:alice Read from * on Topic '{topic_name}' (literal)"}
    finally:
        admin.close()

    rd = AdminClient({"bootstrap.servers": bootstrap})
    group = AclBinding(RdResourceType.GROUP, "billing", RdPatternType.LITERAL, "User:bob", "*", AclOperation.READ,
                       AclPermissionType.ALLOW)
    for future in rd.create_acls([group]).values():
        future.result(timeout=60)
    assert "Allow User:bob Read from * on Group 'billing' (literal)" in _stored(zk_client)
    groups = AclBindingFilter(RdResourceType.GROUP, None, RdPatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
    assert rd.describe_acls(groups).result(timeout=60) == [group]
    (deleted,) = [f.result(timeout=60) for f in rd.delete_acls([groups]).values()]
    assert deleted == [group]
    assert _stored(zk_client) == {f"Allow User:alice Read from * on Topic '{topic_name}' (literal)"}


def test_refused_admin_requests_write_nothing(broker_factory, zk_client, topic_name):
    """With the authorizer on and no ACL for User:ANONYMOUS, CreateTopics answers TOPIC_AUTHORIZATION_FAILED,
    CreateAcls and broker DescribeConfigs CLUSTER_AUTHORIZATION_FAILED; ZooKeeper holds no new topic or
    ACL."""
    broker_factory(extra_env=AUTHORIZER)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(zk_client, 0), request_timeout_ms=60000)
    try:
        refused = admin.create_topics({topic_name: {"num_partitions": 1}}, raise_errors=False)
        assert [(t["name"], t["error_code"]) for t in refused["topics"]] == [(topic_name, _TOPIC_AUTHORIZATION_FAILED)]
        assert zk_client.exists(f"{TOPICS_PATH}/{topic_name}") is None

        acl = ACL("User:ANONYMOUS", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", ACLResourcePatternType.LITERAL))
        result = admin.create_acls([acl])
        assert result["succeeded"] == [] and [e.errno for e in result["failed"]] == [_CLUSTER_AUTHORIZATION_FAILED]
        assert _stored(zk_client) == set()
    finally:
        admin.close()
    rd = AdminClient({"bootstrap.servers": kafka_bootstrap(zk_client, 0)})
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        for future in rd.describe_configs([RdConfigResource(RdConfigResource.Type.BROKER, "0")]).values():
            future.result(timeout=60)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        for future in rd.delete_topics(["__consumer_offsets"], operation_timeout=30).values():
            future.result(timeout=60)
