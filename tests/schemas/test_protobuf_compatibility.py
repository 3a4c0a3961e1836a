"""Protobuf schemas without a broker: protoc's parse (42201 with its message) and Confluent's ``SchemaDiff``
rules under each compatibility level."""

from __future__ import annotations

import pytest

from lakelog.errors.schemas import InvalidSchemaError
from lakelog.schemas.compatibility import incompatibilities
from lakelog.schemas.protobuf_compatibility import protobuf_differences
from lakelog.schemas.schema_types import parse_schema


def _proto(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


V1 = _proto("message Order { int64 id = 1; string note = 2; }")


def _kinds(old: str, new: str) -> set[tuple[str, bool]]:
    return {(kind, ok) for kind, _, ok in protobuf_differences(parse_schema("PROTOBUF", old).proto,
                                                               parse_schema("PROTOBUF", new).proto)}


def test_protoc_parses_and_refuses_with_its_message():
    with pytest.raises(InvalidSchemaError) as refused:
        parse_schema("PROTOBUF", _proto("message Order { int64 id = 1; strin note = 2; }"))
    assert refused.value.error_code == 42201 and '"strin" is not defined' in refused.value.message
    with_import = _proto('import "google/protobuf/timestamp.proto";\n'
                         "message Order { int64 id = 1; google.protobuf.Timestamp at = 2; }")
    assert parse_schema("PROTOBUF", with_import).proto.dependency == ["google/protobuf/timestamp.proto"]


@pytest.mark.parametrize("new, kinds", [
    (_proto("message Order { int64 id = 1; string note = 2; double amount = 3; }"), {("FIELD_ADDED", True)}),
    (_proto("message Order { int64 id = 1; }"), {("FIELD_REMOVED", True)}),
    (_proto("message Order { int64 id = 1; string remark = 2; }"), {("FIELD_NAME_CHANGED", True)}),
    (_proto("message Order { int32 id = 1; string note = 2; }"), set()),  # same wire group
    (_proto("message Order { int64 id = 1; int64 note = 2; }"), {("FIELD_SCALAR_KIND_CHANGED", False)}),
    (_proto("message Order { int64 id = 1; Line note = 2; } message Line { string sku = 1; }"),
     {("FIELD_KIND_CHANGED", False), ("MESSAGE_ADDED", True)}),
    (_proto("message Order { int64 id = 1; oneof x { string note = 2; } }"), {("FIELD_MOVED_TO_NEW_ONEOF", True),
                                                                            ("ONEOF_ADDED", True)}),
    (_proto("message Sale { int64 id = 1; string note = 2; }"), {("MESSAGE_REMOVED", False), ("MESSAGE_ADDED", True)}),
    (_proto("message Order { int64 id = 1; string note = 2; }", package="shop.v2"), {("PACKAGE_CHANGED", False)}),
])
def test_confluents_difference_types(new, kinds):
    assert _kinds(V1, new) == kinds


def test_levels_and_transitive_checks():
    v2 = parse_schema("PROTOBUF", _proto("message Order { int64 id = 1; string note = 2; bytes extra = 3; }"))
    v3 = parse_schema("PROTOBUF", _proto("message Order { int64 id = 1; string note = 2; string extra = 3; }"))
    v4 = parse_schema("PROTOBUF", _proto("message Order { int64 id = 1; string note = 2; int64 extra = 3; }"))
    versions = [(1, parse_schema("PROTOBUF", V1)), (2, v2), (3, v3)]
    assert incompatibilities("FULL_TRANSITIVE", v3, versions[:2]) == []  # bytes <-> string: one wire group
    assert incompatibilities("BACKWARD", v4, versions) != []
    assert incompatibilities("BACKWARD_TRANSITIVE", v4, [(1, versions[0][1])]) == []  # v1 has no field 3
    problems = incompatibilities("BACKWARD_TRANSITIVE", v4, versions)
    assert {p.split(":")[0] for p in problems} == {"the new schema cannot read data written with version 3",
                                                   "the new schema cannot read data written with version 2"}
    assert incompatibilities("NONE", v4, versions) == []


def test_a_reference_name_outside_the_import_tree_is_refused(tmp_path):
    """A reference's name becomes a file beside the schema for protoc: one that climbs out is refused."""
    escaped = tmp_path / "escaped.proto"
    with pytest.raises(InvalidSchemaError) as refused:
        parse_schema("PROTOBUF", _proto('import "x.proto";\nmessage A { int64 a = 1; }'),
                     referenced=[(str(escaped), 'syntax = "proto3";')])
    assert "relative .proto import path" in refused.value.message and not escaped.exists()
    with pytest.raises(InvalidSchemaError):
        parse_schema("PROTOBUF", V1, referenced=[("../up.proto", 'syntax = "proto3";')])
