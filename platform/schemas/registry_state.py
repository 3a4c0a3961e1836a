"""The registry's records in ``_schemas`` and the view every broker folds them into.

The records are Confluent Schema Registry's (``SchemaRegistryKey`` / ``SchemaRegistryValue`` as JSON), so
a ``_schemas`` topic reads the same:

==========  ======================================================  ============================================
key type    key                                                     value (null: a tombstone)
==========  ======================================================  ============================================
``SCHEMA``  ``{"keytype":"SCHEMA","subject":s,"version":v,          ``{"subject","version","id","schema",
            "magic":1}``                                            "schemaType"?,"references"?,"deleted"}``;
                                                                    a tombstone: the version is gone
                                                                    (permanent delete)
``CONFIG``  ``{"keytype":"CONFIG","subject":s|null,"magic":0}``      ``{"compatibilityLevel": level}``; a
                                                                    tombstone: back to the global level
``MODE``    ``{"keytype":"MODE","subject":s|null,"magic":0}``        ``{"mode": mode}``; a tombstone: back to the
                                                                    global mode
==========  ======================================================  ============================================

A soft delete rewrites a version's record with ``"deleted": true``; a permanent one writes its tombstone.
Each record is the whole state of its key, so folding the same record twice changes nothing and a
compacted topic folds to the same view.

:class:`RegistryView` is the fold: subjects, versions, ids, levels and modes, with the reads of the REST API.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator

import pyarrow as pa

from lakelog.schemas.compatibility import DEFAULT_COMPATIBILITY, CompatibilityLevel
from lakelog.schemas.schema_types import ParsedSchema, SchemaReference, SchemaType, parse_schema

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_MODE", "RegistryView", "SchemaVersion", "config_record", "mode_record", "schema_record",
           "schema_tombstone", "version_from_dict"]

#: Confluent's default mode: writes allowed.
DEFAULT_MODE = "READWRITE"

Record = tuple[bytes, bytes | None]


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclasses.dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject.

    Attributes:
        subject, version: where it is (version >= 1).
        schema_id: the schema's id (the same schema has the same id under every subject).
        schema_type: ``AVRO``, ``JSON`` or ``PROTOBUF``.
        schema: the schema's kept string (:mod:`lakelog.schemas.schema_types`).
        references: the types it uses from other subjects.
        deleted: soft-deleted (hidden unless a read asks for deleted versions).
    """

    subject: str
    version: int
    schema_id: int
    schema_type: SchemaType
    schema: str
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False

    def to_dict(self) -> dict:
        """The REST answer: ``{"subject", "version", "id", "schemaType"?, "references"?, "schema"}``
        (``schemaType`` left out for AVRO and ``references`` when empty, as Confluent answers)."""
        out: dict = {"subject": self.subject, "version": self.version, "id": self.schema_id}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_dict() for r in self.references]
        out["schema"] = self.schema
        return out

    @property
    def identity(self) -> tuple:
        """What makes two registrations the same schema (:attr:`ParsedSchema.identity`)."""
        return self.schema_type, self.schema, self.references


def schema_record(v: SchemaVersion) -> Record:
    """The ``SCHEMA`` record of a version."""
    key = {"keytype": "SCHEMA", "subject": v.subject, "version": v.version, "magic": 1}
    value: dict = {"subject": v.subject, "version": v.version, "id": v.schema_id, "schema": v.schema,
                   "deleted": v.deleted}
    if v.schema_type != "AVRO":
        value["schemaType"] = v.schema_type
    if v.references:
        value["references"] = [r.to_dict() for r in v.references]
    return _dump(key), _dump(value)


def schema_tombstone(subject: str, version: int) -> Record:
    """The tombstone of a version (a permanent delete)."""
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}), None


