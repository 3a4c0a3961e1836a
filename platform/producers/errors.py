"""Errors of idempotent and transactional producers (``lakelog.producers``): the classes of
:mod:`lakelog.errors.producers`, the name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors import producers as _producers
from lakelog.errors.producers import *  # noqa: F401,F403  (re-exported: __all__)

__all__ = [*_producers.__all__]
