"""ClientSettings: one parser of the connection settings, from the environment, a properties file (the CLI's
--command-config), flags and Spark options, with their precedence; real files, the real environment, and a
real broker with authentication.methods=basic for the settings' client."""

from __future__ import annotations

import pickle

import pytest

from lakelog.client import BearerToken, ClientSettings, GatewayError
from lakelog.protocol.client_id import CLIENT_ID_HEADER

ENV = ("LAKELOG_BOOTSTRAP_SERVERS", "LAKELOG_BOOTSTRAP_SERVER", "LAKELOG_USERNAME", "LAKELOG_PASSWORD",
       "LAKELOG_TOKEN", "LAKELOG_SASL_USERNAME", "LAKELOG_SASL_PASSWORD", "LAKELOG_SASL_OAUTHBEARER_TOKEN",
       "LAKELOG_SSL_CAFILE", "LAKELOG_SSL_CERTFILE", "LAKELOG_SSL_KEYFILE", "LAKELOG_CLIENT_ID",
       "LAKELOG_SECURITY_PROTOCOL", "LAKELOG_SASL_MECHANISM")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def _properties(tmp_path, text: str):
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_defaults_and_kafka_names():
    s = ClientSettings()
    assert (s.bootstrap_servers, s.auth(), s.tls(), s.request_timeout_ms, s.enable_idempotence) == \
        ("localhost:8082", None, {}, 60_000, True)
    assert s.bootstrap_urls() == ["http://localhost:8082"]
    named = ClientSettings(**{"bootstrap.servers": "h:1", "client.id": "etl", "delivery.timeout.ms": 5000})
    assert (named.bootstrap_servers, named.client_id, named.delivery_timeout_ms) == ("h:1", "etl", 5000)
    assert ClientSettings.dotted_names()[:3] == ("bootstrap.servers", "security.protocol", "sasl.mechanism")
    with pytest.raises(ValueError, match="x.y"):
        ClientSettings(**{"x.y": "1"})


def test_the_environment_and_flags_over_it(monkeypatch):
    monkeypatch.setenv("LAKELOG_BOOTSTRAP_SERVER", "env-host:1")  # the CLI's name
    monkeypatch.setenv("LAKELOG_USERNAME", "alice")
    monkeypatch.setenv("LAKELOG_PASSWORD", "alice-pw")
    monkeypatch.setenv("LAKELOG_SSL_CAFILE", "")  # empty: not set
    monkeypatch.setenv("LAKELOG_CLIENT_ID", "etl")
    s = ClientSettings.from_env()
    assert (s.bootstrap_servers, s.auth(), s.tls(), s.client_id) == ("env-host:1", ("alice", "alice-pw"), {}, "etl")
    assert "alice-pw" not in repr(s)
    flags = ClientSettings.from_env(**{"bootstrap.servers": "flag-host:2", "client.id": None})
    assert (flags.bootstrap_servers, flags.client_id) == ("flag-host:2", "etl")  # None: flag not given
    monkeypatch.setenv("LAKELOG_BOOTSTRAP_SERVERS", "kafka-name:3")  # Kafka's name wins over the CLI's
    assert ClientSettings.from_env().bootstrap_servers == "kafka-name:3"
    monkeypatch.setenv("LAKELOG_TOKEN", "a.b.c")
    with pytest.raises(ValueError, match="give either LAKELOG_TOKEN .* or LAKELOG_USERNAME and LAKELOG_PASSWORD, not both"):
        ClientSettings.from_env()
    monkeypatch.delenv("LAKELOG_USERNAME")
    monkeypatch.delenv("LAKELOG_PASSWORD")
    assert ClientSettings.from_env().auth() == BearerToken("a.b.c")


