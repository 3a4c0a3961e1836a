"""Errors of ZooKeeper coordination and replication (:mod:`lakelog.replication`), re-exported by
``lakelog.replication.errors``."""

from __future__ import annotations

from lakelog.errors.base import LakelogError

__all__ = ["BrokerIdInUseError", "CommitterLeaseHeldError", "ControllerFencedError", "InvalidPartitionsError",
           "InvalidReplicationFactorError", "InvalidRequiredAcksError", "InvalidTopicError",
           "LeaderNotAvailableError", "NotEnoughReplicasAfterAppendError", "NotEnoughReplicasError",
           "NotLeaderError", "PolicyViolationError", "ReplicationError", "RequestTimedOutError", "TopicChangeConflictError",
           "TopicExistsError", "UnknownBrokerError", "UnknownLeaderEpochError", "UnknownPartitionError",
           "UnknownReplicaError", "UnknownTopicConfigError", "UnknownTopicError", "ZooKeeperStartError",
           "ZooKeeperUnavailableError"]


class ReplicationError(LakelogError):
    """Coordination or replication through ZooKeeper failed."""


class ZooKeeperStartError(ReplicationError):
    """The embedded ZooKeeper server could not be started.

    Raised when Java or the ZooKeeper jars cannot be found, when the client port is taken, or when the
    server process exits or does not answer within the start timeout. The message ends with the tail of
    the server's log. Retriable: the cause (a busy port, a slow machine) is often transient.
    """

    http_status = 503
    error_code = 50303
    retriable = True


class ZooKeeperUnavailableError(ReplicationError):
    """The broker lost its ZooKeeper connection or session (kazoo ``ConnectionLoss``,
    ``SessionExpiredError``, a timeout) while answering; it reconnects by itself. 503 / 50304, retriable."""

    http_status = 503
    error_code = 50304
    retriable = True


class BrokerIdInUseError(ReplicationError):
    """Another live broker is registered with this broker.id."""

    http_status = 409
    error_code = 40913


class UnknownTopicError(ReplicationError):
    """Topic not found. Kafka: UNKNOWN_TOPIC_OR_PARTITION (3). REST Proxy: 40401."""

    http_status = 404
    error_code = 40401

    def __init__(self, topic: str) -> None:
        super().__init__(f"Topic '{topic}' not found.")
        self.topic = topic


class UnknownPartitionError(ReplicationError):
    """Partition not found. Kafka: UNKNOWN_TOPIC_OR_PARTITION (3). REST Proxy: 40402."""

    http_status = 404
    error_code = 40402

    def __init__(self, topic: str, partition: int, partitions_count: int) -> None:
        super().__init__(f"Partition {partition} of topic '{topic}' not found: the topic has partitions "
                         f"0 to {partitions_count - 1}.")


class UnknownBrokerError(ReplicationError):
    """No live broker has this id (no registration under ``/lakelog/brokers/ids``): never started, stopped,
    or its ZooKeeper session ended (``GET /v3/clusters/{c}/brokers/{id}``). REST Proxy answers 404 for
    it; 404 / 40410."""

    http_status = 404
    error_code = 40410

    def __init__(self, broker_id: int) -> None:
        super().__init__(f"Broker {broker_id} not found: no live broker is registered with that id.")
        self.broker_id = broker_id


class UnknownReplicaError(ReplicationError):
    """The broker holds no replica of the partition: it is not in the partition's replica assignment
    (``GET /v3/clusters/{c}/topics/{t}/partitions/{p}/replicas/{id}``). REST Proxy answers 404 for it;
    404 / 40411."""

    http_status = 404
    error_code = 40411

    def __init__(self, topic: str, partition: int, broker_id: int, replicas: list[int]) -> None:
        super().__init__(f"Broker {broker_id} holds no replica of partition {partition} of topic '{topic}'; "
                         f"its replicas are on brokers {replicas}.")


class LeaderNotAvailableError(ReplicationError):
    """The partition has no leader on a live broker right now. Kafka: LEADER_NOT_AVAILABLE (5). REST Proxy:
    404 / 40404 (``LEADER_NOT_AVAILABLE_ERROR_CODE``, kafka-rest ``Errors.java``)."""

    http_status = 404
    error_code = 40404
    retriable = True


