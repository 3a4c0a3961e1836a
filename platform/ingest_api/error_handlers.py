"""How the gateway answers errors: REST Proxy's body ``{"error_code": int, "message": str}`` always.

- a :class:`~lakelog.errors.LakelogError`: its status and code, ``X-Lakelog-Retriable``;
- kazoo's connection loss, session expiry or timeout (the broker lost ZooKeeper while answering):
  :class:`~lakelog.replication.errors.ZooKeeperUnavailableError`, 503 / 50304, retriable;
- a request parameter or body that fails validation: 400 / 40001 (parameters) or 422 / 42222 (body);
- Starlette's own HTTP errors (404 route, 405 method): their status as the code;
- anything else (a bug): 500 / 50001 with ``Connection: close``, logged with its traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakelog.errors import RETRIABLE_HEADER, LakelogError
from lakelog.replication.errors import ZooKeeperUnavailableError

log = logging.getLogger(__name__)

#: kazoo errors that mean "ZooKeeper is not reachable right now", not a bug.
ZOOKEEPER_UNAVAILABLE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, KazooTimeoutError)


def error_response(exc: LakelogError) -> JSONResponse:
    """The REST Proxy error answer of ``exc``."""
    return JSONResponse(exc.to_body(), status_code=exc.http_status,
                        headers={RETRIABLE_HEADER: "true" if exc.retriable else "false"})


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers above on ``app``."""

    @app.exception_handler(LakelogError)
    async def lakelog_error(request: Request, exc: LakelogError) -> JSONResponse:
        return error_response(exc)

    async def zookeeper_unavailable(request: Request, exc: Exception) -> JSONResponse:
        log.warning("%s %s: ZooKeeper unavailable (%s)", request.method, request.url.path, type(exc).__name__)
        return error_response(ZooKeeperUnavailableError(
            f"The broker lost its ZooKeeper connection ({type(exc).__name__}) while answering; retry."))

    for kind in ZOOKEEPER_UNAVAILABLE:
        app.add_exception_handler(kind, zookeeper_unavailable)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug or an unexpected failure: still a REST Proxy error body, never a bare text/plain 500.
        log.exception("%s %s failed", request.method, request.url.path)
        return JSONResponse({"error_code": 50001, "message": f"Internal error: {type(exc).__name__}: {exc}"},
                            status_code=500, headers={RETRIABLE_HEADER: "false", "Connection": "close"})

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            parts.append(f"{loc}: {err['msg']}")
        status = 422 if any(e["loc"] and e["loc"][0] == "body" for e in exc.errors()) else 400
        return JSONResponse({"error_code": status * 100 + (22 if status == 422 else 1),
                             "message": "Invalid request: " + "; ".join(parts)}, status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error_code": exc.status_code, "message": str(exc.detail)}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))
