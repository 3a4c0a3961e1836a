"""Errors of consumer groups and the offset store (:mod:`lakelog.consumer_groups`), re-exported by
``lakelog.consumer_groups.errors``."""

from __future__ import annotations

from lakelog.errors.base import LakelogError

__all__ = ["ConsumerAlreadyExistsError", "ConsumerAlreadySubscribedError", "ConsumerFormatMismatchError",
           "ConsumerGroupError", "ConsumerInstanceNotFoundError", "GroupNotEmptyError",
           "IllegalConsumerStateError", "IllegalGenerationError", "InvalidCommitError",
           "InvalidConsumerConfigError", "InvalidConsumerInstanceNameError", "InvalidGroupIdError",
           "InvalidSubscriptionError", "RecordDeserializationError", "UnknownGroupError",
           "UnknownMemberIdError", "RebalanceInProgressError", "InconsistentGroupProtocolError",
           "MemberIdRequiredError", "InvalidSessionTimeoutError", "FencedInstanceIdError",
           "GroupSubscribedToTopicError"]


class ConsumerGroupError(LakelogError):
    """A consumer group operation failed."""


class IllegalGenerationError(ConsumerGroupError):
    """An offset commit carries an older generation than the group's. Kafka: ILLEGAL_GENERATION (22).

    Answered 409 / 40904: the committer was fenced by a rebalance; it must rejoin, not retry.
    """

    http_status = 409
    error_code = 40904


class GroupNotEmptyError(ConsumerGroupError):
    """The group has active members. Kafka: NON_EMPTY_GROUP (68). 409 / 40905."""

    http_status = 409
    error_code = 40905


class UnknownGroupError(ConsumerGroupError):
    """The group has no committed offsets and no members. Kafka: GROUP_ID_NOT_FOUND (69). 404 / 40405.

    REST Proxy: ``CONSUMER_GROUP_ID_NOT_FOUND_ERROR_CODE`` (40405, kafka-rest ``Errors.java``).
    """

    http_status = 404
    error_code = 40405


class InvalidGroupIdError(ConsumerGroupError):
    """A group id that cannot name a group. Kafka: INVALID_GROUP_ID (24). 400 / 40008.

    Kafka takes any non-empty string; here a group is also one ZooKeeper znode name
    (``/lakelog/consumers/{group}``), so ``.``, ``..``, ``/`` and the characters ZooKeeper refuses
    (controls U+0000-U+001F and U+007F-U+009F, U+D800-U+F8FF, U+FFF0 and above) are refused too.
    """

    http_status = 400
    error_code = 40008


class InvalidCommitError(ConsumerGroupError):
    """An offset commit names a partition that does not exist or a negative offset. 422 / 42228.

    lakelog's code (REST Proxy's 42207 is a serialization error, kafka-rest ``Errors.java``).
    """

    http_status = 422
    error_code = 42228


class ConsumerInstanceNotFoundError(ConsumerGroupError):
    """Consumer instance not found. REST Proxy: 404 / 40403.

    The instance was deleted, expired after ``consumer.instance.timeout.ms`` without requests, or
    lives on another broker (use the ``base_uri`` returned when it was created).
    """

    http_status = 404
    error_code = 40403


class ConsumerFormatMismatchError(ConsumerGroupError):
    """The requested embedded data format does not match the format of this consumer instance.

    REST Proxy: 406 / 40601 (the ``Accept`` header of a records request must name the instance's format).
    """

    http_status = 406
    error_code = 40601


class ConsumerAlreadySubscribedError(ConsumerGroupError):
    """The consumer instance is already subscribed to other topics. REST Proxy: 409 / 40901.

    Delete the subscription first (``DELETE .../subscription``), then subscribe again.
    """

    http_status = 409
    error_code = 40901


class ConsumerAlreadyExistsError(ConsumerGroupError):
    """Consumer with specified consumer ID already exists in the specified consumer group.

    REST Proxy: 409 / 40902. Instance names are unique per group across the cluster (ZooKeeper).
    """

    http_status = 409
    error_code = 40902


class IllegalConsumerStateError(ConsumerGroupError):
    """Illegal state of a consumer instance. REST Proxy: 409 / 40903 (Kafka's IllegalStateException).

    E.g. subscription, manual assignment and pattern subscription are mutually exclusive; seeking or
    reading needs an assignment.
    """

    http_status = 409
    error_code = 40903


