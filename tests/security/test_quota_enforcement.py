"""Client quotas enforced by a real broker (ZooKeeper, a broker process, HTTP): throttled with 429 and
Retry-After, never a lost or duplicated record; brokers and the internal routes are never throttled."""

from __future__ import annotations

import base64
import re
import time

import httpx
import pytest

from lakelog.client import LakelogClient
from lakelog.ingest_api.client_quota_hooks import quota_types_of
from lakelog.protocol.client_id import CLIENT_ID_HEADER
from lakelog.security.quotas import FETCH, PRODUCE, REQUEST

BROKER_PASSWORD = "inter-broker-s3cret"
#: basic authentication (users are principals) and short quota windows (2 x 0.5 s) for a fast test
SETTINGS = {"LAKELOG_AUTHENTICATION_METHODS": "basic", "LAKELOG_INTER_BROKER_PASSWORD": BROKER_PASSWORD,
            "LAKELOG_QUOTA_WINDOW_NUM": "2", "LAKELOG_QUOTA_WINDOW_SIZE_SECONDS": "0.5"}
ALICE = ("alice", "alice-pw")


def test_routes_are_classified_by_template():
    assert quota_types_of("POST", "/topics/{topic}") == (PRODUCE, REQUEST)
    assert quota_types_of("POST", "/v3/clusters/{cluster_id}/topics/{topic}/records") == (PRODUCE, REQUEST)
    assert quota_types_of("GET", "/consumers/{group}/instances/{instance}/records") == (FETCH, REQUEST)
    assert quota_types_of("GET", "/topics/{topic}/partitions/{partition}/records") == (FETCH, REQUEST)
    assert quota_types_of("GET", "/topics") == (REQUEST,)
    for internal in ("/lakelog/v1/replica/topics/{topic}/partitions/{partition}/records",
                     "/lakelog/v1/coordinator/groups/{group}/offsets", "/health", "/metrics"):
        assert quota_types_of("GET", internal) == ()
    # with authentication, only the brokers' principal is exempt: a client on an internal route counts
    assert quota_types_of("GET", "/lakelog/v1/replica/topics/{topic}/partitions/{partition}/records",
                          internal_exempt=False) == (FETCH, REQUEST)
    assert quota_types_of("GET", "/lakelog/v1/coordinator/groups", internal_exempt=False) == (REQUEST,)
    assert quota_types_of("GET", "/metrics", internal_exempt=False) == ()


def _throttled(url: str, quota_type: str) -> int:
    text = httpx.get(f"{url}/metrics", auth=("broker", BROKER_PASSWORD)).text
    m = re.search(rf'lakelog_client_quota_throttled_requests_total{{quota_type="{quota_type}"}} (\S+)', text)
    return int(float(m.group(1))) if m else 0


