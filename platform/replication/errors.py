"""Errors of ZooKeeper coordination and replication (``lakelog.replication``): the classes of
:mod:`lakelog.errors.replication` and :mod:`lakelog.errors.coordinators`, the name this package's modules
import them by."""

from __future__ import annotations

from lakelog.errors import coordinators as _coordinators, replication as _replication
from lakelog.errors.coordinators import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.replication import *  # noqa: F401,F403  (re-exported: __all__)

__all__ = [*_coordinators.__all__, *_replication.__all__]
