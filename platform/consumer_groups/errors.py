"""Errors of consumer groups and the offset store (``lakelog.consumer_groups``)."""

from __future__ import annotations

from lakelog.errors import LakelogError


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
    """The group has no committed offsets and no members. Kafka: GROUP_ID_NOT_FOUND (69). 404 / 40407."""

    http_status = 404
    error_code = 40407


class InvalidCommitError(ConsumerGroupError):
    """An offset commit names a partition that does not exist or a negative offset. 422 / 42202."""

    http_status = 422
    error_code = 42202
