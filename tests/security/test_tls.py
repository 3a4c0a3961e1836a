"""TLS on the gateway (ssl.certfile, ssl.keyfile, ssl.cafile): clients verify the broker, plain HTTP and
unverified clients fail clearly; TLS between three brokers with replication and failover."""

from __future__ import annotations

import httpx
import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.protocol.errors import RemoteError
from lakelog.client.tls import client_ssl_context
from lakelog.replication.metadata import ClusterMetadata
from lakelog.security.authentication import MTLS_CHALLENGE
from lakelog.security.certificates import CertificateAuthority, TlsFiles
from tests.harness import wait_for

HOSTS = ["localhost", "127.0.0.1"]


@pytest.fixture
def ca(tmp_path) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path / "tls")


#: mtls principals (broker certificates CN=broker,OU=brokers are User:broker) and ACLs, User:CN=admin a super user
MTLS_ACLS = {"LAKELOG_AUTHENTICATION_METHODS": "mtls",
             "LAKELOG_SSL_PRINCIPAL_MAPPING_RULES": "RULE:^CN=([^,]+),OU=brokers$/$1/,DEFAULT",
             "LAKELOG_AUTHORIZER_ENABLED": "true", "LAKELOG_SUPER_USERS": "User:CN=admin"}


def broker_files(ca: CertificateAuthority, broker_id: int, *, unit: str | None = None) -> dict:
    """BrokerProcess keyword arguments of a broker certificate (server and client use, CN=broker[,OU=unit])."""
    files = ca.issue(f"broker-{broker_id}", common_name="broker", organizational_unit=unit, hosts=HOSTS, server=True)
    return {"ssl_certfile": files.certfile, "ssl_keyfile": files.keyfile, "ssl_cafile": files.cafile}


def client_tls(files: TlsFiles | None = None, *, cafile=None) -> dict:
    if files is None:
        return {"ssl_cafile": str(cafile)}
    return {"ssl_cafile": str(files.cafile), "ssl_certfile": str(files.certfile), "ssl_keyfile": str(files.keyfile)}


def test_a_tls_broker_is_verified_by_its_clients(broker_factory, ca, topic_name):
    broker = broker_factory(0, **broker_files(ca, 0))
    assert broker.url.startswith("https://")
    port = broker.port
    with LakelogClient(f"127.0.0.1:{port}", ssl_cafile=str(ca.cafile)) as client:  # host:port -> https
        assert client.urls == [f"https://127.0.0.1:{port}"]
        client.create_topic(topic_name, partitions=1)
        client.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"a", b"b"])}))
        assert client.fetch_arrow(topic_name, 0, 0).column("value").to_pylist() == [b"a", b"b"]
        brokers = httpx.get(f"{broker.url}/v3/clusters/{client.cluster_id}/brokers", verify=client_ssl_context(ssl_cafile=ca.cafile)).json()
        assert brokers["data"][0]["port"] == port

    other_ca = CertificateAuthority.create(ca.directory / "other")  # a client trusting another CA
    for kwargs in ({}, {"ssl_cafile": str(other_ca.cafile)}):
        with LakelogClient(broker.url, **kwargs) as client:
            with pytest.raises(ConnectionError, match="TLS certificate of .* was not verified .*ssl.cafile"):
                client.admin.list_topics()
    with LakelogClient(f"http://127.0.0.1:{port}") as client:  # plain HTTP to the TLS port
        with pytest.raises(ConnectionError, match="TLS port, use https://"):
            client.admin.list_topics()


# a lag time that a loaded machine does not exceed: no follower leaves the ISR before the leader's kill
FAST = {"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "3000", "LAKELOG_REPLICA_LAG_TIME_MAX_MS": "5000",
        "LAKELOG_REPLICA_FETCH_WAIT_MAX_MS": "200", "LAKELOG_REQUEST_TIMEOUT_MS": "8000"}


@pytest.mark.cluster
def test_three_tls_brokers_replicate_and_fail_over(broker_factory, ca, zk_client, topic_name):
    """Every broker requires a client certificate (ssl.client.auth=required) and checks ACLs with mtls
    principals: replica fetches, forwarded requests and the readiness poll present the brokers' own
    certificates (User:broker, a super user, through ssl.principal.mapping.rules); RF 3, acks=all, the
    leader killed, produce and fetch go on over TLS."""
    env = {**FAST, **MTLS_ACLS, "LAKELOG_SSL_CLIENT_AUTH": "required"}
    brokers = {i: broker_factory(i, extra_env=env, **broker_files(ca, i, unit="brokers")) for i in range(3)}
    with LakelogClient(brokers[0].url, ssl_cafile=str(ca.cafile)) as no_cert:  # the handshake needs one
        with pytest.raises(ConnectionError, match="requires a client certificate .*ssl.certfile"):
            no_cert.admin.list_topics()
    admin = ca.issue("admin", common_name="admin")
    meta = ClusterMetadata(zk_client)
    assert {b.url for b in meta.brokers().values()} == {b.url for b in brokers.values()}  # https:// registered
    with LakelogClient(",".join(b.url for b in brokers.values()), **client_tls(admin)) as client:
        client.create_topic(topic_name, partitions=1, replication_factor=3)
        wait_for(lambda: len(meta.partition_state(topic_name, 0).isr) == 3, what="3 in-sync replicas")
        client.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"v%d" % i for i in range(10)])}))
        wait_for(lambda: len(meta.partition_state(topic_name, 0).isr) == 3, what="3 in-sync replicas")
        leader = meta.partition_state(topic_name, 0).leader
        # acks=all answered: the in-sync followers fetched over TLS
        assert client.topic_logs(topic_name)[0]["high_watermark"] == 10
        brokers[leader].kill()
        wait_for(lambda: meta.partition_state(topic_name, 0).leader not in (leader, -1), what="a new leader")
        client.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"after"])}))
        values = client.fetch_arrow(topic_name, 0, 0).column("value").to_pylist()
        assert values == [b"v%d" % i for i in range(10)] + [b"after"]
        assert len(meta.partition_state(topic_name, 0).isr) == 2



