"""listeners, advertised.listeners and listener.security.protocol.map as Kafka parses them."""

from __future__ import annotations

import pytest

from lakelog.config import BrokerSettings
from lakelog.errors import ConfigError
from lakelog.kafka.listeners import ListenerSpec, advertised_endpoint, parse_listeners


def test_listeners_with_names_hosts_and_ports():
    assert parse_listeners("PLAINTEXT://127.0.0.1:9092, internal://:0",
                           protocol_map="INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT") == [
        ListenerSpec("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"), ListenerSpec("INTERNAL", "", 0, "PLAINTEXT")]
    assert parse_listeners("") == []


@pytest.mark.parametrize("listeners, protocol_map, fix", [
    ("127.0.0.1:9092", "PLAINTEXT:PLAINTEXT", "NAME://host:port"),
    ("PLAINTEXT://h:70000", "PLAINTEXT:PLAINTEXT", "port 0 to 65535"),
    ("A://h:1,A://h:2", "A:PLAINTEXT", "names a listener twice"),
    ("CLIENT://h:1", "PLAINTEXT:PLAINTEXT", "add CLIENT:PLAINTEXT to listener.security.protocol.map"),
    ("SSL://h:1", "SSL:SSL", "uses SSL: set ssl.certfile"),
    ("SECURE://h:1", "SECURE:SASL_SSL", "uses SASL_SSL: set ssl.certfile"),
    ("PLAINTEXT://h:1", "PLAINTEXT:TLS", "NAME:PROTOCOL"),
])
def test_a_bad_listener_setting_says_what_to_fix(listeners, protocol_map, fix):
    with pytest.raises(ConfigError, match=fix):
        parse_listeners(listeners, protocol_map=protocol_map, has_certificate=False)


def test_every_security_protocol_is_served():
    specs = parse_listeners("PLAINTEXT://:0,SSL://:0,SASL_PLAINTEXT://:0,SASL_SSL://:0")
    assert [(s.protocol, s.tls, s.sasl) for s in specs] == [
        ("PLAINTEXT", False, False), ("SSL", True, False), ("SASL_PLAINTEXT", False, True), ("SASL_SSL", True, True)]


def test_advertised_endpoint():
    spec = ListenerSpec("PLAINTEXT", "", 0, "PLAINTEXT")
    assert advertised_endpoint(spec, bound_port=41000, advertised_listeners="", broker_host="10.0.0.5") == \
        "PLAINTEXT://10.0.0.5:41000"
    assert advertised_endpoint(spec, bound_port=41000, advertised_listeners="PLAINTEXT://kafka.example:9092",
                               broker_host="h") == "PLAINTEXT://kafka.example:9092"


def test_broker_settings_read_kafkas_listener_names():
    settings = BrokerSettings.load(listeners="PLAINTEXT://127.0.0.1:9092",
                                   advertised_listeners="PLAINTEXT://kafka.example:9092")
    assert settings.listeners == "PLAINTEXT://127.0.0.1:9092"
    assert settings.listener_security_protocol_map == "PLAINTEXT:PLAINTEXT"
