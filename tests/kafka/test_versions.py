"""The served-versions table: one source for ApiVersions and the docs page."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lakelog.kafka.versions import API_NAMES, SERVED, accepts

ROOT = Path(__file__).resolve().parents[2]


def _hook():
    spec = importlib.util.spec_from_file_location("kafka_versions", ROOT / "docs" / "hooks" / "kafka_versions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_page_shows_every_served_api_from_the_table():
    hook = _hook()
    assert hook.MARKER in (ROOT / "docs" / "kafka.md").read_text()
    table = hook.served_table()
    for key, r in SERVED.items():
        assert f"| {API_NAMES[key]} | {key} | {r.accepted_min}-{r.max}" in table
    assert "| Produce | 0 | 3-11 (0-11 advertised) |" in table


def test_produce_below_v3_is_advertised_but_not_accepted():
    assert SERVED[0].advertised_min == 0
    assert not accepts(0, 2) and accepts(0, 3) and not accepts(0, SERVED[0].max + 1)
    assert not accepts(57, 0)
