"""Errors of the schema registry (:mod:`lakelog.schemas`), answered with Confluent Schema Registry's own codes.

The schema registry is a second API beside REST Proxy's, with a code space of its own: Confluent Schema
Registry's (``core/src/main/java/io/confluent/kafka/schemaregistry/rest/exceptions/Errors.java``), which
reuses numbers REST Proxy gives other meanings (40401 is a subject there, a topic in REST Proxy). So
these classes keep the project's table :data:`lakelog.errors.ERROR_CLASSES` (REST Proxy's codes and
lakelog's own, one class a code) as it is: each declares ``registry_error_code`` instead of
``error_code``, is listed in :data:`SCHEMA_REGISTRY_ERRORS` (one class a code, checked by
tests/test_error_codes.py) and answers ``{"error_code": registry_error_code, "message": ...}``, the body
Confluent's clients (``confluent_kafka.schema_registry.SchemaRegistryClient``) read.
"""

from __future__ import annotations

from lakelog.errors.base import LakelogError

__all__ = [
    "SCHEMA_REGISTRY_ERROR_HEADER", "IncompatibleSchemaError", "InvalidCompatibilityLevelError", "InvalidModeError", "InvalidSchemaError",
    "InvalidSubjectError", "InvalidVersionError", "OperationNotPermittedError", "RecordValidationError", "ReferenceExistsError",
    "SCHEMA_REGISTRY_ERRORS", "SchemaNotFoundError", "SchemaRegistryError", "SchemaRegistryForwardingError",
    "SchemaRegistryStoreError", "SchemaRegistryTimeoutError", "SchemaVersionNotSoftDeletedError",
    "SchemaVersionSoftDeletedError", "SubjectCompatibilityNotConfiguredError", "SubjectModeNotConfiguredError",
    "SubjectNotFoundError", "SubjectNotSoftDeletedError", "SubjectSoftDeletedError", "VersionNotFoundError",
    "registry_error_for_code", "registry_error_from_body",
]

#: Header of every schema registry error answer (``true``): a broker that forwarded a write to the registry's
#: writer rebuilds the error from this table, not from :data:`lakelog.errors.ERROR_CLASSES`.
SCHEMA_REGISTRY_ERROR_HEADER = "X-Lakelog-Schema-Registry-Error"

#: Confluent Schema Registry error code -> the class that answers with it (one class a code).
SCHEMA_REGISTRY_ERRORS: dict[int, type["SchemaRegistryError"]] = {}


class SchemaRegistryError(LakelogError):
    """Base of the schema registry's errors: ``registry_error_code`` is Confluent Schema Registry's code,
    answered as the body's ``error_code`` (see the module docstring)."""

    http_status = 500
    registry_error_code = 50001

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("registry_error_code")
        if isinstance(code, int):
            SCHEMA_REGISTRY_ERRORS.setdefault(code, cls)

    #: sent with the answer (:data:`SCHEMA_REGISTRY_ERROR_HEADER`)
    response_headers = {SCHEMA_REGISTRY_ERROR_HEADER: "true"}

    @property
    def error_code(self) -> int:  # type: ignore[override]
        """The code the answer carries: Confluent Schema Registry's."""
        return self.registry_error_code

    def to_body(self) -> dict:
        """Confluent Schema Registry's error body: ``{"error_code": int, "message": str}``."""
        return {"error_code": self.registry_error_code, "message": self.message}


def registry_error_for_code(error_code: int) -> type[SchemaRegistryError] | None:
    """The schema registry's class of a Confluent Schema Registry error code, None when none has it."""
    return SCHEMA_REGISTRY_ERRORS.get(error_code)


def registry_error_from_body(body: object) -> SchemaRegistryError:
    """The error a schema registry error answer's body ``{"error_code", "message"}`` names (the base class
    with its code for an unknown code)."""
    code = body.get("error_code") if isinstance(body, dict) else None
    message = str(body.get("message")) if isinstance(body, dict) else str(body)
    cls = registry_error_for_code(code) if isinstance(code, int) else None
    if cls is None:
        err = SchemaRegistryError(message)
        err.registry_error_code = code if isinstance(code, int) else 50001
        return err
    return cls(message)


class SubjectNotFoundError(SchemaRegistryError):
    """The subject has no version (or none that is not soft-deleted). Confluent: 404 / 40401."""

    http_status = 404
    registry_error_code = 40401


class VersionNotFoundError(SchemaRegistryError):
    """The subject has no such version. Confluent: 404 / 40402."""

    http_status = 404
    registry_error_code = 40402


class SchemaNotFoundError(SchemaRegistryError):
    """No schema has this id, or the subject has no version with this schema. Confluent: 404 / 40403."""

    http_status = 404
    registry_error_code = 40403


class SubjectSoftDeletedError(SchemaRegistryError):
    """The subject was soft-deleted already (delete it with ``permanent=true``). Confluent: 404 / 40404."""

    http_status = 404
    registry_error_code = 40404


class SubjectNotSoftDeletedError(SchemaRegistryError):
    """A permanent delete of a subject that was not soft-deleted first. Confluent: 404 / 40405."""

    http_status = 404
    registry_error_code = 40405


class SchemaVersionSoftDeletedError(SchemaRegistryError):
    """The version was soft-deleted already (delete it with ``permanent=true``). Confluent: 404 / 40406."""

    http_status = 404
    registry_error_code = 40406


