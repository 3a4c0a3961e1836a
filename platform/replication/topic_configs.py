"""Topic configs as the admin sees them: where each value comes from (the topic, the broker's settings,
the built-in default; Kafka's ``ConfigEntry.ConfigSource`` and synonyms) and how a change of them
(Kafka's incremental alter: SET and DELETE) is checked and merged before it is written to the topic znode
(:meth:`ClusterMetadata.alter_topic_configs <lakelog.replication.metadata.ClusterMetadata.alter_topic_configs>`).
Only the configs set on a topic are stored; the broker's defaults are applied where configs are parsed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lakelog.config import TOPIC_CONFIG_BROKER_SYNONYMS, TopicConfig
from lakelog.errors import ConfigError

#: ``source`` of a topic config entry (Kafka's ``ConfigEntry.ConfigSource``): set on the topic, the
#: broker's default (``message.max.bytes``, ``log.retention.ms``, ``log.retention.bytes`` in its
#: settings), or the built-in default.
DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"

#: operations of a topic config change (Kafka's ``AlterConfigOp.OpType`` SET and DELETE)
SET = "SET"
DELETE = "DELETE"
#: one change of :func:`altered_configs`: ``(name, SET, value)`` or ``(name, DELETE, None)``
ConfigChange = tuple[str, str, str | None]


@dataclass(frozen=True)
class TopicConfigSynonym:
    """Where a config value may come from, in precedence order (Kafka's ``ConfigEntry.ConfigSynonym``)."""

    name: str
    value: str
    source: str


@dataclass(frozen=True)
class TopicConfigEntry:
    """One topic config as ``kafka-configs --describe`` shows it: its effective value, whether that is the
    default, and its source (:data:`DYNAMIC_TOPIC_CONFIG`, :data:`STATIC_BROKER_CONFIG` or :data:`DEFAULT_CONFIG`)."""

    name: str
    value: str
    is_default: bool
    source: str
    synonyms: list[TopicConfigSynonym]


def known_configs() -> list[str]:
    """The Kafka names of every topic config, sorted."""
    return sorted(TopicConfig().to_kafka())


def explicit_configs(configs: dict[str, str], *, defaults: dict[str, str] | None = None) -> dict[str, str]:
    """The configs to store on a topic: ``configs`` validated over ``defaults`` (:meth:`TopicConfig.parse`),
    only the keys given, with their normalised values (``cleanup.policy=delete, compact`` ->
    ``compact,delete``), sorted by name.

    Raises:
        ConfigError: naming the key: an unknown key, a value that does not validate.
    """
    normalised = TopicConfig.parse(configs, defaults=defaults).to_kafka()
    return {k: normalised[k] for k in sorted(configs)}


def config_changes(*, set: dict[str, str] | None = None, delete: Iterable[str] | None = None) -> list[ConfigChange]:
    """``set`` and ``delete`` as :data:`ConfigChange` tuples (SETs first)."""
    return [(k, SET, v) for k, v in (set or {}).items()] + [(k, DELETE, None) for k in delete or []]


def altered_configs(current: dict[str, str], changes: Iterable[ConfigChange], *,
                    defaults: dict[str, str] | None = None) -> dict[str, str]:
    """The explicit configs after ``changes`` (Kafka's incremental alter: SET and DELETE), each
    ``(name, "SET", value)`` or ``(name, "DELETE", None)``.

    The merged result is validated over ``defaults`` (:func:`explicit_configs`). A deleted config goes
    back to its default (the broker's, else the built-in one); deleting one that is not set changes
    nothing.

    Raises:
        ConfigError: naming the key: a key named twice (both set and deleted, or twice the same), an
            unknown key (to set or delete), a SET without a value, an unknown operation, a value that
            does not validate.
    """
    known = known_configs()
    to_set: dict[str, str] = {}
    to_delete: set[str] = set()
    seen: dict[str, str] = {}
    for key, operation, value in changes:
        if key in seen:
            if {seen[key], operation} == {SET, DELETE}:
                raise ConfigError(f"Invalid configuration: config '{key}' is both set and deleted in one request.")
            raise ConfigError(f"Invalid configuration: config '{key}' appears more than once in one request.")
        seen[key] = operation
        if operation == SET:
            if value is None:
                raise ConfigError(f"Invalid configuration: config '{key}' is set without a value.")
            to_set[key] = value
        elif operation == DELETE:
            if key not in known:
                raise ConfigError(f"Invalid configuration: unknown config '{key}' (known: {', '.join(known)})")
            to_delete.add(key)
        else:
            raise ConfigError(f"Invalid configuration: config '{key}': unknown operation {operation!r} "
                              f"(SET or DELETE).")
    merged = {k: v for k, v in {**current, **to_set}.items() if k not in to_delete}
    return explicit_configs(merged, defaults=defaults)


def config_entries(configs: dict[str, str], *, defaults: dict[str, str] | None = None) -> list[TopicConfigEntry]:
    """Every topic config with its effective value, sorted by name (``kafka-configs --describe --all``):
    ``configs`` set on the topic over the broker's ``defaults`` over the built-in ones.

    As Kafka: a config set on the topic has source DYNAMIC_TOPIC_CONFIG; one the broker's settings give
    (``retention.ms`` from ``log.retention.ms``, ...) STATIC_BROKER_CONFIG; those two are not defaults
    (``is_default`` false). Any other has source DEFAULT_CONFIG. The synonyms list where the value may
    come from, highest precedence first: the topic's own, the broker setting (under its broker name),
    the built-in default.

    Raises:
        ConfigError: the configs do not validate.
    """
    defaults = defaults or {}
    effective = TopicConfig.parse(configs, defaults=defaults).to_kafka()
    builtin = TopicConfig().to_kafka()
    out = []
    for name in sorted(effective):
        synonyms = [TopicConfigSynonym(name, builtin[name], DEFAULT_CONFIG)]
        if name in defaults:
            synonyms.insert(0, TopicConfigSynonym(TOPIC_CONFIG_BROKER_SYNONYMS.get(name, name), defaults[name],
                                                  STATIC_BROKER_CONFIG))
        if name in configs:
            synonyms.insert(0, TopicConfigSynonym(name, effective[name], DYNAMIC_TOPIC_CONFIG))
            out.append(TopicConfigEntry(name, effective[name], False, DYNAMIC_TOPIC_CONFIG, synonyms))
        elif name in defaults:
            out.append(TopicConfigEntry(name, effective[name], False, STATIC_BROKER_CONFIG, synonyms))
        else:
            out.append(TopicConfigEntry(name, effective[name], True, DEFAULT_CONFIG, synonyms))
    return out
