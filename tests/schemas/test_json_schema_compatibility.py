"""JSON Schema compatibility without a broker: Confluent's ``JsonSchemaDiff`` rules under each level
(the cases are Confluent's: its ``diff-schema-examples.json`` describes them the same way)."""

from __future__ import annotations

import json

import pytest

from lakelog.schemas.compatibility import incompatibilities
from lakelog.schemas.json_compatibility import json_schema_differences
from lakelog.schemas.schema_types import parse_schema


def _obj(properties: dict, *, required=(), additional=None) -> str:
    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if additional is not None:
        schema["additionalProperties"] = additional
    return json.dumps(schema)


def _compatible(level: str, old: str, new: str) -> bool:
    return incompatibilities(level, parse_schema("JSON", new), [(1, parse_schema("JSON", old))]) == []


def _kinds(old: str, new: str) -> set[tuple[str, bool]]:
    return {(kind, ok) for kind, _, ok in json_schema_differences(old, new)}


CLOSED = _obj({"id": {"type": "integer"}}, required=["id"], additional=False)
CLOSED_PLUS_OPTIONAL = _obj({"id": {"type": "integer"}, "note": {"type": "string"}}, required=["id"],
                            additional=False)
OPEN = _obj({"id": {"type": "integer"}}, required=["id"])
OPEN_PLUS_OPTIONAL = _obj({"id": {"type": "integer"}, "note": {"type": "string"}}, required=["id"])


@pytest.mark.parametrize("level, old, new, compatible", [
    # an optional property added to a closed content model: new readers read old data; old readers refuse
    # the new property (additionalProperties false)
    ("BACKWARD", CLOSED, CLOSED_PLUS_OPTIONAL, True),
    ("FORWARD", CLOSED, CLOSED_PLUS_OPTIONAL, False),
    ("FULL", CLOSED, CLOSED_PLUS_OPTIONAL, False),
    # to an open content model: old data may hold anything under that name (Confluent's rule), but old
    # readers read new data
    ("BACKWARD", OPEN, OPEN_PLUS_OPTIONAL, False),
    ("FORWARD", OPEN, OPEN_PLUS_OPTIONAL, True),
    ("NONE", OPEN, OPEN_PLUS_OPTIONAL, True),
])
def test_adding_a_property_depends_on_the_content_model(level, old, new, compatible):
    assert _compatible(level, old, new) is compatible


def test_type_changes_constraints_and_required():
    integer, number, string = ('{"type": "integer"}', '{"type": "number"}', '{"type": "string"}')
    assert _kinds(integer, number) == {("TYPE_EXTENDED", True)}
    assert _kinds(number, integer) == {("TYPE_NARROWED", False)}
    assert _kinds(integer, string) == {("TYPE_CHANGED", False)}
    assert _kinds(string, '{"type": ["string", "null"]}') == {("TYPE_EXTENDED", True)}
    assert _kinds('{"type": "string", "maxLength": 5}', '{"type": "string", "maxLength": 9}') == {
        ("MAX_LENGTH_INCREASED", True)}
    assert _kinds('{"type": "string"}', '{"type": "string", "minLength": 1}') == {("MIN_LENGTH_ADDED", False)}
    assert _kinds('{"type": "number", "multipleOf": 4}', '{"type": "number", "multipleOf": 2}') == {
        ("MULTIPLE_OF_REDUCED", True)}
    assert _kinds('{"enum": ["a", "b"]}', '{"enum": ["a", "b", "c"]}') == {("ENUM_ARRAY_EXTENDED", True)}
    assert _kinds('{"enum": ["a", "b"]}', '{"enum": ["a"]}') == {("ENUM_ARRAY_NARROWED", False)}
    with_default = _obj({"id": {"type": "integer"}, "n": {"type": "integer", "default": 0}},
                        required=["id", "n"], additional=False)
    assert ("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", True) in _kinds(CLOSED, with_default)
    required = _obj({"id": {"type": "integer"}, "n": {"type": "integer"}}, required=["id", "n"], additional=False)
    assert ("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", False) in _kinds(CLOSED, required)
    assert not _compatible("BACKWARD", CLOSED, required)


def test_sum_types_refs_and_nested_properties():
    string = '{"type": "string"}'
    nullable = '{"oneOf": [{"type": "string"}, {"type": "null"}]}'
    assert _compatible("BACKWARD", string, nullable)
    assert not _compatible("FORWARD", string, nullable)
    old = json.dumps({"$defs": {"Amount": {"type": "integer"}}, "type": "object",
                      "properties": {"amount": {"$ref": "#/$defs/Amount"}}})
    new = json.dumps({"$defs": {"Amount": {"type": "number"}}, "type": "object",
                      "properties": {"amount": {"$ref": "#/$defs/Amount"}}})
    assert _kinds(old, new) == {("TYPE_EXTENDED", True)}
    assert _compatible("BACKWARD", old, new) and not _compatible("FORWARD", old, new)
    closed_item = _obj({"items": {"type": "array", "items": json.loads(CLOSED)}})
    wider_item = _obj({"items": {"type": "array", "items": json.loads(CLOSED_PLUS_OPTIONAL)}})
    assert _compatible("BACKWARD", closed_item, wider_item)
    assert not _compatible("FULL", closed_item, wider_item)


def test_transitive_levels_check_every_version_and_type_changes_are_refused():
    v1 = _obj({"id": {"type": "integer"}}, additional=False)
    v2 = _obj({"id": {"type": "integer"}}, additional={"type": "string"})  # other properties: strings
    v3 = _obj({"id": {"type": "integer"}, "note": {"type": "string"}}, additional=False)
    versions = [(1, parse_schema("JSON", v1)), (2, parse_schema("JSON", v2))]
    # v2 reads what v3 writes (note is covered by its partially open model); v1 refuses note
    assert incompatibilities("FORWARD", parse_schema("JSON", v3), versions[-1:]) == []
    problems = incompatibilities("FORWARD_TRANSITIVE", parse_schema("JSON", v3), versions)
    assert problems and all("version 1" in p for p in problems)
    avro = parse_schema("AVRO", '{"type": "record", "name": "R", "fields": []}')
    assert incompatibilities("BACKWARD", avro, versions) != []
