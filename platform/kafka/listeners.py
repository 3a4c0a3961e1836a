"""Kafka's listener settings: ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``.

``listeners=PLAINTEXT://127.0.0.1:9092,OTHER://:9093`` names each listener and where it binds (an empty
host: every interface; port 0: a free port the system picks); ``listener.security.protocol.map`` gives
each name's security protocol (a name that is itself a protocol maps to it when the map leaves it out, as
Kafka's default map does); ``advertised.listeners`` what the broker registers in ZooKeeper for clients
(Kafka's ``KafkaConfig.effectiveAdvertisedBrokerListeners``). Every Kafka security protocol is served:
PLAINTEXT, SSL (``ssl.certfile``), SASL_PLAINTEXT and SASL_SSL (``sasl.enabled.mechanisms``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from lakelog.errors import ConfigError

__all__ = ["SECURITY_PROTOCOLS", "ListenerSpec", "SecurityProtocol", "advertised_endpoint", "parse_listeners",
           "sasl_mechanisms_in_use"]

#: Kafka's security protocols, all served.
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SECURITY_PROTOCOLS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


@dataclass(frozen=True)
class ListenerSpec:
    """One listener: ``name`` (upper case, as Kafka), ``host`` ("" for every interface), ``port`` (0: free),
    ``protocol``."""

    name: str
    host: str
    port: int
    protocol: str

    @property
    def tls(self) -> bool:
        """Whether connections are TLS (SSL, SASL_SSL)."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        """Whether clients authenticate with SASL first (SASL_PLAINTEXT, SASL_SSL)."""
        return self.protocol.startswith("SASL_")


def _parse_map(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map entry {item!r} must be NAME:PROTOCOL with PROTOCOL "
                              f"one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def _parse(value: str, *, setting: str) -> list[tuple[str, str, int]]:
    out = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        m = _LISTENER.match(item)
        if m is None or not 0 <= int(m.group(3)) <= 65535:
            raise ConfigError(f"{setting} entry {item!r} must be NAME://host:port (host may be empty, port 0 to "
                              "65535), e.g. PLAINTEXT://127.0.0.1:9092")
        out.append((m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))))
    names = [name for name, _, _ in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{setting} names a listener twice: {value!r}; give each listener its own name")
    return out


def parse_listeners(listeners: str, *, protocol_map: str = "PLAINTEXT:PLAINTEXT",
                    has_certificate: bool = True) -> list[ListenerSpec]:
    """The listeners of ``listeners`` with their protocols (empty for an empty setting).

    Args:
        has_certificate: whether ``ssl.certfile`` is set (an SSL or SASL_SSL listener needs it).

    Raises:
        ConfigError: an entry not ``NAME://host:port``, a name twice, a name without a protocol, or a TLS
            listener without ``ssl.certfile``.
    """
    protocols = _parse_map(protocol_map)
    specs = []
    for name, host, port in _parse(listeners, setting="listeners"):
        protocol = protocols.get(name, name if name in SECURITY_PROTOCOLS else None)
        if protocol is None:
            raise ConfigError(f"listener {name} has no security protocol: add {name}:PLAINTEXT to "
                              "listener.security.protocol.map")
        spec = ListenerSpec(name, host, port, protocol)
        if spec.tls and not has_certificate:
            raise ConfigError(f"listener {name} uses {protocol}: set ssl.certfile (and ssl.keyfile) to the broker's "
                              "PEM certificate and key")
        specs.append(spec)
    return specs


def sasl_mechanisms_in_use(listeners: str, *, protocol_map: str, mechanisms: tuple[str, ...]) -> frozenset[str]:
    """``mechanisms`` (``sasl.enabled.mechanisms``) when a listener is SASL_PLAINTEXT or SASL_SSL, else none:
    what the broker's authenticator must be ready for.

    Raises:
        ConfigError: malformed listener settings (:func:`parse_listeners`).
    """
    specs = parse_listeners(listeners, protocol_map=protocol_map)
    return frozenset(mechanisms) if any(spec.sasl for spec in specs) else frozenset()


def advertised_endpoint(spec: ListenerSpec, *, bound_port: int, advertised_listeners: str,
                        broker_host: str) -> str:
    """``NAME://host:port`` the broker registers for ``spec``: its entry in ``advertised.listeners``, else its
    own host (``broker_host`` when it binds every interface) and ``bound_port``.

    Raises:
        ConfigError: a malformed ``advertised.listeners`` entry.
    """
    for name, host, port in _parse(advertised_listeners, setting="advertised.listeners"):
        if name == spec.name:
            return f"{name}://{host or broker_host}:{port or bound_port}"
    host = spec.host or broker_host
    return f"{spec.name}://{f'[{host}]' if ':' in host else host}:{bound_port}"
