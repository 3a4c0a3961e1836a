"""The registry's writes decided: from the view and a write command, the records to append and the answer.

Pure functions (no I/O): the registry's one writer (the leader of ``_schemas`` partition 0,
:mod:`lakelog.schemas.registry`) calls :func:`decide` on its caught-up view under its write lock, appends
the records, and answers once its view folded them. A command is a JSON object, so a broker that does not
lead ``_schemas`` forwards it as it is:

===================  =====================================================  ============================
``op``               fields                                                 answer
===================  =====================================================  ============================
``register``         ``subject``, ``schema``, ``schemaType``,               ``{"id": int}``
                     ``references``, ``id``? / ``version``? (IMPORT mode)
``delete_version``   ``subject``, ``version`` (int), ``permanent``          the version (int)
``delete_subject``   ``subject``, ``permanent``                             the versions deleted
``set_config``       ``subject`` (null: global), ``compatibility``          ``{"compatibility": level}``
``delete_config``    ``subject`` (null: global)                             ``{"compatibilityLevel": old}``
``set_mode``         ``subject`` (null: global), ``mode``, ``force``        ``{"mode": mode}``
``delete_mode``      ``subject``                                            ``{"mode": old}``
===================  =====================================================  ============================

The rules are Confluent Schema Registry's (``KafkaSchemaRegistry.register``, ``deleteSchemaVersion``,
``deleteSubject``): a schema the subject already has (not soft-deleted) answers its id and writes nothing;
a new version is checked against the subject's versions under its compatibility level, gets the id the
same schema has under any subject (else the largest id + 1) and the subject's largest version + 1 (soft-
deleted ones count); a permanent delete needs a soft delete first; a version another schema references
is not deleted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from lakelog.errors.schemas import (
    IncompatibleSchemaError,
    InvalidModeError,
    InvalidSchemaError,
    InvalidSubjectError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaVersionNotSoftDeletedError,
    SchemaVersionSoftDeletedError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
)
from lakelog.schemas.compatibility import compatibility_level, incompatibilities
from lakelog.schemas.registry_state import (
    Record,
    RegistryView,
    SchemaVersion,
    config_record,
    mode_record,
    schema_record,
    schema_tombstone,
)
from lakelog.schemas.schema_types import ParsedSchema, SchemaReference, parse_schema

__all__ = ["MODES", "check_subject", "decide", "parse_candidate"]

#: Confluent's modes.
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


def check_subject(subject: str) -> str:
    """``subject`` when it is a valid name. Raises InvalidSubjectError (422 / 42208): empty, or with a
    control character."""
    if not subject or any(ord(c) < 32 for c in subject):
        raise InvalidSubjectError(f"Invalid subject {subject!r}: a subject is a non-empty name without control "
                                  "characters, e.g. \"orders-value\".")
    return subject


def parse_candidate(view: RegistryView, *, schema: object, schema_type: object,
                    references: object) -> ParsedSchema:
    """A schema sent to be registered, looked up or checked, parsed with its references resolved.

    Raises:
        InvalidSchemaError: 422 / 42201: no schema, a reference to a version that does not exist, or a schema
            that does not parse.
    """
    if not isinstance(schema, str):
        raise InvalidSchemaError("Invalid schema: the body's \"schema\" must be the schema as a string.")
    refs = []
    for r in references or ():
        try:
            ref = SchemaReference(str(r["name"]), check_subject(str(r["subject"])), int(r["version"]))
        except (KeyError, TypeError, ValueError):
            raise InvalidSchemaError(f"Invalid schema: a reference is {{\"name\", \"subject\", \"version\"}}, "
                                     f"not {r!r}.") from None
        found = view.subjects.get(ref.subject, {}).get(ref.version)
        if found is None:
            raise InvalidSchemaError(f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r} "
                                     f"version {ref.version}, which does not exist; register it first.")
        refs.append(ref)
    return parse_schema(str(schema_type or "AVRO").upper(), schema, references=refs,
                        referenced=view.referenced_schemas(refs))


def _writable(view: RegistryView, subject: str | None, *, importing: bool = False) -> None:
    mode = view.mode(subject)
    if mode == "READONLY" or (mode == "READONLY_OVERRIDE"):
        raise OperationNotPermittedError(f"Subject {subject!r} is in {mode} mode: no writes. Set it to READWRITE "
                                         f"(PUT /mode/{subject or ''}) first.")
    if importing and mode != "IMPORT":
        raise OperationNotPermittedError("A schema id or version may be given only in IMPORT mode; leave them out "
                                         "or set the subject's mode to IMPORT.")


def _register(view: RegistryView, cmd: dict) -> tuple[list[Record], dict]:
    subject = check_subject(cmd["subject"])
    wanted_id, wanted_version = cmd.get("id"), cmd.get("version")
    _writable(view, subject, importing=wanted_id is not None and wanted_id >= 0)
    new = parse_candidate(view, schema=cmd.get("schema"), schema_type=cmd.get("schemaType"),
                          references=cmd.get("references"))
    live = view.versions(subject)
    for v in live:
        if v.identity == new.identity:
            return [], {"id": v.schema_id}
    problems = incompatibilities(view.compatibility(subject), new, [(v.version, view.parsed(v)) for v in live])
    if problems:
        raise IncompatibleSchemaError(
            f"Schema being registered is incompatible with an earlier schema for subject {subject!r} "
            f"(compatibility {view.compatibility(subject)}): " + "; ".join(problems))
    schema_id = wanted_id if wanted_id is not None and wanted_id >= 0 else view.id_of(new.identity)
    if schema_id is None:
        schema_id = view.max_id + 1
    every = view.versions(subject, deleted=True)
    version = wanted_version if wanted_version else (every[-1].version + 1 if every else 1)
    v = SchemaVersion(subject=subject, version=version, schema_id=schema_id, schema_type=new.schema_type,
                      schema=new.schema, references=new.references)
    return [schema_record(v)], {"id": schema_id}


def _delete_version(view: RegistryView, cmd: dict) -> tuple[list[Record], int]:
    subject, number, permanent = check_subject(cmd["subject"]), int(cmd["version"]), bool(cmd.get("permanent"))
    _writable(view, subject)
    every = view.versions(subject, deleted=True)
    if not every:
        raise SubjectNotFoundError(f"Subject '{subject}' not found.")
    if number == -1:  # latest
        live = view.versions(subject, deleted=permanent)
        if not live:
            raise VersionNotFoundError(f"Version latest not found: subject '{subject}' has no version left.")
        number = live[-1].version
    v = next((v for v in every if v.version == number), None)
    if v is None:
        raise VersionNotFoundError(f"Version {number} not found.")
    if view.referenced_by(subject, number):
        raise ReferenceExistsError(f"Subject '{subject}' version {number} is referenced by schema id(s) "
                                   f"{view.referenced_by(subject, number)}; delete those first.")
    if permanent:
        if not v.deleted:
            raise SchemaVersionNotSoftDeletedError(f"Subject '{subject}' Version {number} was not deleted first "
                                                   "before being permanently deleted")
        return [schema_tombstone(subject, number)], number
    if v.deleted:
        raise SchemaVersionSoftDeletedError(f"Subject '{subject}' Version {number} was soft deleted. Set "
                                            "permanent=true to delete permanently")
    return [schema_record(dataclasses.replace(v, deleted=True))], number


def _delete_subject(view: RegistryView, cmd: dict) -> tuple[list[Record], list[int]]:
    subject, permanent = check_subject(cmd["subject"]), bool(cmd.get("permanent"))
    _writable(view, subject)
    every, live = view.versions(subject, deleted=True), view.versions(subject)
    if not every:
        raise SubjectNotFoundError(f"Subject '{subject}' not found.")
    for v in live:
        if view.referenced_by(subject, v.version):
            raise ReferenceExistsError(f"Subject '{subject}' version {v.version} is referenced by schema id(s) "
                                       f"{view.referenced_by(subject, v.version)}; delete those first.")
    if permanent:
        if live:
            raise SubjectNotSoftDeletedError(f"Subject '{subject}' was not deleted first before being permanently "
                                             "deleted")
        records = [schema_tombstone(subject, v.version) for v in every]
        if subject in view.configs:
            records.append(config_record(subject, None))
        if subject in view.modes:
            records.append(mode_record(subject, None))
        return records, [v.version for v in every]
    if not live:
        raise SubjectSoftDeletedError(f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                                      "permanently")
    return [schema_record(dataclasses.replace(v, deleted=True)) for v in live], [v.version for v in live]


def _set_config(view: RegistryView, cmd: dict) -> tuple[list[Record], dict]:
    subject = cmd.get("subject")
    if subject is not None:
        check_subject(subject)
    level = compatibility_level(cmd.get("compatibility"))
    return [config_record(subject, level)], {"compatibility": level}


def _delete_config(view: RegistryView, cmd: dict) -> tuple[list[Record], dict]:
    subject = cmd.get("subject")
    if subject is None:
        return [config_record(None, None)], {"compatibilityLevel": view.compatibility(None)}
    if subject not in view.configs:
        raise SubjectCompatibilityNotConfiguredError(f"Subject '{subject}' does not have subject-level "
                                                     "compatibility configured")
    return [config_record(subject, None)], {"compatibilityLevel": view.configs[subject]}


def _set_mode(view: RegistryView, cmd: dict) -> tuple[list[Record], dict]:
    subject, mode = cmd.get("subject"), str(cmd.get("mode") or "").upper()
    if subject is not None:
        check_subject(subject)
    if mode not in MODES:
        raise InvalidModeError(f"Invalid mode {cmd.get('mode')!r}: use one of {', '.join(MODES)}.")
    if mode == "IMPORT" and not cmd.get("force"):
        holds = view.versions(subject, deleted=True) if subject is not None else view.subject_names(deleted=True)
        if holds:
            raise OperationNotPermittedError(f"Cannot set IMPORT mode on {'subject ' + repr(subject) if subject else 'the registry'}: "
                                             "it holds schemas already. Delete them, or set it with force=true.")
    return [mode_record(subject, mode)], {"mode": mode}


def _delete_mode(view: RegistryView, cmd: dict) -> tuple[list[Record], dict]:
    subject = check_subject(cmd["subject"])
    if subject not in view.modes:
        raise SubjectModeNotConfiguredError(f"Subject '{subject}' does not have subject-level mode configured")
    return [mode_record(subject, None)], {"mode": view.modes[subject]}


_DECISIONS: dict[str, Callable[[RegistryView, dict], tuple[list[Record], object]]] = {
    "register": _register, "delete_version": _delete_version, "delete_subject": _delete_subject,
    "set_config": _set_config, "delete_config": _delete_config, "set_mode": _set_mode, "delete_mode": _delete_mode,
}


def decide(view: RegistryView, command: dict) -> tuple[list[Record], object]:
    """The records a write command appends (possibly none) and its answer (see the module docstring).

    Raises:
        The schema registry's errors (:mod:`lakelog.errors.schemas`) of each command; ValueError for an
        unknown ``op``.
    """
    decision = _DECISIONS.get(command.get("op", ""))
    if decision is None:
        raise ValueError(f"unknown schema registry write {command.get('op')!r}")
    return decision(view, command)
