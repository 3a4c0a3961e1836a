"""Errors of consumer groups and the offset store (``lakelog.consumer_groups``): the classes of
:mod:`lakelog.errors.groups`, and the coordinators' :class:`NotCoordinatorError` and
:class:`CoordinatorLoadInProgressError` (:mod:`lakelog.errors.coordinators`, shared with the transaction
coordinator), the name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors.coordinators import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
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

__all__ = ["ConsumerAlreadyExistsError", "ConsumerAlreadySubscribedError", "ConsumerFormatMismatchError",
           "ConsumerGroupError", "ConsumerInstanceNotFoundError", "CoordinatorLoadInProgressError",
           "GroupNotEmptyError", "IllegalConsumerStateError", "IllegalGenerationError", "InvalidCommitError",
           "InvalidConsumerConfigError", "InvalidConsumerInstanceNameError", "InvalidGroupIdError",
           "NotCoordinatorError", "UnknownGroupError"]
