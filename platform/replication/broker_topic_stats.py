"""Per-topic request and traffic counters of one broker (Kafka's ``BrokerTopicStats``).

Kafka's ``kafka.server:type=BrokerTopicMetrics`` meters, kept as plain integers: the hot path adds to
them once per request or group commit (never per record) and ``GET /metrics`` reads them as Prometheus
counters (:func:`lakelog.replication.broker_metrics.replication_metrics`).

- messages and bytes in: every leader group commit (produce requests, internal topics; not transaction
  markers), as Kafka counts ``MessagesInPerSec`` / ``BytesInPerSec`` on the leader's append;
- bytes out: every consumer fetch's answer (``BytesOutPerSec``);
- produce and fetch requests, total and failed (``TotalProduceRequestsPerSec``,
  ``FailedProduceRequestsPerSec``, ``TotalFetchRequestsPerSec``, ``FailedFetchRequestsPerSec``), counted by
  :func:`counted_requests` around the replica manager's produce and the consumer fetch, failed only for
  unexpected errors, as Kafka's.

Bytes are Arrow bytes of the records (Kafka counts wire bytes of record batches).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from lakelog.log_tables.errors import FencedLeaderEpochError, OffsetOutOfRangeError
from lakelog.replication.errors import (
    LeaderNotAvailableError,
    NotLeaderError,
    UnknownLeaderEpochError,
    UnknownPartitionError,
    UnknownTopicError,
)

__all__ = ["BrokerTopicStats", "TopicCounters", "counted_requests"]

T = TypeVar("T")


@dataclass(slots=True)
class TopicCounters:
    """One topic's counters since the broker started."""

    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    produce_requests: int = 0
    failed_produce_requests: int = 0
    fetch_requests: int = 0
    failed_fetch_requests: int = 0


class BrokerTopicStats:
    """The counters of every topic this broker served, by topic name."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}

    def topic(self, name: str) -> TopicCounters:
        """The counters of ``name`` (created at zero on first use)."""
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def appended(self, topic: str, *, records: int, nbytes: int) -> None:
        """A leader append of ``records`` records (``nbytes`` Arrow bytes) to a partition of ``topic``."""
        counters = self.topic(topic)
        counters.messages_in += records
        counters.bytes_in += nbytes

    def drop(self, topic: str) -> None:
        """Forget a deleted topic's counters (Kafka removes its topic metrics on deletion)."""
        self.topics.pop(topic, None)


#: A request another broker serves (it is forwarded or answered 421) or that names no partition: not counted.
NOT_THIS_BROKERS = (NotLeaderError, LeaderNotAvailableError, UnknownTopicError, UnknownPartitionError)
#: Expected answers, counted as requests but not as failed ones: Kafka's ReplicaManager leaves OffsetOutOfRange
#: and the leader-epoch errors out of FailedFetchRequestsPerSec / FailedProduceRequestsPerSec ("un-expected
#: failures" only); a cancelled request (the client went away) is not the broker's failure either.
EXPECTED = (OffsetOutOfRangeError, FencedLeaderEpochError, UnknownLeaderEpochError, asyncio.CancelledError)


def counted_requests(kind: Literal["produce", "fetch"]) -> Callable[[Callable[..., Awaitable[T]]],
                                                                    Callable[..., Awaitable[T]]]:
    """Decorate ``async def f(rm, topic, partition, ...)`` (``rm`` has ``topic_stats``: a
    :class:`BrokerTopicStats`, or None when metrics are off) to count its calls as ``kind`` requests of
    ``topic``, as Kafka's ``ReplicaManager`` counts them:

    - a request this broker does not serve (:data:`NOT_THIS_BROKERS`: not the leader, no such topic or
      partition) is not counted at all: the leader counts it when it gets it, and a client cannot grow the
      metrics with names that are no topic;
    - an :data:`EXPECTED` error counts as a request, not as a failed one;
    - any other error counts as a failed request;
    - a fetch's answer ``(rows, partition)`` adds ``rows.nbytes`` to the topic's bytes out.
    """

    def decorate(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(fn)
        async def counted(rm, topic: str, *args, **kwargs) -> T:
            stats = rm.topic_stats
            if stats is None:
                return await fn(rm, topic, *args, **kwargs)
            try:
                result = await fn(rm, topic, *args, **kwargs)
            except NOT_THIS_BROKERS:
                raise
            except BaseException as e:
                counters = stats.topic(topic)
                failed = not isinstance(e, EXPECTED)
                if kind == "produce":
                    counters.produce_requests += 1
                    counters.failed_produce_requests += failed
                else:
                    counters.fetch_requests += 1
                    counters.failed_fetch_requests += failed
                raise
            counters = stats.topic(topic)
            if kind == "produce":
                counters.produce_requests += 1
            else:
                counters.fetch_requests += 1
                counters.bytes_out += result[0].nbytes  # type: ignore[index]
            return result
        return counted
    return decorate