def test_a_command_config_file_alone_holds_the_security_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("LAKELOG_USERNAME", "env-user")
    monkeypatch.setenv("LAKELOG_PASSWORD", "env-pw")
    monkeypatch.setenv("LAKELOG_SSL_CAFILE", "/env/ca.pem")
    path = _properties(tmp_path, "# Kafka-style\nsasl.username=alice\nsasl.password = alice-pw\nssl.certfile=/c.pem\n")
    s = ClientSettings.load(command_config=path, **{"bootstrap.servers": "flag-host:1"})
    assert (s.bootstrap_servers, s.auth(), s.tls()) == ("flag-host:1", ("alice", "alice-pw"), {"ssl_certfile": "/c.pem"})
    assert ClientSettings.load(**{"bootstrap.servers": "h:1"}).auth() == ("env-user", "env-pw")  # no file: the env
    flag_wins = ClientSettings.load(command_config=path, **{"sasl.username": "bob", "sasl.password": "bob-pw"})
    assert flag_wins.auth() == ("bob", "bob-pw")


def test_command_config_files_that_cannot_work(tmp_path):
    keys = ("sasl.username", "sasl.password", "sasl.oauthbearer.token", "ssl.cafile", "ssl.certfile", "ssl.keyfile")
    cases = {
        "sasl.username=alice\n": "set both sasl.username and sasl.password",
        "sasl.username=a\nsasl.password=b\nsasl.oauthbearer.token=t\n": "not both",
        "sasl.oauthbearer.token=\n": "sasl.oauthbearer.token: a bearer token must be one non-empty word",
        "sasl.jaas.config=x\n": "unknown key(s) sasl.jaas.config",
        "client.id=etl\n": "unknown key(s) client.id",  # not one of the keys the caller takes
        "request.timeout.ms=-5\n": "request.timeout.ms: Input should be greater than 0",
    }
    for text, message in cases.items():
        path = _properties(tmp_path, text)
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            ClientSettings.from_properties(path, keys=keys if "timeout" not in text else None)
    assert ClientSettings.from_properties(_properties(tmp_path, "client.id=etl\n")).client_id == "etl"  # every key
    with pytest.raises(ValueError, match="missing.properties"):
        ClientSettings.from_properties(tmp_path / "missing.properties")


def test_spark_options_are_a_source_of_their_own(monkeypatch):
    monkeypatch.setenv("LAKELOG_USERNAME", "env-user")  # an executor's environment does not count
    monkeypatch.setenv("LAKELOG_PASSWORD", "env-pw")
    opts = {"LAKELOG.bootstrap.servers": " h:1 ", "kafka.bootstrap.servers": "h:1", "subscribe": "t",
            "lakelog.auth.username": "etl", "lakelog.auth.password": "etl-pw", "lakelog.ssl.cafile": "/ca.pem"}
    s = ClientSettings.from_spark_options(opts)
    assert (s.bootstrap_servers, s.auth(), s.tls()) == ("h:1", ("etl", "etl-pw"), {"ssl_cafile": "/ca.pem"})
    assert ClientSettings.from_spark_options(s.as_spark_options()).model_dump() == s.model_dump()
    assert s.as_spark_options(bootstrap=False) == {"lakelog.auth.username": "etl", "lakelog.auth.password": "etl-pw",
                                                    "lakelog.ssl.cafile": "/ca.pem"}
    assert ClientSettings.from_spark_options({"kafka.bootstrap.servers": "h:2"}).auth() is None
    token = ClientSettings.from_spark_options({"kafka.bootstrap.servers": "h", "lakelog.auth.token": "eyJ.x.y"})
    assert pickle.loads(pickle.dumps(token)).auth() == BearerToken("eyJ.x.y")  # what an executor receives
    refused = {
        "are aliases \\(the gateways\\) but differ": {"kafka.bootstrap.servers": "h:1", "lakelog.bootstrap.servers": "h:2"},
        "'lakelog.bootstrap.servers' \\(or its alias 'kafka.bootstrap.servers'\\) must be specified": {},
        "lakelog.auth.username and lakelog.auth.password .*go together": {"kafka.bootstrap.servers": "h",
                                                                           "lakelog.auth.username": "etl"},
        "give either lakelog.auth.token": {"kafka.bootstrap.servers": "h", "lakelog.auth.token": "t",
                                           "lakelog.auth.password": "p"},
        "lakelog.auth.token: a bearer token": {"kafka.bootstrap.servers": "h", "lakelog.auth.token": " "},
    }
    for message, options in refused.items():
        with pytest.raises(ValueError, match=message):
            ClientSettings.from_spark_options(options)


