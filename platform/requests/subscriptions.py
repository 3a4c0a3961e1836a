"""The shape rules of a consumer's subscription (Kafka's ``subscribe(topics)`` / ``subscribe(pattern)``),
for every front door: REST Proxy v2 ``POST .../subscription`` today, the Kafka listener's JoinGroup next.

A subscription is exactly one of a non-empty list of topic names, each following Kafka's topic-name rule
(:func:`lakelog.replication.metadata.validate_topic_name`: ``[a-zA-Z0-9._-]{1,249}``, not ``.`` or
``..``), or a regex over topic names. A name such as ``../evil`` never reaches the group: the group's
rebalance reads each subscribed topic's znode, and ZooKeeper refuses relative paths.
"""

from __future__ import annotations

import re

from lakelog.errors import InvalidSubscriptionError
from lakelog.replication.metadata import validate_topic_name

__all__ = ["validate_subscription"]


def validate_subscription(*, topics: list[str] | None, topic_pattern: str | None) -> re.Pattern | None:
    """Check a subscription; return ``topic_pattern`` compiled (None for a topic list).

    Raises:
        InvalidSubscriptionError: neither or both of ``topics`` and ``topic_pattern``, an empty ``topics``
            list, or a pattern that does not compile (422 / 42227).
        InvalidTopicError: a topic name outside Kafka's rule (400 / 40004), naming it.
    """
    if (topics is None) == (topic_pattern is None) or (topics is not None and not topics):
        raise InvalidSubscriptionError(
            "A subscription needs either a non-empty 'topics' list or a 'topic_pattern', not both.")
    if topics is not None:
        for name in topics:
            validate_topic_name(name)
        return None
    try:
        return re.compile(topic_pattern)
    except re.error as e:
        raise InvalidSubscriptionError(f"topic_pattern {topic_pattern!r} is not a valid regex: {e}") from None
