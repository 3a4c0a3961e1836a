"""Errors of lakelog's Spark side (``lakelog.spark``): the classes of :mod:`lakelog.errors.spark`, the
name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors import spark as _spark
from lakelog.errors.spark import *  # noqa: F401,F403  (re-exported: __all__)

__all__ = [*_spark.__all__]
