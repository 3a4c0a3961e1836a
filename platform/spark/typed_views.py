"""The typed columns of a schema'd topic in its SQL views: ``key_parsed`` and ``value_parsed``.

A topic bound to a registry subject has, beside the raw ``key`` and ``value``, struct columns decoded at
flush (:mod:`lakelog.log_tables.typed_columns`), so ``SELECT value_parsed.amount FROM orders`` works. Its
partition tables need not agree on them: a partition flushed nothing since the subject's latest version
(fewer nested fields), or nothing at all (no column). A view's ``UNION ALL`` needs one type per column, so
each column's type is the union of the partitions' (every nested field any partition has) and each
partition's column is reshaped to it (``named_struct`` of its fields, null for the fields it lacks).

The types are read from each table's Delta schema with delta-rs (its JSON is Spark's ``StructType`` JSON),
a metadata read of the newest snapshot.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from deltalake import DeltaTable
from pyspark.sql.types import ArrayType, DataType, StructField, StructType

from lakelog.protocol.log_info import PartitionLogInfo

log = logging.getLogger(__name__)

__all__ = ["TYPED_COLUMNS", "partition_typed_columns", "typed_column_type", "typed_select_sql"]

#: The typed columns, in the order a view shows them (after ``headers``).
TYPED_COLUMNS = ("key_parsed", "value_parsed")

TypedColumns = Mapping[str, DataType]


def partition_typed_columns(partitions: Sequence[PartitionLogInfo], *,
                            storage_options: dict[str, str] | None = None) -> list[dict[str, DataType]]:
    """For each partition (in order), the typed columns its table has and their Spark types; ``{}`` for a
    table without any, and for one delta-rs cannot open (an object-store table without ``storage_options``:
    its view then has no typed column from it)."""
    out: list[dict[str, DataType]] = []
    for info in partitions:
        try:
            schema = StructType.fromJson(json.loads(
                DeltaTable(info.table_uri, storage_options=storage_options).schema().to_json()))
        except Exception as e:  # noqa: BLE001 - delta-rs' errors: missing table, credentials
            log.debug("no typed columns read from %s: %s", info.table_uri, e)
            out.append({})
            continue
        out.append({f.name: f.dataType for f in schema.fields if f.name in TYPED_COLUMNS})
    return out


def typed_column_type(per_partition: Sequence[TypedColumns], name: str) -> DataType | None:
    """The type of typed column ``name`` over these partitions (every nested field any of them has), None
    when none has it."""
    wanted: DataType | None = None
    for columns in per_partition:
        if name in columns:
            wanted = columns[name] if wanted is None else _union(wanted, columns[name])
    return wanted


def typed_select_sql(per_partition: Sequence[TypedColumns]) -> tuple[str, list[str]]:
    """The SQL of the typed columns in a view over these partitions: ``(nulls, selects)``, ``nulls`` for the
    typed empty row set that leads the union (``CAST(NULL AS <type>) AS value_parsed``), ``selects[i]``
    for partition ``i``; each starts with ``", "`` (appended after ``headers``), both empty when no
    partition has a typed column."""
    found = {name: typed_column_type(per_partition, name) for name in TYPED_COLUMNS}
    wanted = {name: t for name, t in found.items() if t is not None}
    names = [n for n in TYPED_COLUMNS if n in wanted]
    if not names:
        return "", ["" for _ in per_partition]
    nulls = "".join(f", CAST(NULL AS {wanted[n].simpleString()}) AS {n}" for n in names)
    selects = ["".join(f", {_conform(n, columns.get(n), wanted[n])} AS {n}" for n in names)
               for columns in per_partition]
    return nulls, selects


def _union(a: DataType, b: DataType) -> DataType:
    """The type holding both (structs: every field of either, ``a``'s first; arrays: their elements'
    union; otherwise ``a``: the flusher keeps leaf types stable)."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        theirs = {f.name: f for f in b.fields}
        fields = []
        for f in a.fields:
            other = theirs.pop(f.name, None)
            fields.append(f if other is None else StructField(f.name, _union(f.dataType, other.dataType), True))
        fields.extend(theirs.values())
        return StructType(fields)
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return ArrayType(_union(a.elementType, b.elementType), True)
    return a


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _conform(expr: str, have: DataType | None, want: DataType) -> str:
    """SQL turning ``expr`` (of type ``have``; None: the table lacks it) into type ``want``."""
    if have is None:
        return f"CAST(NULL AS {want.simpleString()})"
    if have == want:
        return expr
    if isinstance(have, StructType) and isinstance(want, StructType):
        fields = {f.name: f.dataType for f in have.fields}
        parts = ", ".join(f"{_literal(f.name)}, {_conform(f'{expr}.{_quote(f.name)}', fields.get(f.name), f.dataType)}"
                          for f in want.fields)
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE named_struct({parts}) END"
    return f"CAST({expr} AS {want.simpleString()})"
