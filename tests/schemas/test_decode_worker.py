"""The typed columns' decode in a child process (:mod:`lakelog.schemas.decode_worker`): a real child answers
what :class:`RegistryColumns` answers in process, for Avro (with a referenced type and a soft-deleted
version), JSON Schema and Protobuf; a child killed by pid is replaced without a wrong or lost column; the
checks stay in the parent; :meth:`close` stops the child by pid."""

from __future__ import annotations

import io
import json
import os
import signal

import fastavro
import pyarrow as pa
import pytest

from lakelog.errors import TypedColumnsNotReadyError
from lakelog.processes import process_alive
from lakelog.schemas.decode_worker import ProcessRegistryColumns, subject_records
from lakelog.schemas.protobuf_schemas import encode_message_indexes, message_class
from lakelog.schemas.record_columns import RegistryColumns
from lakelog.schemas.registry_state import RegistryView, SchemaVersion, schema_record
from lakelog.schemas.schema_types import SchemaReference
from lakelog.schemas.wire_format import frame
from tests.harness import wait_for
from tests.schemas.test_record_columns import ORDER_JSON, ORDER_PROTO

MONEY = {"type": "record", "name": "Money", "namespace": "shop", "fields": [{"name": "cents", "type": "long"}]}
PRICED_V1 = {"type": "record", "name": "Priced", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "price", "type": "shop.Money"}]}
PRICED_V2 = {**PRICED_V1, "fields": PRICED_V1["fields"] + [{"name": "note", "type": ["null", "string"],
                                                             "default": None}]}


def _version(subject, version, schema_id, schema_type, schema, references=(), deleted=False) -> SchemaVersion:
    return SchemaVersion(subject=subject, version=version, schema_id=schema_id, schema_type=schema_type,
                         schema=schema if isinstance(schema, str) else json.dumps(schema),
                         references=tuple(references), deleted=deleted)


@pytest.fixture
def view() -> RegistryView:
    view = RegistryView()
    money = SchemaReference("shop.Money", "money-value", 1)
    for v in (_version("money-value", 1, 1, "AVRO", MONEY),
              _version("priced-value", 1, 2, "AVRO", PRICED_V1, [money], deleted=True),
              _version("priced-value", 2, 3, "AVRO", PRICED_V2, [money]),
              _version("j-value", 1, 10, "JSON", ORDER_JSON), _version("p-value", 1, 11, "PROTOBUF", ORDER_PROTO)):
        view.apply(*schema_record(v))
    return view


def _avro(schema: dict, value: dict) -> bytes:
    named: dict = {}
    fastavro.parse_schema(MONEY, named_schemas=named)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema, named_schemas=named), value)
    return buf.getvalue()


def _columns(view: RegistryView) -> dict[str, pa.Array]:
    order = message_class(ORDER_PROTO, [0])(id=3, note="n", kind=1)
    order.items.add(sku="s1")
    return {
        "priced-value": pa.array([frame(2, _avro(PRICED_V1, {"id": 1, "price": {"cents": 5}})),
                                  frame(3, _avro(PRICED_V2, {"id": 2, "price": {"cents": 7}, "note": "x"})),
                                  frame(3, b"\x02"), frame(10, b"{}"), b"not framed", None], pa.binary()),
        "j-value": pa.chunked_array([[frame(10, b'{"id": 1, "tags": ["a"]}')], [frame(10, b'{"id": "x"}')]]),
        "p-value": pa.array([frame(11, encode_message_indexes([0]) + order.SerializeToString())]),
        "unknown-value": pa.array([b"x"]),
    }


def test_subject_records_hold_every_version_and_what_they_reference(view):
    keys = [json.loads(k) for k, _ in subject_records(view, "priced-value")]
    assert [(k["subject"], k["version"]) for k in keys] == [("priced-value", 1), ("money-value", 1),
                                                             ("priced-value", 2)]


def test_the_child_answers_what_the_broker_would(view):
    local = RegistryColumns(lambda: view)
    worker = ProcessRegistryColumns(RegistryColumns(lambda: view))
    try:
        for subject, data in _columns(view).items():
            expected = local(subject=subject, data=data)
            got = worker(subject=subject, data=data)
            assert (got is None) == (expected is None), subject
            if expected is not None:
                assert got.type == expected.type and got.to_pylist() == expected.to_pylist(), subject
        assert worker.pid is not None  # it was the child that answered
        assert worker(subject="priced-value", data=_columns(view)["priced-value"]).to_pylist()[:3] == [
            {"id": 1, "price": {"cents": 5}, "note": None}, {"id": 2, "price": {"cents": 7}, "note": "x"}, None]
    finally:
        worker.close()


def test_a_killed_child_is_replaced_and_close_stops_it_by_pid(view, caplog):
    worker = ProcessRegistryColumns(RegistryColumns(lambda: view))
    data = _columns(view)["priced-value"]
    expected = RegistryColumns(lambda: view)(subject="priced-value", data=data).to_pylist()
    try:
        assert worker(subject="priced-value", data=data).to_pylist() == expected
        first = worker.pid
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: not process_alive(first), what="the killed child gone")
        assert worker(subject="priced-value", data=data).to_pylist() == expected  # a new child, or the broker
        assert worker(subject="priced-value", data=data).to_pylist() == expected
        assert worker.pid not in (None, first)
        last = worker.pid
    finally:
        worker.close()
    assert not process_alive(last)
    assert worker(subject="priced-value", data=data).to_pylist() == expected  # closed: decoded in process
    assert worker.pid is None


def test_the_checks_stay_in_the_parent(view):
    worker = ProcessRegistryColumns(RegistryColumns(lambda: view, ready=lambda: False))
    try:
        with pytest.raises(TypedColumnsNotReadyError):
            worker(subject="priced-value", data=_columns(view)["priced-value"])
        assert worker.pid is None  # nothing was sent
    finally:
        worker.close()
