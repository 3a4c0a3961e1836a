"""Typed columns of a schema'd topic's table: ``value_parsed`` and ``key_parsed`` beside the raw bytes.

A topic bound to a registry subject (``value.schema.subject``, or ``confluent.value.schema.validation=true``
with Confluent's TopicNameStrategy: :meth:`TopicConfig.value_subject <lakelog.config.TopicConfig.value_subject>`;
the same for keys) gets, in every partition table, a struct column decoded from each record's Confluent
wire-format bytes when the segment tail is committed to Delta (as Confluent Tableflow and Redpanda's
Iceberg topics (``value_schema_id_prefix``) materialize typed columns). The raw ``key`` and ``value`` stay
the truth: a record that does not decode (written before validation was on, another subject's schema id,
not framed) gets a null struct.

The log knows no schema registry (layer 1; the registry is layer 3): the broker gives the
:class:`~lakelog.log_tables.log_manager.LogManager` a :class:`RecordDecoder`, which every log it opens uses
at flush. A topic without a subject costs nothing: :func:`with_typed_columns` returns the rows unchanged
before any decoding.

Delta schema evolution follows the registry: the column's type is the subject's latest schema, so a field
added by a compatible evolution adds a nested column (delta-rs ``schema_mode="merge"``, a metadata-only
change: no file is rewritten and older rows read null). Commits that rewrite files (merges, cleaning,
truncation) keep the columns (:func:`conform_to_table`).
"""

from __future__ import annotations

import logging
from typing import Protocol

import pyarrow as pa

from lakelog.config import TopicConfig
from lakelog.errors import TypedColumnsNotReadyError
from lakelog.log_tables.schema import LOG_SCHEMA

log = logging.getLogger(__name__)

__all__ = ["KEY_PARSED", "TYPED_COLUMNS", "VALUE_PARSED", "RecordDecoder", "conform_to_table",
           "log_columns", "with_typed_columns"]

#: The typed value column (a struct, null where the record's value does not decode).
VALUE_PARSED = "value_parsed"
#: The typed key column.
KEY_PARSED = "key_parsed"
#: Both, as a table has them (after the log columns).
TYPED_COLUMNS = (KEY_PARSED, VALUE_PARSED)


class RecordDecoder(Protocol):
    """Decodes one column of framed keys or values against a registry subject (given by the broker).

    Called in a flusher's worker thread, once per column per Delta commit; must not block on the network.
    """

    def __call__(self, *, subject: str, data: pa.Array | pa.ChunkedArray) -> pa.Array | None:
        """The typed column of ``data`` (binary, Confluent's wire format: magic byte, 4-byte schema id):
        one struct (or value) per record, null where the record is null, not framed, framed with a schema id
        that is not a version of ``subject``, or does not decode. None when ``subject`` has no schema (no
        column is added then). Never raises for a record's bytes; raises :class:`~lakelog.errors.TypedColumnsNotReadyError` when it
        cannot tell yet."""
        ...


def with_typed_columns(rows: pa.Table, *, topic: str, config: TopicConfig,
                       decoder: RecordDecoder | None) -> pa.Table:
    """``rows`` (log columns) with :data:`VALUE_PARSED` / :data:`KEY_PARSED` appended for the subjects
    ``config`` names for ``topic``; ``rows`` itself when there is no decoder or no subject (no work).

    Raises:
        TypedColumnsNotReadyError: the decoder cannot decode yet (commit nothing now; try again later).
    """
    if decoder is None:
        return rows
    value_subject, key_subject = config.value_subject(topic), config.key_subject(topic)
    if value_subject is None and key_subject is None:
        return rows
    for name, source, subject in ((KEY_PARSED, "key", key_subject), (VALUE_PARSED, "value", value_subject)):
        if subject is None or name in rows.column_names:
            continue
        try:
            column = decoder(subject=subject, data=rows[source])
        except TypedColumnsNotReadyError:
            raise
        except Exception:  # noqa: BLE001 - a decoder's failure must not stop the log's flush: raw bytes stay
            log.exception("decoding the %s of %s against %s failed; the column is left out of this commit",
                          source, topic, subject)
            continue
        if column is not None:
            rows = rows.append_column(pa.field(name, column.type), column)
    return rows


def log_columns(rows: pa.Table) -> pa.Table:
    """``rows`` read from a data file with the log columns cast to :data:`LOG_SCHEMA`'s types and any other
    columns (typed columns) kept after them, as they are."""
    if rows.num_columns == len(LOG_SCHEMA) and rows.schema.names == LOG_SCHEMA.names:
        return rows.cast(LOG_SCHEMA)
    log_part = rows.select(LOG_SCHEMA.names).cast(LOG_SCHEMA)
    for field in rows.schema:
        if field.name not in LOG_SCHEMA.names:
            log_part = log_part.append_column(field, rows[field.name])
    return log_part


def conform_to_table(rows: pa.Table, table_schema: pa.Schema) -> tuple[pa.Table, bool]:
    """``rows`` shaped for a write to a table of ``table_schema``, and whether the write must merge the
    table's schema (delta-rs refuses a write whose columns differ from the table's).

    Columns of the table that ``rows`` lacks are added as nulls; a struct column is cast to the union of its
    fields and the table's (nested fields the table has but the rows lack read null); columns or nested
    fields the table lacks are kept and the answer says merge. A typed column that cannot be cast to the
    table's type (an incompatible registry change) is written as nulls: the raw bytes stay the truth.
    """
    if rows.num_columns == len(LOG_SCHEMA) and len(table_schema) == len(LOG_SCHEMA):
        return rows, False  # neither is typed: the common case, no work
    merge = False
    columns, fields = [], []
    for field in table_schema:
        if field.name in rows.column_names:
            column, ftype = rows[field.name], rows.schema.field(field.name).type
            if field.name in LOG_SCHEMA.names or ftype.equals(field.type):
                columns.append(column)
                fields.append(rows.schema.field(field.name))
                continue
            wanted = _union_type(field.type, ftype)
            merge = merge or not wanted.equals(field.type)
            try:
                column = column.cast(wanted)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                log.warning("the typed column %s (%s) does not fit the table's %s (%s): written as nulls",
                            field.name, ftype, field.type, e)
                wanted, column = field.type, pa.nulls(rows.num_rows, field.type)
            columns.append(column)
            fields.append(pa.field(field.name, wanted))
        else:
            columns.append(pa.nulls(rows.num_rows, field.type))
            fields.append(field)
    for field in rows.schema:
        if field.name not in table_schema.names:
            merge = True
            columns.append(rows[field.name])
            fields.append(field)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields)), merge


def _union_type(table_type: pa.DataType, rows_type: pa.DataType) -> pa.DataType:
    """The type holding both: structs get the union of their fields (the table's first, in its order);
    lists their items' union; a leaf keeps the table's type (a cast the caller tries)."""
    if pa.types.is_struct(table_type) and pa.types.is_struct(rows_type):
        theirs = {f.name: f for f in rows_type}
        out = []
        for f in table_type:
            other = theirs.pop(f.name, None)
            out.append(f if other is None else pa.field(f.name, _union_type(f.type, other.type)))
        out.extend(theirs.values())
        return pa.struct(out)
    if pa.types.is_list(table_type) and pa.types.is_list(rows_type):
        return pa.list_(pa.field(table_type.value_field.name,
                                 _union_type(table_type.value_type, rows_type.value_type)))
    return table_type  # a leaf: the table's type (the registry's int and long are both int64 already)
