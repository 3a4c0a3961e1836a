"""Every lakelog error, importable from one place, and the REST error code -> class table.

Every error lakelog raises on purpose derives from :class:`LakelogError` and knows its HTTP status, its
REST error code (``http_status * 100 + n``, unique across the project) and whether a client may retry
it. The classes are defined here, at the bottom layer, one module per area:

- :mod:`lakelog.errors.base`: :class:`LakelogError`, :class:`ConfigError`, :class:`InternalError`;
- :mod:`lakelog.errors.request`: malformed requests every gateway route may answer;
- :mod:`lakelog.errors.log`: the partition log (``log_tables``);
- :mod:`lakelog.errors.replication`: ZooKeeper coordination, topics, leaders, acks;
- :mod:`lakelog.errors.coordinators`: the group and transaction coordinators' partitions;
- :mod:`lakelog.errors.producers`: idempotent and transactional producers;
- :mod:`lakelog.errors.groups`: consumer groups, REST Proxy v2 consumer instances;
- :mod:`lakelog.errors.security`: authentication, authorization, quotas;
- :mod:`lakelog.errors.spark`: the ``lakelog`` data source and the SparkSession;
- :mod:`lakelog.errors.gateway`: the HTTP gateway itself.

Importing this package imports every area, so :data:`ERROR_CLASSES` is complete as soon as it loads
(as aiokafka's ``errors.py`` builds ``kafka_errors`` and kazoo's ``exceptions.py`` registers each class
with ``@_zookeeper_exception(code)``); :func:`for_code` looks a code up. A subpackage's own
``errors.py`` re-exports its area's classes, so its modules keep importing them from there.
"""

from __future__ import annotations

from lakelog.errors.base import (
    ConfigError,
    ERROR_CLASSES,
    InternalError,
    LakelogError,
    RETRIABLE_HEADER,
)
from lakelog.errors.request import (
    FieldOutOfRangeError,
    InvalidBodyFieldError,
    InvalidEncodingError,
    InvalidPartitionInRecordError,
    InvalidProducerHeadersError,
    MalformedBodyError,
    NotAcceptableError,
    ProduceQueueFullError,
    RequestError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)
from lakelog.errors.log import (
    CommitFailedError,
    DataLossError,
    FencedLeaderEpochError,
    InvalidTimestampError,
    LogClosedError,
    LogStorageError,
    LogTableError,
    NonContiguousOffsetsError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    RecordWithoutKeyError,
    TransactionsNeedTailError,
    UnreadableBatchError,
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
from lakelog.errors.coordinators import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
)
from lakelog.errors.producers import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTransactionalIdError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerError,
    ProducerIdsExhaustedError,
    TransactionalIdNotFoundError,
    TransactionsNotSupportedError,
    UnknownProducerIdError,
)
from lakelog.errors.groups import (
    ConsumerAlreadyExistsError,
    ConsumerAlreadySubscribedError,
    ConsumerFormatMismatchError,
    ConsumerGroupError,
    ConsumerInstanceNotFoundError,
    GroupNotEmptyError,
    IllegalConsumerStateError,
    IllegalGenerationError,
    InvalidCommitError,
    InvalidConsumerConfigError,
    InvalidConsumerInstanceNameError,
    InvalidGroupIdError,
    UnknownGroupError,
)
from lakelog.errors.security import (
    AuthenticationError,
    AuthorizationError,
    ClientQuotaExceededError,
    InvalidAclError,
    InvalidCredentialError,
    InvalidQuotaError,
    InvalidTokenError,
    SecurityError,
    UnknownUserError,
)
from lakelog.errors.spark import (
    DeltaJarsError,
    SourceError,
    SourceOptionError,
)
from lakelog.errors.gateway import (
    BrokerNotReadyError,
    ClusterNotFoundError,
    RequestTimeoutError,
    TooManyConnectionsError,
)

__all__ = ["AuthenticationError", "AuthorizationError", "BrokerIdInUseError", "BrokerNotReadyError",
           "ClientQuotaExceededError", "ClusterNotFoundError", "CommitFailedError", "CommitterLeaseHeldError",
           "ConcurrentTransactionsError", "ConfigError", "ConsumerAlreadyExistsError",
           "ConsumerAlreadySubscribedError", "ConsumerFormatMismatchError", "ConsumerGroupError",
           "ConsumerInstanceNotFoundError", "ControllerFencedError", "CoordinatorLoadInProgressError",
           "DataLossError", "DeltaJarsError", "ERROR_CLASSES", "FencedLeaderEpochError",
           "FieldOutOfRangeError", "GroupNotEmptyError", "IllegalConsumerStateError",
           "IllegalGenerationError", "InternalError", "InvalidAclError", "InvalidBodyFieldError",
           "InvalidCommitError", "InvalidConsumerConfigError", "InvalidConsumerInstanceNameError",
           "InvalidCredentialError", "InvalidEncodingError", "InvalidGroupIdError",
           "InvalidPartitionInRecordError", "InvalidPartitionsError", "InvalidProducerEpochError",
           "InvalidProducerHeadersError", "InvalidProducerIdMappingError", "InvalidQuotaError",
           "InvalidReplicationFactorError", "InvalidRequiredAcksError", "InvalidTimestampError",
           "InvalidTokenError", "InvalidTopicError", "InvalidTransactionTimeoutError",
           "InvalidTransactionalIdError", "InvalidTxnStateError", "LakelogError", "LeaderNotAvailableError",
           "LogClosedError", "LogStorageError", "LogTableError", "MalformedBodyError",
           "NonContiguousOffsetsError", "NotAcceptableError", "NotCoordinatorError",
           "NotEnoughReplicasAfterAppendError", "NotEnoughReplicasError", "NotLeaderError",
           "OffsetOutOfRangeError", "OutOfOrderSequenceError", "ProduceQueueFullError", "ProducerError",
           "ProducerIdsExhaustedError", "RETRIABLE_HEADER", "RecordTooLargeError", "RecordWithoutKeyError",
           "ReplicationError", "RequestError", "RequestTimedOutError", "RequestTimeoutError",
           "RequestTooLargeError", "SecurityError", "SourceError", "SourceOptionError",
           "TooManyConnectionsError", "TopicChangeConflictError", "TopicExistsError",
           "TransactionalIdNotFoundError", "TransactionsNeedTailError", "TransactionsNotSupportedError",
           "UnknownBrokerError", "UnknownGroupError", "UnknownLeaderEpochError", "UnknownPartitionError",
           "UnknownProducerIdError", "UnknownReplicaError", "UnknownTopicConfigError", "UnknownTopicError",
           "UnknownUserError", "UnreadableBatchError", "UnsupportedMediaTypeError", "ZooKeeperStartError",
           "ZooKeeperUnavailableError", "for_code"]


def for_code(error_code: int) -> type[LakelogError] | None:
    """The class that answers with REST error code ``error_code`` (e.g. ``40401`` -> ``UnknownTopicError``),
    or None when no lakelog class has it. aiokafka: ``errors.for_code``.
    """
    return ERROR_CLASSES.get(error_code)
