"""The security stores in ZooKeeper (ACLs, users' credentials, client quotas, the followed trees) answer
a ZooKeeper they cannot reach with lakelog's retriable
:class:`~lakelog.replication.errors.ZooKeeperUnavailableError`, never a raw kazoo error (a real ZooKeeper;
the connection is closed by stopping the real kazoo client)."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionClosedError

from lakelog.replication.errors import ZooKeeperUnavailableError
from lakelog.security.acl_store import AclStore
from lakelog.security.acls import AclBinding, AclFilter, Operation, ResourceType
from lakelog.security.errors import UnknownUserError
from lakelog.security.followed_tree import FollowedTree
from lakelog.security.quotas import QuotaStore
from lakelog.security.quotas.entities import QuotaEntity
from lakelog.security.user_credentials import UserCredentials


def test_security_stores_answer_a_lost_zookeeper_with_a_retriable_lakelog_error(zk_client):
    acls, users, quotas = AclStore(zk_client), UserCredentials(zk_client), QuotaStore(zk_client)
    acls.add([AclBinding.of(resource_type=ResourceType.TOPIC, name="orders", principal="User:alice", operation=Operation.READ)])
    users.upsert("alice", "secret-password")
    quotas.alter(QuotaEntity("alice", None), set={"producer_byte_rate": 1024})
    assert [a.entry.principal for a in acls.list()] == ["User:alice"]
    with pytest.raises(UnknownUserError):  # an answer of ZooKeeper (no znode), not an outage: as before
        users.get("bob")

    zk_client.stop()  # from now on every kazoo call raises ConnectionClosedError
    tree = FollowedTree(zk_client, "/lakelog/acls", lambda path, data: None, what="ACLs")
    for call in (acls.list, lambda: acls.add([AclBinding.of(resource_type=ResourceType.TOPIC, name="t", principal="User:bob",
                                                      operation=Operation.READ)]),
                 lambda: acls.remove(AclFilter()), users.names, lambda: users.get("alice"),
                 lambda: users.upsert("bob", "another-password"), lambda: users.delete("alice"),
                 lambda: quotas.get(QuotaEntity("alice", None)), quotas.describe,
                 lambda: quotas.alter(QuotaEntity("alice", None), remove=["producer_byte_rate"]),
                 lambda: tree.start(timeout_s=5)):
        with pytest.raises(ZooKeeperUnavailableError) as e:
            call()
        assert isinstance(e.value.__cause__, ConnectionClosedError)
        assert (e.value.http_status, e.value.error_code, e.value.retriable) == (503, 50304, True)