class InvalidConsumerConfigError(ConsumerGroupError):
    """Invalid consumer configuration. REST Proxy: 422 / 42204 (``INVALID_CONSUMER_CONFIG_ERROR_CODE``,
    kafka-rest ``Errors.java``): a consumer instance's format, reset policy, isolation level or assignor."""

    http_status = 422
    error_code = 42204


class InvalidSubscriptionError(ConsumerGroupError):
    """A subscription that is not exactly one of a non-empty ``topics`` list or a ``topic_pattern`` regex, or a
    ``topic_pattern`` that does not compile. 422 / 42227 (lakelog's code; REST Proxy's 42204 is an invalid
    consumer configuration)."""

    http_status = 422
    error_code = 42227


class RecordDeserializationError(ConsumerGroupError):
    """A record's key or value could not be read in the consumer instance's format: a ``json`` instance met
    bytes that are not JSON, an ``avro`` / ``jsonschema`` / ``protobuf`` instance a record not in
    Confluent's wire format or not of the schema its id names. 408 / 40801, not retriable: the instance's
    position stays at that record.

    REST Proxy answers this with 408 / 40801: its JSON consumer raises Kafka's ``SerializationException``,
    which kafka-rest's ``KafkaRestExceptionMapper`` maps to ``REQUEST_TIMEOUT`` / 40801 (CPKAFKA-3412). Read
    the partition with a ``binary`` instance, or seek past the record.
    """

    http_status = 408
    error_code = 40801


class InvalidConsumerInstanceNameError(InvalidConsumerConfigError):
    """A consumer instance name outside REST Proxy's characters (ASCII letters, digits, ``.``, ``_``,
    ``-``, ``:``, ``@``), or ``.`` / ``..`` (the name is a ZooKeeper znode and a URL path segment).
    422 / 42209 (an :class:`InvalidConsumerConfigError`)."""

    error_code = 42209


class UnknownMemberIdError(ConsumerGroupError):
    """The member id is not a member of the group's current membership (it was removed after
    ``session.timeout.ms`` without a heartbeat, or left, or the group's coordinator moved). Kafka:
    UNKNOWN_MEMBER_ID (25). 409 / 40951: rejoin the group with an empty member id."""

    http_status = 409
    error_code = 40951


class RebalanceInProgressError(ConsumerGroupError):
    """The group is rebalancing: the member must rejoin (JoinGroup) before it syncs or commits. Kafka:
    REBALANCE_IN_PROGRESS (27). 409 / 40952, retriable after a rejoin."""

    http_status = 409
    error_code = 40952
    retriable = True


class InconsistentGroupProtocolError(ConsumerGroupError):
    """The group is used by members of another kind or protocol: a Kafka client joining a group whose
    members are HTTP consumer instances (or the reverse), a protocol type other than the group's, or no
    assignment protocol every member supports. Kafka: INCONSISTENT_GROUP_PROTOCOL (23). 409 / 40953: use
    another group id, or stop the group's other members first (its committed offsets are shared)."""

    http_status = 409
    error_code = 40953


class MemberIdRequiredError(ConsumerGroupError):
    """A Kafka client's first JoinGroup (v4+, KIP-394): the coordinator gives the member its id, which the
    client sends in a second JoinGroup. Kafka: MEMBER_ID_REQUIRED (79). 409 / 40954.

    Attributes:
        member_id: the id given to the member.
    """

    http_status = 409
    error_code = 40954
    member_id: str = ""

    def __init__(self, message: str | None = None, *, member_id: str = "") -> None:
        super().__init__(message)
        self.member_id = member_id


class InvalidSessionTimeoutError(ConsumerGroupError):
    """A member's ``session.timeout.ms`` outside the broker's ``group.min.session.timeout.ms`` to
    ``group.max.session.timeout.ms``. Kafka: INVALID_SESSION_TIMEOUT (26). 400 / 40051."""

    http_status = 400
    error_code = 40051


class FencedInstanceIdError(ConsumerGroupError):
    """A static member (``group.instance.id``) was replaced by a newer member with the same instance id: the
    older one is fenced. Kafka: FENCED_INSTANCE_ID (82). 409 / 40955: two consumers share one
    ``group.instance.id``; give each its own."""

    http_status = 409
    error_code = 40955


class GroupSubscribedToTopicError(ConsumerGroupError):
    """OffsetDelete of a topic that a member of the group subscribes to: its committed offsets are in use.
    Kafka: GROUP_SUBSCRIBED_TO_TOPIC (86). 409 / 40956: stop the members, or unsubscribe them from the topic,
    first."""

    http_status = 409
    error_code = 40956