class SchemaVersionNotSoftDeletedError(SchemaRegistryError):
    """A permanent delete of a version that was not soft-deleted first. Confluent: 404 / 40407."""

    http_status = 404
    registry_error_code = 40407


class SubjectCompatibilityNotConfiguredError(SchemaRegistryError):
    """The subject has no compatibility level of its own (``GET /config/{subject}`` without
    ``defaultToGlobal``). Confluent: 404 / 40408."""

    http_status = 404
    registry_error_code = 40408


class SubjectModeNotConfiguredError(SchemaRegistryError):
    """The subject has no mode of its own (``GET /mode/{subject}`` without ``defaultToGlobal``).
    Confluent: 404 / 40409."""

    http_status = 404
    registry_error_code = 40409


class IncompatibleSchemaError(SchemaRegistryError):
    """The schema is incompatible with the subject's versions under its compatibility level; nothing was
    registered. Confluent: 409 / 40901 (Schema Registry before 7.x answered the code 409)."""

    http_status = 409
    registry_error_code = 40901


class InvalidSchemaError(SchemaRegistryError):
    """The schema does not parse as its type (Avro, JSON Schema, Protobuf), or a reference is missing.
    Confluent: 422 / 42201."""

    http_status = 422
    registry_error_code = 42201


class InvalidVersionError(SchemaRegistryError):
    """A version that is neither a positive integer nor ``latest`` (or -1). Confluent: 422 / 42202."""

    http_status = 422
    registry_error_code = 42202


class InvalidCompatibilityLevelError(SchemaRegistryError):
    """A compatibility level that is not one of NONE, BACKWARD, FORWARD, FULL and their ``_TRANSITIVE``
    forms. Confluent: 422 / 42203."""

    http_status = 422
    registry_error_code = 42203


class InvalidModeError(SchemaRegistryError):
    """A mode that is not READWRITE, READONLY or IMPORT. Confluent: 422 / 42204."""

    http_status = 422
    registry_error_code = 42204


class OperationNotPermittedError(SchemaRegistryError):
    """The subject's (or the registry's) mode refuses the write (READONLY; an id given outside IMPORT).
    Confluent: 422 / 42205."""

    http_status = 422
    registry_error_code = 42205


class ReferenceExistsError(SchemaRegistryError):
    """The version is referenced by another schema and cannot be deleted. Confluent: 422 / 42206."""

    http_status = 422
    registry_error_code = 42206


class InvalidSubjectError(SchemaRegistryError):
    """An empty subject name, or one with control characters. Confluent: 422 / 42208."""

    http_status = 422
    registry_error_code = 42208


class SchemaRegistryStoreError(SchemaRegistryError):
    """The ``_schemas`` topic could not be written or read. Confluent: 500 / 50001."""

    http_status = 500
    registry_error_code = 50001
    retriable = True


class SchemaRegistryTimeoutError(SchemaRegistryError):
    """This broker's view of ``_schemas`` did not reach the write in time. Confluent: 500 / 50002."""

    http_status = 500
    registry_error_code = 50002
    retriable = True


class SchemaRegistryForwardingError(SchemaRegistryError):
    """The write could not be forwarded to the leader of ``_schemas`` partition 0 (the registry's one
    writer, Confluent's primary). Confluent: 500 / 50003."""

    http_status = 500
    registry_error_code = 50003
    retriable = True


# -- REST Proxy's schema'd produce (application/vnd.kafka.{avro,jsonschema,protobuf}.v2+json): REST Proxy's codes

class KeySchemaMissingError(LakelogError):
    """A record of an Avro, JSON Schema or Protobuf produce request has a key but the request names no key schema
    (``key_schema`` / ``key_schema_id``). REST Proxy: 422 / 42201."""

    http_status = 422
    error_code = 42201


class ValueSchemaMissingError(LakelogError):
    """A record of an Avro, JSON Schema or Protobuf produce request has a value but the request names no value schema
    (``value_schema`` / ``value_schema_id``). REST Proxy: 422 / 42202."""

    http_status = 422
    error_code = 42202


class InvalidEmbeddedSchemaError(LakelogError):
    """An Avro, JSON Schema or Protobuf produce request's ``key_schema`` / ``value_schema`` does not parse, or
    its schema id names no schema of the format's type. REST Proxy: 422 / 42205."""

    http_status = 422
    error_code = 42205


class RecordValidationError(LakelogError):
    """A record produced to a topic with schema validation (``confluent.value.schema.validation``,
    ``value.schema.subject`` and their key forms) has a key or value that is not in Confluent's wire format,
    whose schema id is not a version of the topic's subject, or that does not decode against that schema
    (:mod:`lakelog.schemas.validation`). The message names the first such record's index in the request and
    the reason; nothing of the request was written. 422 / 42230 (lakelog's code). Kafka: INVALID_RECORD (87),
    with each refused record in ProduceResponse's ``record_errors`` (KIP-467). Not retriable: serialize the
    record with a schema of the subject (or set ``errors.tolerance=all`` and
    ``errors.deadletterqueue.topic.name`` on the topic to route such records aside).

    Attributes:
        failures: record index -> the reason, for every refused record of the request (in index order).
    """

    http_status = 422
    error_code = 42230

    def __init__(self, message: str, *, failures: dict[int, str] | None = None) -> None:
        super().__init__(message)
        self.failures = dict(sorted((failures or {}).items()))