class NotLeaderError(ReplicationError):
    """This broker is not the partition's leader. Kafka: NOT_LEADER_OR_FOLLOWER (6).

    Answered with 421 Misdirected Request; the message names the leader's URL, and the body carries
    ``leader_id`` and ``leader_url`` (when known) so a client can go straight to the leader.
    """

    http_status = 421
    error_code = 42101
    retriable = True

    def __init__(self, message: str | None = None, *, leader_id: int | None = None,
                 leader_url: str | None = None) -> None:
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_url = leader_url

    @classmethod
    def from_body(cls, message: str, body: dict) -> "NotLeaderError":
        err = super().from_body(message, body)
        err.leader_id = body.get("leader_id")
        err.leader_url = body.get("leader_url")
        return err

    def to_body(self) -> dict:
        body = super().to_body()
        if self.leader_id is not None:
            body["leader_id"] = self.leader_id
            body["leader_url"] = self.leader_url
        return body


class TopicExistsError(ReplicationError):
    """The topic already exists. Kafka: TOPIC_ALREADY_EXISTS (36). REST Proxy v3: 400 / 40002."""

    http_status = 400
    error_code = 40002


class InvalidTopicError(ReplicationError):
    """The topic name is not valid. Kafka: INVALID_TOPIC_EXCEPTION (17)."""

    http_status = 400
    error_code = 40004


class PolicyViolationError(ReplicationError):
    """The request goes against the topic's configured policy: records deleted (DeleteRecords) from a topic
    whose ``cleanup.policy`` is ``compact`` alone. Nothing was changed. Kafka: POLICY_VIOLATION (44).
    400 / 40030."""

    http_status = 400
    error_code = 40030


class InvalidPartitionsError(ReplicationError):
    """The number of partitions is not valid. Kafka: INVALID_PARTITIONS (37)."""

    http_status = 400
    error_code = 40005


class InvalidReplicationFactorError(ReplicationError):
    """The replication factor is not valid (e.g. more than the live brokers). Kafka: INVALID_REPLICATION_FACTOR (38)."""

    http_status = 400
    error_code = 40006


class NotEnoughReplicasError(ReplicationError):
    """The ISR is smaller than the topic's ``min.insync.replicas``: an ``acks=all`` produce is refused
    before anything is written. Kafka: NOT_ENOUGH_REPLICAS (19). Retriable (the ISR may grow back)."""

    http_status = 503
    error_code = 50310
    retriable = True


class NotEnoughReplicasAfterAppendError(ReplicationError):
    """The batch was written by the leader but did not reach ``min.insync.replicas`` replicas in
    ``request.timeout.ms``; it may or may not become committed. Kafka: NOT_ENOUGH_REPLICAS_AFTER_APPEND (20).
    Retriable (a retry may duplicate the batch)."""

    http_status = 503
    error_code = 50311
    retriable = True


class RequestTimedOutError(ReplicationError):
    """The batch was written by the leader, but the high watermark did not pass it within
    ``request.timeout.ms``. Kafka: REQUEST_TIMED_OUT (7). Retriable (a retry may duplicate the batch)."""

    http_status = 504
    error_code = 50401
    retriable = True


class InvalidRequiredAcksError(ReplicationError):
    """``acks`` is not 0, 1, all (or -1). Kafka: INVALID_REQUIRED_ACKS (21)."""

    http_status = 400
    error_code = 40007


class UnknownLeaderEpochError(ReplicationError):
    """A replica request names a leader epoch newer than this broker knows (it has not yet seen the
    state change). Kafka: UNKNOWN_LEADER_EPOCH (76). Retriable."""

    http_status = 409
    error_code = 40912
    retriable = True


class UnknownTopicConfigError(ReplicationError):
    """The config name is not a topic config (``GET /v3/clusters/{c}/topics/{t}/configs/{name}``).
    REST Proxy answers 404 for it; 404 / 40440."""

    http_status = 404
    error_code = 40440


class TopicChangeConflictError(ReplicationError):
    """A topic's znode kept changing (other alters, partitions added) while this change was being
    written; nothing of this change was written. 409 / 40940, retriable."""

    http_status = 409
    error_code = 40940
    retriable = True


class CommitterLeaseHeldError(ReplicationError):
    """Another outside committer (a maintenance job) held the partition table's committer lease
    (``/lakelog/leases/{topic}-{partition}``) for the whole wait. The message names the holder. 409 / 40914,
    retriable: run the job again once the other one is done."""

    http_status = 409
    error_code = 40914
    retriable = True


class ControllerFencedError(ReplicationError):
    """A newer controller has written partition state: this one must step down. Kafka:
    ``ControllerMovedException`` (NOT_CONTROLLER, 41). Raised by
    :func:`lakelog.replication.controller.update_partitions`; the controller that meets it resigns, so no
    request answers it today. 503 / 50312, retriable: the new controller does the work.

    Attributes:
        newer_epoch: the controller epoch found in the partition state.
    """

    http_status = 503
    error_code = 50312
    retriable = True

    def __init__(self, newer_epoch: int) -> None:
        super().__init__(f"a controller with epoch {newer_epoch} is active")
        self.newer_epoch = newer_epoch
