"""MkDocs hook: the benchmark pages of the site come from ``bench/`` itself.

``bench/README.md`` (what each bench measures and how to run it) becomes ``benchmarks/index.md`` and
``bench/RESULTS.md`` (every dated figure, with the command that printed it) ``benchmarks/results.md``,
so the figures live in one file beside the benches and the site never holds a copy that could drift.
Links between the two files and into ``docs/`` (``../docs/spark.md``) are rewritten to the site's paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

BENCH = Path(__file__).resolve().parents[2] / "bench"

#: file under bench/ -> its page in the site
PAGES = {"README.md": "benchmarks/index.md", "RESULTS.md": "benchmarks/results.md"}


def site_markdown(text: str) -> str:
    """``text`` of a bench/ file with its links rewritten for ``benchmarks/``."""
    for source, page in PAGES.items():
        text = text.replace(f"]({source}", f"]({Path(page).name}")
    return text.replace("](../docs/", "](../")


def on_files(files: Files, config: Any) -> Files:
    """MkDocs' files event: add the two bench pages as generated files."""
    for source, page in PAGES.items():
        files.append(File.generated(config, page, content=site_markdown((BENCH / source).read_text())))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:  # noqa: ARG001 (MkDocs' signature)
    """MkDocs' page event: a page under docs/ links the bench files as ``../bench/RESULTS.md`` (right when
    read in the repository); in the site they are the generated pages."""
    if page.file.src_uri in PAGES.values():
        return markdown
    depth = page.file.src_uri.count("/")
    up = "../" * (depth + 1)
    for source, site_page in PAGES.items():
        markdown = markdown.replace(f"]({up}bench/{source}", f"]({'../' * depth}{site_page}")
    return markdown
