"""Errors of the partition log (``lakelog.log_tables``): the classes of :mod:`lakelog.errors.log`, the
name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors import log as _log
from lakelog.errors.log import *  # noqa: F401,F403  (re-exported: __all__)

__all__ = [*_log.__all__]
