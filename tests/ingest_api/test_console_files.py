"""The web console's files on a real broker: ``GET /console`` answers the page, ``/console/assets/``
its script and style (from the package data that pyproject lists), and neither is in the OpenAPI
document. The page itself is driven in a browser by ``tests/cluster/test_console.py``."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

from lakelog.ingest_api.console_api import ASSETS_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_console_page_and_assets(http):
    page = http.get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assets = re.findall(r'(?:src|href)="(/console/assets/[^"]+)"', page.text)
    assert sorted(assets) == ["/console/assets/console.css", "/console/assets/console.js"]
    for path, media in (("/console/assets/console.js", "javascript"), ("/console/assets/console.css", "text/css")):
        resp = http.get(path)
        assert resp.status_code == 200 and media in resp.headers["content-type"], path
        assert resp.content == (ASSETS_DIR / path.rsplit("/", 1)[1]).read_bytes()
    assert http.get("/console/", follow_redirects=False).headers["location"] == "/console"
    assert http.get("/console/assets/missing.js").status_code == 404


def test_console_loads_nothing_from_other_hosts():
    """Offline: no asset, font or script comes from another origin (no CDN)."""
    for f in ASSETS_DIR.iterdir():
        text = f.read_text()
        assert not re.search(r"(src|href)=\"(https?:)?//", text), f
        assert "@import" not in text and "url(http" not in text, f


def test_console_out_of_the_openapi_document(http):
    paths = http.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/console")]


def test_console_files_are_package_data():
    """A non-editable install has every file of the console: pyproject's package data matches each
    (tests/test_install.py installs the wheel itself)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["lakelog.ingest_api.console"]
    files = sorted(p.relative_to(ASSETS_DIR).as_posix() for p in ASSETS_DIR.iterdir())
    assert files == ["console.css", "console.js", "index.html"]
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files)


def test_console_calls_only_documented_routes(http):
    """No back door: every path the console's script requests is a route of the OpenAPI document."""
    js = (ASSETS_DIR / "console.js").read_text()
    documented = [re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", p) + "$") for p in http.get("/openapi.json").json()["paths"]]
    called = set()
    for in_v3, literal in re.findall(r'(v3\()?[`"](/[^`"]+)[`"]', js):
        path = re.sub(r"\$\{[^}]+\}", "x", literal).split("?")[0]
        called.add(f"/v3/clusters/x{path}" if in_v3 else path)
    assert {"/v3/clusters", "/topics", "/health", "/v3/clusters/x/consumer-groups/x/lags",
            "/topics/x/partitions/x/records", "/lakelog/v1/topics/x/logs"} <= called
    undocumented = sorted(p for p in called if not any(d.match(p) for d in documented))
    assert undocumented == []