def test_quotas_throttle_produce_and_fetch_without_loss(broker_factory, topic_name):
    broker = broker_factory(extra_env=SETTINGS)
    url = broker.url
    with LakelogClient(url, auth=("broker", BROKER_PASSWORD)) as admin:
        admin.security.upsert_user(*ALICE)
        admin.create_topic(topic_name, partitions=1)
        assert admin.security.alter_client_quotas({"user": "alice"}, set={PRODUCE: 100_000, FETCH: 100_000}) == {
            PRODUCE: 100_000, FETCH: 100_000}
        # a stricter quota for alice's client id "raw" (more specific than her user quota)
        admin.security.alter_client_quotas({"user": "alice", "client-id": "raw"}, set={PRODUCE: 1000, FETCH: 1000})
        admin.security.alter_client_quotas({"user": "<default>"}, set={FETCH: 1})  # never applies to the brokers' user
        # 5 % of a second: 50 ms of request time per second
        admin.security.alter_client_quotas({"user": "alice", "client-id": "slow"}, set={REQUEST: 5})
        admin.security.alter_client_quotas({"user": "alice", "client-id": "reader"}, set={FETCH: 100_000})
        assert [e["entity"] for e in admin.security.describe_client_quotas(user="alice")] == [
            {"user": "alice"}, {"user": "alice", "client-id": "raw"}, {"user": "alice", "client-id": "reader"},
            {"user": "alice", "client-id": "slow"}]
    time.sleep(0.5)  # the broker follows the quotas (TreeCache)

    # -- produce: 300 records of ~330 bytes, 10 a request: ~100 kB at 100 kB/s, throttled, nothing lost
    values = [b"%06d" % i * 40 for i in range(300)]
    started = time.monotonic()
    with LakelogClient(url, auth=ALICE, client_id="etl") as alice:
        alice.admin.list_topics()  # the password check (PBKDF2) before the clock matters
        started = time.monotonic()
        for i in range(0, len(values), 10):
            alice.produce_binary(topic_name, [(None, v) for v in values[i:i + 10]], partition=0)
    elapsed_s = time.monotonic() - started
    assert _throttled(url, PRODUCE) > 0, "no produce request was throttled"
    assert elapsed_s > 1.0  # the quota held the producer back (unthrottled it takes well under a second)

    # a throttled produce answers 429 + Retry-After and writes nothing
    raw = httpx.Client(base_url=url, auth=ALICE, headers={CLIENT_ID_HEADER: "raw"})
    body = {"records": [{"value": base64.b64encode(b"x" * 4000).decode()}]}
    headers = {"Content-Type": "application/vnd.kafka.binary.v2+json"}
    assert raw.post(f"/topics/{topic_name}/partitions/0", json=body, headers=headers).status_code == 200
    r = raw.post(f"/topics/{topic_name}/partitions/0", json=body, headers=headers)
    assert r.status_code == 429 and r.json()["error_code"] == 42902 and int(r.headers["Retry-After"]) >= 1
    assert r.headers["X-Lakelog-Retriable"] == "true" and "producer_byte_rate=1000" in r.json()["message"]

    with LakelogClient(url, auth=("broker", BROKER_PASSWORD)) as admin:  # exempt: never throttled
        offsets = admin.partition_offsets(topic_name, 0)
        assert offsets["end_offset"] == len(values) + 1  # 300 + the one raw record, not the refused one
        got, offset = [], 0
        while offset < offsets["end_offset"]:
            page = admin.fetch_page(topic_name, 0, offset, max_bytes=8000)
            got += [base64.b64decode(rec["value"]) for rec in page.records]
            offset = page.next_offset
    assert got[:-1] == values and got[-1] == b"x" * 4000  # every record once, in order
    assert _throttled(url, FETCH) == 0  # <default> user's consumer_byte_rate=1 did not apply to the brokers

    # -- fetch: alice reads it all back through a throttled consumer quota, in order, once
    fetched_throttles = _throttled(url, FETCH)
    started = time.monotonic()
    with LakelogClient(url, auth=ALICE, client_id="etl") as alice:
        got, offset = [], 0
        while offset < len(values):
            page = alice.fetch_page(topic_name, 0, offset, max_bytes=8000)
            got += [base64.b64decode(rec["value"]) for rec in page.records]
            offset = page.next_offset
    assert got[:len(values)] == values
    print(f"produce {elapsed_s:.1f} s, fetch {time.monotonic() - started:.1f} s")
    assert _throttled(url, FETCH) > fetched_throttles, "no fetch was throttled"

    # a consumer instance's polls are fetches too: throttled, retried by HttpConsumer, nothing lost
    fetched_throttles = _throttled(url, FETCH)
    with LakelogClient(url, auth=ALICE, client_id="reader") as alice:
        with alice.groups.create_consumer("readers", auto_commit=False) as consumer:
            consumer.assign([(topic_name, 0)])
            consumer.seek(topic_name, 0, 0)
            got = []
            while len(got) < len(values):
                got += [base64.b64decode(rec["value"]) for rec in consumer.poll(timeout_ms=200, max_bytes=20_000)]
    assert got[:len(values)] == values
    assert _throttled(url, FETCH) > fetched_throttles, "no consumer instance poll was throttled"

    r1 = raw.get(f"/topics/{topic_name}/partitions/0/records", params={"max_bytes": 20000},
                 headers={"Accept": "application/vnd.kafka.binary.v2+json"})
    r2 = raw.get(f"/topics/{topic_name}/partitions/0/records", params={"max_bytes": 20000},
                 headers={"Accept": "application/vnd.kafka.binary.v2+json"})
    assert r1.status_code == 200 and r2.status_code == 429 and r2.json()["error_code"] == 42902
    # nor is the internal replica route a way around the quota (the authorizer is off here: alice may call
    # it); only the brokers' own principal is exempt
    r3 = raw.get(f"/lakelog/v1/replica/topics/{topic_name}/partitions/0/records",
                 params={"offset": 0, "replica_id": 0, "leader_epoch": 0, "max_wait_ms": 0})
    assert r3.status_code == 429 and r3.json()["error_code"] == 42902
    raw.close()

    # request_percentage: a 300 ms long poll is 30 % of a second, over alice's 5 % with client id "slow"
    with httpx.Client(base_url=url, auth=ALICE, headers={CLIENT_ID_HEADER: "slow"}) as slow:
        r = slow.get(f"/topics/{topic_name}/partitions/0/records", params={"offset": len(values) + 1, "max_wait_ms": 300},
                     headers={"Accept": "application/vnd.kafka.binary.v2+json"})
        assert r.status_code == 200 and r.json() == []
        r = slow.get("/topics")
        assert r.status_code == 429 and "request_percentage=5 of user=alice, client-id=slow" in r.json()["message"]
    assert _throttled(url, REQUEST) == 1


@pytest.mark.cluster
def test_replication_is_never_throttled(broker_factory, topic_name):
    """authentication.methods=none: brokers and clients are all User:ANONYMOUS, and request_percentage=1 on the
    default client id covers the followers' replica fetches (long polls: far above 1 % of a second), yet
    acks=all produce goes on: the replica routes are exempt."""
    brokers = [broker_factory(i, extra_env={"LAKELOG_QUOTA_WINDOW_NUM": "2",
                                            "LAKELOG_QUOTA_WINDOW_SIZE_SECONDS": "0.5"}) for i in range(2)]
    with LakelogClient(",".join(b.url for b in brokers), client_id="producer") as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=2)
        leader = admin.admin.describe_topic(topic_name)["partitions"][0]["leader"]
        admin.security.alter_client_quotas({"client-id": "producer"}, set={REQUEST: 1_000_000})  # this client's own first
        admin.security.alter_client_quotas({"client-id": "<default>"}, set={REQUEST: 1, FETCH: 1})
    time.sleep(0.5)
    with LakelogClient(brokers[leader].url, client_id="producer") as client:  # the leader: nothing forwarded
        started = time.monotonic()
        for i in range(20):  # acks=all: each answer waits for the follower's replica fetch
            client.produce_binary(topic_name, [(None, b"v%d" % i)], partition=0)
        assert time.monotonic() - started < 15
        assert client.topic_logs(topic_name)[0]["high_watermark"] == 20
    assert all(_throttled(b.url, REQUEST) == 0 for b in brokers)
