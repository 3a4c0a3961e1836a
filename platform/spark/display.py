"""A Spark DataFrame printed as a rich table: what ``lakelog sql`` and the demo show."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["print_dataframe"]


def print_dataframe(df: "DataFrame", *, max_rows: int = 100, title: str | None = None,
                    console: Console | None = None) -> None:
    """Print ``df``'s first ``max_rows`` rows as a rich table on ``console`` (default: a new stdout console).

    Binary cells are shown as UTF-8 text where they decode, else as ``base64:...``; floats with two
    decimals; nulls as ``null``. A line under the table says when rows were left out.
    """
    console = console or Console()
    rows = df.limit(max_rows + 1).collect()
    table = Table(*df.columns, title=title)
    for row in rows[:max_rows]:
        table.add_row(*[_cell(v) for v in row])
    console.print(table)
    if len(rows) > max_rows:
        console.print(f"(only the first {max_rows} rows shown)")


def _cell(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    if isinstance(value, float):
        return f"{value:,.2f}"
    return "null" if value is None else str(value)
