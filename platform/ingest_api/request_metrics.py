"""Per-route HTTP request metrics: an ASGI middleware and the counters it feeds.

:class:`RequestMetrics` wraps the gateway app when ``metrics.enabled`` is true (the default); it times every
request and labels it with the route template FastAPI matched, so ``GET /metrics`` shows Kafka's
``kafka.network:type=RequestMetrics`` per request type. One dict lookup and two observations per request.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import Counter, Histogram
from prometheus_client.metrics_core import Metric

__all__ = ["RequestMetrics", "RequestStats"]

#: The ``method`` label's values; any other method a client sends is labelled ``other``.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: Seconds: 100 us to 60 s (a one-record produce is about a millisecond; a long poll up to max.wait.ms).
REQUEST_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                     5.0, 10.0, 30.0, 60.0)


class RequestStats:
    """Every HTTP request counted and timed by method and route template (``/topics/{topic}``, never the
    path itself, so label values stay few), with the answer's status class (``2xx``, ...): Kafka's
    ``kafka.network:type=RequestMetrics`` (``RequestsPerSec``, ``TotalTimeMs`` per request type). Fed by
    :class:`RequestMetrics`; read by ``GET /metrics`` through :meth:`collect`."""

    def __init__(self) -> None:
        self.requests = Counter("lakelog_http_requests", "HTTP requests answered, by method, route template and "
                                "status class (Kafka's kafka.network:type=RequestMetrics,name=RequestsPerSec).",
                                ["method", "route", "status"], registry=None)
        self.seconds = Histogram("lakelog_http_request_duration_seconds", "Time from a request's start to the end "
                                 "of its answer, by method and route template (Kafka's "
                                 "kafka.network:type=RequestMetrics,name=TotalTimeMs).", ["method", "route"],
                                 buckets=REQUEST_BUCKETS_S, registry=None)
        self._children: dict[tuple[str, str, str], tuple] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """One answered request: ``status`` its HTTP status, ``seconds`` its time."""
        key = (method, route, f"{status // 100}xx")
        children = self._children.get(key)
        if children is None:  # labels() takes a lock and builds a tuple: once per key
            children = self._children[key] = (self.requests.labels(*key), self.seconds.labels(method, route))
        children[0].inc()
        children[1].observe(seconds)

    def collect(self) -> Iterable[Metric]:
        """The two families, for the scrape."""
        yield from self.requests.collect()
        yield from self.seconds.collect()


class RequestMetrics:
    """ASGI middleware feeding :class:`RequestStats`; a request no route matched is labelled
    ``route="unmatched"``, one that failed before answering ``status="5xx"``.

    Args:
        app: the ASGI app inside.
        stats: where the requests are counted.
    """

    def __init__(self, app, *, stats: RequestStats) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500

        async def send_status(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"] if scope["method"] in HTTP_METHODS else "other"  # the client's: bounded
            self.stats.observe(method, route, status, time.perf_counter() - started)
