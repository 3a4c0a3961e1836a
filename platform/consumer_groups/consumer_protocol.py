"""The ``consumer`` protocol's member metadata and assignments, read for the group views.

Kafka consumers (protocol type ``consumer``) put their subscription in JoinGroup's member metadata and
the leader puts each member's partitions in SyncGroup's assignments, both opaque to the coordinator and
encoded as Kafka's ``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``
(clients/src/main/resources/common/message/ConsumerProtocol*.json, never flexible): an int16 version,
then a topics array (int32 count, int16-length strings; the assignment's with an int32 array of
partitions each). Only these leading fields are read: later versions add fields after them. The
coordinator never needs them; ``lakelog groups describe`` and the v3 views show them.
"""

from __future__ import annotations

import struct

from lakelog.consumer_groups.assignors import TopicPartition

__all__ = ["assigned_partitions", "subscribed_topics"]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.take(">h")
        if n < 0:
            return ""
        value = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return value

    def count(self) -> int:
        n = self.take(">i")
        if n > len(self.data) - self.pos:  # each element takes at least one byte: a count larger is corrupt
            raise ValueError("array count beyond the data")
        return max(n, 0)


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics of a ``consumer`` member's subscription ([] when the bytes are not one)."""
    try:
        r = _Reader(metadata)
        r.take(">h")
        return [r.string() for _ in range(r.count())]
    except (struct.error, ValueError):
        return []


def assigned_partitions(assignment: bytes) -> list[TopicPartition]:
    """The ``(topic, partition)`` pairs of a ``consumer`` member's assignment, sorted ([] when the bytes
    are not one, e.g. an empty assignment)."""
    try:
        r = _Reader(assignment)
        r.take(">h")
        out = []
        for _ in range(r.count()):
            topic = r.string()
            out.extend((topic, r.take(">i")) for _ in range(r.count()))
        return sorted(out)
    except (struct.error, ValueError):
        return []