def config_record(subject: str | None, level: CompatibilityLevel | None) -> Record:
    """A ``CONFIG`` record: the subject's (None: the global) level; None writes its tombstone."""
    key = _dump({"keytype": "CONFIG", "subject": subject, "magic": 0})
    return key, None if level is None else _dump({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    """A ``MODE`` record: the subject's (None: the global) mode; None writes its tombstone."""
    key = _dump({"keytype": "MODE", "subject": subject, "magic": 0})
    return key, None if mode is None else _dump({"mode": mode})


def version_from_dict(value: dict) -> SchemaVersion:
    """A version from its ``_schemas`` record value, or from the REST answer of
    ``GET /subjects/{subject}/versions/{version}`` (``{"subject", "version", "id", "schema", "schemaType"?,
    "references"?, "deleted"?}``; a missing ``schemaType`` is AVRO, a missing ``deleted`` false).

    Raises:
        KeyError, ValueError, TypeError: a dict of another shape.
    """
    refs = tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                 for r in value.get("references") or ())
    return SchemaVersion(subject=str(value["subject"]), version=int(value["version"]), schema_id=int(value["id"]),
                         schema_type=value.get("schemaType") or "AVRO", schema=str(value["schema"]),
                         references=refs, deleted=bool(value.get("deleted", False)))


class RegistryView:
    """Everything ``_schemas`` holds up to :attr:`next_offset`, folded (see the module docstring).

    Attributes:
        next_offset: the offset of the next record to fold (every record below it is in the view).
        max_id: the largest schema id seen (the next new schema gets ``max_id + 1``).
    """

    def __init__(self) -> None:
        self.next_offset = 0
        self.max_id = 0
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.configs: dict[str | None, CompatibilityLevel] = {}
        self.modes: dict[str | None, str] = {}
        self._parsed: dict[tuple, ParsedSchema] = {}

    # -- the fold ---------------------------------------------------------------------------------

    def fold(self, rows: pa.Table, *, next_offset: int) -> int:
        """Fold records (columns ``key``, ``value``; in offset order) and move :attr:`next_offset` to
        ``next_offset``. Returns the records applied; one that is not the registry's is skipped (logged)."""
        applied = 0
        for key, value in zip(rows["key"].to_pylist(), rows["value"].to_pylist()):
            try:
                self.apply(key, value)
                applied += 1
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                log.warning("_schemas: skipped a record that is not the registry's (%s): key %r", e, key)
        self.next_offset = max(self.next_offset, next_offset)
        return applied

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Fold one record. Raises ValueError / KeyError / TypeError on a record of another shape."""
        k = json.loads(key or b"null")
        keytype = k.get("keytype")
        if keytype == "SCHEMA":
            subject, version = str(k["subject"]), int(k["version"])
            if value is None:
                versions = self.subjects.get(subject, {})
                versions.pop(version, None)
                if not versions:
                    self.subjects.pop(subject, None)
                return
            v = version_from_dict(json.loads(value))
            self.subjects.setdefault(subject, {})[version] = v
            self.max_id = max(self.max_id, v.schema_id)
        elif keytype == "CONFIG":
            if value is None:
                self.configs.pop(k.get("subject"), None)
            else:
                self.configs[k.get("subject")] = json.loads(value)["compatibilityLevel"]
        elif keytype == "MODE":
            if value is None:
                self.modes.pop(k.get("subject"), None)
            else:
                self.modes[k.get("subject")] = json.loads(value)["mode"]
        # NOOP, DELETE_SUBJECT, CLEAR_SUBJECT (Confluent's other key types): their effect is in SCHEMA records

    # -- reads --------------------------------------------------------------------------------------

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, oldest first; soft-deleted ones only with ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        """The subjects with a version (not soft-deleted, unless ``deleted``), sorted."""
        return sorted(s for s in self.subjects if self.versions(s, deleted=deleted))

    def all_versions(self) -> Iterator[SchemaVersion]:
        """Every version of every subject, soft-deleted ones included."""
        for versions in self.subjects.values():
            yield from versions.values()

    def by_id(self, schema_id: int) -> SchemaVersion | None:
        """A version with this id (one that is not soft-deleted first), None when no version has it."""
        found = [v for v in self.all_versions() if v.schema_id == schema_id]
        found.sort(key=lambda v: (v.deleted, v.subject, v.version))
        return found[0] if found else None

    def id_of(self, identity: tuple) -> int | None:
        """The id of a schema already registered under any subject (:attr:`ParsedSchema.identity`)."""
        for v in self.all_versions():
            if v.identity == identity:
                return v.schema_id
        return None

    def compatibility(self, subject: str | None) -> CompatibilityLevel:
        """The subject's level, else the global one, else ``BACKWARD``."""
        return self.configs.get(subject) or self.configs.get(None) or DEFAULT_COMPATIBILITY

    def mode(self, subject: str | None) -> str:
        """The subject's mode, else the global one, else ``READWRITE``."""
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas (versions not soft-deleted) that reference ``subject`` version ``version``."""
        return sorted({v.schema_id for v in self.all_versions() if not v.deleted
                       and any(r.subject == subject and r.version == version for r in v.references)})

    def parsed(self, v: SchemaVersion) -> ParsedSchema:
        """A registered version parsed (cached by schema), for compatibility checks."""
        cached = self._parsed.get(v.identity)
        if cached is None:
            cached = parse_schema(v.schema_type, v.schema, references=v.references,
                                  referenced=self.referenced_schemas(v.references))
            self._parsed[v.identity] = cached
        return cached

    def referenced_texts(self, references: tuple[SchemaReference, ...] | list[SchemaReference]) -> list[str]:
        """The schema texts of ``references`` and of theirs, dependencies first, each once. A reference to a
        version the view does not hold is left out (the parse then fails naming the missing type)."""
        return [text for _, text in self.referenced_schemas(references)]

    def referenced_schemas(self, references: tuple[SchemaReference, ...] | list[SchemaReference]
                           ) -> list[tuple[str, str]]:
        """``(name, schema text)`` of ``references`` and of theirs, dependencies first, each once (``name``:
        as the referring schema names it, e.g. a ``.proto`` import path)."""
        out: list[tuple[str, str]] = []
        seen: set[tuple[str, int]] = set()

        def visit(refs) -> None:
            for r in refs:
                if (r.subject, r.version) in seen:
                    continue
                seen.add((r.subject, r.version))
                found = self.subjects.get(r.subject, {}).get(r.version)
                if found is not None:
                    visit(found.references)
                    out.append((r.name, found.schema))
        visit(references)
        return out
