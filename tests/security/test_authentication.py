"""Who a request is: HTTP Basic against SCRAM credentials (authentication.methods=basic), brokers included."""

from __future__ import annotations

import base64
import time

import httpx
import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.protocol.errors import RemoteError
from lakelog.security.authentication import ANONYMOUS, Authenticator, basic_credentials
from lakelog.security.errors import AuthenticationError
from lakelog.security.user_credentials import UserCredentials
from tests.harness import CONDITION_WAIT_S

BROKER_PASSWORD = "inter-broker-s3cret"
SECURE = {"LAKELOG_AUTHENTICATION_METHODS": "basic", "LAKELOG_INTER_BROKER_PASSWORD": BROKER_PASSWORD}


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_basic_header_parsing_and_the_none_method():
    assert basic_credentials(basic("alice", "p:w")) == ("alice", "p:w")  # the first colon splits
    assert basic_credentials(None) is None and basic_credentials("Bearer abc") is None
    with pytest.raises(AuthenticationError, match="not base64 of user:password"):
        basic_credentials("Basic !!!")
    assert Authenticator().authenticate(None) == ANONYMOUS
    assert Authenticator(method="none").authenticate(basic("x", "y")) == ANONYMOUS


def test_basic_checks_the_scram_credential_and_follows_changes(zk_client, caplog):
    UserCredentials(zk_client).upsert("alice", "s3cret")
    auth = Authenticator(method="basic", zk=zk_client).start()
    try:
        assert auth.authenticate(basic("alice", "s3cret")) == "User:alice"
        assert auth.authenticate(basic("alice", "s3cret")) == "User:alice"  # remembered
        with caplog.at_level("WARNING", logger="lakelog.security"):
            for header in (None, basic("alice", "Xyzzy-9"), basic("nobody", "s3cret")):
                with pytest.raises(AuthenticationError) as e:
                    auth.authenticate(header, client_host="10.0.0.5", route="GET /topics")
                assert e.value.http_status == 401 and e.value.error_code == 40101
                assert e.value.response_headers["WWW-Authenticate"].startswith('Basic realm="lakelog"')
        assert "10.0.0.5" in caplog.text and "'alice'" in caplog.text and "Xyzzy-9" not in caplog.text and "s3cret" not in caplog.text
        UserCredentials(zk_client).upsert("alice", "n3w")  # a new password: the old one stops working
        deadline = time.monotonic() + CONDITION_WAIT_S
        while time.monotonic() < deadline:
            try:
                auth.authenticate(basic("alice", "s3cret"))
            except AuthenticationError:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the old password still works 10 s after the change")
        assert auth.authenticate(basic("alice", "n3w")) == "User:alice"
    finally:
        auth.close()


@pytest.mark.cluster
def test_a_basic_cluster_replicates_and_refuses_requests_without_credentials(broker_factory, topic_name):
    brokers = [broker_factory(i, extra_env=SECURE) for i in range(2)]
    url = brokers[0].url
    r = httpx.get(f"{url}/topics")
    assert r.status_code == 401 and r.json()["error_code"] == 40101
    assert r.headers["WWW-Authenticate"].startswith('Basic realm="lakelog"')
    assert httpx.get(f"{url}/topics", auth=("broker", "wrong")).status_code == 401
    assert httpx.get(f"{url}/health").status_code == 200  # probes need no credentials

    with LakelogClient(url, auth=("broker", BROKER_PASSWORD)) as admin:  # the inter-broker user exists
        admin.security.upsert_user("alice", "alice-pw")
    for b in brokers:  # the new credential reaches each broker's followed copy within ZooKeeper's watch latency
        deadline = time.monotonic() + CONDITION_WAIT_S
        while httpx.get(f"{b.url}/topics", auth=("alice", "alice-pw")).status_code == 401:
            assert time.monotonic() < deadline, "alice's credential did not reach the broker"
            time.sleep(0.05)
    with LakelogClient(",".join(b.url for b in brokers), auth=("alice", "alice-pw")) as alice:
        alice.create_topic(topic_name, partitions=2, replication_factor=2)
        for p in range(2):  # acks=all: each answer waits for the follower's authenticated replica fetch
            alice.produce_arrow(topic_name, p, pa.table({"value": pa.array([b"v%d" % i for i in range(10)])}))
        logs = {log["partition"]: log for log in alice.topic_logs(topic_name)}
        assert all(logs[p]["high_watermark"] == 10 for p in range(2))
        got = alice.fetch_page(topic_name, 1, 0, max_bytes=1 << 20, form="arrow").records
        assert got.column("value").to_pylist() == [b"v%d" % i for i in range(10)]
    with LakelogClient(url, auth=("alice", "not-it"), enable_idempotence=False) as mallory:
        with pytest.raises(RemoteError) as e:
            mallory.topic_logs(topic_name)
        assert e.value.error_code == 40101
    for b in brokers:
        assert BROKER_PASSWORD not in b.log_tail(400) and "alice-pw" not in b.log_tail(400)


