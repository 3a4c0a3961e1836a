"""The web console: ``GET /console`` and its static assets under ``/console/assets/``.

A single page of plain HTML, JavaScript and CSS, shipped in the package (``ingest_api/console/``, listed
in the package data) and served by every broker, so it works without network access. The page reads
and writes the cluster only through the public REST API this gateway serves (v2 and v3 topics,
partitions, records, offsets, brokers, consumer groups and lags); it has no routes of its own beyond its
files. Neither route is in the OpenAPI document: they answer files for a browser, not API resources.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse
from starlette.staticfiles import StaticFiles

#: The console's files (``index.html``, ``console.js``, ``console.css``), package data of lakelog.
ASSETS_DIR = Path(__file__).resolve().parent / "console"

router = APIRouter(include_in_schema=False)


@router.get("/console")
async def console_page() -> FileResponse:
    """The console's page; it loads its script and style from ``/console/assets/``."""
    return FileResponse(ASSETS_DIR / "index.html", media_type="text/html",
                        headers={"Cache-Control": "no-cache"})


@router.get("/console/")
async def console_slash() -> RedirectResponse:
    """``/console/`` is the page at ``/console``."""
    return RedirectResponse("/console", status_code=308)


def console_assets() -> StaticFiles:
    """The ASGI app serving the console's script and style (mounted at ``/console/assets``)."""
    return StaticFiles(directory=ASSETS_DIR, check_dir=True)
