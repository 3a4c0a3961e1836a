"""Security on the Kafka listener, as on the HTTP gateway: SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
OAUTHBEARER against lakelog's users and JWKS, SSL with the gateway's certificates and principal mapping,
the same ACLs; failures as Kafka answers them; max.connections. Unchanged kafka-python and
confluent-kafka (librdkafka) clients, and raw frames where the exact answer matters."""

from __future__ import annotations

import json
import socket
import ssl
import struct

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import TopicAuthorizationFailedError
from kafka.net.sasl.oauth import AbstractTokenProvider
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from scramp import ScramClient

from lakelog.client import LakelogClient
from lakelog.security.certificates import CertificateAuthority
from tests.harness import wait_for
from tests.kafka.test_protocol_edges import _closed, _connect, _read_frame
from tests.security.test_oauth import AUDIENCE, ISSUER, Key, write_jwks

BROKER_PASSWORD = "inter-broker-s3cret"
ADMIN = ("broker", BROKER_PASSWORD)
SASL_ENV = {"LAKELOG_LISTENERS": "SASL_PLAINTEXT://127.0.0.1:0", "LAKELOG_AUTHENTICATION_METHODS": "basic",
            "LAKELOG_INTER_BROKER_PASSWORD": BROKER_PASSWORD, "LAKELOG_AUTHORIZER_ENABLED": "true"}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
HOSTS = ["localhost", "127.0.0.1"]


def endpoint(zk_client, name: str, broker_id: int = 0) -> str:
    """``host:port`` of broker ``broker_id``'s listener ``name``, as it registered it in ZooKeeper."""
    data = json.loads(zk_client.get(f"/lakelog/brokers/ids/{broker_id}")[0])
    (found,) = [e for e in data["endpoints"] if e.startswith(f"{name}://")]
    return found.removeprefix(f"{name}://")


def allow(principal: str, topic: str) -> list[dict]:
    """ACLs letting ``principal`` produce to and consume ``topic`` (and use any group)."""
    return [{"resource_type": "TOPIC", "resource_name": topic, "principal": principal, "operation": op}
            for op in ("WRITE", "READ", "DESCRIBE")] + [
        {"resource_type": "GROUP", "resource_name": "*", "principal": principal, "operation": "READ"}]


def wait_until_known(broker, user: str, password: str) -> None:
    """Until the broker's followed credentials hold ``user`` (HTTP Basic and SASL read the same copy)."""
    def known() -> bool:
        with LakelogClient(broker.url, auth=(user, password)) as c:
            try:
                c.admin.list_topics()
                return True
            except Exception:  # noqa: BLE001 - 401 until the credential arrived
                return False
    wait_for(known, what=f"user {user} known to the broker")


@pytest.fixture
def sasl_broker(broker_factory, zk_client, topic_name):
    """A broker with a SASL_PLAINTEXT listener (every mechanism of sasl.enabled.mechanisms' default), HTTP
    Basic and ACLs; users alice (may produce and consume ``topic_name``) and bob (no ACLs).
    ``(broker, bootstrap)``."""
    broker = broker_factory(extra_env=SASL_ENV)
    with LakelogClient(broker.url, auth=ADMIN) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1)
        admin.security.upsert_user("alice", "alice-pw")
        admin.security.upsert_user("bob", "bob-pw")
        admin.security.create_acls(allow("User:alice", topic_name))
    wait_until_known(broker, "alice", "alice-pw")
    wait_until_known(broker, "bob", "bob-pw")
    return broker, endpoint(zk_client, "SASL_PLAINTEXT")


# -- raw frames --------------------------------------------------------------------------------------

# _connect, _read_frame, _closed: the raw-frame helpers of test_protocol_edges


def _call(sock: socket.socket, request, response_cls, version: int, correlation_id: int):
    request.with_header(correlation_id=correlation_id, client_id="sasl-test")
    sock.sendall(bytes(request.encode(header=True, framed=True)))
    frame = _read_frame(sock)
    assert frame, "the broker closed the connection instead of answering"
    return response_cls.decode(frame, version=version, header=True)


