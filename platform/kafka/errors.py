"""lakelog's errors as Kafka error codes: the one table the Kafka listener answers with.

Kafka's codes are those of ``org.apache.kafka.common.protocol.Errors``. An error the table lacks
answers UNKNOWN_SERVER_ERROR (-1) and is logged by the caller. An authorization failure's code depends
on the resource the request names (a topic: TOPIC_AUTHORIZATION_FAILED; a transactional id:
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the cluster: CLUSTER_AUTHORIZATION_FAILED), so the handler says
which.
"""

from __future__ import annotations

from lakelog.errors import (
    AuthenticationError,
    AuthorizationError,
    ConfigError,
    InvalidAclError,
    InvalidBodyFieldError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    PolicyViolationError,
    TopicChangeConflictError,
    TopicExistsError,
    UnknownTopicConfigError,
    ClientQuotaExceededError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    FencedLeaderEpochError,
    FieldOutOfRangeError,
    GroupNotEmptyError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidCommitError,
    InvalidGroupIdError,
    InvalidPartitionInRecordError,
    InvalidProducerEpochError,
    InvalidProducerHeadersError,
    InvalidProducerIdMappingError,
    InvalidRequiredAcksError,
    InvalidSessionTimeoutError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTransactionalIdError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    LeaderNotAvailableError,
    LakeUnavailableError,
    LogStorageError,
    MalformedBodyError,
    MemberIdRequiredError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProduceQueueFullError,
    RebalanceInProgressError,
    RecordTooLargeError,
    RecordValidationError,
    SchemaRegistryTimeoutError,
    RecordWithoutKeyError,
    RequestTimedOutError,
    UnknownGroupError,
    UnknownLeaderEpochError,
    UnknownMemberIdError,
    UnknownPartitionError,
    UnknownProducerIdError,
    UnknownTopicError,
    ZooKeeperUnavailableError,
)
from lakelog.kafka.records import CorruptBatchError, InvalidBatchError

__all__ = ["CLUSTER_AUTHORIZATION_FAILED", "CORRUPT_MESSAGE", "ERROR_CODES", "GROUP_AUTHORIZATION_FAILED", "INVALID_RECORD", "INVALID_REQUEST",
           "NONE", "NOT_LEADER_OR_FOLLOWER", "TOPIC_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
           "UNKNOWN_SERVER_ERROR", "UNKNOWN_TOPIC_OR_PARTITION", "UNSUPPORTED_VERSION", "kafka_error_code"]
__all__ += ["INVALID_CONFIG", "INVALID_PARTITIONS", "INVALID_REPLICA_ASSIGNMENT", "INVALID_REPLICATION_FACTOR",
            "MISMATCHED_ENDPOINT_TYPE", "POLICY_VIOLATION", "TOPIC_ALREADY_EXISTS", "UNKNOWN_TOPIC_ID"]

NONE = 0
UNKNOWN_SERVER_ERROR = -1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_RECORD = 87
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
POLICY_VIOLATION = 44
UNKNOWN_TOPIC_ID = 100
MISMATCHED_ENDPOINT_TYPE = 114

