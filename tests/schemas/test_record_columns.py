"""The typed column of each schema type (Avro, JSON Schema, Protobuf) as the flusher builds it: the registry
view folded from ``_schemas``-shaped records, real framed bytes, real Arrow columns; and a partition log's
Delta table keeping ``value_parsed`` through a merge of its small files and a truncation."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.errors import CommitFailedError  # TypedColumnsNotReadyError is one
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.schemas.protobuf_schemas import encode_message_indexes, message_class
from lakelog.schemas.record_columns import RegistryColumns
from lakelog.schemas.registry_state import RegistryView
from lakelog.schemas.wire_format import frame

ORDER_JSON = {"type": "object", "properties": {
    "id": {"type": "integer"}, "price": {"type": ["number", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
    "extra": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
ORDER_PROTO = ('syntax = "proto3";\npackage shop;\nmessage Order {\n  int64 id = 1;\n  string note = 2;\n'
               '  map<string, int32> counts = 3;\n  repeated Item items = 4;\n  Kind kind = 5;\n  Item main = 6;\n'
               '  enum Kind { PLAIN = 0; GIFT = 1; }\n}\nmessage Item { string sku = 1; }\n')
ORDER_AVRO = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "choice", "type": ["int", "string"]}, {"name": "tags", "type": {"type": "map", "values": "int"}}]}


def _view(*versions: tuple[str, int, int, str, object]) -> RegistryView:
    """A registry view holding ``(subject, version, id, schemaType, schema)`` versions."""
    view = RegistryView()
    for subject, version, schema_id, schema_type, schema in versions:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        view.apply(json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}).encode(),
                   json.dumps({"subject": subject, "version": version, "id": schema_id, "schemaType": schema_type,
                               "schema": text}).encode())
    return view


def test_json_schema_and_protobuf_values_decode_into_struct_columns():
    view = _view(("j-value", 1, 10, "JSON", ORDER_JSON), ("p-value", 1, 11, "PROTOBUF", ORDER_PROTO))
    decode = RegistryColumns(lambda: view)
    column = decode(subject="j-value", data=pa.array([
        frame(10, json.dumps({"id": 1, "price": 2, "tags": ["a"], "extra": 5}).encode()),
        frame(10, b'{"id": "not an integer"}'),  # valid JSON the column cannot hold: null, the rest kept
        frame(11, b"{}"),                          # another subject's schema id
        b"not framed", None], pa.binary()))
    assert column.type == pa.struct([("id", pa.int64()), ("price", pa.float64()), ("tags", pa.list_(pa.string())),
                                     ("extra", pa.string())])
    assert column.to_pylist() == [{"id": 1, "price": 2.0, "tags": ["a"], "extra": "5"}, None, None, None, None]

    order = message_class(ORDER_PROTO, [0])(id=3, note="n", kind=1)
    order.counts["x"] = 2
    order.items.add(sku="s1")
    column = decode(subject="p-value", data=pa.array([frame(11, encode_message_indexes([0]) + order.SerializeToString())]))
    assert column.to_pylist() == [{"id": 3, "note": "n", "counts": [("x", 2)], "items": [{"sku": "s1"}],
                                   "kind": "GIFT", "main": None}]
    assert decode(subject="unknown-value", data=pa.array([b"x"])) is None  # no schema: no column


def test_a_partition_table_keeps_value_parsed_through_merges_and_truncation(tmp_path):
    view = _view(("o-value", 1, 1, "AVRO", ORDER_AVRO))
    parsed = fastavro.parse_schema(ORDER_AVRO)

    def framed(i: int) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"id": i, "when": 1_764_000_000_000, "choice": "c", "tags": {"t": i}})
        return frame(1, buf.getvalue())

    plog = PartitionLog.open(topic="o", partition=0, table_uri=tmp_path / "o-0",
                             config=TopicConfig.model_validate({"value.schema.subject": "o-value"}))
    plog.record_decoder = RegistryColumns(lambda: view)
    try:
        for i in range(3):  # three commits, three small files
            plog.append(pa.table({"value": pa.array([framed(i)], pa.binary())}))
            plog.advance_high_watermark(plog.log_end_offset)
            assert plog.flush_to_lake() == 1
        assert plog.lifecycle.merge_head(keep_newest=0, max_file_bytes=1 << 30) == 3
        assert len(DeltaTable(str(tmp_path / "o-0")).file_uris()) == 1
        plog.truncate_to(2)
        rows = DeltaTable(str(tmp_path / "o-0")).to_pyarrow_table(columns=["offset", "value_parsed"]).sort_by("offset")
        assert [r["value_parsed"]["id"] for r in rows.to_pylist()] == [0, 1]
        first = rows.to_pylist()[0]["value_parsed"]
        assert (first["choice"], first["tags"], first["when"].year) == ('"c"', [("t", 0)], 2025)
    finally:
        plog.close()


def test_a_flush_waits_for_the_registry_view_instead_of_writing_null_typed_values(tmp_path):
    """Before the broker's registry view has caught up (just after a restart) the decoder cannot tell a
    schema not read yet from a bad record: the flush commits nothing and fails retriably; once the view is
    current the same records are committed with their typed values."""
    view = _view(("o-value", 1, 1, "AVRO", ORDER_AVRO))
    parsed = fastavro.parse_schema(ORDER_AVRO)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, {"id": 7, "when": 1_764_000_000_000, "choice": 3, "tags": {}})
    caught_up = False
    plog = PartitionLog.open(topic="o", partition=0, table_uri=tmp_path / "o-0",
                             config=TopicConfig.model_validate({"value.schema.subject": "o-value",
                                                                "lake.commit.interval.ms": 60_000}))
    plog.record_decoder = RegistryColumns(lambda: view, ready=lambda: caught_up)
    try:
        plog.append(pa.table({"value": pa.array([frame(1, buf.getvalue())], pa.binary())}))
        plog.advance_high_watermark(plog.log_end_offset)
        with pytest.raises(CommitFailedError, match="wait for this broker's schema registry view"):
            plog.flush_to_lake()
        assert plog.lake_end_offset == 0
        caught_up = True
        assert plog.flush_to_lake() == 1
        rows = DeltaTable(str(tmp_path / "o-0")).to_pyarrow_table(columns=["value_parsed"]).to_pylist()
        assert rows[0]["value_parsed"]["id"] == 7
    finally:
        plog.close()


def test_a_flush_waits_a_while_for_a_schema_id_newer_than_the_view_then_writes_null(tmp_path):
    """A record whose schema id is above every id the view holds (registered through another broker a moment
    ago) holds the flush back, retriably, until the view holds it, so it gets its typed value; an id the
    view should know already (not above its largest) is null at once; past the wait the record is null."""
    view = _view(("o-value", 1, 1, "AVRO", ORDER_AVRO), ("other-value", 1, 2, "JSON", ORDER_JSON))
    parsed = fastavro.parse_schema(ORDER_AVRO)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, {"id": 7, "when": 1_764_000_000_000, "choice": 3, "tags": {}})
    now = [100.0]
    plog = PartitionLog.open(topic="o", partition=0, table_uri=tmp_path / "o-0",
                             config=TopicConfig.model_validate({"value.schema.subject": "o-value",
                                                                "lake.commit.interval.ms": 60_000}))
    plog.record_decoder = RegistryColumns(lambda: view, unknown_id_wait_s=5.0, monotonic=lambda: now[0])
    try:
        # id 2 is another subject's (not above the view's largest): null at once, nothing waits
        plog.append(pa.table({"value": pa.array([frame(2, b"{}")], pa.binary())}))
        plog.advance_high_watermark(plog.log_end_offset)
        assert plog.flush_to_lake() == 1
        # id 3: not in the view yet; the flush commits nothing until the view folds its version
        plog.append(pa.table({"value": pa.array([frame(3, buf.getvalue())], pa.binary())}))
        plog.advance_high_watermark(plog.log_end_offset)
        with pytest.raises(CommitFailedError, match=r"wait for schema id\(s\) \[3\]"):
            plog.flush_to_lake()
        now[0] += 4.0
        with pytest.raises(CommitFailedError):
            plog.flush_to_lake()
        assert plog.lake_end_offset == 1
        view.apply(json.dumps({"keytype": "SCHEMA", "subject": "o-value", "version": 2, "magic": 1}).encode(),
                   json.dumps({"subject": "o-value", "version": 2, "id": 3, "schema": json.dumps(ORDER_AVRO)}).encode())
        assert plog.flush_to_lake() == 1
        # id 9 never comes: after the wait its record is committed, null
        plog.append(pa.table({"value": pa.array([frame(9, buf.getvalue())], pa.binary())}))
        plog.advance_high_watermark(plog.log_end_offset)
        with pytest.raises(CommitFailedError):
            plog.flush_to_lake()
        now[0] += 5.0
        assert plog.flush_to_lake() == 1
        rows = DeltaTable(str(tmp_path / "o-0")).to_pyarrow_table(columns=["offset", "value_parsed"]).to_pylist()
        assert [(r["offset"], None if r["value_parsed"] is None else r["value_parsed"]["id"])
                for r in sorted(rows, key=lambda r: r["offset"])] == [(0, None), (1, 7), (2, None)]
    finally:
        plog.close()
