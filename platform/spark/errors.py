"""Errors of lakelog's Spark side (``lakelog.spark``): the classes of :mod:`lakelog.errors.spark`, the
name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors.spark import (
    DeltaJarsError,
    SourceError,
    SourceOptionError,
)

__all__ = ["DeltaJarsError", "SourceError", "SourceOptionError"]