#: lakelog error class -> Kafka error code (the first class in the MRO found wins)
ERROR_CODES: dict[type[BaseException], int] = {
    OffsetOutOfRangeError: 1,               # OFFSET_OUT_OF_RANGE
    CorruptBatchError: CORRUPT_MESSAGE,
    InvalidBatchError: INVALID_RECORD,
    MalformedBodyError: CORRUPT_MESSAGE,
    UnknownTopicError: UNKNOWN_TOPIC_OR_PARTITION,
    UnknownPartitionError: UNKNOWN_TOPIC_OR_PARTITION,
    InvalidPartitionInRecordError: UNKNOWN_TOPIC_OR_PARTITION,
    LeaderNotAvailableError: 5,             # LEADER_NOT_AVAILABLE
    NotLeaderError: NOT_LEADER_OR_FOLLOWER,
    RequestTimedOutError: 7,                # REQUEST_TIMED_OUT
    ProduceQueueFullError: 7,               # (retriable: Kafka's broker would make the producer wait)
    RecordTooLargeError: 10,                # MESSAGE_TOO_LARGE
    CoordinatorLoadInProgressError: 14,     # COORDINATOR_LOAD_IN_PROGRESS
    NotCoordinatorError: 16,                # NOT_COORDINATOR
    InvalidTopicError: 17,                  # INVALID_TOPIC_EXCEPTION
    NotEnoughReplicasError: 19,             # NOT_ENOUGH_REPLICAS
    NotEnoughReplicasAfterAppendError: 20,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    InvalidRequiredAcksError: 21,           # INVALID_REQUIRED_ACKS
    AuthorizationError: TOPIC_AUTHORIZATION_FAILED,
    InvalidTimestampError: 32,              # INVALID_TIMESTAMP
    FieldOutOfRangeError: INVALID_REQUEST,
    InvalidProducerHeadersError: INVALID_REQUEST,
    OutOfOrderSequenceError: 45,            # OUT_OF_ORDER_SEQUENCE_NUMBER
    InvalidProducerEpochError: 47,          # INVALID_PRODUCER_EPOCH
    InvalidTxnStateError: 48,               # INVALID_TXN_STATE
    InvalidProducerIdMappingError: 49,      # INVALID_PRODUCER_ID_MAPPING
    InvalidTransactionTimeoutError: 50,     # INVALID_TRANSACTION_TIMEOUT
    ConcurrentTransactionsError: 51,        # CONCURRENT_TRANSACTIONS
    InvalidTransactionalIdError: 53,        # (Kafka answers an empty transactional id this way too)
    LogStorageError: 56,                    # KAFKA_STORAGE_ERROR
    LakeUnavailableError: 56,               # KAFKA_STORAGE_ERROR (retriable in Kafka's clients)
    UnknownProducerIdError: 59,             # UNKNOWN_PRODUCER_ID
    FencedLeaderEpochError: 74,             # FENCED_LEADER_EPOCH
    UnknownLeaderEpochError: 75,            # UNKNOWN_LEADER_EPOCH
    RecordWithoutKeyError: INVALID_RECORD,
    RecordValidationError: INVALID_RECORD,  # schema validation (KIP-467's record_errors name each record)
    SchemaRegistryTimeoutError: 7,          # REQUEST_TIMED_OUT (retriable: the registry view is behind)
    ClientQuotaExceededError: 89,           # THROTTLING_QUOTA_EXCEEDED
    ZooKeeperUnavailableError: 15,          # COORDINATOR_NOT_AVAILABLE (retriable)
    IllegalGenerationError: 22,             # ILLEGAL_GENERATION
    InvalidGroupIdError: 24,                # INVALID_GROUP_ID
    InvalidCommitError: UNKNOWN_TOPIC_OR_PARTITION,  # a partition the topic lacks (a negative offset: the same code)
    UnknownGroupError: 69,                  # GROUP_ID_NOT_FOUND
    TopicExistsError: TOPIC_ALREADY_EXISTS,
    InvalidPartitionsError: INVALID_PARTITIONS,
    InvalidReplicationFactorError: INVALID_REPLICATION_FACTOR,
    UnknownTopicConfigError: INVALID_CONFIG,
    ConfigError: INVALID_CONFIG,
    PolicyViolationError: POLICY_VIOLATION,
    InvalidAclError: INVALID_REQUEST,
    InvalidBodyFieldError: INVALID_REQUEST,
    TopicChangeConflictError: 7,            # REQUEST_TIMED_OUT (retriable: the topic kept changing, nothing written)
    AuthenticationError: 58,                # SASL_AUTHENTICATION_FAILED
}
ERROR_CODES.update({
    InconsistentGroupProtocolError: 23,     # INCONSISTENT_GROUP_PROTOCOL
    UnknownMemberIdError: 25,               # UNKNOWN_MEMBER_ID
    InvalidSessionTimeoutError: 26,         # INVALID_SESSION_TIMEOUT
    RebalanceInProgressError: 27,           # REBALANCE_IN_PROGRESS
    GroupNotEmptyError: 68,                 # NON_EMPTY_GROUP
    MemberIdRequiredError: 79,              # MEMBER_ID_REQUIRED
    FencedInstanceIdError: 82,              # FENCED_INSTANCE_ID
    GroupSubscribedToTopicError: 86,        # GROUP_SUBSCRIBED_TO_TOPIC
})


def kafka_error_code(error: BaseException, *, authorization: int = TOPIC_AUTHORIZATION_FAILED) -> int:
    """The Kafka error code of ``error`` (:data:`ERROR_CODES`; UNKNOWN_SERVER_ERROR when none applies).

    Args:
        authorization: the code of an AuthorizationError for the resource the request names.
    """
    if isinstance(error, AuthorizationError):
        return authorization
    for cls in type(error).__mro__:
        code = ERROR_CODES.get(cls)
        if code is not None:
            return code
    return UNKNOWN_SERVER_ERROR