def _handshake(sock: socket.socket, mechanism: str, *, version: int = 1):
    return _call(sock, SaslHandshakeRequest(version=version, mechanism=mechanism), SaslHandshakeResponse, version, 1)


def _authenticate(sock: socket.socket, token: bytes, *, correlation_id: int = 2, version: int = 2):
    return _call(sock, SaslAuthenticateRequest(version=version, auth_bytes=token), SaslAuthenticateResponse,
                 version, correlation_id)


def _metadata(sock: socket.socket, topic: str):
    from kafka.protocol.metadata.metadata import MetadataResponse

    request = MetadataRequest(version=4, topics=[MetadataRequest.MetadataRequestTopic(version=4, name=topic)],
                              allow_auto_topic_creation=False)
    return _call(sock, request, MetadataResponse, 4, 9)


def test_sasl_exchanges_and_their_failures_on_the_wire(sasl_broker, topic_name):
    """PLAIN and SCRAM over SaslHandshake v1 + SaslAuthenticate v2 and over SaslHandshake v0 + raw tokens
    (KIP-43); a wrong password SASL_AUTHENTICATION_FAILED (58) with a message, then closed; an unknown
    mechanism UNSUPPORTED_SASL_MECHANISM (33); a request before authentication closes the connection
    (ILLEGAL_SASL_STATE, logged), and so does a size prefix over sasl.server.max.receive.size before
    authentication; the authenticated principal's ACLs decide (bob: TOPIC_AUTHORIZATION_FAILED)."""
    broker, bootstrap = sasl_broker
    with _connect(bootstrap) as sock:  # PLAIN, then Metadata as alice
        answer = _handshake(sock, "PLAIN")
        assert answer.error_code == 0 and set(answer.mechanisms) == set(MECHANISMS)
        answer = _authenticate(sock, b"\0alice\0alice-pw")
        assert (answer.error_code, answer.session_lifetime_ms) == (0, 0)
        topic = _metadata(sock, topic_name).topics[0]
        assert (topic.name, topic.error_code, len(topic.partitions)) == (topic_name, 0, 1)
    with _connect(bootstrap) as sock:  # SaslAuthenticate before SaslHandshake
        assert _authenticate(sock, b"", correlation_id=3).error_code == 34
        assert _closed(sock)
    with _connect(bootstrap) as sock:  # bob may not Describe the topic
        _handshake(sock, "PLAIN")
        assert _authenticate(sock, b"\0bob\0bob-pw").error_code == 0
        assert _metadata(sock, topic_name).topics[0].error_code == 29  # TOPIC_AUTHORIZATION_FAILED
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        with _connect(bootstrap) as sock:
            _handshake(sock, mechanism)
            client = ScramClient([mechanism], "alice", "alice-pw")
            server_first = _authenticate(sock, client.get_client_first().encode())
            assert server_first.error_code == 0
            client.set_server_first(server_first.auth_bytes.decode())
            server_final = _authenticate(sock, client.get_client_final().encode(), correlation_id=3)
            assert server_final.error_code == 0
            client.set_server_final(server_final.auth_bytes.decode())  # the server proved it knows the key
            assert _metadata(sock, topic_name).topics[0].error_code == 0
        with _connect(bootstrap) as sock:  # a wrong password fails at the proof
            _handshake(sock, mechanism)
            client = ScramClient([mechanism], "alice", "Wrong-pw-1")
            client.set_server_first(_authenticate(sock, client.get_client_first().encode()).auth_bytes.decode())
            failed = _authenticate(sock, client.get_client_final().encode(), correlation_id=3)
            assert failed.error_code == 58 and f"invalid credentials with SASL mechanism {mechanism}" in failed.error_message
            assert _closed(sock)
    with _connect(bootstrap) as sock:
        _handshake(sock, "PLAIN")
        failed = _authenticate(sock, b"\0alice\0Wrong-pw-2")
        assert failed.error_code == 58 and "wrong password for 'alice'" in failed.error_message
        assert "Wrong-pw-2" not in failed.error_message
        assert _closed(sock)
    with _connect(bootstrap) as sock:
        answer = _handshake(sock, "GSSAPI")
        assert answer.error_code == 33 and set(answer.mechanisms) == set(MECHANISMS)
        assert _closed(sock)
    with _connect(bootstrap) as sock:  # SaslHandshake v0: raw size-prefixed tokens, no Kafka header
        assert _handshake(sock, "PLAIN", version=0).error_code == 0
        token = b"\0alice\0alice-pw"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert sock.recv(4) == struct.pack(">i", 0)  # PLAIN's (empty) server token, size-prefixed
        assert _metadata(sock, topic_name).topics[0].error_code == 0
    with _connect(bootstrap) as sock:  # Metadata before authentication
        request = MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False)
        request.with_header(correlation_id=1, client_id="early")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        assert _closed(sock)
    with _connect(bootstrap) as sock:  # before authentication a frame may not exceed sasl.server.max.receive.size
        sock.sendall(struct.pack(">i", 524288 + 1))
        assert _closed(sock)
    log = broker.log_file
    wait_for(lambda: "over sasl.server.max.receive.size (524288)" in log.read_text(),
             what="the WARN line of a large frame before authentication")
    wait_for(lambda: "(client 'early') closed: ILLEGAL_SASL_STATE (34)" in log.read_text(),
             what="the WARN line of a request before authentication")
    text = log.read_text()
    assert "Wrong-pw" not in text and "unknown user or wrong password for 'alice'" in text


