"""The schema types the registry takes: each schema parsed by its own library, and the one string it is kept as.

============  ===========================================================  ============================
type          parsed by                                                    kept and served as
============  ===========================================================  ============================
``AVRO``      fastavro's ``parse_schema`` (named types of the references   the JSON, compact (no
              first), and Apache Avro's ``avro.schema`` for the            whitespace), members in
              compatibility checks (:mod:`lakelog.schemas.compatibility`)  their order
``JSON``      jsonschema: the validator of the schema's ``$schema`` (draft  the JSON, compact
              2020-12 when none) checks the schema against its meta-schema
``PROTOBUF``  protoc (grpcio-tools' own, a child process) to a              the text as sent
              ``FileDescriptorProto``, imports from the references and
              protoc's well-known types; or a base64
              ``FileDescriptorProto`` (:mod:`lakelog.schemas.protobuf_schemas`)
============  ===========================================================  ============================

Two registrations are of the same schema when their type, kept string and references are equal: the
same schema under another subject gets the same id, as Confluent's registry gives it (Confluent compares
Avro's ``Schema.toString()``, which likewise drops whitespace and keeps defaults and docs).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Literal

import avro.errors
import avro.name
import avro.schema
import fastavro
import jsonschema
import jsonschema.exceptions
import jsonschema.validators
from google.protobuf import descriptor_pb2

from lakelog.errors.schemas import InvalidSchemaError
from lakelog.schemas.protobuf_schemas import compile_proto

__all__ = ["SCHEMA_TYPES", "ParsedSchema", "SchemaReference", "SchemaType", "parse_schema"]

SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]
#: ``GET /schemas/types``, in Confluent's order.
SCHEMA_TYPES: tuple[SchemaType, ...] = ("JSON", "PROTOBUF", "AVRO")


@dataclasses.dataclass(frozen=True)
class SchemaReference:
    """A named type a schema uses from another subject's version (Confluent's ``SchemaReference``).

    Attributes:
        name: how the schema names it (an Avro full name, a JSON Schema ``$ref`` URL, a ``.proto`` import).
        subject: the subject that holds it.
        version: its version there (>= 1).
    """

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict:
        """Confluent's JSON shape: ``{"name", "subject", "version"}``."""
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclasses.dataclass(frozen=True)
class ParsedSchema:
    """A schema that parsed.

    Attributes:
        schema_type: ``AVRO``, ``JSON`` or ``PROTOBUF``.
        schema: the string it is kept and served as (see the module docstring).
        references: the types it uses from other subjects, in the order given.
        avro: Apache Avro's parsed schema (AVRO only; None for the other types), for compatibility checks.
        proto: protoc's descriptor of the file (PROTOBUF only), for compatibility checks.
    """

    schema_type: SchemaType
    schema: str
    references: tuple[SchemaReference, ...] = ()
    avro: avro.schema.Schema | None = dataclasses.field(default=None, compare=False, repr=False)
    proto: descriptor_pb2.FileDescriptorProto | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def identity(self) -> tuple:
        """What makes two registrations the same schema: type, kept string, references."""
        return self.schema_type, self.schema, self.references


def _json(text: str, schema_type: str) -> object:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidSchemaError(f"Invalid schema: the {schema_type} schema is not JSON ({e}); send the schema as a "
                                 "JSON string in the body's \"schema\" field.") from None


def _parse_avro(text: str, referenced: Sequence[str]) -> ParsedSchema:
    obj = _json(text, "AVRO")
    named: dict = {}
    names = avro.name.Names(validate_names=True)
    try:
        for ref_text in referenced:  # dependencies first: each one's named types are known to the next
            ref_obj = json.loads(ref_text)
            fastavro.parse_schema(ref_obj, named_schemas=named)
            avro.schema.make_avsc_object(ref_obj, names)
        fastavro.parse_schema(obj, named_schemas=named)
        parsed = avro.schema.make_avsc_object(obj, names)
    except (fastavro.schema.SchemaParseException, fastavro.schema.UnknownType, avro.errors.AvroException,
            ValueError, TypeError, KeyError, AttributeError) as e:
        raise InvalidSchemaError(f"Invalid schema: not a valid Avro schema: {e}") from None
    return ParsedSchema("AVRO", json.dumps(obj, separators=(",", ":"), ensure_ascii=False), avro=parsed)


def _parse_json_schema(text: str) -> ParsedSchema:
    obj = _json(text, "JSON")
    if not isinstance(obj, (dict, bool)):
        raise InvalidSchemaError("Invalid schema: a JSON Schema is an object (or true / false).")
    try:
        validator = jsonschema.validators.validator_for(obj, default=jsonschema.Draft202012Validator)
        validator.check_schema(obj)
    except jsonschema.exceptions.SchemaError as e:
        raise InvalidSchemaError(f"Invalid schema: not a valid JSON Schema: {e.message}") from None
    return ParsedSchema("JSON", json.dumps(obj, separators=(",", ":"), ensure_ascii=False))


def parse_schema(schema_type: str, schema: str, *, references: Sequence[SchemaReference] = (),
                 referenced: Sequence[tuple[str, str]] = ()) -> ParsedSchema:
    """Parse a schema as its type (see the module docstring).

    Args:
        schema_type: ``AVRO``, ``JSON`` or ``PROTOBUF`` (Confluent's ``schemaType``; AVRO when left out).
        schema: the schema's text.
        references: the references it declares.
        referenced: ``(name, schema text)`` of the references, resolved, dependencies first (Avro: their
            named types are defined before the schema is parsed; Protobuf: the files its imports name).

    Raises:
        InvalidSchemaError: 422 / 42201: an unknown type, or a schema that does not parse (the message says why).
    """
    if schema_type == "AVRO":
        parsed = _parse_avro(schema, [text for _, text in referenced])
    elif schema_type == "JSON":
        parsed = _parse_json_schema(schema)
    elif schema_type == "PROTOBUF":
        if not schema.strip():
            raise InvalidSchemaError("Invalid schema: the Protobuf schema is empty; send the .proto file's text.")
        parsed = ParsedSchema("PROTOBUF", schema,
                              proto=compile_proto(schema, imports=[(n, t) for n, t in referenced]))
    else:
        raise InvalidSchemaError(f"Invalid schema type {schema_type!r}: use one of {', '.join(SCHEMA_TYPES)}.")
    return dataclasses.replace(parsed, references=tuple(references))