def test_security_protocol_and_sasl_mechanism():
    ssl = ClientSettings(**{"bootstrap.servers": "a:1,http://b:2", "security.protocol": "SSL"})
    assert ssl.bootstrap_urls() == ["https://a:1", "http://b:2"]  # a URL keeps its scheme
    assert ClientSettings(**{"ssl.cafile": "/ca.pem"}).bootstrap_urls() == ["https://localhost:8082"]
    assert ClientSettings(**{"ssl.cafile": "/ca.pem", "security.protocol": "PLAINTEXT"}).bootstrap_urls() == \
        ["http://localhost:8082"]
    with pytest.raises(ValueError, match="security.protocol"):
        ClientSettings(**{"security.protocol": "TLS"})
    with pytest.raises(ValueError, match="needs sasl.mechanism=OAUTHBEARER"):
        ClientSettings(**{"sasl.mechanism": "PLAIN", "sasl.oauthbearer.token": "a.b.c"}).auth()
    with pytest.raises(ValueError, match="OAUTHBEARER takes sasl.oauthbearer.token"):
        ClientSettings(**{"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u", "sasl.password": "p"}).auth()


def test_the_client_of_the_settings():
    s = ClientSettings(**{"bootstrap.servers": "h:1,h:2", "client.id": "etl", "request.timeout.ms": 2500,
                          "enable.idempotence": "false", "sasl.oauthbearer.token": "eyJ.a.b"})
    with s.client() as client:
        assert client.urls == ["http://h:1", "http://h:2"] and client.timeout_s == 2.5 and client.producer is None
        request = client.http.build_request("GET", "/topics")
        assert request.headers[CLIENT_ID_HEADER] == "etl"
        assert next(client.auth.auth_flow(request)).headers["Authorization"] == "Bearer eyJ.a.b"
    with s.client(enable_idempotence=True) as client:  # a keyword argument wins
        assert client.producer is not None


def test_a_properties_file_reaches_a_broker(broker_factory, tmp_path, topic_name):
    broker = broker_factory(extra_env={"LAKELOG_AUTHENTICATION_METHODS": "basic",
                                       "LAKELOG_INTER_BROKER_PASSWORD": "inter-broker-s3cret"})
    admin = ClientSettings(**{"bootstrap.servers": broker.url, "sasl.username": "broker",
                              "sasl.password": "inter-broker-s3cret"})
    with admin.client() as client:
        client.security.upsert_user("alice", "alice-pw")
    good = _properties(tmp_path, f"bootstrap.servers={broker.url}\nsasl.username=alice\nsasl.password=alice-pw\n")
    with ClientSettings.from_properties(good).client() as alice:
        alice.admin.create_topic(topic_name, partitions=1)
        assert topic_name in alice.admin.list_topics()
    wrong = _properties(tmp_path, f"bootstrap.servers={broker.url}\nsasl.username=alice\nsasl.password=nope\n")
    with ClientSettings.from_properties(wrong).client() as mallory, pytest.raises(GatewayError) as refused:
        mallory.admin.list_topics()
    assert refused.value.http_status == 401


def test_every_setting_has_a_kafka_name_and_a_description():
    for name, field in ClientSettings.model_fields.items():
        dotted = field.validation_alias.choices[0]
        assert dotted == name.replace("_", "."), name
        assert (field.description or "").startswith(f"{dotted}:"), name