def test_sasl_requests_on_a_plaintext_listener_answer_illegal_sasl_state(kafka_broker):
    """SaslHandshake and SaslAuthenticate on a PLAINTEXT listener answer ILLEGAL_SASL_STATE (34) and the
    connection stays, as Kafka's KafkaApis answers them."""
    _, bootstrap = kafka_broker
    with _connect(bootstrap) as sock:
        assert _handshake(sock, "PLAIN").error_code == 34
        assert _authenticate(sock, b"\0alice\0pw").error_code == 34
        assert _handshake(sock, "PLAIN", version=0).error_code == 34


# -- unchanged clients: SASL ---------------------------------------------------------------------------

def _kafka_python(bootstrap: str, mechanism: str, user: str, password: str, **more) -> dict:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password, **more}


def _consume_kafka_python(config: dict, topic: str, count: int) -> list:
    consumer = KafkaConsumer(**config, enable_auto_commit=False, group_id=None, fetch_max_wait_ms=200)
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list = []

        def more() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
            return len(got) >= count

        wait_for(more, what=f"{count} records consumed by kafka-python")
        return got
    finally:
        consumer.close()


def test_kafka_python_produces_and_consumes_with_plain_and_scram(sasl_broker, topic_name):
    """kafka-python authenticates with each mechanism as alice, produces, and consumes what it produced;
    bob, authenticated but without ACLs, gets TOPIC_AUTHORIZATION_FAILED."""
    _, bootstrap = sasl_broker
    for mechanism in MECHANISMS:
        producer = KafkaProducer(**_kafka_python(bootstrap, mechanism, "alice", "alice-pw"), acks=1,
                                 enable_idempotence=False)
        try:
            producer.send(topic_name, value=f"kafka-python {mechanism}".encode(), partition=0).get(timeout=60)
        finally:
            producer.close()
    got = _consume_kafka_python(_kafka_python(bootstrap, "SCRAM-SHA-256", "alice", "alice-pw"), topic_name, 3)
    assert [(r.offset, r.value) for r in got] == [(i, f"kafka-python {m}".encode()) for i, m in enumerate(MECHANISMS)]
    producer = KafkaProducer(**_kafka_python(bootstrap, "SCRAM-SHA-512", "bob", "bob-pw"), acks=1,
                             enable_idempotence=False, max_block_ms=10_000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(topic_name, value=b"bob", partition=0).get(timeout=60)
    finally:
        producer.close()


def _librdkafka(bootstrap: str, mechanism: str, user: str, password: str, **more) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, **more}


