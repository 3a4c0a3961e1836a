"""Errors of authentication and authorization (``lakelog.security``): the classes of
:mod:`lakelog.errors.security`, the name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors import security as _security
from lakelog.errors.security import *  # noqa: F401,F403  (re-exported: __all__)

__all__ = [*_security.__all__]
