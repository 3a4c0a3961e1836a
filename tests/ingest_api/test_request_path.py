"""The produce request path stays short: no thread hop to resolve the broker, small bodies and answers
skip pyarrow's JSON reader and Arrow string building (both ways give the same batch and bytes).
``bench/latency.py`` (scenario f, ``--profile``) measures it; these tests only pin the behaviour."""

from __future__ import annotations

import inspect

import orjson
import pytest
from fastapi.routing import APIRoute

from lakelog.ingest_api import codecs, records_api
from lakelog.ingest_api.columnar_json import decode_columnar


def _calls(dependant):
    for dep in dependant.dependencies:
        yield dep.call
        yield from _calls(dep)


def test_produce_and_fetch_routes_resolve_their_dependencies_on_the_event_loop():
    """FastAPI runs a plain ``def`` dependency in its thread pool: a hop to a worker thread and back on
    every request. The produce and fetch routes' dependencies are coroutines."""
    routes = [r for r in records_api.router.routes if isinstance(r, APIRoute)]
    assert {r.path for r in routes} >= {"/topics/{topic}", "/topics/{topic}/partitions/{partition}",
                                       "/topics/{topic}/partitions/{partition}/records"}
    for route in routes:
        calls = list(_calls(route.dependant))
        assert calls, route.path
        for call in calls:
            assert inspect.iscoroutinefunction(call), (route.path, call)


def _json_body(records: int) -> bytes:
    return orjson.dumps({"records": [{"key": f"k{i}", "value": "v" * 98, "partition": i % 2} for i in range(records)]})


@pytest.mark.parametrize("records, columnar", [(1, False), (100, False), (1000, True)])
def test_json_bodies_go_columnar_only_when_large(records, columnar, monkeypatch):
    body = _json_body(records)
    assert (len(body) >= codecs._COLUMNAR_JSON_MIN_BYTES) == columnar
    expected = decode_columnar(body, "json")
    assert expected is not None
    used = []
    monkeypatch.setattr(codecs, "decode_columnar", lambda b, f: used.append(f) or decode_columnar(b, f))
    batch, parts = codecs.decode_produce(body, "json")
    assert bool(used) == columnar
    assert batch.equals(expected[0])
    assert parts is not None and parts.equals(expected[1].cast(parts.type))