def _produce_librdkafka(config: dict, topic: str, value: bytes, *, timeout_s: float = 60) -> list:
    """Produce one record to partition 0; the delivery reports' errors (``[None]`` when written)."""
    reports: list = []
    producer = Producer(config)
    producer.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(timeout_s)
    return reports


def _consume_librdkafka(config: dict, topic: str, count: int) -> list:
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list = []

        def more() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
            return len(got) >= count

        wait_for(more, what=f"{count} records consumed by librdkafka")
        return got
    finally:
        consumer.close()


def test_librdkafka_produces_and_consumes_with_plain_and_scram(sasl_broker, topic_name):
    """librdkafka authenticates with each mechanism; a wrong password is SASL_AUTHENTICATION_FAILED
    (librdkafka's _AUTHENTICATION with the broker's message) and writes nothing; bob gets
    TOPIC_AUTHORIZATION_FAILED."""
    broker, bootstrap = sasl_broker
    for mechanism in MECHANISMS:
        assert _produce_librdkafka(_librdkafka(bootstrap, mechanism, "alice", "alice-pw"), topic_name,
                                   f"librdkafka {mechanism}".encode()) == [None]
    got = _consume_librdkafka(_librdkafka(bootstrap, "SCRAM-SHA-512", "alice", "alice-pw"), topic_name, 3)
    assert [(m.offset(), m.value()) for m in got] == [(i, f"librdkafka {m}".encode()) for i, m in enumerate(MECHANISMS)]

    for mechanism in MECHANISMS:
        errors: list = []
        reports = _produce_librdkafka(_librdkafka(bootstrap, mechanism, "alice", "Wrong-pw-3", **{
            "message.timeout.ms": 5000, "error_cb": errors.append}), topic_name, b"never", timeout_s=30)
        assert reports and reports[0] is not None
        assert any(e.code() == KafkaError._AUTHENTICATION and "Authentication failed" in e.str() for e in errors), errors
    reports = _produce_librdkafka(_librdkafka(bootstrap, "PLAIN", "bob", "bob-pw", **{"message.timeout.ms": 10000}),
                                  topic_name, b"bob", timeout_s=30)
    assert reports and reports[0] is not None and reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with LakelogClient(broker.url, auth=ADMIN) as admin:  # nothing of the refused producers was written
        assert admin.partition_offsets(topic_name, 0)["end_offset"] == 3


# -- OAUTHBEARER ---------------------------------------------------------------------------------------

class _TokenProvider(AbstractTokenProvider):
    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def token(self) -> str:
        return self._token


def test_oauthbearer_with_tokens_of_the_jwks(broker_factory, zk_client, tmp_path, topic_name):
    """sasl.enabled.mechanisms=OAUTHBEARER: kafka-python's sasl_oauth_token_provider and confluent-kafka's
    oauth_cb send a JWT signed by a key of oauth.jwks.url (the JWKS the HTTP gateway checks); the principal
    is User:{sub}; a token signed by another key is SASL_AUTHENTICATION_FAILED."""
    key, stranger = Key("kafka-1"), Key("kafka-1")
    env = {**SASL_ENV, "LAKELOG_SASL_ENABLED_MECHANISMS": "OAUTHBEARER",
           "LAKELOG_OAUTH_JWKS_URL": write_jwks(tmp_path / "jwks.json", key),
           "LAKELOG_OAUTH_EXPECTED_ISSUER": ISSUER, "LAKELOG_OAUTH_EXPECTED_AUDIENCE": AUDIENCE}
    broker = broker_factory(extra_env=env)
    with LakelogClient(broker.url, auth=ADMIN) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1)
        admin.security.create_acls(allow("User:etl", topic_name))
    bootstrap = endpoint(zk_client, "SASL_PLAINTEXT")
    token = key.sign(sub="etl")
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=_TokenProvider(token), acks=1,
                             enable_idempotence=False)
    try:
        assert producer.send(topic_name, value=b"kafka-python token", partition=0).get(timeout=60).offset == 0
    finally:
        producer.close()
    config = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
              "oauth_cb": lambda _config: (token, key_expiry(token))}
    assert _produce_librdkafka(config, topic_name, b"librdkafka token") == [None]
    got = _consume_librdkafka(config, topic_name, 2)
    assert [m.value() for m in got] == [b"kafka-python token", b"librdkafka token"]

    with _connect(bootstrap) as sock:
        assert _handshake(sock, "OAUTHBEARER").error_code == 0
        forged = stranger.sign(sub="etl")
        failed = _authenticate(sock, f"n,,\x01auth=Bearer {forged}\x01\x01".encode())
        assert failed.error_code == 58 and "signature does not verify" in failed.error_message
        assert _closed(sock)
    with _connect(bootstrap) as sock:  # PLAIN is not enabled here
        assert _handshake(sock, "PLAIN").error_code == 33


