"""Every route of the gateway under authentication and ACLs, walked from the OpenAPI document.

One broker with ``authentication.methods=basic`` and ``authorizer.enabled=true``; for each route of the
document, in an order that builds the state the next ones need (a topic, a group, a consumer instance, a
transaction):

- without credentials: 401 (``/health`` and ``/ready`` excepted);
- as ``User:nobody`` (authenticated, no ACL): 403 naming the operation Kafka checks for the matching API,
  or an empty list where Kafka filters, or success where Kafka checks nothing (brokers, the cluster);
- as ``User:alice``, whose ACLs allow exactly the operations the walk needs on its own topic, group and
  transactional id: success.

The internal replica and coordinator routes (not in the document) refuse both users and accept a broker.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.ingest_api import coordinator_api, replica_api
from tests.harness import CONDITION_WAIT_S

BROKER_PASSWORD = "inter-broker-s3cret"
SECURE = {"LAKELOG_AUTHENTICATION_METHODS": "basic", "LAKELOG_INTER_BROKER_PASSWORD": BROKER_PASSWORD,
          "LAKELOG_AUTHORIZER_ENABLED": "true"}
BROKER = ("broker", BROKER_PASSWORD)
ALICE = ("alice", "alice-pw")
NOBODY = ("nobody", "nobody-pw")
JSON_V2 = "application/vnd.kafka.json.v2+json"
RECORDS = {"records": [{"value": {"n": 1}}]}

#: What User:nobody gets on each route: "403 <Operation> on <Type>" (the message's words), "empty" (a list
#: Kafka filters), or "open" (Kafka checks nothing beyond authentication). Every route of the document is
#: here: a new route fails the walk until its check is decided.
NOBODY_GETS: dict[tuple[str, str], str] = {
    ("GET", "/topics"): "empty",
    ("GET", "/topics/{topic}"): "Describe on Topic",
    ("GET", "/topics/{topic}/partitions"): "Describe on Topic",
    ("GET", "/topics/{topic}/partitions/{partition}"): "Describe on Topic",
    ("GET", "/topics/{topic}/partitions/{partition}/offsets"): "Describe on Topic",
    ("GET", "/lakelog/v1/topics/{topic}/partitions/{partition}/offset-for-timestamp"): "Describe on Topic",
    ("GET", "/lakelog/v1/topics/{topic}/logs"): "Describe on Topic",
    ("GET", "/brokers"): "open",
    ("POST", "/topics/{topic}"): "Write on Topic",
    ("POST", "/topics/{topic}/partitions/{partition}"): "Write on Topic",
    ("POST", "/topics/{topic}/partitions/{partition}/records"): "Write on Topic",
    ("GET", "/topics/{topic}/partitions/{partition}/records"): "Read on Topic",
    ("GET", "/v3/clusters"): "open",
    ("GET", "/v3/clusters/{cluster_id}"): "open",
    ("GET", "/v3/clusters/{cluster_id}/brokers"): "open",
    ("GET", "/v3/clusters/{cluster_id}/brokers/{broker_id}"): "open",
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions"): "Describe on Topic",
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}"): "Describe on Topic",
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}/replicas"): "Describe on Topic",
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}/replicas/{broker_id}"):
        "Describe on Topic",
    ("GET", "/v3/clusters/{cluster_id}/topics"): "empty",
    ("POST", "/v3/clusters/{cluster_id}/topics"): "Create on Topic",
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic}"): "Describe on Topic",
    ("DELETE", "/v3/clusters/{cluster_id}/topics/{topic}"): "Delete on Topic",
    ("PATCH", "/v3/clusters/{cluster_id}/topics/{topic}"): "Alter on Topic",
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/configs"): "DescribeConfigs on Topic",
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/configs/{name}"): "DescribeConfigs on Topic",
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic}/configs:alter"): "AlterConfigs on Topic",
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic}/records"): "Write on Topic",
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic}/records:delete"): "Delete on Topic",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups"): "empty",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}"): "Describe on Group",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers"): "Describe on Group",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}"):
        "Describe on Group",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments"):
        "Describe on Group",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments/"
            "{topic_name}/partitions/{partition_id}"): "Describe on Group",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags"): "Describe on Group",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/partitions/"
            "{partition_id}"): "Describe on Group",
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary"): "Describe on Group",
    ("POST", "/v3/clusters/{cluster_id}/producers"): "Write on TransactionalId",
    ("GET", "/v3/clusters/{cluster_id}/transactions"): "empty",
    ("GET", "/v3/clusters/{cluster_id}/transactions/{transactional_id}"): "Describe on TransactionalId",
    ("POST", "/v3/clusters/{cluster_id}/transactions/{transactional_id}/commit"): "Write on TransactionalId",
    ("POST", "/v3/clusters/{cluster_id}/transactions/{transactional_id}/abort"): "Write on TransactionalId",
    ("POST", "/v3/clusters/{cluster_id}/transactions/{transactional_id}/offsets"): "Write on TransactionalId",
    ("POST", "/consumers/{group}/offsets"): "Read on Group",
    ("GET", "/consumers/{group}/offsets"): "Describe on Group",
    ("GET", "/consumers"): "empty",
    ("GET", "/consumers/{group}/lag"): "Describe on Group",
    ("POST", "/consumers/{group}/offsets/reset"): "Read on Group",
    ("POST", "/consumers/{group}/offsets/delete"): "Delete on Group",
    ("POST", "/consumers/{group}"): "Read on Group",
    ("DELETE", "/consumers/{group}/instances/{instance}"): "Read on Group",
    ("POST", "/consumers/{group}/instances/{instance}/subscription"): "Read on Group",
    ("GET", "/consumers/{group}/instances/{instance}/subscription"): "Read on Group",
    ("DELETE", "/consumers/{group}/instances/{instance}/subscription"): "Read on Group",
    ("POST", "/consumers/{group}/instances/{instance}/assignments"): "Read on Group",
    ("GET", "/consumers/{group}/instances/{instance}/assignments"): "Read on Group",
    ("POST", "/consumers/{group}/instances/{instance}/positions"): "Read on Group",
    ("POST", "/consumers/{group}/instances/{instance}/positions/beginning"): "Read on Group",
    ("POST", "/consumers/{group}/instances/{instance}/positions/end"): "Read on Group",
    ("GET", "/consumers/{group}/instances/{instance}/records"): "Read on Group",
    ("POST", "/consumers/{group}/instances/{instance}/offsets"): "Read on Group",
    ("GET", "/consumers/{group}/instances/{instance}/offsets"): "Read on Group",
    ("GET", "/lakelog/v1/consumers/{group}/members"): "Describe on Group",
    ("GET", "/metrics"): "Describe on Cluster",
    ("GET", "/health"): "open",
    ("GET", "/ready"): "open",
    ("GET", "/v3/clusters/{cluster_id}/acls"): "Describe on Cluster",
    ("POST", "/v3/clusters/{cluster_id}/acls"): "Alter on Cluster",
    ("POST", "/v3/clusters/{cluster_id}/acls:batch"): "Alter on Cluster",
    ("DELETE", "/v3/clusters/{cluster_id}/acls"): "Alter on Cluster",
    ("GET", "/lakelog/v1/users"): "Describe on Cluster",
    ("PUT", "/lakelog/v1/users/{name}"): "Alter on Cluster",
    ("DELETE", "/lakelog/v1/users/{name}"): "Alter on Cluster",
    ("GET", "/lakelog/v1/client-quotas"): "DescribeConfigs on Cluster",
    ("POST", "/lakelog/v1/client-quotas:alter"): "AlterConfigs on Cluster",
    # the schema registry: a {topic}-value subject is checked on its topic; global config and mode on the
    # cluster; schemas by id and the lists are open or filtered
    ("GET", "/schemas/types"): "open",
    ("GET", "/schemas/ids/{id}"): "open",
    ("GET", "/schemas/ids/{id}/schema"): "open",
    ("GET", "/schemas/ids/{id}/subjects"): "empty",
    ("GET", "/schemas/ids/{id}/versions"): "empty",
    ("GET", "/subjects"): "empty",
    ("POST", "/subjects/{subject}"): "Describe on Topic",
    ("DELETE", "/subjects/{subject}"): "Write on Topic",
    ("GET", "/subjects/{subject}/versions"): "Describe on Topic",
    ("POST", "/subjects/{subject}/versions"): "Write on Topic",
    ("GET", "/subjects/{subject}/versions/{version}"): "Describe on Topic",
    ("GET", "/subjects/{subject}/versions/{version}/schema"): "Describe on Topic",
    ("GET", "/subjects/{subject}/versions/{version}/referencedby"): "Describe on Topic",
    ("DELETE", "/subjects/{subject}/versions/{version}"): "Write on Topic",
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"): "Describe on Topic",
    ("POST", "/compatibility/subjects/{subject}/versions"): "Describe on Topic",
    ("GET", "/config"): "open",
    ("PUT", "/config"): "Alter on Cluster",
    ("DELETE", "/config"): "Alter on Cluster",
    ("GET", "/config/{subject}"): "Describe on Topic",
    ("PUT", "/config/{subject}"): "Write on Topic",
    ("DELETE", "/config/{subject}"): "Write on Topic",
    ("GET", "/mode"): "open",
    ("PUT", "/mode"): "Alter on Cluster",
    ("GET", "/mode/{subject}"): "Describe on Topic",
    ("PUT", "/mode/{subject}"): "Write on Topic",
    ("DELETE", "/mode/{subject}"): "Write on Topic",
}

_V1 = '{"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}'
_V2 = ('{"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}, '
       '{"name": "b", "type": "int", "default": 0}]}')


def _acl(resource_type: str, name: str, operation: str, *, principal: str = "User:alice") -> dict:
    return {"resource_type": resource_type, "resource_name": name, "principal": principal, "operation": operation}


def _wait_for(check, what: str, timeout_s: float = CONDITION_WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.05)


def test_every_route_checks_what_kafka_checks(broker_factory):
    broker = broker_factory(extra_env=SECURE)
    url = broker.url
    run = uuid.uuid4().hex[:8]
    topic, new_topic, group, txn, instance = f"t-{run}", f"t-{run}-new", f"g-{run}", f"x-{run}", f"i-{run}"
    with LakelogClient(url, auth=BROKER) as admin:
        cluster_id = admin.cluster_id
        admin.security.upsert_user("alice", ALICE[1])
        admin.security.upsert_user("nobody", NOBODY[1])
        admin.create_topic(topic, partitions=1, replication_factor=1)
        admin.security.create_acls([_acl("TOPIC", topic, op) for op in ("READ", "WRITE", "DELETE", "ALTER", "DESCRIBE_CONFIGS",
                                                               "ALTER_CONFIGS")]
                          + [_acl("TOPIC", new_topic, "CREATE"), _acl("GROUP", group, "READ"),
                             _acl("GROUP", group, "DELETE"), _acl("TRANSACTIONAL_ID", txn, "WRITE"),
                             _acl("CLUSTER", "kafka-cluster", "DESCRIBE"), _acl("CLUSTER", "kafka-cluster", "ALTER"),
                             _acl("CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS"),
                             _acl("CLUSTER", "kafka-cluster", "ALTER_CONFIGS")])
    _wait_for(lambda: httpx.get(f"{url}/topics", auth=ALICE).json() == [topic], "alice's ACLs reach the broker")

    values = {"cluster_id": cluster_id, "topic": topic, "topic_name": topic, "partition": "0", "partition_id": "0",
              "broker_id": "0", "group": group, "consumer_group_id": group, "instance": instance,
              "consumer_id": instance, "transactional_id": txn, "subject": f"{topic}-value", "version": "1",
              "id": "0"}
    producer: dict = {}
    member = {"partitions": [{"topic": topic, "partition": 0}]}
    # the walk: (method, path, what to send); alice's answer must be a success
    steps: list[tuple[str, str, dict]] = [
        ("GET", "/topics", {}), ("GET", "/topics/{topic}", {}), ("GET", "/topics/{topic}/partitions", {}),
        ("GET", "/topics/{topic}/partitions/{partition}", {}),
        ("GET", "/topics/{topic}/partitions/{partition}/offsets", {}),
        ("POST", "/topics/{topic}", {"json": RECORDS, "headers": {"Content-Type": JSON_V2}}),
        ("POST", "/topics/{topic}/partitions/{partition}", {"json": RECORDS, "headers": {"Content-Type": JSON_V2}}),
        ("POST", "/topics/{topic}/partitions/{partition}/records",
         {"json": RECORDS, "headers": {"Content-Type": JSON_V2}}),
        ("POST", "/v3/clusters/{cluster_id}/topics/{topic}/records", {"json": {"value": {"type": "JSON", "data": 1}}}),
        ("GET", "/topics/{topic}/partitions/{partition}/records", {"params": {"max_wait_ms": 0}}),
        ("GET", "/lakelog/v1/topics/{topic}/partitions/{partition}/offset-for-timestamp",
         {"params": {"timestamp_ms": 0}}),
        ("GET", "/lakelog/v1/topics/{topic}/logs", {}), ("GET", "/brokers", {}),
        ("GET", "/v3/clusters", {}), ("GET", "/v3/clusters/{cluster_id}", {}),
        ("GET", "/v3/clusters/{cluster_id}/brokers", {}), ("GET", "/v3/clusters/{cluster_id}/brokers/{broker_id}", {}),
        ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions", {}),
        ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}", {}),
        ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}/replicas", {}),
        ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}/replicas/{broker_id}", {}),
        ("GET", "/v3/clusters/{cluster_id}/topics", {}),
        ("POST", "/v3/clusters/{cluster_id}/topics", {"json": {"topic_name": new_topic, "partitions_count": 1}}),
        ("GET", "/v3/clusters/{cluster_id}/topics/{topic}", {}),
        ("PATCH", "/v3/clusters/{cluster_id}/topics/{topic}", {"json": {"partitions_count": 2}}),
        ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/configs", {}),
        ("GET", "/v3/clusters/{cluster_id}/topics/{topic}/configs/{name}", {"name": "retention.ms"}),
        ("POST", "/v3/clusters/{cluster_id}/topics/{topic}/configs:alter",
         {"json": {"data": [{"name": "retention.ms", "value": "86400000"}]}}),
        # a consumer instance of alice's, a member of her group
        ("POST", "/consumers/{group}", {"json": {"name": instance, "format": "binary",
                                                 "auto.offset.reset": "earliest"}}),
        ("POST", "/consumers/{group}/instances/{instance}/subscription", {"json": {"topics": [topic]}}),
        ("GET", "/consumers/{group}/instances/{instance}/subscription", {}),
        ("GET", "/consumers/{group}/instances/{instance}/records", {"params": {"timeout": 5000}}),
        ("GET", "/lakelog/v1/consumers/{group}/members", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments",
         {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments/"
                "{topic_name}/partitions/{partition_id}", {}),
        ("POST", "/consumers/{group}/instances/{instance}/offsets",
         {"json": {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]}}),
        ("GET", "/consumers/{group}/instances/{instance}/offsets", {}),
        ("DELETE", "/consumers/{group}/instances/{instance}/subscription", {}),
        ("POST", "/consumers/{group}/instances/{instance}/assignments", {"json": member}),
        ("GET", "/consumers/{group}/instances/{instance}/assignments", {}),
        ("POST", "/consumers/{group}/instances/{instance}/positions",
         {"json": {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]}}),
        ("POST", "/consumers/{group}/instances/{instance}/positions/beginning", {"json": member}),
        ("POST", "/consumers/{group}/instances/{instance}/positions/end", {"json": member}),
        ("DELETE", "/consumers/{group}/instances/{instance}", {}),
        # the group's offsets
        ("POST", "/consumers/{group}/offsets", {"json": {"offsets": [{"topic": topic, "partition": 0, "offset": 1}]}}),
        ("GET", "/consumers/{group}/offsets", {}), ("GET", "/consumers", {}), ("GET", "/consumers/{group}/lag", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/partitions/"
                "{partition_id}", {}),
        ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary", {}),
        ("POST", "/consumers/{group}/offsets/reset", {"json": {"to": "earliest"}}),
        ("POST", "/consumers/{group}/offsets/delete", {"json": {"topic": topic}}),
        # a transactional producer
        ("POST", "/v3/clusters/{cluster_id}/producers", {"json": {"transactional_id": txn}}),
        ("GET", "/v3/clusters/{cluster_id}/transactions", {}),
        ("GET", "/v3/clusters/{cluster_id}/transactions/{transactional_id}", {}),
        ("POST", "/v3/clusters/{cluster_id}/transactions/{transactional_id}/offsets",
         {"json": lambda: {**producer, "group_id": group, "offsets": [{"topic": topic, "partition": 0, "offset": 1}]}}),
        ("POST", "/v3/clusters/{cluster_id}/transactions/{transactional_id}/abort", {"json": lambda: producer}),
        ("POST", "/v3/clusters/{cluster_id}/transactions/{transactional_id}/offsets",  # a second transaction
         {"json": lambda: {**producer, "group_id": group, "offsets": [{"topic": topic, "partition": 0, "offset": 1}]}}),
        ("POST", "/v3/clusters/{cluster_id}/transactions/{transactional_id}/commit", {"json": lambda: producer}),
        # operations
        ("GET", "/metrics", {}), ("GET", "/health", {}), ("GET", "/ready", {}),
        ("GET", "/v3/clusters/{cluster_id}/acls", {}),
        ("POST", "/v3/clusters/{cluster_id}/acls", {"json": _acl("TOPIC", "walk-", "READ", principal="User:carol")}),
        ("POST", "/v3/clusters/{cluster_id}/acls:batch",
         {"json": {"data": [_acl("TOPIC", "walk-", "WRITE", principal="User:carol")]}}),
        ("DELETE", "/v3/clusters/{cluster_id}/acls", {"params": {"resource_type": "TOPIC", "principal": "User:carol"}}),
        ("GET", "/lakelog/v1/users", {}),
        ("PUT", "/lakelog/v1/users/{name}", {"name": "carol", "json": {"password": "carol-pw"}}),
        ("DELETE", "/lakelog/v1/users/{name}", {"name": "carol"}),
        ("POST", "/lakelog/v1/client-quotas:alter", {"json": {"entries": [
            {"entity": {"user": "carol"}, "ops": [{"key": "producer_byte_rate", "value": 1048576}]}]}}),
        ("GET", "/lakelog/v1/client-quotas", {}),
        # the schema registry, on alice's topic's value subject
        ("POST", "/subjects/{subject}/versions", {"json": {"schema": _V1}}),
        ("GET", "/schemas/types", {}), ("GET", "/schemas/ids/{id}", {}), ("GET", "/schemas/ids/{id}/schema", {}),
        ("GET", "/schemas/ids/{id}/subjects", {}), ("GET", "/schemas/ids/{id}/versions", {}),
        ("GET", "/subjects", {}), ("POST", "/subjects/{subject}", {"json": {"schema": _V1}}),
        ("GET", "/subjects/{subject}/versions", {}), ("GET", "/subjects/{subject}/versions/{version}", {}),
        ("GET", "/subjects/{subject}/versions/{version}/schema", {}),
        ("GET", "/subjects/{subject}/versions/{version}/referencedby", {}),
        ("POST", "/compatibility/subjects/{subject}/versions/{version}", {"json": {"schema": _V2}}),
        ("POST", "/compatibility/subjects/{subject}/versions", {"json": {"schema": _V2}}),
        ("GET", "/config", {}), ("PUT", "/config", {"json": {"compatibility": "BACKWARD"}}),
        ("DELETE", "/config", {}),
        ("PUT", "/config/{subject}", {"json": {"compatibility": "FULL"}}), ("GET", "/config/{subject}", {}),
        ("DELETE", "/config/{subject}", {}),
        ("GET", "/mode", {}), ("PUT", "/mode", {"json": {"mode": "READWRITE"}}),
        ("PUT", "/mode/{subject}", {"json": {"mode": "READWRITE"}}), ("GET", "/mode/{subject}", {}),
        ("DELETE", "/mode/{subject}", {}),
        ("POST", "/subjects/{subject}/versions", {"json": {"schema": _V2}}),  # version 2 outlives version 1's delete
        ("DELETE", "/subjects/{subject}/versions/{version}", {}), ("DELETE", "/subjects/{subject}", {}),
        ("POST", "/v3/clusters/{cluster_id}/topics/{topic}/records:delete",
         {"json": {"partitions": [{"partition_id": 0, "offset": -1}]}}),
        ("DELETE", "/v3/clusters/{cluster_id}/topics/{topic}", {}),
    ]
    documented = {(method.upper(), path) for path, item in httpx.get(f"{url}/openapi.json").json()["paths"].items()
                  for method in item}
    assert documented == set(NOBODY_GETS), "decide what User:nobody gets on every documented route"
    assert {(m, p) for m, p, _ in steps} == documented, "the walk calls every documented route"

    with httpx.Client(base_url=url, timeout=30) as http:
        for method, path, send in steps:
            send = dict(send)
            target = path.format(**values, name=send.pop("name", ""))
            if callable(send.get("json")):
                send["json"] = send["json"]()
            route = f"{method} {path}"
            expected = NOBODY_GETS[(method, path)]
            unauthenticated = http.request(method, target, **send)
            if path in ("/health", "/ready"):
                assert unauthenticated.status_code == 200, route
            else:
                assert unauthenticated.status_code == 401, route
                assert unauthenticated.headers["WWW-Authenticate"].startswith("Basic"), route
            denied = http.request(method, target, auth=NOBODY, **send)
            if expected == "empty":
                assert denied.status_code == 200, (route, denied.text)
                body = denied.json()
                assert (body if isinstance(body, list) else body["data"]) == [], route
            elif expected == "open":
                assert denied.status_code == 200, (route, denied.text)
            else:
                assert denied.status_code == 403, (route, denied.status_code, denied.text)
                assert denied.json()["error_code"] == 40301, route
                assert f"User:nobody is not authorized to {expected}" in denied.json()["message"], (route, denied.text)
            allowed = http.request(method, target, auth=ALICE, **send)
            assert 200 <= allowed.status_code < 300, (route, allowed.status_code, allowed.text)
            if method == "POST" and path == "/subjects/{subject}/versions":  # the id of the schema registered
                values["id"] = str(allowed.json()["id"])
            if path == "/v3/clusters/{cluster_id}/producers":
                producer = {k: allowed.json()[k] for k in ("producer_id", "producer_epoch")}
            if path == "/consumers/{group}/instances/{instance}/records":  # wait for the group's assignment
                _wait_for(lambda: http.get(target.replace("/records", "/assignments"), auth=ALICE).json()["partitions"],
                          "the instance is assigned its partition")
            if method == "GET" and path in ("/topics", "/v3/clusters/{cluster_id}/topics"):  # alice: her topic only
                names = allowed.json() if path == "/topics" else [t["topic_name"] for t in allowed.json()["data"]]
                assert names == [topic], route

        # the internal routes: brokers only
        internal = [(sorted(r.methods)[0], r.path) for r in (*replica_api.router.routes, *coordinator_api.router.routes)]
        assert internal
        for method, path in internal:
            target = path.format(**values)
            for user in (ALICE, NOBODY):
                r = http.request(method, target, auth=user)
                assert r.status_code == 403 and "ClusterAction on Cluster" in r.json()["message"], (method, path)
            r = http.request(method, target, auth=BROKER)
            assert r.status_code not in (401, 403), (method, path, r.text)


@pytest.mark.parametrize("pattern", [False, True])
def test_consumer_instances_belong_to_their_creator_and_read_only_readable_topics(broker_factory, pattern):
    broker = broker_factory(extra_env=SECURE)
    url = broker.url
    run = uuid.uuid4().hex[:8]
    readable, secret, group = f"r-{run}", f"r-{run}-secret", f"g-{run}"
    with LakelogClient(url, auth=BROKER) as admin:
        for user in ("alice", "bob"):
            admin.security.upsert_user(user, f"{user}-pw")
        for t in (readable, secret):
            admin.create_topic(t, partitions=1, replication_factor=1)
            admin.produce_arrow(t, 0, __import__("pyarrow").table({"value": [t.encode()]}))
        admin.security.create_acls([_acl("TOPIC", readable, "READ", principal=f"User:{u}") for u in ("alice", "bob")]
                          + [_acl("GROUP", group, "READ", principal=f"User:{u}") for u in ("alice", "bob")])
    alice, bob = ("alice", "alice-pw"), ("bob", "bob-pw")
    base = f"{url}/consumers/{group}"
    _wait_for(lambda: httpx.post(base, json={"name": "probe"}, auth=alice).status_code == 200, "ACLs reach the broker")
    httpx.delete(f"{base}/instances/probe", auth=alice)
    r = httpx.post(base, json={"name": "a1", "auto.offset.reset": "earliest"}, auth=alice)
    assert r.status_code == 200
    inst = f"{base}/instances/a1"
    if pattern:  # the pattern matches both topics; alice reads only the one she may
        assert httpx.post(f"{inst}/subscription", json={"topic_pattern": f"r-{run}.*"}, auth=alice).status_code == 204
        assert httpx.get(f"{inst}/subscription", auth=alice).json()["topics"] == [readable]
    else:  # naming the secret topic is refused, and nothing is subscribed
        r = httpx.post(f"{inst}/subscription", json={"topics": [readable, secret]}, auth=alice)
        assert r.status_code == 403 and f"Read on Topic '{secret}'" in r.json()["message"]
        assert httpx.get(f"{inst}/subscription", auth=alice).json()["topics"] == []
        r = httpx.post(f"{inst}/assignments", json={"partitions": [{"topic": secret, "partition": 0}]}, auth=alice)
        assert r.status_code == 403
        assert httpx.post(f"{inst}/subscription", json={"topics": [readable]}, auth=alice).status_code == 204
    got: list = []
    deadline = time.monotonic() + CONDITION_WAIT_S
    while not got and time.monotonic() < deadline:
        got = httpx.get(f"{inst}/records", params={"timeout": 1000}, auth=alice,
                        headers={"Accept": "application/vnd.kafka.binary.v2+json"}, timeout=30).json()
    assert [(x["topic"], x["offset"]) for x in got] == [(readable, 0)]
    # bob may read the group and the topic, but not alice's instance
    for method, path in (("GET", "/records"), ("GET", "/subscription"), ("POST", "/positions/end"),
                         ("DELETE", "")):
        r = httpx.request(method, f"{inst}{path}", auth=bob,
                          json={"partitions": [{"topic": readable, "partition": 0}]} if method == "POST" else None)
        assert r.status_code == 403 and r.json()["error_code"] == 40301, (method, path, r.text)
        assert "consumer instance 'a1'" in r.json()["message"] and "belongs to the principal" in r.json()["message"]
    assert httpx.delete(inst, auth=alice).status_code == 204
