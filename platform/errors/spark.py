"""Errors of lakelog's Spark side: the ``lakelog`` data source and the Delta-enabled SparkSession.

Every class knows its HTTP status and REST error code (unique across the project, see
:mod:`lakelog.errors`), so a Spark job that reports one through the gateway or a test that walks the
error classes sees the same code:

- :class:`SourceOptionError` (400 / 40003, a :class:`~lakelog.errors.ConfigError`): an option of the
  ``lakelog`` source or sink is missing, unknown in this mode, or invalid;
- :class:`SourceError` (400 / 40020): the source can not plan or read a query;
- :class:`DeltaJarsError` (500 / 50022): Delta's JVM jars could not be resolved.
"""

from __future__ import annotations

from lakelog.errors.base import ConfigError, LakelogError

__all__ = ["DeltaJarsError", "SourceError", "SourceOptionError"]


class SourceOptionError(ConfigError):
    """An option of the ``lakelog`` data source is missing, unknown in this mode, or invalid.

    Raised on the driver when a read or write is defined (``load()``, ``save()``, ``start()``); the
    message names the option and what is wrong with it, in the words of Spark's Kafka source where it
    has the same check. HTTP 400, REST error code 40003 (inherited from :class:`ConfigError`).
    """


class SourceError(LakelogError):
    """The ``lakelog`` data source can not plan or read a query (e.g. partitions that do not exist).

    Also raised for data loss the driver detects while planning (``failOnDataLoss=true``) and for rows
    the sink can not place (null topic, a partition the topic does not have). HTTP 400, REST error
    code 40020.
    """

    http_status = 400
    error_code = 40020


class DeltaJarsError(LakelogError):
    """Delta Lake's JVM jars could not be resolved (no cached copy and no reachable repository).

    Raised by :func:`lakelog.spark.session.ensure_delta_jars`. HTTP 500, REST error code 50022 (lakelog's
    code; REST Proxy's 50002 is any other Kafka error, rest-utils ``KafkaExceptionMapper``).
    """

    http_status = 500
    error_code = 50022
