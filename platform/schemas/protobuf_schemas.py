"""Protobuf schemas: a ``.proto`` text compiled by protoc (the one grpcio-tools ships, in a child process) to
its ``FileDescriptorProto``, and the message classes protobuf builds from it.

A schema is taken as Confluent's registry takes it: the ``.proto`` text, or a serialized
``FileDescriptorProto`` in base64 (what ``confluent_kafka``'s ``ProtobufSerializer`` registers). Its
imports are its references (``name``: the import path) or protoc's well-known types
(``google/protobuf/*.proto``, which grpcio-tools ships).

The records' wire format is Confluent's ``ProtobufSerializer``'s: after the magic byte and the schema id,
the *message indexes* (which message of the file: a zig-zag varint count, then each index; the first
message, ``[0]``, is the single byte 0), then the message's binary encoding.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence

import grpc_tools
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from lakelog.errors.schemas import InvalidSchemaError

__all__ = ["compile_proto", "decode_message_indexes", "encode_message_indexes", "message_class"]

_WELL_KNOWN = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
#: a .proto compiles in milliseconds; a bound in case protoc hangs on a loaded machine
_PROTOC_TIMEOUT_S = 60
_NAME = "schema.proto"


def _from_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    fd = descriptor_pb2.FileDescriptorProto()
    try:
        fd.ParseFromString(raw)
    except DecodeError:
        return None
    return fd if fd.message_type or fd.enum_type else None


_DEFINES = re.compile(r"\b(message|enum)\s+[A-Za-z_]")


def _protoc(text: str, imports: dict[str, str], *, stub: bool = False) -> list[descriptor_pb2.FileDescriptorProto]:
    if not stub and not _DEFINES.search(text):  # refused before a protoc run: nothing a record could be
        raise InvalidSchemaError("Invalid schema: the Protobuf schema defines no message or enum; send the .proto "
                                 "file's text (or a base64 FileDescriptorProto).")
    with tempfile.TemporaryDirectory(prefix="lakelog-proto-") as tmp:
        for name, body in {**imports, _NAME: text}.items():
            path = os.path.normpath(os.path.join(tmp, name))
            if os.path.isabs(name) or not path.startswith(tmp + os.sep):  # an import path stays in the tree
                raise InvalidSchemaError(f"Invalid schema: reference name {name!r} is not a relative .proto import "
                                         "path (such as common/money.proto).")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
        out = os.path.join(tmp, "out.pb")
        # protoc in a child process: its global state and its errors on fd 2 stay out of the broker's
        try:
            done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{_WELL_KNOWN}",
                                   "--include_imports", f"--descriptor_set_out={out}", os.path.join(tmp, _NAME)],
                                  capture_output=True, text=True, timeout=_PROTOC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise InvalidSchemaError(f"Invalid schema: protoc did not compile the Protobuf schema within "
                                     f"{_PROTOC_TIMEOUT_S} s.") from None
        if done.returncode != 0:
            reason = " ".join(done.stderr.replace(tmp + os.sep, "").split())
            raise InvalidSchemaError("Invalid schema: the Protobuf schema does not compile: "
                                     f"{reason or 'protoc failed'}")
        files = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            files.ParseFromString(f.read())
        return list(files.file)


@functools.lru_cache(maxsize=256)
def _compiled(text: str, imports: tuple[tuple[str, str], ...]) -> tuple[bytes, ...]:
    found = _from_base64(text)
    if found is not None:
        # each import compiled with the ones before it (dependencies first)
        deps = [fd for k, (name, body) in enumerate(imports) for fd in _compile_files(body, imports[:k], name)]
        known = {name for name, _ in imports}
        well_known = [d for d in found.dependency if d not in known]
        if well_known:  # protoc's own files (google/protobuf/*.proto): compiled from what grpcio-tools ships
            stub = 'syntax = "proto3";\n' + "".join(f'import "{d}";\n' for d in well_known)
            deps = _protoc(stub, {}, stub=True)[:-1] + deps
        found.name = found.name or _NAME
        return tuple(fd.SerializeToString() for fd in _unique(deps + [found]))
    return tuple(fd.SerializeToString() for fd in _protoc(text, dict(imports)))


def _compile_files(text: str, imports: tuple[tuple[str, str], ...],
                   name: str) -> list[descriptor_pb2.FileDescriptorProto]:
    fds = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in _compiled(text, imports)]
    if fds:
        fds[-1].name = name
    return fds


def _unique(fds: list[descriptor_pb2.FileDescriptorProto]) -> list[descriptor_pb2.FileDescriptorProto]:
    seen, out = set(), []
    for fd in fds:
        if fd.name not in seen:
            seen.add(fd.name)
            out.append(fd)
    return out


def compile_proto(text: str, *, imports: Sequence[tuple[str, str]] = ()) -> descriptor_pb2.FileDescriptorProto:
    """The schema's ``FileDescriptorProto`` (its dependencies compiled too, see :func:`message_class`).

    Args:
        text: the ``.proto`` text, or a serialized ``FileDescriptorProto`` in base64.
        imports: ``(import path, schema text)`` of its references, dependencies first.

    Raises:
        InvalidSchemaError: 422 / 42201 with protoc's message (file, line, column, what).
    """
    return descriptor_pb2.FileDescriptorProto.FromString(_compiled(text, tuple(imports))[-1])


@functools.lru_cache(maxsize=256)
def _pool(text: str, imports: tuple[tuple[str, str], ...]) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for raw in _compiled(text, imports):
        fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
        try:
            pool.FindFileByName(fd.name)
        except KeyError:
            pool.Add(fd)
    return pool


def message_class(text: str, indexes: Sequence[int] = (0,), *, imports: Sequence[tuple[str, str]] = ()):
    """The message class of the schema's message at ``indexes`` (Confluent's message indexes: ``[0]`` the
    first top-level message, ``[1, 0]`` the first nested message of the second).

    Raises:
        InvalidSchemaError: the schema has no message there.
    """
    fd = compile_proto(text, imports=imports)
    pool = _pool(text, tuple(imports))
    messages, name = fd.message_type, fd.package
    try:
        for i in indexes:
            msg = messages[i]
            name = f"{name}.{msg.name}" if name else msg.name
            messages = msg.nested_type
    except IndexError:
        raise InvalidSchemaError(f"The Protobuf schema has no message at indexes {list(indexes)}.") from None
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """Confluent's message indexes: ``[0]`` as the single byte 0, else the count and each index as zig-zag
    varints."""
    if list(indexes) == [0]:
        return b"\x00"
    return _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)


def decode_message_indexes(data: bytes, pos: int) -> tuple[list[int], int]:
    """The message indexes at ``data[pos:]`` and the position after them.

    Raises:
        ValueError: a varint that runs past the data.
    """
    def varint(p: int) -> tuple[int, int]:
        shift = result = 0
        while True:
            if p >= len(data):
                raise ValueError("the message indexes run past the record")
            b = data[p]
            result |= (b & 0x7F) << shift
            p += 1
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1), p
            shift += 7

    count, pos = varint(pos)
    if count == 0:
        return [0], pos
    indexes = []
    for _ in range(count):
        i, pos = varint(pos)
        indexes.append(i)
    return indexes, pos
