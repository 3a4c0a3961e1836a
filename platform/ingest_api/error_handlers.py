"""How the gateway answers errors: REST Proxy's body ``{"error_code": int, "message": str}`` always.

- a :class:`~lakelog.errors.LakelogError`: its status and code, ``X-Lakelog-Retriable``;
- kazoo's connection loss, session expiry or timeout (the broker lost ZooKeeper while answering) met
  outside the modules that wrap it where it enters (:mod:`lakelog.replication.zookeeper_errors`): the same
  :class:`~lakelog.replication.errors.ZooKeeperUnavailableError`, 503 / 50304, retriable;
- a request parameter or body that fails validation: :class:`~lakelog.protocol.errors.MalformedBodyError`,
  400 / 40001 (parameters, and a body that is not JSON, on every route) or
  :class:`~lakelog.protocol.errors.InvalidBodyFieldError`, 422 / 42222 (body);
- Starlette's own HTTP errors (404 route, 405 method): their status as the code; a 405 carries an
  ``Allow`` header naming every method the path serves (across routers);
- a client that went away while its body was read (``ClientDisconnect``, e.g. closed by
  :mod:`lakelog.ingest_api.http_guard` for a slow body): logged at debug, the answer
  (:class:`~lakelog.ingest_api.errors.RequestTimeoutError`, 408 / 40802) goes nowhere;
- anything else (a bug): :class:`~lakelog.errors.InternalError`, 500 / 50001 with ``Connection: close``
  (uvicorn closes the connection after the answer, so a client reusing connections opens a new one), logged
  with its traceback.

The statuses and codes are documented in :mod:`lakelog.ingest_api.openapi_docs`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from lakelog.errors import RETRIABLE_HEADER, InternalError, LakelogError
from lakelog.ingest_api.errors import RequestTimeoutError
from lakelog.protocol.errors import InvalidBodyFieldError, MalformedBodyError
from lakelog.replication.zookeeper_errors import ZOOKEEPER_UNAVAILABLE, unavailable_error

log = logging.getLogger(__name__)


def error_response(exc: LakelogError) -> JSONResponse:
    """The REST Proxy error answer of ``exc``."""
    headers = {RETRIABLE_HEADER: "true" if exc.retriable else "false"}
    headers.update(getattr(exc, "response_headers", None) or {})  # e.g. WWW-Authenticate of a 401
    return JSONResponse(exc.to_body(), status_code=exc.http_status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers above on ``app``."""

    @app.exception_handler(LakelogError)
    async def lakelog_error(request: Request, exc: LakelogError) -> JSONResponse:
        return error_response(exc)

    async def zookeeper_unavailable(request: Request, exc: Exception) -> JSONResponse:
        log.warning("%s %s: ZooKeeper unavailable (%s)", request.method, request.url.path, type(exc).__name__)
        return error_response(unavailable_error(exc))

    for kind in ZOOKEEPER_UNAVAILABLE:
        app.add_exception_handler(kind, zookeeper_unavailable)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug or an unexpected failure: still a REST Proxy error body, never a bare text/plain 500.
        log.exception("%s %s failed", request.method, request.url.path)
        err = InternalError(f"Internal error: {type(exc).__name__}: {exc}")
        return JSONResponse(err.to_body(), status_code=err.http_status,
                            headers={RETRIABLE_HEADER: "false", "Connection": "close"})

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        bad_json = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
        if bad_json is not None:  # the same answer as a produce body that is not JSON (REST Proxy: 400)
            detail = (bad_json.get("ctx") or {}).get("error") or bad_json.get("msg")
            answer = MalformedBodyError(f"The body is not valid JSON: {detail} (at character "
                                        f"{bad_json['loc'][-1]}). Nothing was written.")
            return JSONResponse(answer.to_body(), status_code=answer.http_status)
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            parts.append(f"{loc}: {err['msg']}")
        body = any(e["loc"] and e["loc"][0] == "body" for e in exc.errors())
        answer = (InvalidBodyFieldError if body else MalformedBodyError)("Invalid request: " + "; ".join(parts))
        return JSONResponse(answer.to_body(), status_code=answer.http_status)

    @app.exception_handler(ClientDisconnect)
    async def client_disconnect(request: Request, exc: ClientDisconnect) -> JSONResponse:
        log.debug("%s %s: the client disconnected before its request body arrived", request.method,
                  request.url.path)
        err = RequestTimeoutError("The client disconnected.")
        return JSONResponse(err.to_body(), status_code=err.http_status, headers={"Connection": "close"})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            allowed = allowed_methods(request.app.routes, request.url.path)
            if allowed:
                headers["Allow"] = ", ".join(allowed)
        return JSONResponse({"error_code": exc.status_code, "message": str(exc.detail)}, status_code=exc.status_code,
                            headers=headers or None)


def allowed_methods(routes, path: str) -> list[str]:
    """The methods the routes serve on ``path`` (a path served by routes of several routers: all of
    theirs), sorted."""
    methods: set[str] = set()
    for route in _leaf_routes(routes):
        regex = getattr(route, "path_regex", None)
        if regex is not None and getattr(route, "methods", None) and regex.match(path):
            methods |= set(route.methods)
    return sorted(methods)


def _leaf_routes(routes):
    for route in routes:
        included = getattr(route, "original_router", None)  # a router included by FastAPI
        if included is not None:
            yield from _leaf_routes(included.routes)
        else:
            yield route
