#!/usr/bin/env python
"""Flush throughput with typed columns: records/s of the segment tail -> Delta commit of a schema'd topic
(``value_parsed`` decoded from 100-byte Avro records) against the same records on a topic without a subject.

Usage::

    python bench/typed_flush.py                      # 3 pairs of 200,000 records, ~1 minute
    python bench/typed_flush.py --records 500000 --repeat 5

What it does: in this process, no broker (the flush alone is measured): for each phase a fresh partition
log in a temp dir (the broker's :class:`~lakelog.log_tables.partition_log.PartitionLog`, segment tail on),
``--records`` Avro records of ``--value-bytes`` bytes each in Confluent's wire format (magic byte, schema
id; encoded by fastavro before the clock starts) appended in batches of 10,000 and moved below the high
watermark, then timed: ``flush_to_lake`` until the lake end offset reaches the high watermark
(``lake.commit.bytes`` 64 MiB per commit, the default). The typed phase's topic names the subject
(``value.schema.subject``), so each commit decodes its records with the registry's schema
(:class:`~lakelog.schemas.record_columns.RegistryColumns` over a registry view holding it) and writes the
struct column; the plain phase's topic names none (the decoder is given, and does nothing). Phases
alternate (plain, typed, typed, plain, ...: a drift of the machine's load hits both alike).

Figures: records/s of each phase, the ratio typed / plain per pair and its median. The ``bench/`` folder
never asserts timings.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import fastavro
import pyarrow as pa
from rich.table import Table

from _cluster import make_console
from lakelog.config import TopicConfig
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.schemas.record_columns import RegistryColumns
from lakelog.schemas.registry_state import RegistryView
from lakelog.schemas.wire_format import frame

console = make_console()

SUBJECT = "orders-value"
SCHEMA_ID = 1
ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "int"},
    {"name": "currency", "type": "string"}, {"name": "created_ms", "type": "long"},
    {"name": "note", "type": "string"}]}
BATCH_RECORDS = 10_000


def registry_view() -> RegistryView:
    """A registry view holding the subject's one version (as a broker's view after following ``_schemas``)."""
    view = RegistryView()
    view.apply(json.dumps({"keytype": "SCHEMA", "subject": SUBJECT, "version": 1, "magic": 1}).encode(),
               json.dumps({"subject": SUBJECT, "version": 1, "id": SCHEMA_ID, "schema": json.dumps(ORDER)}).encode())
    return view


def values(count: int, value_bytes: int) -> list[pa.Table]:
    """``count`` framed Avro values of ``value_bytes`` bytes each (the note pads them), in produce batches."""
    parsed = fastavro.parse_schema(ORDER)

    def encode(i: int, note: str) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"id": i, "amount": i % 1000, "currency": "EUR",
                                                 "created_ms": 1_764_000_000_000 + i, "note": note})
        return frame(SCHEMA_ID, buf.getvalue())

    def padded(i: int) -> bytes:
        pad = max(0, value_bytes - len(encode(i, "")) - 1)  # the note's length: 1 byte below 64 characters
        while pad and len(encode(i, "x" * pad)) > value_bytes:
            pad -= 1
        return encode(i, "x" * pad)

    batches = []
    for start in range(0, count, BATCH_RECORDS):
        batch = [padded(i) for i in range(start, min(count, start + BATCH_RECORDS))]
        batches.append(pa.table({"value": pa.array(batch, pa.binary())}))
    return batches


def phase(batches: list[pa.Table], *, typed: bool, view: RegistryView, root: Path) -> float:
    """Seconds the flush of every batch took (tail -> Delta, below the high watermark)."""
    configs = {"lake.commit.interval.ms": "1000"} | ({"value.schema.subject": SUBJECT} if typed else {})
    directory = Path(tempfile.mkdtemp(dir=root))
    plog = PartitionLog.open(topic="orders", partition=0, table_uri=directory / "orders-0",
                             config=TopicConfig.model_validate(configs), tail_cache_max_bytes=1 << 20)
    plog.record_decoder = RegistryColumns(lambda: view)
    try:
        for batch in batches:
            plog.append(batch)
        plog.advance_high_watermark(plog.log_end_offset)
        started = time.perf_counter()
        while plog.lake_end_offset < plog.high_watermark:
            plog.flush_to_lake()
        return time.perf_counter() - started
    finally:
        plog.close()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per phase (default 200,000)")
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes per framed value (default 100)")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of phases (default 3)")
    args = parser.parse_args()

    view = registry_view()
    batches = values(args.records, args.value_bytes)
    size = len(batches[-1]["value"][-1].as_py())
    results: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="typed-flush-") as tmp:
        phase(batches[:1], typed=True, view=view, root=Path(tmp))  # warm-up: imports, the first schema parse
        for i in range(args.repeat):
            for typed in ((False, True) if i % 2 == 0 else (True, False)):
                seconds = phase(batches, typed=typed, view=view, root=Path(tmp))
                results[typed].append(args.records / seconds)
                console.print(f"{'typed' if typed else 'plain'}: {args.records:,} records in {seconds:.2f} s")

    table = Table(title=f"Flush (tail -> Delta) of {args.records:,} Avro records of {size} B, records/s")
    for column in ("plain, per pair", "typed (value_parsed), per pair", "typed / plain per pair", "median"):
        table.add_column(column, justify="right")
    ratios = [t / p for p, t in zip(results[False], results[True])]
    table.add_row(", ".join(f"{r:,.0f}" for r in results[False]), ", ".join(f"{r:,.0f}" for r in results[True]),
                  ", ".join(f"{x:.3f}x" for x in ratios), f"{statistics.median(ratios):.3f}x")
    console.print(table)


if __name__ == "__main__":
    main()