@pytest.mark.cluster
def test_only_brokers_may_call_the_internal_routes(broker_factory, topic_name):
    brokers = [broker_factory(i, extra_env={**SECURE, "LAKELOG_AUTHORIZER_ENABLED": "true"}) for i in range(2)]
    url = brokers[0].url
    with LakelogClient(url, auth=("broker", BROKER_PASSWORD)) as admin:
        admin.security.upsert_user("alice", "alice-pw")
        admin.create_topic(topic_name, partitions=1, replication_factor=2)
        admin.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"a", b"b"])}))  # replicated: brokers may
        assert admin.topic_logs(topic_name)[0]["high_watermark"] == 2
    internal = [f"{b.url}/lakelog/v1/coordinator/groups" for b in brokers]
    internal += [f"{b.url}/lakelog/v1/replica/topics/{topic_name}/partitions/0/epoch-end-offset?epoch=0&leader_epoch=0"
                 for b in brokers]
    for route in internal:  # a client cannot pose as a broker (nor fetch as a follower and move the HW)
        r = httpx.get(route, auth=("alice", "alice-pw"))
        assert r.status_code == 403 and r.json()["error_code"] == 40301, route
        assert "User:alice is not authorized to ClusterAction on Cluster 'kafka-cluster'" in r.json()["message"]
    assert httpx.get(internal[0], auth=("broker", BROKER_PASSWORD)).status_code == 200
    with LakelogClient(url, auth=("broker", BROKER_PASSWORD)) as admin:
        admin.security.create_acls([{"resource_type": "CLUSTER", "resource_name": "kafka-cluster", "principal": "User:alice",
                            "operation": "CLUSTER_ACTION"}])
    # nor grant herself anything: ACLs and users need Describe / Alter on the cluster
    with LakelogClient(url, auth=("alice", "alice-pw")) as alice:
        for call in (alice.security.list_acls, alice.security.list_users, lambda: alice.security.upsert_user("mallory", "pw"),
                     lambda: alice.security.create_acls([{"resource_type": "CLUSTER", "resource_name": "kafka-cluster",
                                                 "principal": "User:alice", "operation": "ALL"}])):
            with pytest.raises(RemoteError) as e:
                call()
            assert e.value.error_code == 40301
    with LakelogClient(url, auth=("broker", BROKER_PASSWORD)) as admin:  # the brokers' own user is not changed here
        with pytest.raises(RemoteError) as e:
            admin.security.upsert_user("broker", "taken-over")
        assert e.value.error_code == 40022 and "inter.broker.password" in str(e.value)
    deadline = time.monotonic() + CONDITION_WAIT_S
    while httpx.get(internal[0], auth=("alice", "alice-pw")).status_code != 200:  # the ACL reaches the cache
        assert time.monotonic() < deadline, "the ClusterAction ACL did not take effect"
        time.sleep(0.05)


def test_settings_that_cannot_work_are_refused():
    from lakelog.config import BrokerSettings
    from lakelog.errors import ConfigError

    with pytest.raises(ConfigError, match="inter.broker.password must be set"):
        BrokerSettings.load(authentication_methods="basic")
    with pytest.raises(ConfigError, match="authorizer.enabled=true needs authentication.methods=basic"):
        BrokerSettings.load(authorizer_enabled=True)


