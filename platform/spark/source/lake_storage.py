"""How executors reach a lake on an object store: the ``lakelog.lake.storage.*`` options of a read.

A cluster with ``lake.uri=s3://bucket/prefix`` keeps every partition's Delta table in an S3-compatible
store (one table per partition for all its replicas); the gateway reports each table as its ``s3://``
URI. An executor reads such a table directly (``lakelog.read.mode=direct``, or ``auto``) through
delta-rs, which needs the store's endpoint and credentials: the broker's own ``lake.storage.*`` settings,
given to the read with the prefix ``lakelog.``::

    spark.read.format("lakelog")
        .option("lakelog.bootstrap.servers", "localhost:8082").option("subscribe", "orders")
        .option("lakelog.read.mode", "direct")
        .option("lakelog.lake.storage.endpoint", "http://127.0.0.1:9000")
        .option("lakelog.lake.storage.access.key.id", "...")
        .option("lakelog.lake.storage.secret.access.key", "...")
        .option("lakelog.lake.storage.path.style.access", "true")
        .option("lakelog.lake.storage.allow.http", "true")
        .load()

Each becomes the delta-rs (Rust ``object_store``) storage option the broker uses for the same setting
(:meth:`lakelog.config.BrokerConfig.lake_storage_options`). Options not given are left to delta-rs's own
lookup on the executor (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ... in its environment, the AWS
profile, an instance role), so a Spark cluster whose executors already carry credentials needs none of
them. No Hadoop jar is involved: this is delta-rs, not Spark's ``s3a`` filesystem.

The secret never appears in a log line or a repr (:class:`LakeStorage`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from lakelog.spark.errors import SourceOptionError

__all__ = ["LAKE_STORAGE_OPTIONS", "LakeStorage", "lake_storage_option", "lake_storage_options_from_env"]

#: Spark option (lower-case) -> delta-rs storage option, for the options whose value is passed on as is.
_VALUE_OPTIONS = {
    "lakelog.lake.storage.endpoint": "AWS_ENDPOINT_URL",
    "lakelog.lake.storage.region": "AWS_REGION",
    "lakelog.lake.storage.access.key.id": "AWS_ACCESS_KEY_ID",
    "lakelog.lake.storage.secret.access.key": "AWS_SECRET_ACCESS_KEY",
}
#: Spark option (lower-case) -> (delta-rs storage option, its value when the option is true).
_FLAG_OPTIONS = {
    "lakelog.lake.storage.path.style.access": ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false"),
    "lakelog.lake.storage.allow.http": ("AWS_ALLOW_HTTP", "true"),
}
#: Every ``lakelog.lake.storage.*`` option of a read (the broker's ``lake.storage.*`` names, prefixed).
LAKE_STORAGE_OPTIONS: tuple[str, ...] = (
    "lakelog.lake.storage.endpoint", "lakelog.lake.storage.region", "lakelog.lake.storage.access.key.id",
    "lakelog.lake.storage.secret.access.key", "lakelog.lake.storage.path.style.access",
    "lakelog.lake.storage.allow.http")


@dataclass(frozen=True)
class LakeStorage:
    """The delta-rs storage options an executor opens ``s3://`` partition tables with.

    Attributes:
        options: ``{"AWS_ENDPOINT_URL": ..., "AWS_ACCESS_KEY_ID": ..., ...}``, only those given; empty when
            none was (delta-rs then looks in the executor's environment). Holds the secret: left out of
            the repr, never logged.
    """

    options: dict[str, str] = field(default_factory=dict, repr=False)

    def for_uri(self, table_uri: str) -> dict[str, str] | None:
        """The storage options to open ``table_uri`` with: :attr:`options` for an object-store URI
        (``s3://``, ``s3a://``), None for a local path or ``file://`` URI (delta-rs needs none there)."""
        if table_uri.startswith(("s3://", "s3a://")) and self.options:
            return dict(self.options)
        return None

    def __repr__(self) -> str:  # the dataclass repr leaves ``options`` out; say which are set, not their values
        return f"LakeStorage(set={sorted(self.options)})"


def lake_storage_option(opts: Mapping[str, str]) -> LakeStorage:
    """The ``lakelog.lake.storage.*`` options of lower-cased ``opts`` as a :class:`LakeStorage`.

    ``...endpoint`` (the S3 API's URL), ``...region``, ``...access.key.id`` and
    ``...secret.access.key`` (the store's credentials) are passed on as given (stripped);
    ``...path.style.access`` and ``...allow.http`` are ``true`` or ``false`` (default false), as the
    broker's settings of the same names.

    Raises:
        SourceOptionError: an empty value, or a flag that is neither ``true`` nor ``false``; the message
            names the option, never the secret's value.
    """
    options: dict[str, str] = {}
    for name, key in _VALUE_OPTIONS.items():
        if name in opts:
            value = opts[name].strip()
            if not value:
                raise SourceOptionError(f"Option '{name}' is empty: give a value (the broker's "
                                        f"'{name[len('lakelog.'):]}'), or leave the option out.")
            options[key] = value
    for name, (key, when_true) in _FLAG_OPTIONS.items():
        if name in opts:
            value = opts[name].strip().lower()
            if value not in ("true", "false"):
                raise SourceOptionError(f"Option '{name}' must be 'true' or 'false', got {opts[name]!r}")
            if value == "true":
                options[key] = when_true
    return LakeStorage(options)


def lake_storage_options_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``lakelog.lake.storage.*`` read options from the broker's environment variables of the same
    settings (``LAKELOG_LAKE_STORAGE_ENDPOINT`` -> ``lakelog.lake.storage.endpoint``, ...), those set:
    a command run beside a broker (``lakelog sql``) reads its lake as the broker does. ``environ``:
    default ``os.environ``. Holds the secret when it is set: never log it."""
    env = os.environ if environ is None else environ
    out = {}
    for option in LAKE_STORAGE_OPTIONS:
        value = env.get("LAKELOG_" + option[len("lakelog."):].replace(".", "_").upper())
        if value:
            out[option] = value
    return out
