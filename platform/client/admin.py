"""Requests about topics, their configs and partitions: :class:`AdminClient`, :attr:`LakelogClient.admin
<lakelog.client.LakelogClient.admin>` (Kafka's ``Admin`` topic and config operations; ``kafka-topics``,
``kafka-configs --entity-type topics``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakelog.client.transport import LakelogClient

__all__ = ["AdminClient"]


class AdminClient:
    """Topic and config requests of one :class:`~lakelog.client.LakelogClient` (its transport sends them).

    Every method raises :class:`~lakelog.client.GatewayError` (the server's error class) for an error
    answer and ``ConnectionError`` when no gateway answers.
    """

    def __init__(self, transport: "LakelogClient") -> None:
        self.transport = transport

    def list_topics(self) -> list[str]:
        """The topics' names (``GET /topics``; internal topics too)."""
        return self.transport.request("GET", "/topics").json()

    def create_topic(self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
                     configs: dict[str, str] | None = None) -> dict:
        """Create ``name`` (``POST /v3/clusters/{c}/topics``); None: the broker's ``num.partitions`` /
        ``default.replication.factor``. ``configs``: Kafka-named topic configs (``{"retention.ms": "1000"}``).

        Returns:
            REST Proxy's ``KafkaTopic``.

        Raises:
            GatewayError: TopicExistsError (40002), ConfigError (40003), InvalidReplicationFactorError (40006).
        """
        body = {"topic_name": name, "partitions_count": partitions, "replication_factor": replication_factor,
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        return self.transport.request("POST", f"/v3/clusters/{self.transport.cluster_id}/topics", json=body).json()

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` (``DELETE /v3/clusters/{c}/topics/{t}``). Raises GatewayError (UnknownTopicError 40401)."""
        self.transport.request("DELETE", f"/v3/clusters/{self.transport.cluster_id}/topics/{name}")

    def brokers(self) -> list[dict]:
        """The live brokers (``GET /v3/clusters/{c}/brokers``): each REST Proxy's ``KafkaBroker`` with
        ``broker_id``, ``host``, ``port`` (its gateway), ``rack`` and ``endpoints``, its Kafka listeners
        (``PLAINTEXT://host:port``; empty when it opens none)."""
        return self.transport.request("GET", f"/v3/clusters/{self.transport.cluster_id}/brokers").json()["data"]

    def describe_topic(self, name: str) -> dict:
        """REST Proxy v2's topic (``GET /topics/{t}``: ``name``, ``configs``, ``partitions`` with leaders and replicas)."""
        return self.transport.request("GET", f"/topics/{name}").json()

    def topic_configs(self, topic: str) -> dict[str, dict]:
        """Every config of ``topic`` with its effective value (``GET /v3/clusters/{c}/topics/{t}/configs``).

        Returns:
            ``{name: entry}``; each entry is REST Proxy's ``KafkaTopicConfig`` (``value`` a string,
            ``is_default``, ``source``: ``DYNAMIC_TOPIC_CONFIG`` when set on the topic,
            ``STATIC_BROKER_CONFIG`` when the broker's settings give it (``log.retention.ms``, ...), else
            ``DEFAULT_CONFIG``; ``synonyms``, ...).

        Raises:
            GatewayError (UnknownTopicError 40401).
        """
        data = self.transport.request(
            "GET", f"/v3/clusters/{self.transport.cluster_id}/topics/{topic}/configs").json()["data"]
        return {entry["name"]: entry for entry in data}

    def alter_topic_configs(self, topic: str, *, set: dict[str, str] | None = None,
                            delete: Sequence[str] | None = None, validate_only: bool = False) -> None:
        """Set and delete configs of ``topic`` in one all-or-nothing change (``kafka-configs --alter
        --add-config k=v --delete-config k``; ``POST .../configs:alter``). Running brokers apply it without
        a restart; a deleted config goes back to its default (the broker's setting, as ``log.retention.ms``
        for ``retention.ms``, where it has one).

        Args:
            topic: the topic.
            set: Kafka-named configs and their new values (``{"retention.ms": "86400000"}``).
            delete: configs to delete.
            validate_only: check the change, write nothing.

        Raises:
            GatewayError: UnknownTopicError (40401); ConfigError (40003) naming an unknown key, an
            invalid value or a key both set and deleted, nothing written.
        """
        body = {"data": [{"name": k, "value": v, "operation": "SET"} for k, v in (set or {}).items()]
                + [{"name": k, "operation": "DELETE"} for k in (delete or [])], "validate_only": validate_only}
        self.transport.request("POST", f"/v3/clusters/{self.transport.cluster_id}/topics/{topic}/configs:alter",
                               json=body)

    def add_partitions(self, topic: str, *, partitions_count: int) -> dict:
        """Grow ``topic`` to ``partitions_count`` partitions in total (``kafka-topics --alter --partitions``;
        ``PATCH /v3/clusters/{c}/topics/{t}``). The new partitions get leaders and take records at once;
        keyed records may map to other partitions from then on (murmur2 over the new count).

        Returns:
            The topic, REST Proxy's ``KafkaTopic`` (``partitions_count``, ``replication_factor``, ...).

        Raises:
            GatewayError: InvalidPartitionsError (40005) when ``partitions_count`` is not above the
            current count; UnknownTopicError (40401); InvalidReplicationFactorError (40006).
        """
        return self.transport.request("PATCH", f"/v3/clusters/{self.transport.cluster_id}/topics/{topic}",
                                      json={"partitions_count": partitions_count}).json()

    def delete_records(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Delete the records below an offset of each partition (Kafka's ``Admin.deleteRecords``,
        ``kafka-delete-records``; ``POST /v3/clusters/{c}/topics/{t}/records:delete``, one request per topic).

        Args:
            offsets: ``{(topic, partition): offset}``: each partition's log is to start at ``offset``
                (at most its high watermark); -1 means the high watermark.

        Returns:
            ``{(topic, partition): low_watermark}``: each partition's log start offset afterwards.

        Raises:
            GatewayError: AuthorizationError (40301, no Delete on the topic), UnknownTopicError (40401),
            UnknownPartitionError (40402), OffsetOutOfRangeError (an offset above the high watermark),
            PolicyViolationError (40030, a topic with cleanup.policy=compact alone); nothing of that
            topic's request deleted. Retrying is safe: a log start offset never moves back.
        """
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_id": partition, "offset": offset})
        out = {}
        for topic, partitions in by_topic.items():
            answer = self.transport.request(
                "POST", f"/v3/clusters/{self.transport.cluster_id}/topics/{topic}/records:delete",
                json={"partitions": partitions}).json()
            out.update({(topic, p["partition_id"]): p["low_watermark"] for p in answer["partitions"]})
        return out

    def partition_offsets(self, topic: str, partition: int, *, timestamp_ms: int | None = None) -> dict:
        """``{"beginning_offset", "end_offset", "last_stable_offset"}`` (log start offset, high watermark, the
        first offset of an open transaction, at most the HW: read_committed's end) of a partition, plus
        ``offset_for_timestamp`` with ``timestamp_ms``: the first offset whose record timestamp is at or
        after it (ms since the epoch), the high watermark when none is (Kafka's ListOffsets by timestamp).

        Raises: UnknownTopicError (40401), UnknownPartitionError, LeaderNotAvailableError (retriable)."""
        params = {} if timestamp_ms is None else {"timestamp_ms": timestamp_ms}
        return self.transport.request("GET", f"/topics/{topic}/partitions/{partition}/offsets", params=params).json()

    def topic_logs(self, topic: str) -> list[dict]:
        """Each partition's Delta table and offsets on its leader (``GET /lakelog/v1/topics/{t}/logs``)."""
        return self.transport.request("GET", f"/lakelog/v1/topics/{topic}/logs").json()
