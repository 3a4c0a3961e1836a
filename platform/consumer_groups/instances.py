"""A REST Proxy v2 consumer instance: its configuration, subscription, assignment and positions.

An instance is the HTTP counterpart of a ``KafkaConsumer``: created by ``POST /consumers/{group}``,
it lives in the broker process that created it (REST Proxy's model; its ``base_uri`` points there)
until it is deleted or has served no request for ``consumer.instance.timeout.ms``.

State, all touched only from the broker's event loop:

- ``owned``: partitions the instance may read now (its current assignment); ``positions`` holds the
  next offset to read of each (Kafka's *position*);
- ``pending``: partitions assigned to it in the current generation that it may read only once every
  member has revoked what it loses (see :mod:`lakelog.consumer_groups.membership`);
- ``generation``: the group generation it belongs to (None when it is not a group member: not
  subscribed, or manually assigned); its offset commits carry it. ``acked_generation``: the
  generation whose revocation it has acknowledged in ZooKeeper.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Literal

from lakelog.consumer_groups.assignors import TopicPartition
from lakelog.consumer_groups.errors import InvalidConsumerInstanceNameError, InvalidGroupIdError

EmbeddedFormat = Literal["binary", "json", "avro", "jsonschema", "protobuf"]
OffsetReset = Literal["earliest", "latest"]
#: Kafka's consumer ``isolation.level`` (:data:`lakelog.log_tables.transaction_index.IsolationLevel`).
IsolationLevel = Literal["read_uncommitted", "read_committed"]
#: Keeps, of some topic names, those a consumer instance's principal may read (set where ACLs are checked).
TopicFilter = Callable[[list[str]], list[str]]

#: Kafka's ``auto.commit.interval.ms`` default: with auto commit, positions are committed on a
#: records request at most this often (and always on revocation and close).
AUTO_COMMIT_INTERVAL_MS = 5000


#: REST Proxy's characters of a consumer instance name (the name is a URL path segment).
INSTANCE_NAME_PATTERN = r"^[A-Za-z0-9._\-:@]+$"
#: The longest group id and instance name: Kafka's topic-name limit (each is one ZooKeeper znode name, like
#: a topic's, and a URL path segment; 10,000-character ids made 10 kB znode paths and URLs).
MAX_GROUP_ID_LENGTH = 249
MAX_INSTANCE_NAME_LENGTH = 249


def _zookeeper_refuses(ch: str) -> bool:
    """Characters ZooKeeper refuses in a path (``PathUtils.validatePath``; Java chars, so every
    character above U+FFFF, a surrogate pair there, is refused too)."""
    c = ord(ch)
    return c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or c >= 0xFFF0


def validate_group_id(group: str) -> None:
    """Refuse a group id that cannot be one ZooKeeper znode name (Kafka takes any non-empty string).

    Raises:
        InvalidGroupIdError: empty, ``.``, ``..``, longer than :data:`MAX_GROUP_ID_LENGTH`, with a ``/`` or
            a character ZooKeeper refuses (400 / 40008).
    """
    if group in ("", ".", ".."):
        raise InvalidGroupIdError(f"Group id {group!r} is not allowed: it must not be empty, '.' or '..'.")
    if len(group) > MAX_GROUP_ID_LENGTH:
        raise InvalidGroupIdError(f"Group id is {len(group)} characters; the limit is {MAX_GROUP_ID_LENGTH}.")
    bad = sorted({ch for ch in group if ch == "/" or _zookeeper_refuses(ch)})
    if bad:
        raise InvalidGroupIdError(f"Group id {group!r} is not allowed: it contains {', '.join(map(repr, bad))} "
                                  f"('/' and the characters ZooKeeper refuses in a path are not allowed).")


def validate_instance_name(name: str) -> None:
    """Refuse a consumer instance name that is not a REST Proxy name or is ``.`` / ``..``.

    Raises:
        InvalidConsumerInstanceNameError: 422 / 42209.
    """
    if name in (".", "..") or len(name) > MAX_INSTANCE_NAME_LENGTH or not re.fullmatch(INSTANCE_NAME_PATTERN, name):
        raise InvalidConsumerInstanceNameError(
            f"Invalid consumer configuration: instance name {name!r} is not allowed: use ASCII letters, digits, "
            f"'.', '_', '-', ':' and '@', at most {MAX_INSTANCE_NAME_LENGTH} of them, and not '.' or '..' alone.")


@dataclass(eq=False)
class ConsumerInstance:
    """One consumer instance (REST Proxy v2 ``ConsumerInstanceConfig`` plus its consumer state).

    Attributes:
        group, name: the consumer group and the instance's name (its member id in the group).
        format: ``binary`` (base64 keys and values), ``json`` (embedded JSON), or ``avro`` / ``jsonschema``
            / ``protobuf`` (records in Confluent's wire format, answered as their JSON).
        auto_offset_reset: where to start a partition without a committed offset (``earliest``,
            ``latest``). Kafka's default: ``latest``.
        auto_commit: ``auto.commit.enable``: commit positions every ``auto.commit.interval.ms`` on
            reads, before partitions are revoked and on close. Kafka's default: true.
        fetch_min_bytes: a records request returns once it has this many bytes (or at its timeout).
        request_timeout_ms: default ``timeout`` of a records request (``consumer.request.timeout.ms``).
        assignor: the ``partition.assignment.strategy`` it asks the group for.
        isolation_level: Kafka's ``isolation.level``: ``read_uncommitted`` (Kafka's default) reads below the
            high watermark, open and aborted transactions included; ``read_committed`` below the last
            stable offset, no aborted records ("latest" is then the last stable offset). Neither reads
            transaction markers; positions move past them.
        principal: who created it (``User:name``); only that principal may use it. Default: ``User:ANONYMOUS``.
        topic_filter: keeps, of the topics a pattern matches, those the principal may read (set where ACLs
            are checked; Kafka's consumers see only the topics their metadata shows). Default: None (all).
    """

    group: str
    name: str
    format: EmbeddedFormat = "binary"
    auto_offset_reset: OffsetReset = "latest"
    auto_commit: bool = True
    fetch_min_bytes: int = 1
    request_timeout_ms: int = 1000
    assignor: str = "range"
    isolation_level: IsolationLevel = "read_uncommitted"
    principal: str = "User:ANONYMOUS"
    topic_filter: TopicFilter | None = None
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # subscription: explicit topics, a pattern, or a manual assignment (mutually exclusive)
    topics: list[str] | None = None
    pattern: re.Pattern | None = None
    manual: bool = False
    # assignment and positions
    generation: int | None = None
    acked_generation: int | None = None  # the generation whose revocation ack is written (rebalance step 2)
    owned: set[TopicPartition] = field(default_factory=set)
    pending: set[TopicPartition] = field(default_factory=set)
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    closed: bool = False
    last_used: float = field(default_factory=time.monotonic)
    last_auto_commit: float = field(default_factory=time.monotonic)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    rotation: int = 0

    @property
    def subscribed(self) -> bool:
        """True when subscribed to topics or a pattern (a group member)."""
        return self.topics is not None or self.pattern is not None

    def touch(self) -> None:
        """Record a request on the instance (restarts its ``consumer.instance.timeout.ms`` clock)."""
        self.last_used = time.monotonic()

    def idle_ms(self, now: float | None = None) -> float:
        """Milliseconds since its last request."""
        return ((now if now is not None else time.monotonic()) - self.last_used) * 1000.0

    def matching_topics(self, all_topics: list[str]) -> list[str]:
        """The topics of its subscription: the explicit list, or the existing topics its pattern matches
        in full (Java ``Pattern.matcher(topic).matches()``), sorted."""
        if self.pattern is not None:
            matched = sorted(t for t in all_topics if self.pattern.fullmatch(t))
            return matched if self.topic_filter is None else self.topic_filter(matched)
        return sorted(self.topics or [])

    def notify(self) -> None:
        """Wake a records request waiting on this instance (its assignment changed)."""
        event, self.changed = self.changed, asyncio.Event()
        event.set()

    def revoke(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """Stop reading ``partitions``; returns their positions (what auto commit commits)."""
        positions = {tp: self.positions[tp] for tp in partitions if tp in self.positions}
        self.owned -= partitions
        self.pending -= partitions
        for tp in partitions:
            self.positions.pop(tp, None)
        self.notify()
        return positions

    def activate(self, positions: dict[TopicPartition, int]) -> None:
        """Start reading the given partitions at the given offsets."""
        self.positions.update(positions)
        self.owned |= set(positions)
        self.pending -= set(positions)
        self.notify()

    def consumed_positions(self) -> dict[TopicPartition, int]:
        """The positions of the owned partitions: what an empty offset commit commits."""
        return {tp: self.positions[tp] for tp in sorted(self.owned) if tp in self.positions}

    def auto_commit_due(self, now: float | None = None) -> bool:
        """True when auto commit is on and ``auto.commit.interval.ms`` passed since the last one."""
        now = now if now is not None else time.monotonic()
        return self.auto_commit and (now - self.last_auto_commit) * 1000.0 >= AUTO_COMMIT_INTERVAL_MS
