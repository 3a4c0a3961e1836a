"""A broker's own configs as Kafka's DescribeConfigs shows a BROKER resource (``kafka-configs --describe
--entity-type brokers --entity-name 0 --all``).

lakelog's broker settings are static (``server.properties``, ``LAKELOG_*``, command-line flags), so every
entry is Kafka's STATIC_BROKER_CONFIG when it differs from the built-in default and DEFAULT_CONFIG
otherwise; there are no dynamic broker configs to alter. The entries are the settings that carry a Kafka
name (the name their description starts with, ``broker.id: ...``); a secret (``inter.broker.password``,
``lake.storage.secret.access.key``) is answered sensitive, without its value, as Kafka does.
As Kafka's ``ConfigHelper.describeConfigs``: DescribeConfigs on the cluster, and a broker answers only
its own configs (the admin client sends a broker resource to that broker).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakelog.config import BrokerSettings
from lakelog.protocol.errors import InvalidBodyFieldError
from lakelog.replication.topic_configs import DEFAULT_CONFIG, STATIC_BROKER_CONFIG
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["BrokerConfigEntry", "BrokerConfigs"]

_KAFKA_NAME = re.compile(r"([a-z0-9]+(?:\.[a-z0-9]+)*): (.*)", re.DOTALL)


@dataclass(frozen=True)
class BrokerConfigEntry:
    """One broker config: its Kafka name, value (None for a secret, or a setting left unset), source
    (STATIC_BROKER_CONFIG or DEFAULT_CONFIG), whether it is sensitive, and its documentation."""

    name: str
    value: str | None
    source: str
    is_sensitive: bool
    documentation: str


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def broker_config_entries(settings: BrokerSettings, *, defaults_only: bool = False) -> list[BrokerConfigEntry]:
    """Every Kafka-named setting of ``settings`` as a :class:`BrokerConfigEntry`, sorted by name
    (``defaults_only``: each with its built-in default, source DEFAULT_CONFIG)."""
    out = []
    for field_name, info in BrokerSettings.model_fields.items():
        match = _KAFKA_NAME.match(info.description or "")
        if match is None:
            continue
        value = info.default if defaults_only else getattr(settings, field_name)
        sensitive = "SecretStr" in str(info.annotation) or "password" in field_name
        source = STATIC_BROKER_CONFIG if value != info.default else DEFAULT_CONFIG
        out.append(BrokerConfigEntry(match.group(1), None if sensitive else _text(value), source, sensitive,
                                     match.group(2)))
    return sorted(out, key=lambda e: e.name)


class BrokerConfigs:
    """This broker's configs (Kafka's DescribeConfigs of a BROKER resource).

    Args:
        settings: the broker's settings. authorizer: the broker's ACLs (``authorizer.enabled``).
    """

    def __init__(self, *, settings: BrokerSettings, authorizer: Authorizer) -> None:
        self.settings = settings
        self.authorizer = authorizer

    async def describe_broker_configs(self, broker: str, *, context: RequestContext) -> list[BrokerConfigEntry]:
        """The configs of broker ``broker`` (its id as text, as Kafka's ConfigResource names it; empty: the
        cluster-wide defaults, which are this broker's built-in ones).

        Raises:
            AuthorizationError: 403 / 40301, no DescribeConfigs on the cluster (checked first).
            InvalidBodyFieldError: 422 / 42222, ``broker`` is not this broker's id (ask that broker).
        """
        RequestPermissions.of(self.authorizer, context).require(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
        if broker == "":
            return broker_config_entries(self.settings, defaults_only=True)
        if broker != str(self.settings.broker_id):
            raise InvalidBodyFieldError(f"Broker {broker!r} is not this broker ({self.settings.broker_id}): ask "
                                        "broker configs of the broker itself (its id as the resource name).")
        return broker_config_entries(self.settings)
