"""Protobuf compatibility: Confluent Schema Registry's rules (``SchemaDiff`` / ``MessageSchemaDiff`` /
``FieldSchemaDiff`` of ``io.confluent.kafka.schemaregistry.protobuf.diff``) over protoc's descriptors.

Messages are matched by full name, fields by number, enum values by number. Every difference has a
Confluent difference type; the pair is compatible when each is a compatible one:

====================================================  ================================================
compatible                                            incompatible
====================================================  ================================================
``MESSAGE_ADDED``, ``FIELD_ADDED``,                   ``PACKAGE_CHANGED``, ``MESSAGE_REMOVED``,
``FIELD_REMOVED``, ``FIELD_NAME_CHANGED``,            ``FIELD_KIND_CHANGED`` (scalar / message / enum),
``ENUM_ADDED``, ``ENUM_REMOVED``,                     ``FIELD_SCALAR_KIND_CHANGED`` (out of its wire
``ENUM_CONST_ADDED`` / ``_CHANGED`` / ``_REMOVED``,   group), ``FIELD_NAMED_TYPE_CHANGED``,
``ONEOF_ADDED``, ``ONEOF_REMOVED``,                   ``FIELD_LABEL_CHANGED``, ``REQUIRED_FIELD_ADDED``
``ONEOF_FIELD_ADDED``, ``FIELD_MOVED_TO_NEW_ONEOF``   / ``_REMOVED``, ``ONEOF_FIELD_REMOVED``,
(one field), a scalar changed within its wire group   ``FIELD_MOVED_TO_EXISTING_ONEOF``,
(int32 / int64 / uint32 / uint64 / bool; sint32 /     ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``
sint64; fixed32 / sfixed32; fixed64 / sfixed64;
string / bytes), a numeric field made repeated or
not (``FIELD_NUMERIC_LABEL_CHANGED``)
====================================================  ================================================

The rules are the same both ways but for required fields (proto2): BACKWARD compares the latest version
(original) with the new schema (update), FORWARD the other way round, as for the other types.
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf import descriptor_pb2

__all__ = ["protobuf_differences"]

F = descriptor_pb2.FieldDescriptorProto
_GROUPS = [{F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL}, {F.TYPE_SINT32, F.TYPE_SINT64},
           {F.TYPE_FIXED32, F.TYPE_SFIXED32}, {F.TYPE_FIXED64, F.TYPE_SFIXED64}, {F.TYPE_STRING, F.TYPE_BYTES}]
_NAMED = {F.TYPE_MESSAGE: "message", F.TYPE_GROUP: "message", F.TYPE_ENUM: "enum"}
_NUMERIC = set().union(*_GROUPS[:4]) | {F.TYPE_FLOAT, F.TYPE_DOUBLE}

Diff = tuple[str, str, bool]


def _kind(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return _NAMED.get(field.type, "scalar")


def _oneof(message: descriptor_pb2.DescriptorProto, field: descriptor_pb2.FieldDescriptorProto) -> str | None:
    if not field.HasField("oneof_index") or field.proto3_optional:
        return None
    return message.oneof_decl[field.oneof_index].name


def _messages(fd: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def visit(prefix: str, messages) -> None:
        for m in messages:
            name = f"{prefix}.{m.name}" if prefix else m.name
            out[name] = m
            visit(name, m.nested_type)
    visit(fd.package, fd.message_type)
    return out


def _enums(fd: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.EnumDescriptorProto]:
    out = {f"{fd.package}.{e.name}" if fd.package else e.name: e for e in fd.enum_type}
    for name, m in _messages(fd).items():
        out.update({f"{name}.{e.name}": e for e in m.enum_type})
    return out


def _scalar_changed(o: descriptor_pb2.FieldDescriptorProto, u: descriptor_pb2.FieldDescriptorProto) -> bool:
    return o.type != u.type and not any(o.type in g and u.type in g for g in _GROUPS)


def _fields(name: str, o: descriptor_pb2.DescriptorProto, u: descriptor_pb2.DescriptorProto) -> Iterator[Diff]:
    of, uf = {f.number: f for f in o.field}, {f.number: f for f in u.field}
    moved_to: dict[str, list[int]] = {}
    for number in sorted(of.keys() | uf.keys()):
        where = f"{name}#{number}"
        if number not in uf:
            field = of[number]
            if field.label == F.LABEL_REQUIRED:
                yield "REQUIRED_FIELD_REMOVED", where, False
            elif _oneof(o, field) is not None:
                yield "ONEOF_FIELD_REMOVED", where, False
            else:
                yield "FIELD_REMOVED", where, True
            continue
        if number not in of:
            field = uf[number]
            if field.label == F.LABEL_REQUIRED:
                yield "REQUIRED_FIELD_ADDED", where, False
            elif _oneof(u, field) is not None:
                yield "ONEOF_FIELD_ADDED", where, True
            else:
                yield "FIELD_ADDED", where, True
            continue
        a, b = of[number], uf[number]
        if a.name != b.name:
            yield "FIELD_NAME_CHANGED", where, True
        if _kind(a) != _kind(b):
            yield "FIELD_KIND_CHANGED", where, False
        elif _kind(a) == "scalar" and _scalar_changed(a, b):
            yield "FIELD_SCALAR_KIND_CHANGED", where, False
        elif _kind(a) != "scalar" and a.type_name.split(".")[-1] != b.type_name.split(".")[-1]:
            yield "FIELD_NAMED_TYPE_CHANGED", where, False
        if (a.label == F.LABEL_REPEATED) != (b.label == F.LABEL_REPEATED):
            numeric = a.type in _NUMERIC and b.type in _NUMERIC
            yield ("FIELD_NUMERIC_LABEL_CHANGED", where, True) if numeric else ("FIELD_LABEL_CHANGED", where, False)
        elif (a.label == F.LABEL_REQUIRED) != (b.label == F.LABEL_REQUIRED):
            yield ("REQUIRED_FIELD_ADDED" if b.label == F.LABEL_REQUIRED else "REQUIRED_FIELD_REMOVED"), where, False
        before, after = _oneof(o, a), _oneof(u, b)
        if before is None and after is not None:
            moved_to.setdefault(after, []).append(number)
    old_oneofs = {d.name for d in o.oneof_decl}
    for oneof, numbers in sorted(moved_to.items()):
        where = f"{name}.{oneof}"
        if oneof in old_oneofs:
            yield "FIELD_MOVED_TO_EXISTING_ONEOF", where, False
        elif len(numbers) > 1:
            yield "MULTIPLE_FIELDS_MOVED_TO_ONEOF", where, False
        else:
            yield "FIELD_MOVED_TO_NEW_ONEOF", where, True
    def real(m: descriptor_pb2.DescriptorProto) -> set[str]:  # proto3 optional's synthetic oneofs aside
        return {d.name for i, d in enumerate(m.oneof_decl)
                if not any(f.proto3_optional and f.oneof_index == i for f in m.field)}
    for oneof in sorted(real(u) - real(o)):
        yield "ONEOF_ADDED", f"{name}.{oneof}", True
    for oneof in sorted(real(o) - real(u)):
        yield "ONEOF_REMOVED", f"{name}.{oneof}", True


def protobuf_differences(original: descriptor_pb2.FileDescriptorProto,
                         update: descriptor_pb2.FileDescriptorProto) -> list[Diff]:
    """The differences from ``original`` to ``update`` (protoc's descriptors), Confluent's way.

    Returns:
        ``(difference type, where: message full name [#field number], compatible)`` for each difference.
    """
    out: list[Diff] = []
    if original.package != update.package:
        out.append(("PACKAGE_CHANGED", update.package or "(no package)", False))
        return out
    om, um = _messages(original), _messages(update)
    for name in sorted(om.keys() - um.keys()):
        out.append(("MESSAGE_REMOVED", name, False))
    for name in sorted(um.keys() - om.keys()):
        out.append(("MESSAGE_ADDED", name, True))
    for name in sorted(om.keys() & um.keys()):
        out.extend(_fields(name, om[name], um[name]))
    oe, ue = _enums(original), _enums(update)
    for name in sorted(oe.keys() ^ ue.keys()):
        out.append(("ENUM_ADDED" if name in ue else "ENUM_REMOVED", name, True))
    for name in sorted(oe.keys() & ue.keys()):
        ov, uv = {v.number: v.name for v in oe[name].value}, {v.number: v.name for v in ue[name].value}
        for number in sorted(ov.keys() | uv.keys()):
            if ov.get(number) != uv.get(number):
                kind = ("ENUM_CONST_ADDED" if number not in ov else "ENUM_CONST_REMOVED" if number not in uv
                        else "ENUM_CONST_CHANGED")
                out.append((kind, f"{name}#{number}", True))
    return out
