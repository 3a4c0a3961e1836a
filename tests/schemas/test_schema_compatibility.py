"""The registry's decisions without a broker: parsing, Avro's schema resolution rules under each
compatibility level, ids and versions, soft and permanent deletes, config and mode (the pure functions of
lakelog.schemas; the records folded as every broker folds ``_schemas``)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lakelog.errors.schemas import (
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidSchemaError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaVersionNotSoftDeletedError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
)
from lakelog.schemas.compatibility import incompatibilities
from lakelog.schemas.registry_state import RegistryView
from lakelog.schemas.registry_writes import decide
from lakelog.schemas.schema_types import parse_schema


def _record(fields: list[dict], name: str = "Order") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "shop", "fields": fields})


V1 = _record([{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}])
#: a field added with a default: BACKWARD and FORWARD compatible
V2 = _record([{"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
              {"name": "currency", "type": "string", "default": "EUR"}])
#: a field added without a default: new readers cannot read old data (not BACKWARD), old readers ignore it
V2_NO_DEFAULT = _record([{"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
                         {"name": "currency", "type": "string"}])


def _avro(text: str):
    return parse_schema("AVRO", text)


@pytest.mark.parametrize("level, new, compatible", [
    ("BACKWARD", V2, True),
    ("BACKWARD", V2_NO_DEFAULT, False),
    ("FORWARD", V2_NO_DEFAULT, True),  # the old schema reads new data: the extra field is skipped
    ("FULL", V2, True),
    ("FULL", V2_NO_DEFAULT, False),
    ("NONE", V2_NO_DEFAULT, True),
])
def test_adding_a_field_under_each_level(level, new, compatible):
    assert (incompatibilities(level, _avro(new), [(1, _avro(V1))]) == []) is compatible


def test_avro_type_promotions_follow_the_spec():
    """Avro's schema resolution: int is promoted to long, float, double; long to float, double; string and
    bytes both ways; never back."""
    ints = _record([{"name": "n", "type": "int"}])
    longs = _record([{"name": "n", "type": "long"}])
    strings = _record([{"name": "n", "type": "string"}])
    raw = _record([{"name": "n", "type": "bytes"}])
    assert incompatibilities("BACKWARD", _avro(longs), [(1, _avro(ints))]) == []  # long reader, int writer
    assert incompatibilities("BACKWARD", _avro(ints), [(1, _avro(longs))])  # int cannot read long
    assert incompatibilities("FULL", _avro(raw), [(1, _avro(strings))]) == []


def test_removing_an_enum_symbol_breaks_backward_and_a_union_branch_too():
    colors = json.dumps({"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]})
    fewer = json.dumps({"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]})
    assert incompatibilities("BACKWARD", _avro(fewer), [(1, _avro(colors))])
    assert incompatibilities("FORWARD", _avro(fewer), [(1, _avro(colors))]) == []
    union = _record([{"name": "n", "type": ["null", "string", "long"]}])
    narrower = _record([{"name": "n", "type": ["null", "string"]}])
    assert incompatibilities("BACKWARD", _avro(narrower), [(1, _avro(union))])


def test_transitive_levels_check_every_version():
    """v1 has no ``currency``, v2 adds it with a default, v3 drops the default: v3 reads v2's data but not v1's."""
    v3 = V2_NO_DEFAULT
    history = [(1, _avro(V1)), (2, _avro(V2))]
    assert incompatibilities("BACKWARD", _avro(v3), history) == []
    problems = incompatibilities("BACKWARD_TRANSITIVE", _avro(v3), history)
    assert problems and "version 1" in problems[0]


def test_invalid_schemas_are_refused_with_42201():
    for schema_type, text in [("AVRO", "{not json"), ("AVRO", json.dumps({"type": "record", "name": "X"})),
                              ("AVRO", json.dumps({"type": "nosuchtype"})), ("JSON", json.dumps({"type": 5})),
                              ("PROTOBUF", "  "), ("XML", "<a/>")]:
        with pytest.raises(InvalidSchemaError) as e:
            parse_schema(schema_type, text)
        assert e.value.to_body()["error_code"] == 42201 and e.value.http_status == 422


def test_the_same_schema_whitespace_aside_is_one_schema():
    assert _avro(V1).identity == _avro(json.dumps(json.loads(V1), indent=4)).identity
    assert parse_schema("JSON", '{ "type": "object" }').schema == '{"type":"object"}'


class _Registry:
    """A view and its writes, folded as a broker folds ``_schemas`` (offsets counted here)."""

    def __init__(self) -> None:
        self.view = RegistryView()

    def write(self, **command):
        records, result = decide(self.view, command)
        if records:
            table = pa.table({"key": pa.array([k for k, _ in records], pa.binary()),
                              "value": pa.array([v for _, v in records], pa.binary())})
            self.view.fold(table, next_offset=self.view.next_offset + len(records))
        return result

    def register(self, subject: str, schema: str, schema_type: str = "AVRO", **more):
        return self.write(op="register", subject=subject, schema=schema, schemaType=schema_type, **more)["id"]


def test_ids_are_shared_by_the_same_schema_and_versions_count_per_subject():
    r = _Registry()
    first = r.register("orders-value", V1)
    assert r.register("orders-value", json.dumps(json.loads(V1), indent=2)) == first  # nothing written
    assert r.view.next_offset == 1
    assert r.register("archive-value", V1) == first  # the same schema under another subject: the same id
    second = r.register("orders-value", V2)
    assert second == first + 1
    assert [v.version for v in r.view.versions("orders-value")] == [1, 2]
    with pytest.raises(IncompatibleSchemaError) as e:
        r.register("orders-value", _record([{"name": "id", "type": "string"}]))
    assert e.value.http_status == 409 and e.value.to_body()["error_code"] == 40901
    assert r.view.next_offset == 3  # the refused schema wrote nothing


def test_deletes_soft_then_permanent():
    r = _Registry()
    r.register("s-value", V1)
    r.register("s-value", V2)
    with pytest.raises(SchemaVersionNotSoftDeletedError):
        r.write(op="delete_version", subject="s-value", version=1, permanent=True)
    assert r.write(op="delete_version", subject="s-value", version=1) == 1
    assert [v.version for v in r.view.versions("s-value")] == [2]
    assert r.write(op="delete_version", subject="s-value", version=1, permanent=True) == 1
    assert [v.version for v in r.view.versions("s-value", deleted=True)] == [2]
    with pytest.raises(SubjectNotSoftDeletedError):
        r.write(op="delete_subject", subject="s-value", permanent=True)
    assert r.write(op="delete_subject", subject="s-value") == [2]
    with pytest.raises(SubjectSoftDeletedError):
        r.write(op="delete_subject", subject="s-value")
    assert r.view.subject_names() == [] and r.view.subject_names(deleted=True) == ["s-value"]
    assert r.write(op="delete_subject", subject="s-value", permanent=True) == [2]
    assert r.view.subject_names(deleted=True) == []
    # a new registration after a permanent delete starts at version 1 again and keeps ids unique
    assert r.register("s-value", V1) == 3 and r.view.versions("s-value")[0].version == 1


def test_references_resolve_and_protect_what_they_name():
    r = _Registry()
    money = json.dumps({"type": "record", "name": "Money", "namespace": "shop",
                        "fields": [{"name": "units", "type": "long"}, {"name": "currency", "type": "string"}]})
    r.register("money", money)
    order = _record([{"name": "id", "type": "long"}, {"name": "total", "type": "shop.Money"}])
    with pytest.raises(InvalidSchemaError):  # without the reference the type is unknown
        r.register("orders-value", order)
    order_id = r.register("orders-value", order, references=[{"name": "shop.Money", "subject": "money", "version": 1}])
    assert r.view.referenced_by("money", 1) == [order_id]
    with pytest.raises(ReferenceExistsError):
        r.write(op="delete_version", subject="money", version=1)


def test_config_and_mode():
    r = _Registry()
    r.register("s-value", V1)
    with pytest.raises(InvalidCompatibilityLevelError):
        r.write(op="set_config", subject=None, compatibility="SIDEWAYS")
    assert r.write(op="set_config", subject="s-value", compatibility="none") == {"compatibility": "NONE"}
    r.register("s-value", _record([{"name": "id", "type": "string"}]))  # NONE: anything goes
    assert r.write(op="delete_config", subject="s-value") == {"compatibilityLevel": "NONE"}
    assert r.view.compatibility("s-value") == "BACKWARD"
    assert r.write(op="set_mode", subject="s-value", mode="READONLY") == {"mode": "READONLY"}
    with pytest.raises(OperationNotPermittedError):
        r.register("s-value", V2)
    with pytest.raises(OperationNotPermittedError):  # IMPORT on a subject that holds schemas needs force
        r.write(op="set_mode", subject="s-value", mode="IMPORT")
