"""Errors of consumer groups and the offset store (``lakelog.consumer_groups``): the classes of
:mod:`lakelog.errors.groups`, and the coordinators' :class:`NotCoordinatorError` and
:class:`CoordinatorLoadInProgressError` (:mod:`lakelog.errors.coordinators`, shared with the transaction
coordinator), the name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors import coordinators as _coordinators, groups as _groups
from lakelog.errors.coordinators import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.groups import *  # noqa: F401,F403  (re-exported: __all__)

__all__ = [*_coordinators.__all__, *_groups.__all__]
