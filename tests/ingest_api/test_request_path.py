"""The produce request path stays short: no thread hop to resolve the broker, small bodies and answers
skip pyarrow's JSON reader and Arrow string building (both ways give the same batch and bytes).
``bench/latency.py`` (scenario f, ``--profile``) measures it; these tests only pin the behaviour."""

from __future__ import annotations

import asyncio
import inspect

import numpy as np
import orjson
import pytest
from fastapi.dependencies.utils import get_dependant
from fastapi.routing import APIRoute

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.ingest_api import (
    brokers_api, client_quotas_api, codecs, console_api, consumers_api, coordinator_api, metrics_api, offsets_api,
    producers_api, records_api, replica_api, topics_api, transactions_api, users_api, v3_acls_api, v3_api,
    v3_cluster_api, v3_groups_api)
from lakelog.ingest_api.app import create_app
from lakelog.ingest_api.columnar_json import decode_columnar
from lakelog.requests import ProduceResult


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


def test_every_route_resolves_its_dependencies_on_the_event_loop(tmp_path):
    """Not only produce and fetch: no route of the app (v2, v3, transactions, groups, ACLs, quotas, users,
    replica and coordinator routes) and none of the app's own dependencies is a plain ``def``."""
    app = create_app(Broker(BrokerSettings.load(log_dirs=tmp_path, zookeeper_connect="127.0.0.1:1")))
    routers = {id(module.router): module.router for module in (
        topics_api, brokers_api, records_api, v3_cluster_api, v3_api, v3_groups_api, producers_api,
        transactions_api, offsets_api, consumers_api, replica_api, coordinator_api, metrics_api, v3_acls_api,
        users_api, client_quotas_api, console_api)}
    routes = [r for router in routers.values() for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) > 50
    app_level = [get_dependant(path="/", call=d.dependency) for d in app.router.dependencies]
    assert len(app_level) == 2
    calls = [(r.path, call) for r in routes for call in _calls(r.dependant)]
    calls += [("(app)", d.call) for d in app_level] + [("(app)", c) for d in app_level for c in _calls(d)]
    plain = sorted({(path, getattr(call, "__name__", repr(call))) for path, call in calls
                    if not inspect.iscoroutinefunction(call)})
    assert plain == []


@pytest.mark.parametrize("records", [1, 255, 256, 1000])
def test_produce_answers_are_the_same_bytes_both_ways(records, monkeypatch):
    result = ProduceResult(np.arange(records, dtype=np.int64) % 3, np.arange(10, 10 + records, dtype=np.int64), {})
    expected = orjson.dumps(codecs._produce_response_entries(result))
    assert codecs.produce_response_body(result) == expected
    for threshold in (0, 10**9):  # all Arrow, all orjson
        monkeypatch.setattr(codecs, "_ARROW_ANSWER_MIN_RECORDS", threshold)
        assert codecs.produce_response_body(result) == expected


@pytest.mark.parametrize("first_offset", [0, -1, 9_999_990, 2**62])
def test_a_streamed_produce_answer_has_the_bytes_and_length_it_announces(first_offset, monkeypatch):
    """A large answer goes out in pieces under a Content-Length computed beforehand: the pieces join to
    the orjson answer and the length is theirs (offsets of any width, -1 for acks=0)."""
    monkeypatch.setattr(codecs, "ANSWER_PIECE_RECORDS", 7)
    n = 30
    offsets = np.full(n, -1, np.int64) if first_offset < 0 else np.arange(first_offset, first_offset + n, dtype=np.int64)
    result = ProduceResult(np.arange(n, dtype=np.int64) % 12, offsets, {})
    length, pieces = codecs.produce_response_pieces(result)
    body = b"".join(pieces)
    assert body == orjson.dumps(codecs._produce_response_entries(result)) and length == len(body)


def test_produce_answer_with_a_failed_share_reports_it_per_record():
    err = RuntimeError("boom")
    err.retriable = True  # type: ignore[attr-defined]
    result = ProduceResult(np.array([0, 1], np.int64), np.array([5, -1], np.int64), {1: err})
    assert orjson.loads(codecs.produce_response_body(result))["offsets"] == [
        {"partition": 0, "offset": 5, "error_code": None, "error": None},
        {"partition": 1, "offset": None, "error_code": 2, "error": "boom"}]


def _json_body(records: int) -> bytes:
    return orjson.dumps({"records": [{"key": f"k{i}", "value": "v" * 98, "partition": i % 2} for i in range(records)]})


@pytest.mark.parametrize("records, columnar", [(1, False), (100, False), (1000, True)])
def test_json_bodies_go_columnar_only_when_large(records, columnar, monkeypatch):
    body = _json_body(records)
    assert (len(body) >= codecs._COLUMNAR_JSON_MIN_BYTES) == columnar
    expected = decode_columnar(body, "json")
    assert expected is not None
    used = []
    monkeypatch.setattr(codecs, "decode_columnar", lambda b, f, **kw: used.append(f) or decode_columnar(b, f, **kw))
    batch, parts = codecs.decode_produce(body, "json")
    assert bool(used) == columnar
    assert batch.equals(expected[0])
    assert parts is not None and parts.equals(expected[1].cast(parts.type))


class _Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str):
        return ("127.0.0.1", 1) if name == "peername" else None


def test_an_answer_head_and_body_leave_in_one_write():
    from lakelog.ingest_api.http_guard import _HeadWithBody

    async def scenario() -> None:
        # head then body in the same loop iteration (a Response): one write
        t = _Recorder()
        w = _HeadWithBody(t)
        w.write(b"HEAD")
        assert t.writes == []
        w.write(b"BODY")
        assert t.writes == [b"HEADBODY"]
        await asyncio.sleep(0)
        assert t.writes == [b"HEADBODY"]
        assert w.get_extra_info("peername") == ("127.0.0.1", 1)  # everything else is the transport's
        # a head alone (a streamed answer) leaves at the end of the iteration, before anything later
        t = _Recorder()
        w = _HeadWithBody(t)
        w.write(b"HEAD")
        await asyncio.sleep(0)
        assert t.writes == [b"HEAD"]
        w.write(b"CHUNK")
        assert t.writes == [b"HEAD", b"CHUNK"]
        # closing flushes what is held first
        t = _Recorder()
        w = _HeadWithBody(t)
        w.write(b"HEAD")
        w.close()
        assert t.writes == [b"HEAD"] and t.closed

    asyncio.run(scenario())
