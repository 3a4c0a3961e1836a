"""Every lakelog error, importable from one place, and the REST error code -> class table.

Every error lakelog raises on purpose derives from :class:`LakelogError` and knows its HTTP status, its
REST error code (``http_status * 100 + n``, unique across the project) and whether a client may retry
it. The classes are defined here, at the bottom layer, one module per area:

- :mod:`lakelog.errors.base`: :class:`LakelogError`, :class:`ConfigError`, :class:`InternalError`;
- :mod:`lakelog.errors.request`: malformed requests every gateway route may answer;
- :mod:`lakelog.errors.log`: the partition log (``log_tables``);
- :mod:`lakelog.errors.replication`: ZooKeeper coordination, topics, leaders, acks;
- :mod:`lakelog.errors.coordinators`: the group and transaction coordinators' partitions;
- :mod:`lakelog.errors.producers`: idempotent and transactional producers;
- :mod:`lakelog.errors.groups`: consumer groups, REST Proxy v2 consumer instances;
- :mod:`lakelog.errors.security`: authentication, authorization, quotas;
- :mod:`lakelog.errors.spark`: the ``lakelog`` data source and the SparkSession;
- :mod:`lakelog.errors.gateway`: the HTTP gateway itself;
- :mod:`lakelog.errors.schemas`: the schema registry, with Confluent Schema Registry's codes in a table of
  their own (:data:`~lakelog.errors.schemas.SCHEMA_REGISTRY_ERRORS`).

Importing this package imports every area, so :data:`ERROR_CLASSES` is complete as soon as it loads
(as aiokafka's ``errors.py`` builds ``kafka_errors`` and kazoo's ``exceptions.py`` registers each class
with ``@_zookeeper_exception(code)``); :func:`for_code` looks a code up. A subpackage's own
``errors.py`` re-exports its area's classes, so its modules keep importing them from there.
"""

from __future__ import annotations

from lakelog.errors import (
    coordinators as _coordinators,
    gateway as _gateway,
    groups as _groups,
    log as _log,
    producers as _producers,
    replication as _replication,
    request as _request,
    schemas as _schemas,
    security as _security,
    spark as _spark,
)
from lakelog.errors.base import ERROR_CLASSES, RETRIABLE_HEADER, ConfigError, InternalError, LakelogError
from lakelog.errors.coordinators import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.gateway import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.groups import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.log import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.producers import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.replication import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.request import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.schemas import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.security import *  # noqa: F401,F403  (re-exported: __all__)
from lakelog.errors.spark import *  # noqa: F401,F403  (re-exported: __all__)

__all__ = ["ERROR_CLASSES", "RETRIABLE_HEADER", "ConfigError", "InternalError", "LakelogError", "for_code",
           *_request.__all__, *_log.__all__, *_replication.__all__, *_coordinators.__all__, *_producers.__all__,
           *_groups.__all__, *_security.__all__, *_spark.__all__, *_gateway.__all__, *_schemas.__all__]


def for_code(error_code: int) -> type[LakelogError] | None:
    """The class that answers with REST error code ``error_code`` (e.g. ``40401`` -> ``UnknownTopicError``),
    or None when no lakelog class has it. aiokafka: ``errors.for_code``.
    """
    return ERROR_CLASSES.get(error_code)