def key_expiry(token: str) -> float:
    """The ``exp`` claim of a JWT (seconds since the epoch), what confluent-kafka's oauth_cb answers beside it."""
    import jwt

    return float(jwt.decode(token, options={"verify_signature": False})["exp"])


# -- SSL -----------------------------------------------------------------------------------------------

def test_ssl_listener_maps_client_certificates_to_principals(broker_factory, zk_client, tmp_path, topic_name):
    """An SSL listener with the gateway's certificate and ssl.client.auth=required: the principal is the
    client certificate's subject after ssl.principal.mapping.rules (the gateway's mtls mapping), so the same
    ACLs decide: CN=alice (with ACLs) produces and consumes with kafka-python and librdkafka, CN=bob gets
    TOPIC_AUTHORIZATION_FAILED, a client without a certificate fails the TLS handshake. A SASL_SSL listener
    of the same broker: TLS as SSL's, then SCRAM-SHA-512 decides the principal (carol's ACLs, not bob's
    certificate's)."""
    ca = CertificateAuthority.create(tmp_path / "tls")
    env = {"LAKELOG_LISTENERS": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "LAKELOG_AUTHENTICATION_METHODS": "mtls",
           "LAKELOG_SSL_CLIENT_AUTH": "required", "LAKELOG_AUTHORIZER_ENABLED": "true",
           "LAKELOG_SSL_PRINCIPAL_MAPPING_RULES": "RULE:^CN=([^,]+),OU=brokers$/$1/,RULE:^CN=([^,]+)$/$1/L,DEFAULT",
           "LAKELOG_SUPER_USERS": "User:admin"}
    files = ca.issue("broker-0", common_name="broker", organizational_unit="brokers", hosts=HOSTS, server=True)
    broker = broker_factory(0, extra_env=env, ssl_certfile=files.certfile, ssl_keyfile=files.keyfile,
                            ssl_cafile=files.cafile)
    admin_files, alice, bob = (ca.issue(name, common_name=name.upper() if name == "alice" else name)
                               for name in ("admin", "alice", "bob"))
    with LakelogClient(broker.url, ssl_cafile=str(ca.cafile), ssl_certfile=str(admin_files.certfile),
                       ssl_keyfile=str(admin_files.keyfile)) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1)
        admin.security.create_acls(allow("User:alice", topic_name))  # CN=ALICE -> alice (the L rule)
    bootstrap = endpoint(zk_client, "SSL")

    def kafka_python(cert) -> dict:
        return {"bootstrap_servers": bootstrap, "security_protocol": "SSL", "ssl_cafile": str(ca.cafile),
                "ssl_certfile": str(cert.certfile), "ssl_keyfile": str(cert.keyfile)}

    def librdkafka(cert) -> dict:
        return {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca.cafile),
                "ssl.certificate.location": str(cert.certfile), "ssl.key.location": str(cert.keyfile)}

    producer = KafkaProducer(**kafka_python(alice), acks=1, enable_idempotence=False)
    try:
        assert producer.send(topic_name, value=b"over TLS", partition=0).get(timeout=60).offset == 0
    finally:
        producer.close()
    assert _produce_librdkafka(librdkafka(alice), topic_name, b"over TLS too") == [None]
    assert [r.value for r in _consume_kafka_python(kafka_python(alice), topic_name, 2)] == [b"over TLS", b"over TLS too"]
    assert [m.value() for m in _consume_librdkafka(librdkafka(alice), topic_name, 2)] == [b"over TLS", b"over TLS too"]
    reports = _produce_librdkafka({**librdkafka(bob), "message.timeout.ms": 10000}, topic_name, b"bob", timeout_s=30)
    assert reports and reports[0] is not None and reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # SASL_SSL: the same TLS, then SASL decides the principal (User:carol, not the certificate's)
    with LakelogClient(broker.url, ssl_cafile=str(ca.cafile), ssl_certfile=str(admin_files.certfile),
                       ssl_keyfile=str(admin_files.keyfile)) as admin:
        admin.security.upsert_user("carol", "carol-pw")
        admin.security.create_acls(allow("User:carol", topic_name))
    sasl_ssl = endpoint(zk_client, "SASL_SSL")
    tls = ssl.create_default_context(cafile=str(ca.cafile))
    tls.load_cert_chain(str(bob.certfile), str(bob.keyfile))

    def carol_known() -> bool:
        with socket.create_connection(tuple(sasl_ssl.rsplit(":", 1)), timeout=60) as raw:
            with tls.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                _handshake(sock, "PLAIN")
                return _authenticate(sock, b"\0carol\0carol-pw").error_code == 0

    wait_for(carol_known, what="user carol known to the SASL_SSL listener")
    producer = KafkaProducer(**{**kafka_python(bob), "bootstrap_servers": sasl_ssl, "security_protocol": "SASL_SSL"},
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol", sasl_plain_password="carol-pw",
                             acks=1, enable_idempotence=False)
    try:  # bob's certificate has no ACLs: carol's do
        assert producer.send(topic_name, value=b"over SASL_SSL", partition=0).get(timeout=60).offset == 2
    finally:
        producer.close()

    errors: list = []
    no_cert = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca.cafile),
               "message.timeout.ms": 5000, "error_cb": errors.append}
    reports = _produce_librdkafka(no_cert, topic_name, b"anonymous", timeout_s=30)
    assert reports and reports[0] is not None
    assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) for e in errors), errors