def test_config_errors_never_show_a_password():
    from lakelog.config import BrokerSettings
    from lakelog.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        BrokerSettings.load(authorizer_enabled=True, inter_broker_password="S3cretPW")
    assert "S3cretPW" not in str(e.value) and "authorizer.enabled=true needs" in str(e.value)
    with pytest.raises(ConfigError) as e:
        BrokerSettings.load(inter_broker_password=["S3cretPW"])  # not a string
    assert "S3cretPW" not in str(e.value)


def test_a_broker_with_another_inter_broker_password_does_not_start(zk_client):
    first = Authenticator(method="basic", zk=zk_client)
    first.ensure_user("broker", "one")
    first.ensure_user("broker", "one")  # the same password: nothing to do
    from lakelog.security.errors import SecurityError
    with pytest.raises(SecurityError, match="inter.broker.password does not match"):
        Authenticator(method="basic", zk=zk_client).ensure_user("broker", "two")


def test_only_a_remembered_check_skips_the_password_derivation(zk_client):
    UserCredentials(zk_client).upsert("alice", "s3cret")
    auth = Authenticator(method="basic", zk=zk_client).start()
    try:
        assert auth.cached_principal(basic("alice", "s3cret")) is None  # not checked yet: the slow path
        assert auth.authenticate(basic("alice", "s3cret")) == "User:alice"
        assert auth.cached_principal(basic("alice", "s3cret")) == "User:alice"
        assert auth.cached_principal(basic("alice", "other")) is None and auth.cached_principal(None) is None
        assert auth.cached_principal("Basic !!") is None
        assert Authenticator().cached_principal(None) == ANONYMOUS
    finally:
        auth.close()


def test_basic_and_mtls_together(zk_client):
    from lakelog.security.authentication import MTLS_CHALLENGE
    from lakelog.security.tls_principal import SslPrincipalMapper

    UserCredentials(zk_client).upsert("alice", "s3cret")
    auth = Authenticator(method="mtls,basic", zk=zk_client,
                         principal_mapper=SslPrincipalMapper("RULE:^CN=([^,]+),OU=eng$/$1/,DEFAULT")).start()
    try:
        bob_cert = "CN=bob,OU=eng"
        # an Authorization header is that header's principal, whatever certificate the connection has
        assert auth.authenticate(basic("alice", "s3cret"), client_cert_name=bob_cert) == "User:alice"
        # without one, the certificate's (mapped by the rules), remembered without a check
        assert auth.cached_principal(None, client_cert_name=bob_cert) == "User:bob"
        assert auth.authenticate(None, client_cert_name="CN=carol,OU=ops") == "User:CN=carol,OU=ops"
        with pytest.raises(AuthenticationError) as e:  # neither: a 401 naming both ways
            auth.authenticate(None, client_cert_name=None)
        challenge = e.value.response_headers["WWW-Authenticate"]
        assert challenge.startswith('Basic realm="lakelog"') and MTLS_CHALLENGE in challenge
        assert "TLS client certificate" in e.value.message and "HTTP Basic" in e.value.message
        with pytest.raises(AuthenticationError):  # a wrong password is not rescued by the certificate
            auth.authenticate(basic("alice", "wrong"), client_cert_name=bob_cert)
    finally:
        auth.close()
    # brokers send HTTP Basic here (basic is on): a certificate naming their user is not a broker's
    posing = Authenticator(method="basic,mtls", zk=zk_client, inter_broker_user="broker",
                           principal_mapper=SslPrincipalMapper("RULE:^CN=([^,]+)$/$1/,DEFAULT"))
    with pytest.raises(AuthenticationError, match="maps to the brokers' user"):
        posing.authenticate(None, client_cert_name="CN=broker")
    assert posing.cached_principal(None, client_cert_name="CN=broker") is None
    # with mtls alone the brokers' certificates are how they authenticate
    assert Authenticator(method="mtls", inter_broker_user="broker",
                         principal_mapper=SslPrincipalMapper("RULE:^CN=([^,]+)$/$1/,DEFAULT")).authenticate(
        None, client_cert_name="CN=broker") == "User:broker"
