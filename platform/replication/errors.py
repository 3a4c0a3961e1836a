"""Errors of ZooKeeper coordination and replication (``lakelog.replication``): the classes of
:mod:`lakelog.errors.replication` and :mod:`lakelog.errors.coordinators`, the name this package's modules
import them by."""

from __future__ import annotations

from lakelog.errors.coordinators import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
)
from lakelog.errors.replication import (
    BrokerIdInUseError,
    CommitterLeaseHeldError,
    ControllerFencedError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    LeaderNotAvailableError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    ReplicationError,
    RequestTimedOutError,
    TopicChangeConflictError,
    TopicExistsError,
    UnknownBrokerError,
    UnknownLeaderEpochError,
    UnknownPartitionError,
    UnknownReplicaError,
    UnknownTopicConfigError,
    UnknownTopicError,
    ZooKeeperStartError,
    ZooKeeperUnavailableError,
)

__all__ = ["BrokerIdInUseError", "CommitterLeaseHeldError", "ControllerFencedError",
           "CoordinatorLoadInProgressError", "InvalidPartitionsError", "InvalidReplicationFactorError",
           "InvalidRequiredAcksError", "InvalidTopicError", "LeaderNotAvailableError", "NotCoordinatorError",
           "NotEnoughReplicasAfterAppendError", "NotEnoughReplicasError", "NotLeaderError",
           "ReplicationError", "RequestTimedOutError", "TopicChangeConflictError", "TopicExistsError",
           "UnknownBrokerError", "UnknownLeaderEpochError", "UnknownPartitionError", "UnknownReplicaError",
           "UnknownTopicConfigError", "UnknownTopicError", "ZooKeeperStartError", "ZooKeeperUnavailableError"]