# -- max.connections -----------------------------------------------------------------------------------

def test_connections_beyond_max_connections_are_closed_at_once(broker_factory, zk_client):
    """max.connections counts the Kafka listeners' connections: one beyond it is closed at once with a WARN
    line; once one closes, a new one is served."""
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

    broker = broker_factory(extra_env={"LAKELOG_LISTENERS": "PLAINTEXT://127.0.0.1:0", "LAKELOG_MAX_CONNECTIONS": "3"})
    bootstrap = endpoint(zk_client, "PLAINTEXT")

    def served(sock: socket.socket) -> bool:
        return _call(sock, ApiVersionsRequest(version=0), ApiVersionsResponse, 0, 7).error_code == 0

    held = [_connect(bootstrap) for _ in range(3)]
    try:
        assert all(served(sock) for sock in held)  # accepted and counted
        with _connect(bootstrap) as extra:
            assert _closed(extra)
        wait_for(lambda: "closed: max.connections (3) connections are open" in broker.log_file.read_text(),
                 what="the WARN line of a connection over max.connections")
        held.pop().close()

        def a_new_one_is_served() -> bool:
            sock = _connect(bootstrap)
            try:
                return served(sock)
            except (AssertionError, OSError):
                return False
            finally:
                sock.close()

        wait_for(a_new_one_is_served, what="a connection served once another closed")
    finally:
        for sock in held:
            sock.close()
