"""Reading many Avro datums of one writer schema, each from a slice of one buffer.

fastavro's ``schemaless_reader`` sets up every call anew: it checks the schema is parsed, builds the
named-schema and option dicts, then calls its compiled ``_read_data``. For a 100-byte record that set-up is
most of the cost (about 1.3 of 2.1 µs on this project's bench machine). :class:`AvroDatumReader` does the
set-up once per schema and calls the same compiled reader for each datum, so validation at produce
(:mod:`lakelog.schemas.validation`) and the typed column at flush (:mod:`lakelog.schemas.record_columns`)
decode exactly as ``schemaless_reader`` does (tests compare the two) for about 0.8 µs a datum.

Without fastavro's compiled module (a pure-Python install) the reader falls back to ``schemaless_reader``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import fastavro
import orjson

try:  # the compiled function behind fastavro.schemaless_reader (fastavro/_read.pyx)
    from fastavro._read import _read_data as _compiled_read_data
except ImportError:  # pragma: no cover - fastavro without its Cython modules
    _compiled_read_data = None

__all__ = ["AvroDatumReader", "parse_avro"]


def parse_avro(schema: str, referenced: Sequence[tuple[str, str]], *, named: dict | None = None) -> Any:
    """``schema`` (Avro JSON text) parsed by fastavro, the named types of ``referenced`` (``(name, schema
    text)`` pairs, dependencies first) known to it; ``named`` (optional) receives every named type.

    Raises:
        fastavro.schema.SchemaParseException / UnknownType: the schema does not parse.
    """
    named = {} if named is None else named
    for _, text in referenced:
        fastavro.parse_schema(orjson.loads(text), named_schemas=named)
    return fastavro.parse_schema(orjson.loads(schema), named_schemas=named)


class AvroDatumReader:
    """Decodes Avro datums written with one schema (Avro's binary encoding, no container, no framing).

    Args:
        schema: the writer's schema (Avro JSON text). referenced: ``(name, schema text)`` of the schemas it
            references, dependencies first.

    Raises (constructor): as :func:`parse_avro`.
    """

    def __init__(self, schema: str, referenced: Sequence[tuple[str, str]] = ()) -> None:
        writer_named: dict = {}
        self.parsed = parse_avro(schema, referenced, named=writer_named)
        # what schemaless_reader passes _read_data (fastavro 1.x): named types by side, and its read options
        self._named_schemas = {"writer": writer_named, "reader": {}}
        self._options = {"return_record_name": False, "return_record_name_override": False,
                         "handle_unicode_errors": "strict", "return_named_type": False,
                         "return_named_type_override": False}

    def read(self, stream: io.BytesIO) -> Any:
        """The next datum of ``stream`` (left just after it): dicts, lists, str, bytes, int, float, bool,
        None, as fastavro's ``schemaless_reader`` gives them.

        Raises:
            StopIteration / EOFError / ValueError / UnicodeDecodeError / fastavro's ReadError (or another
            exception of the decode): the bytes are not a datum of the schema.
        """
        if _compiled_read_data is None:  # pragma: no cover
            return fastavro.schemaless_reader(stream, self.parsed, None)
        return _compiled_read_data(stream, self.parsed, self._named_schemas, None, self._options)

    def read_payload(self, payload: bytes | memoryview) -> Any:
        """One datum that is all of ``payload`` (trailing bytes are not checked). Raises as :meth:`read`."""
        return self.read(io.BytesIO(payload))
