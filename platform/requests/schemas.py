"""The schema registry's requests (Confluent Schema Registry's REST API), one operation each, authorized.

Reads are answered from this broker's view of ``_schemas``; writes go to the registry's writer
(:class:`~lakelog.schemas.registry.SchemaRegistry`). Answers are the JSON Confluent's registry answers.

Authorization uses lakelog's ACLs (Confluent's registry ACLs are not modelled). A subject named by
Confluent's default ``TopicNameStrategy`` (``{topic}-key``, ``{topic}-value``) is authorized on its
topic, as Confluent's ``TopicAclAuthorizer`` does; any other subject on the cluster:

==================================================  ==========================================================
request                                             needs
==================================================  ==========================================================
read a subject (versions, lookup, compatibility     Describe on the topic (implied by Read and Write), else
test, its config and mode)                          Describe on the cluster
write a subject (register, delete, its config and   Write on the topic, else Alter on the cluster
mode)
``GET /subjects``, ``GET /schemas/ids/{id}/...``    only the subjects the principal may read are listed
``GET /schemas/ids/{id}``, ``/schemas/types``,      any authenticated principal (a consumer decoding a
global ``GET /config``, ``GET /mode``               record knows only its id)
global ``PUT``/``DELETE /config``, ``PUT /mode``    Alter on the cluster
==================================================  ==========================================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from lakelog.errors import InvalidBodyFieldError
from lakelog.errors.schemas import (
    InvalidEmbeddedSchemaError,
    KeySchemaMissingError,
    ValueSchemaMissingError,
    InvalidSchemaError,
    InvalidVersionError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.context import RequestContext
from lakelog.schemas.compatibility import incompatibilities
from lakelog.schemas.registry import SchemaRegistry
from lakelog.schemas.registry_state import SchemaVersion
from lakelog.schemas.registry_writes import check_subject, parse_candidate
from lakelog.schemas.schema_types import SCHEMA_TYPES, SchemaType
from lakelog.schemas.wire_format import avro_frames, decode_frames, json_frames, protobuf_frames
from lakelog.security.acls import Operation, ResourceType
from lakelog.security.authorizer import Authorizer

__all__ = ["EmbeddedRecords", "SchemaRegistryOperations", "parse_version", "subject_topic"]

_SUFFIXES = ("-key", "-value")


def subject_topic(subject: str) -> str | None:
    """The topic of a ``TopicNameStrategy`` subject (``orders-value`` -> ``orders``), None for another name."""
    for suffix in _SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return None


def parse_version(version: str) -> int:
    """A version in a path: a positive integer, or ``latest`` / ``-1`` (returned as -1).

    Raises:
        InvalidVersionError: 422 / 42202.
    """
    if version == "latest":
        return -1
    try:
        number = int(version)
    except ValueError:
        number = 0
    if number == -1 or 1 <= number <= 2**31 - 1:
        return number
    raise InvalidVersionError(f"The specified version '{version}' is not a valid version id. Allowed values are "
                              "between [1, 2^31-1] and the string \"latest\"")


#: schema type -> REST Proxy's embedded format of it, and what messages call it
_FORMATS = {"AVRO": "avro", "JSON": "jsonschema", "PROTOBUF": "protobuf"}
_LABELS = {"AVRO": "Avro", "JSON": "JSON Schema", "PROTOBUF": "Protobuf"}
_ENCODERS = {"AVRO": avro_frames, "JSON": json_frames, "PROTOBUF": protobuf_frames}


@dataclass(frozen=True)
class EmbeddedRecords:
    """REST Proxy's produce body in an embedded format, encoded
    (:meth:`SchemaRegistryOperations.encode_embedded_records`).

    Attributes:
        records: a produce batch (:data:`~lakelog.log_tables.records.PRODUCE_SCHEMA`), keys and values framed.
        record_partitions: int32, the partition each record named (nulls: none), or None.
        key_schema_id, value_schema_id: the schemas used (None: none).
    """

    records: pa.Table
    record_partitions: pa.Array | None
    key_schema_id: int | None
    value_schema_id: int | None


class SchemaRegistryOperations:
    """The registry requests of one broker (see the module docstring).

    Args:
        registry: this broker's :class:`~lakelog.schemas.registry.SchemaRegistry`.
        authorizer: the broker's ACLs.
    """

    def __init__(self, *, registry: SchemaRegistry, authorizer: Authorizer) -> None:
        self.registry = registry
        self.authorizer = authorizer

    @property
    def view(self):
        """This broker's :class:`~lakelog.schemas.registry_state.RegistryView`."""
        return self.registry.view

    # -- authorization --------------------------------------------------------------------------------

    def _require(self, context: RequestContext, subject: str | None, *, write: bool) -> None:
        permissions = RequestPermissions.of(self.authorizer, context)
        if not permissions.enabled:
            return
        topic = None if subject is None else subject_topic(subject)
        if topic is not None:
            permissions.require(Operation.WRITE if write else Operation.DESCRIBE, ResourceType.TOPIC, topic)
        else:
            permissions.require(Operation.ALTER if write else Operation.DESCRIBE, ResourceType.CLUSTER)

    def _readable(self, context: RequestContext, subjects: Sequence[str]) -> list[str]:
        permissions = RequestPermissions.of(self.authorizer, context)
        if not permissions.enabled:
            return list(subjects)
        out = []
        for s in subjects:
            topic = subject_topic(s)
            if (permissions.allows(Operation.DESCRIBE, ResourceType.TOPIC, topic) if topic is not None
                    else permissions.allows(Operation.DESCRIBE, ResourceType.CLUSTER)):
                out.append(s)
        return out

    # -- schemas by id ----------------------------------------------------------------------------------

    def schema_types(self) -> list[str]:
        """``GET /schemas/types``."""
        return list(SCHEMA_TYPES)

    def schema_by_id(self, schema_id: int, *, context: RequestContext) -> dict:
        """``GET /schemas/ids/{id}``: ``{"schema", "schemaType"?, "references"?}``. Raises SchemaNotFoundError."""
        v = self.view.by_id(schema_id)
        if v is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        body = v.to_dict()
        return {k: body[k] for k in ("schemaType", "references", "schema") if k in body}

    def schema_text(self, schema_id: int, *, context: RequestContext) -> str:
        """``GET /schemas/ids/{id}/schema``: the schema itself. Raises SchemaNotFoundError."""
        return self.schema_by_id(schema_id, context=context)["schema"]

    def _with_id(self, schema_id: int, *, deleted: bool, context: RequestContext) -> list[SchemaVersion]:
        found = [v for v in self.view.all_versions() if v.schema_id == schema_id]
        if not found:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        readable = set(self._readable(context, sorted({v.subject for v in found})))
        return sorted((v for v in found if v.subject in readable and (deleted or not v.deleted)),
                      key=lambda v: (v.subject, v.version))

    def subjects_of_id(self, schema_id: int, *, deleted: bool = False, context: RequestContext) -> list[str]:
        """``GET /schemas/ids/{id}/subjects``. Raises SchemaNotFoundError."""
        return sorted({v.subject for v in self._with_id(schema_id, deleted=deleted, context=context)})

    def versions_of_id(self, schema_id: int, *, deleted: bool = False, context: RequestContext) -> list[dict]:
        """``GET /schemas/ids/{id}/versions``: ``[{"subject", "version"}]``. Raises SchemaNotFoundError."""
        return [{"subject": v.subject, "version": v.version}
                for v in self._with_id(schema_id, deleted=deleted, context=context)]

    # -- subjects and versions ------------------------------------------------------------------------------

    def list_subjects(self, *, prefix: str = "", deleted: bool = False, deleted_only: bool = False,
                      context: RequestContext) -> list[str]:
        """``GET /subjects``: the subjects the principal may read (soft-deleted ones with ``deleted``; only
        those with ``deleted_only``), sorted."""
        names = self.view.subject_names(deleted=deleted or deleted_only)
        if deleted_only:
            live = set(self.view.subject_names())
            names = [s for s in names if s not in live or any(v.deleted for v in self.view.versions(s, deleted=True))]
        return self._readable(context, [s for s in names if s.startswith(prefix)])

    def _versions(self, subject: str, *, deleted: bool) -> list[SchemaVersion]:
        versions = self.view.versions(check_subject(subject), deleted=deleted)
        if not versions:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        return versions

    def list_versions(self, subject: str, *, deleted: bool = False, deleted_only: bool = False,
                      context: RequestContext) -> list[int]:
        """``GET /subjects/{s}/versions``. Raises SubjectNotFoundError."""
        self._require(context, subject, write=False)
        versions = self._versions(subject, deleted=deleted or deleted_only)
        return [v.version for v in versions if not deleted_only or v.deleted]

    def version(self, subject: str, version: str, *, deleted: bool = False, context: RequestContext) -> SchemaVersion:
        """``GET /subjects/{s}/versions/{v}`` (``latest``: the newest not soft-deleted).

        Raises: SubjectNotFoundError, VersionNotFoundError, InvalidVersionError.
        """
        self._require(context, subject, write=False)
        number = parse_version(version)
        versions = self._versions(subject, deleted=deleted or number != -1)
        if number == -1:
            return versions[-1]
        found = next((v for v in versions if v.version == number and (deleted or not v.deleted)), None)
        if found is None:
            raise VersionNotFoundError(f"Version {number} not found.")
        return found

    def referenced_by(self, subject: str, version: str, *, context: RequestContext) -> list[int]:
        """``GET /subjects/{s}/versions/{v}/referencedby``: ids of the schemas that reference the version."""
        v = self.version(subject, version, context=context)
        return self.view.referenced_by(v.subject, v.version)

    async def lookup(self, subject: str, body: dict, *, deleted: bool = False, context: RequestContext) -> SchemaVersion:
        """``POST /subjects/{s}``: the subject's version holding this schema. The schema is parsed in a worker
        thread (a Protobuf text the broker has not seen runs protoc: about 0.2 s).

        Raises: SubjectNotFoundError, SchemaNotFoundError, InvalidSchemaError.
        """
        return await asyncio.to_thread(self._lookup, subject, body, deleted=deleted, context=context)

    def _lookup(self, subject: str, body: dict, *, deleted: bool, context: RequestContext) -> SchemaVersion:
        self._require(context, subject, write=False)
        versions = self._versions(subject, deleted=deleted)
        wanted = parse_candidate(self.view, schema=body.get("schema"), schema_type=body.get("schemaType"),
                                 references=body.get("references"))
        for v in reversed(versions):
            if v.identity == wanted.identity:
                return v
        raise SchemaNotFoundError(f"Schema not found under subject '{subject}'")

    async def register(self, subject: str, body: dict, *, context: RequestContext) -> dict:
        """``POST /subjects/{s}/versions``: ``{"id": int}`` (the same schema again: the same id, nothing written).

        Raises: InvalidSchemaError, IncompatibleSchemaError, OperationNotPermittedError, InvalidSubjectError,
        the writer's errors.
        """
        self._require(context, check_subject(subject), write=True)
        return await self.registry.write({
            "op": "register", "subject": subject, "schema": body.get("schema"), "schemaType": body.get("schemaType"),
            "references": body.get("references") or [], "id": body.get("id"), "version": body.get("version")})

    async def check_compatibility(self, subject: str, version: str | None, body: dict, *, verbose: bool = False,
                                  context: RequestContext) -> dict:
        """``POST /compatibility/subjects/{s}/versions/{v}`` (``version`` None: against the versions the
        subject's level checks): ``{"is_compatible": bool, "messages": [...]?}``. Parsing and the check run
        in a worker thread (protoc for a Protobuf text the broker has not seen: about 0.2 s).

        Raises: VersionNotFoundError (a version given that does not exist), InvalidVersionError, InvalidSchemaError.
        """
        return await asyncio.to_thread(self._check_compatibility, subject, version, body, verbose=verbose,
                                       context=context)

    def _check_compatibility(self, subject: str, version: str | None, body: dict, *, verbose: bool,
                             context: RequestContext) -> dict:
        self._require(context, check_subject(subject), write=False)
        new = parse_candidate(self.view, schema=body.get("schema"), schema_type=body.get("schemaType"),
                              references=body.get("references"))
        level = self.view.compatibility(subject)
        live = self.view.versions(subject)
        if version is None:
            against = live
        else:
            number = parse_version(version)
            against = live[-1:] if number == -1 else [v for v in live if v.version == number]
            if number != -1 and not against:
                raise VersionNotFoundError(f"Version {number} not found.")
            level = level.replace("_TRANSITIVE", "")  # one version is checked
        problems = incompatibilities(level, new, [(v.version, self.view.parsed(v)) for v in against])
        answer: dict = {"is_compatible": not problems}
        if verbose:
            answer["messages"] = problems
        return answer

    async def delete_version(self, subject: str, version: str, *, permanent: bool = False,
                             context: RequestContext) -> int:
        """``DELETE /subjects/{s}/versions/{v}``: soft, or (``permanent``, after a soft one) for good."""
        self._require(context, check_subject(subject), write=True)
        return await self.registry.write({"op": "delete_version", "subject": subject,
                                          "version": parse_version(version), "permanent": permanent})

    async def delete_subject(self, subject: str, *, permanent: bool = False, context: RequestContext) -> list[int]:
        """``DELETE /subjects/{s}``: every version, soft, or (``permanent``, after a soft one) for good."""
        self._require(context, check_subject(subject), write=True)
        return await self.registry.write({"op": "delete_subject", "subject": subject, "permanent": permanent})

    # -- config and mode --------------------------------------------------------------------------------------

    def config(self, subject: str | None, *, default_to_global: bool = False, context: RequestContext) -> dict:
        """``GET /config`` and ``GET /config/{s}``: ``{"compatibilityLevel": level}``.

        Raises: SubjectCompatibilityNotConfiguredError (a subject without its own level, unless
        ``default_to_global``).
        """
        if subject is None:
            return {"compatibilityLevel": self.view.compatibility(None)}
        self._require(context, check_subject(subject), write=False)
        if subject not in self.view.configs and not default_to_global:
            raise SubjectCompatibilityNotConfiguredError(f"Subject '{subject}' does not have subject-level "
                                                         "compatibility configured")
        return {"compatibilityLevel": self.view.compatibility(subject)}

    async def set_config(self, subject: str | None, body: dict, *, context: RequestContext) -> dict:
        """``PUT /config`` and ``PUT /config/{s}`` ``{"compatibility": level}``: ``{"compatibility": level}``."""
        self._require(context, subject, write=True)
        return await self.registry.write({"op": "set_config", "subject": subject,
                                          "compatibility": body.get("compatibility")})

    async def delete_config(self, subject: str | None, *, context: RequestContext) -> dict:
        """``DELETE /config`` and ``DELETE /config/{s}``: the level removed, ``{"compatibilityLevel": old}``."""
        self._require(context, subject, write=True)
        return await self.registry.write({"op": "delete_config", "subject": subject})

    def mode(self, subject: str | None, *, default_to_global: bool = False, context: RequestContext) -> dict:
        """``GET /mode`` and ``GET /mode/{s}``: ``{"mode": mode}``.

        Raises: SubjectModeNotConfiguredError (a subject without its own mode, unless ``default_to_global``).
        """
        if subject is None:
            return {"mode": self.view.mode(None)}
        self._require(context, check_subject(subject), write=False)
        if subject not in self.view.modes and not default_to_global:
            raise SubjectModeNotConfiguredError(f"Subject '{subject}' does not have subject-level mode configured")
        return {"mode": self.view.mode(subject)}

    async def set_mode(self, subject: str | None, body: dict, *, force: bool = False,
                       context: RequestContext) -> dict:
        """``PUT /mode`` and ``PUT /mode/{s}`` ``{"mode": mode}``: ``{"mode": mode}``."""
        self._require(context, subject, write=True)
        return await self.registry.write({"op": "set_mode", "subject": subject, "mode": body.get("mode"),
                                          "force": force})

    async def delete_mode(self, subject: str, *, context: RequestContext) -> dict:
        """``DELETE /mode/{s}``: the subject's mode removed, ``{"mode": old}``."""
        self._require(context, check_subject(subject), write=True)
        return await self.registry.write({"op": "delete_mode", "subject": subject})

    # -- REST Proxy's embedded formats: produce and consume ------------------------------------------------

    async def embedded_schema(self, topic: str, *, schema_type: SchemaType, field: str, schema: object,
                              schema_id: object, context: RequestContext) -> SchemaVersion | None:
        """The schema a REST Proxy produce request in an embedded format names for its keys or values
        (``field``: ``key`` or ``value``): ``{field}_schema`` is registered under ``{topic}-{field}`` as
        ``schema_type`` (the same schema again: its id), ``{field}_schema_id`` is looked up; None when it
        names neither.

        Raises:
            InvalidEmbeddedSchemaError: 422 / 42205: a schema that does not parse, an id that names no schema
                of that type; the registration's errors (IncompatibleSchemaError, AuthorizationError, ...).
        """
        label = _LABELS[schema_type]
        if schema is not None:
            if not isinstance(schema, str):
                raise InvalidEmbeddedSchemaError(f"{field}_schema must be the {label} schema as a string.")
            try:
                schema_id = (await self.register(f"{topic}-{field}", {"schema": schema, "schemaType": schema_type},
                                                 context=context))["id"]
            except InvalidSchemaError as e:
                raise InvalidEmbeddedSchemaError(f"{field}_schema: {e.message}. Nothing was written.") from None
        if schema_id is None:
            return None
        found = self.view.by_id(schema_id) if isinstance(schema_id, int) and not isinstance(schema_id, bool) else None
        if found is None or found.schema_type != schema_type:
            raise InvalidEmbeddedSchemaError(f"{field}_schema_id {schema_id!r} names no {label} schema of the "
                                             f"registry; register it first or send the schema as {field}_schema.")
        return found

    def _frames(self, schema: SchemaVersion | None, values: Sequence[object], *, what: str) -> pa.Array:
        if schema is None:
            return pa.nulls(len(values), pa.binary())
        encode = _ENCODERS[schema.schema_type]
        return pa.array(encode(schema.schema, self.view.referenced_schemas(schema.references), schema.schema_id,
                               values, what=what), pa.binary())

    async def encode_embedded_records(self, topic: str, *, schema_type: SchemaType, key_schema: object,
                                      key_schema_id: object, value_schema: object, value_schema_id: object,
                                      keys: Sequence[object], values: Sequence[object], partitions: Sequence[object],
                                      context: RequestContext) -> EmbeddedRecords:
        """REST Proxy's produce body in an embedded format (``AVRO``: ``avro``, ``JSON``: ``jsonschema``,
        ``PROTOBUF``: ``protobuf``) as a produce batch: the schemas named (:meth:`embedded_schema`), each key
        and value validated and in Confluent's wire format (:mod:`lakelog.schemas.wire_format`). The
        request's shape is checked before any schema is registered; the records are encoded off the event
        loop, each column as one batch.

        Args:
            topic: the topic produced to. schema_type: the format's schema type.
            key_schema, key_schema_id, value_schema, value_schema_id: the body's.
            keys, values: the records' keys and values (REST Proxy's JSON of them; None: none).
            partitions: the partition each record names (None: none).

        Raises:
            InvalidBodyFieldError (42222: a partition that is no int32 >= 0), KeySchemaMissingError (42201),
            ValueSchemaMissingError (42202), InvalidEmbeddedSchemaError (42205), InvalidEncodingError (42203:
            a key or value its schema refuses, naming the record), the registration's errors. Nothing is
            produced; a schema may have been registered.
        """
        if not all(p is None or (isinstance(p, int) and not isinstance(p, bool) and 0 <= p < 2**31) for p in partitions):
            raise InvalidBodyFieldError("A record's partition must be an integer from 0 (or left out). Nothing was "
                                        "written.")
        if key_schema is None and key_schema_id is None and any(k is not None for k in keys):
            raise KeySchemaMissingError("Records have keys but the request names no key_schema or key_schema_id. "
                                        "Nothing was written.")
        if value_schema is None and value_schema_id is None and any(v is not None for v in values):
            raise ValueSchemaMissingError("Records have values but the request names no value_schema or "
                                          "value_schema_id. Nothing was written.")
        key = await self.embedded_schema(topic, schema_type=schema_type, field="key", schema=key_schema,
                                         schema_id=key_schema_id, context=context)
        value = await self.embedded_schema(topic, schema_type=schema_type, field="value", schema=value_schema,
                                           schema_id=value_schema_id, context=context)
        n = len(values)
        key_frames, value_frames = await asyncio.gather(
            asyncio.to_thread(self._frames, key, keys, what="key"),
            asyncio.to_thread(self._frames, value, values, what="value"))
        records = pa.table({"key": key_frames, "value": value_frames,
                            "headers": pa.nulls(n, PRODUCE_SCHEMA.field("headers").type),
                            "timestamp": pa.nulls(n, pa.int64())}, schema=PRODUCE_SCHEMA)
        parts = None if all(p is None for p in partitions) else pa.array(partitions, pa.int32())
        return EmbeddedRecords(records=records, record_partitions=parts,
                               key_schema_id=None if key is None else key.schema_id,
                               value_schema_id=None if value is None else value.schema_id)

    async def encode_v3_data(self, topic: str, *, field: str, data: object, schema_id: int | None,
                             subject: str | None, schema_version: int | None, type_name: str | None,
                             context: RequestContext) -> bytes | None:
        """A REST Proxy v3 record's schema'd key or value (Confluent Server's v3 produce: ``{"schema_id": N,
        "data": ...}`` or ``{"subject": S, "schema_version": V, "data": ...}``) in Confluent's wire format:
        ``data`` (Avro's JSON encoding, the JSON document, protobuf's JSON mapping of the first message)
        serialized with the schema of ``schema_id``, else of ``subject`` (default ``{topic}-{field}``:
        TopicNameStrategy) at ``schema_version`` (default or -1: the latest). None stays None (a tombstone).

        Args:
            field: ``key`` or ``value``. type_name: the data's ``type`` when it names a format (``AVRO``,
                ``JSONSCHEMA``, ``PROTOBUF``): the schema must be of it.

        Raises:
            InvalidEmbeddedSchemaError: 422 / 42205: no such schema, subject or version, or a schema of another
                type than ``type_name``. InvalidEncodingError: 422 / 42203: ``data`` its schema refuses.
            AuthorizationError: a subject's version the principal may not read.
        """
        if schema_id is not None:
            found = self.view.by_id(schema_id)
            if found is None:
                raise InvalidEmbeddedSchemaError(f"{field}.schema_id {schema_id} names no schema of the registry; "
                                                 "register it first. Nothing was written.")
        else:
            name = subject or f"{topic}-{field}"
            try:
                found = self.version(name, "latest" if schema_version in (None, -1) else str(schema_version),
                                     context=context)
            except SchemaRegistryError as e:
                raise InvalidEmbeddedSchemaError(f"{field}: subject '{name}' version "
                                                 f"{schema_version or 'latest'}: {e.message}. Nothing was written."
                                                 ) from None
        wanted = {"AVRO": "AVRO", "JSONSCHEMA": "JSON", "PROTOBUF": "PROTOBUF"}.get((type_name or "").upper())
        if wanted is not None and found.schema_type != wanted:
            raise InvalidEmbeddedSchemaError(f"{field}.type is {type_name} but schema id {found.schema_id} is a "
                                             f"{_LABELS[found.schema_type]} schema. Nothing was written.")
        if data is None:
            return None
        return _ENCODERS[found.schema_type](found.schema, self.view.referenced_schemas(found.references),
                                            found.schema_id, [data], what=field)[0]

    def decode_records(self, records: pa.Table, *, schema_type: SchemaType, topic: str,
                       partition: int) -> pa.Table:
        """``records`` (a fetch's columns) with each key and value in Confluent's wire format replaced by REST
        Proxy's JSON of it (:func:`lakelog.schemas.wire_format.reader`), for a consumer instance of format
        ``avro`` / ``jsonschema`` / ``protobuf``. Schemas are looked up by id (any principal reads a schema
        by id); each schema is parsed once per call. Blocking: call it off the event loop.

        Raises:
            RecordDeserializationError: 408 / 40801 (REST Proxy's ``SerializationException``): a key or value
                not in the wire format, whose id names no schema of ``schema_type``, or that its schema does
                not read, naming the offset.
        """
        offsets = records["offset"].to_pylist()

        def schema_of(schema_id: int):
            found = self.view.by_id(schema_id)
            return None if found is None else (found.schema_type, found.schema,
                                               self.view.referenced_schemas(found.references))

        columns = {}
        for what in ("key", "value"):
            def where(i: int, what: str = what) -> str:
                return (f"the {what} of {topic}-{partition} at offset {offsets[i]} (this {_FORMATS[schema_type]} "
                        "consumer instance cannot return it; read it with a binary instance or seek past it)")
            columns[what] = pa.array(decode_frames(records[what].to_pylist(), schema_type=schema_type,
                                                   schema_of=schema_of, where=where), pa.binary())
        for what, column in columns.items():
            records = records.set_column(records.schema.get_field_index(what), what, column)
        return records
