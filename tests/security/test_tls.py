"""TLS on the gateway (ssl.certfile, ssl.keyfile, ssl.cafile): clients verify the broker, plain HTTP and
unverified clients fail clearly; TLS between three brokers with replication and failover."""

from __future__ import annotations

import httpx
import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.protocol.tls import client_ssl_context
from lakelog.replication.metadata import ClusterMetadata
from lakelog.security.certificates import CertificateAuthority, TlsFiles
from tests.harness import wait_for

HOSTS = ["localhost", "127.0.0.1"]


@pytest.fixture
def ca(tmp_path) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path / "tls")


def broker_files(ca: CertificateAuthority, broker_id: int) -> dict:
    """BrokerProcess keyword arguments of a broker certificate (server and client use, CN=broker)."""
    files = ca.issue(f"broker-{broker_id}", common_name="broker", hosts=HOSTS, server=True)
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
                client.list_topics()
    with LakelogClient(f"http://127.0.0.1:{port}") as client:  # plain HTTP to the TLS port
        with pytest.raises(ConnectionError, match="TLS port, use https://"):
            client.list_topics()


FAST = {"LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "3000", "LAKELOG_REPLICA_LAG_TIME_MAX_MS": "1500",
        "LAKELOG_REPLICA_FETCH_WAIT_MAX_MS": "200", "LAKELOG_REQUEST_TIMEOUT_MS": "8000"}


@pytest.mark.cluster
def test_three_tls_brokers_replicate_and_fail_over(broker_factory, ca, zk_client, topic_name):
    """Every broker requires a client certificate (ssl.client.auth=required): replica fetches, forwarded
    requests and the readiness poll present the brokers' own certificates; RF 3, acks=all, the leader
    killed, produce and fetch go on over TLS."""
    env = {**FAST, "LAKELOG_SSL_CLIENT_AUTH": "required"}
    brokers = {i: broker_factory(i, extra_env=env, **broker_files(ca, i)) for i in range(3)}
    with LakelogClient(brokers[0].url, ssl_cafile=str(ca.cafile)) as no_cert:  # the handshake needs one
        with pytest.raises(ConnectionError, match="requires a client certificate .*ssl.certfile"):
            no_cert.list_topics()
    admin = ca.issue("admin", common_name="admin")
    meta = ClusterMetadata(zk_client)
    assert {b.url for b in meta.brokers().values()} == {b.url for b in brokers.values()}  # https:// registered
    with LakelogClient(",".join(b.url for b in brokers.values()), **client_tls(admin)) as client:
        client.create_topic(topic_name, partitions=1, replication_factor=3)
        wait_for(lambda: len(meta.partition_state(topic_name, 0).isr) == 3, 20, "3 in-sync replicas")
        client.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"v%d" % i for i in range(10)])}))
        leader = meta.partition_state(topic_name, 0).leader
        # acks=all answered: the in-sync followers fetched over TLS
        assert client.topic_logs(topic_name)[0]["high_watermark"] == 10
        brokers[leader].kill()
        wait_for(lambda: meta.partition_state(topic_name, 0).leader not in (leader, -1), 30, "a new leader")
        client.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"after"])}))
        values = client.fetch_arrow(topic_name, 0, 0).column("value").to_pylist()
        assert values == [b"v%d" % i for i in range(10)] + [b"after"]
        assert len(meta.partition_state(topic_name, 0).isr) == 2

