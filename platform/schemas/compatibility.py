"""Compatibility levels and the check a new schema of a subject passes before it is registered.

Confluent Schema Registry's levels (``CompatibilityLevel``; its default is ``BACKWARD``):

=======================  ==========================================================================
level                    a new schema is registered when ...
=======================  ==========================================================================
``NONE``                 always
``BACKWARD``             it reads data written with the latest version (new = reader)
``BACKWARD_TRANSITIVE``  it reads data written with every version
``FORWARD``              the latest version reads data written with it (new = writer)
``FORWARD_TRANSITIVE``   every version reads data written with it
``FULL``                 both, with the latest version
``FULL_TRANSITIVE``      both, with every version
=======================  ==========================================================================

Versions soft-deleted are not checked against (Confluent's ``lookupLatestVersion`` skips them).

Avro: Apache Avro's own checker (``avro.compatibility.ReaderWriterCompatibilityChecker``, Avro's schema
resolution rules as the Java ``SchemaCompatibility`` has them: promotions int -> long -> float -> double,
string <-> bytes, a reader field missing from the writer needs a default, enum symbols, union branches,
fixed sizes, named types' names). JSON Schema: Confluent's ``JsonSchemaDiff`` rules
(:mod:`lakelog.schemas.json_compatibility`). Protobuf: Confluent's ``SchemaDiff`` rules over protoc's
descriptors (:mod:`lakelog.schemas.protobuf_compatibility`). A change of schema type is refused at every
level but NONE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from lakelog.errors.schemas import InvalidCompatibilityLevelError
from lakelog.schemas.json_compatibility import json_schema_differences
from lakelog.schemas.protobuf_compatibility import protobuf_differences
from lakelog.schemas.schema_types import ParsedSchema

__all__ = ["COMPATIBILITY_LEVELS", "CompatibilityLevel", "DEFAULT_COMPATIBILITY", "compatibility_level",
           "incompatibilities"]

CompatibilityLevel = Literal["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                             "FULL_TRANSITIVE"]
COMPATIBILITY_LEVELS: tuple[str, ...] = get_args(CompatibilityLevel)
#: Confluent's default (``schema.compatibility.level``).
DEFAULT_COMPATIBILITY: CompatibilityLevel = "BACKWARD"


def compatibility_level(value: object) -> CompatibilityLevel:
    """``value`` as a level (any case).

    Raises:
        InvalidCompatibilityLevelError: 422 / 42203 naming the levels.
    """
    level = value.upper() if isinstance(value, str) else value
    if level not in COMPATIBILITY_LEVELS:
        raise InvalidCompatibilityLevelError(f"Invalid compatibility level {value!r}: use one of "
                                             f"{', '.join(COMPATIBILITY_LEVELS)}.")
    return level  # type: ignore[return-value]


def _avro_problems(reader: ParsedSchema, writer: ParsedSchema, *, what: str) -> list[str]:
    result = ReaderWriterCompatibilityChecker().get_compatibility(reader.avro, writer.avro)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    locations = sorted(result.locations) if result.locations else []
    return [f"{what}: {message}" + (f" at {locations[i]}" if i < len(locations) else "")
            for i, message in enumerate(sorted(result.messages) or ["incompatible"])]


def _json_problems(reader: ParsedSchema, writer: ParsedSchema, *, what: str) -> list[str]:
    return [f"{what}: {kind} at {where}"
            for kind, where, ok in json_schema_differences(writer.schema, reader.schema) if not ok]


def _protobuf_problems(reader: ParsedSchema, writer: ParsedSchema, *, what: str) -> list[str]:
    return [f"{what}: {kind} at {where}"
            for kind, where, ok in protobuf_differences(writer.proto, reader.proto) if not ok]


_CHECKERS = {"AVRO": _avro_problems, "JSON": _json_problems, "PROTOBUF": _protobuf_problems}


def _pair_problems(new: ParsedSchema, old: ParsedSchema, version: int, *, backward: bool,
                   forward: bool) -> list[str]:
    if new.schema_type != old.schema_type:
        return [f"version {version} is a {old.schema_type} schema, the new one {new.schema_type}"]
    check = _CHECKERS.get(new.schema_type)
    if check is None or (new.schema_type == "AVRO" and (new.avro is None or old.avro is None)) or (
            new.schema_type == "PROTOBUF" and (new.proto is None or old.proto is None)):
        return []
    problems = []
    if backward:
        problems += check(new, old, what=f"the new schema cannot read data written with version {version}")
    if forward:
        problems += check(old, new, what=f"version {version} cannot read data written with the new schema")
    return problems


def incompatibilities(level: CompatibilityLevel, new: ParsedSchema,
                      versions: Sequence[tuple[int, ParsedSchema]]) -> list[str]:
    """Why ``new`` may not follow ``versions`` under ``level``; empty when it may.

    Args:
        level: the subject's compatibility level.
        new: the schema to register.
        versions: ``(version, schema)`` of the subject's versions that are not soft-deleted, oldest first.

    Returns:
        One message per problem (which version, which direction, Avro's reason and where).
    """
    if level == "NONE" or not versions:
        return []
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    checked = versions if level.endswith("_TRANSITIVE") else versions[-1:]
    problems: list[str] = []
    for version, old in reversed(checked):
        problems += _pair_problems(new, old, version, backward=backward, forward=forward)
    return problems
