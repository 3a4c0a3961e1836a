"""The produce request path stays short: no thread hop to resolve the broker, small bodies and answers
skip pyarrow's JSON reader and Arrow string building (both ways give the same batch and bytes).
``bench/latency.py`` (scenario f, ``--profile``) measures it; these tests only pin the behaviour."""

from __future__ import annotations

import inspect

from fastapi.routing import APIRoute

from lakelog.ingest_api import records_api


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