def test_mtls_principal_is_the_certificate_subject(broker_factory, ca, topic_name):
    """authentication.methods=mtls with ssl.client.auth=requested: the principal is User:{subject} (as Kafka's
    default principal builder), a client without a certificate gets 401 / 40101 (with required, the TLS
    handshake itself refuses it: the three-broker test above); ACLs see the principal."""
    env = {"LAKELOG_SSL_CLIENT_AUTH": "requested", "LAKELOG_AUTHENTICATION_METHODS": "mtls",
           "LAKELOG_SSL_PRINCIPAL_MAPPING_RULES": "RULE:^CN=([^,]+),OU=brokers$/$1/,DEFAULT",
           "LAKELOG_AUTHORIZER_ENABLED": "true", "LAKELOG_SUPER_USERS": "User:CN=alice,OU=eng"}
    files = ca.issue("broker-0", common_name="broker", organizational_unit="brokers", hosts=HOSTS, server=True)
    broker = broker_factory(0, extra_env=env, ssl_certfile=files.certfile, ssl_keyfile=files.keyfile,
                            ssl_cafile=files.cafile)
    alice = ca.issue("alice", common_name="alice", organizational_unit="eng")
    bob = ca.issue("bob", common_name="bob", organizational_unit="eng")
    with LakelogClient(broker.url, ssl_cafile=str(ca.cafile)) as anonymous:
        with pytest.raises(RemoteError) as e:
            anonymous.admin.list_topics()
        assert e.value.http_status == 401 and e.value.error_code == 40101 and "no client certificate" in str(e.value)
    resp = httpx.get(f"{broker.url}/topics", verify=client_ssl_context(ssl_cafile=ca.cafile))
    assert resp.status_code == 401 and resp.headers["WWW-Authenticate"] == MTLS_CHALLENGE
    with LakelogClient(broker.url, **client_tls(alice)) as client:  # a super user: allowed everything
        client.create_topic(topic_name, partitions=1)
        client.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"a"])}))
        assert client.security.list_acls() == []
    with LakelogClient(broker.url, **client_tls(bob)) as client:
        with pytest.raises(RemoteError, match=r"User:CN=bob,OU=eng is not authorized") as e:
            client.security.list_acls()
        assert e.value.http_status == 403


def test_an_mtls_broker_whose_certificate_is_not_the_inter_broker_user_does_not_start(broker_factory, ca):
    env = {"LAKELOG_SSL_CLIENT_AUTH": "required", "LAKELOG_AUTHENTICATION_METHODS": "mtls"}
    with pytest.raises(RuntimeError, match="maps to User:CN=broker, not to inter.broker.username=broker"):
        broker_factory(0, extra_env=env, **broker_files(ca, 0))


def test_a_broker_configured_for_tls_by_its_properties_file(broker_factory, ca, tmp_path):
    files = ca.issue("broker-0", common_name="broker", hosts=HOSTS, server=True)
    config = tmp_path / "broker.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in files.as_properties().items()) + "ssl.client.auth=required\n")
    broker = broker_factory(0, config_file=config)  # polled over TLS with the files the config names
    assert broker.url.startswith("https://")
    with LakelogClient(broker.url, **client_tls(files)) as client:
        assert client.admin.list_topics() == []


def test_tls_settings_are_checked(tmp_path, ca):
    from lakelog.config import BrokerSettings
    from lakelog.errors import ConfigError

    files = ca.issue("broker-0", common_name="broker", hosts=HOSTS, server=True)
    with pytest.raises(ConfigError, match="mtls needs ssl.certfile and ssl.client.auth"):
        BrokerSettings.load(authentication_methods="mtls", ssl_certfile=files.certfile)
    with pytest.raises(ConfigError, match="ssl.client.auth needs ssl.certfile"):
        BrokerSettings.load(ssl_client_auth="required")
    with pytest.raises(ConfigError, match="ssl.cafile .*missing.pem: no such file"):
        BrokerSettings.load(ssl_certfile=files.certfile, ssl_cafile=tmp_path / "missing.pem")
    settings = BrokerSettings.load(ssl_certfile=files.certfile, ssl_keyfile=files.keyfile, port=9443)
    assert settings.advertised_url == "https://127.0.0.1:9443"
