"""ACLs in a real ZooKeeper (a chroot per test): the store's compare-and-set writes and a broker's cache."""

from __future__ import annotations

import json
import threading
import time

from kazoo.client import KazooClient

from lakelog.security.acl_cache import AclCache
from lakelog.security.acl_store import ACLS_PATH, AclStore, pattern_of_path, pattern_path
from lakelog.security.acls import AclBinding, AclFilter, Operation, ResourcePattern, ResourceType
from tests.harness import CONDITION_WAIT_S


def acl(name, principal, operation, **kwargs) -> AclBinding:
    return AclBinding.of(resource_type=kwargs.pop("resource_type", "Topic"), name=name, principal=principal,
                         operation=operation, **kwargs)


def wait_for(condition, timeout_s: float = CONDITION_WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_znode_names_hold_any_resource_name():
    for name in ("orders", "*", ".", "..", "a/b", "grp%20x", "ünï"):
        pattern = ResourcePattern.of("Group", name)
        path = pattern_path(pattern)
        assert path.count("/") == ACLS_PATH.count("/") + 3 and "/./" not in path + "/" and not path.endswith("/..")
        assert pattern_of_path(path) == pattern


def test_add_list_remove_in_kafkas_json(zk_client):
    store = AclStore(zk_client)
    a = acl("orders", "User:alice", "Read")
    b = acl("orders", "User:bob", "Write", host="10.0.0.2")
    c = acl("team-", "User:carol", "All", pattern_type="Prefixed")
    store.add([a, b, c, a])
    assert store.list() == sorted([a, b, c], key=lambda x: (x.pattern.pattern_type.value, x.pattern.name,
                                                            x.entry.principal))
    data, _ = zk_client.get(f"{ACLS_PATH}/Literal/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"host": "*", "operation": "Read", "permissionType": "Allow", "principal": "User:alice"},
        {"host": "10.0.0.2", "operation": "Write", "permissionType": "Allow", "principal": "User:bob"}]}

    assert store.remove(AclFilter(principal="User:bob")) == [b]
    assert store.list(AclFilter(name="orders")) == [a]
    assert store.remove(AclFilter(name="orders")) == [a]
    assert not zk_client.exists(f"{ACLS_PATH}/Literal/Topic/orders")  # no entry left: the znode goes
    assert store.list() == [c]


def test_concurrent_adds_to_one_resource_all_stick(zk_connect):
    clients = [KazooClient(hosts=zk_connect) for _ in range(4)]
    for c in clients:
        c.start(timeout=15)
    try:
        def add(i: int, client: KazooClient) -> None:
            store = AclStore(client)
            for j in range(10):
                store.add([acl("shared", f"User:u{i}-{j}", "Read")])

        threads = [threading.Thread(target=add, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(AclStore(clients[0]).list(AclFilter(name="shared"))) == 40
    finally:
        for c in clients:
            c.stop()
            c.close()


def test_a_brokers_cache_follows_changes(zk_connect, zk_client):
    store = AclStore(zk_client)
    store.add([acl("orders", "User:alice", "Read")])
    other = KazooClient(hosts=zk_connect)  # the broker's own session
    other.start(timeout=15)
    cache = AclCache(other, super_users=frozenset({"User:admin"})).start()
    try:
        def may(principal, operation, name="orders"):
            return cache.authorize(principal=principal, host="127.0.0.1", operation=operation,
                                   resource_type=ResourceType.TOPIC, name=name)

        assert may("User:alice", Operation.READ) and may("User:alice", Operation.DESCRIBE)
        assert not may("User:bob", Operation.READ) and may("User:admin", Operation.DELETE)
        store.add([acl("ord", "User:alice", "Read", permission="Deny", pattern_type="Prefixed")])
        wait_for(lambda: not may("User:alice", Operation.READ))
        store.remove(AclFilter(permission=None, principal="User:alice", pattern_type=None, name="ord"))
        wait_for(lambda: may("User:alice", Operation.READ))
        store.remove(AclFilter())
        wait_for(lambda: not cache.acls)
        assert not may("User:alice", Operation.READ)  # allow.everyone.if.no.acl.found defaults to false
    finally:
        cache.close()
        other.stop()
        other.close()
