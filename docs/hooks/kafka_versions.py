"""MkDocs hook: the Kafka listener page's table of APIs and versions, generated from the one version table
(:data:`lakelog.kafka.versions.SERVED`, what ApiVersions advertises).

``docs/kafka.md`` holds the marker ``<!-- kafka: served apis -->``; :func:`on_page_markdown` replaces it
with :func:`served_table`. ``tests/kafka/test_versions.py`` calls :func:`served_table` directly.
"""

from __future__ import annotations

from typing import Any

from lakelog.kafka.versions import served_rows

MARKER = "<!-- kafka: served apis -->"


def served_table() -> str:
    """A Markdown table: API, key, versions served (and advertised, where they differ)."""
    lines = ["| API | key | versions |", "| --- | --- | --- |"]
    lines += [f"| {name} | {key} | {versions} |" for name, key, versions in served_rows()]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:  # noqa: ARG001 (MkDocs' signature)
    """MkDocs' page event: fill the marker with :func:`served_table`."""
    return markdown.replace(MARKER, served_table()) if MARKER in markdown else markdown
