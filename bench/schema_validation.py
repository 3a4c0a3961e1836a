#!/usr/bin/env python
"""The cost of schema validation at produce: records/s of one broker into a topic with
``confluent.value.schema.validation`` on against the same records into a topic without it.

Usage::

    python bench/schema_validation.py                  # 3 pairs per row, ~2 minutes
    python bench/schema_validation.py --repeat 5 --seconds 10

What it does: starts an embedded ZooKeeper and one broker child process (``produce_fetch.py``'s setup: a
temp dir, free ports, stopped by pid at the end, on Ctrl-C, SIGTERM and errors) and registers an Avro and
a JSON Schema ``Order`` (``{"id": long, "note": string}``). Each request body is REST Proxy v2's binary
produce (``application/vnd.kafka.binary.v2+json``) of ``--records`` records whose values are already in
Confluent's wire format, 100 bytes each (magic byte, schema id, 95 bytes of Avro or JSON), with keys
``key-N``, pre-built: the plain baseline is the same bodies produced to a topic without validation. Each
phase produces to a fresh 6-partition topic with ``--threads`` keep-alive client threads
(``produce_fetch.py``'s load); phases of a pair alternate (off, on, on, off, ...: a drift of the machine's
load hits both alike).

Figures: records/s of each phase, on / off per pair, its median against the target 0.70x (validation
costs at most 30% of plain produce), the broker's CPU microseconds a record on and off (steadier than
records/s on a loaded machine), and, for reference, the validator alone in this process
(:class:`lakelog.schemas.validation.SubjectValidator` over one column of 100,000 records). The ``bench/``
folder never asserts timings.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import time
import uuid

import fastavro
import httpx
import numpy as np
import orjson
import pyarrow as pa

from _cluster import PySpy, bench_cluster, broker_env as parse_broker_env, make_console, on_off_table
from produce_fetch import PARTITIONS, Load, Result, check_json_offsets
from lakelog.schemas.registry_state import RegistryView, SchemaVersion
from lakelog.schemas.validation import SubjectValidator
from lakelog.schemas.wire_format import frame

#: Target: records/s with validation on over records/s with it off (validation costs ≤ 30%).
TARGET_RATIO = 0.70
RECORD_BYTES = 100
ORDER_AVRO = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string"}]})
ORDER_JSON = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
                         "required": ["id", "note"]})
ROWS = (("AVRO", "Avro, 100 B records"), ("JSON", "JSON Schema, 100 B records"))

console = make_console()


def payloads(schema_type: str, n: int, start: int) -> list[bytes]:
    """``n`` payloads of ``RECORD_BYTES - 5`` bytes each (an Avro datum or a JSON document of the Order)."""
    out = []
    parsed = fastavro.parse_schema(json.loads(ORDER_AVRO))
    for i in range(start, start + n):
        if schema_type == "AVRO":
            note_chars = RECORD_BYTES - 5
            while True:  # the string's length prefix grows with it: shorten until the datum fits
                buf = io.BytesIO()
                fastavro.schemaless_writer(buf, parsed, {"id": i, "note": "n" * note_chars})
                if len(buf.getvalue()) <= RECORD_BYTES - 5:
                    break
                note_chars -= len(buf.getvalue()) - (RECORD_BYTES - 5)
            out.append(buf.getvalue())
        else:
            empty = orjson.dumps({"id": i, "note": ""})
            out.append(orjson.dumps({"id": i, "note": "n" * (RECORD_BYTES - 5 - len(empty))}))
    assert all(len(p) == RECORD_BYTES - 5 for p in out)
    return out


def body(schema_type: str, schema_id: int, n: int, start: int) -> bytes:
    """A binary produce body of ``n`` framed 100-byte values with keys."""
    b64 = base64.b64encode
    values = [frame(schema_id, p) for p in payloads(schema_type, n, start)]
    return orjson.dumps({"records": [{"key": b64(b"key-%d" % (start + i)).decode(), "value": b64(v).decode()}
                                     for i, v in enumerate(values)]})


def validator_alone(schema_type: str, n: int = 100_000) -> float:
    """Records/s of :class:`SubjectValidator` over one column of ``n`` framed records, in this process."""
    version = SchemaVersion(subject="bench-value", version=1, schema_id=1, schema_type=schema_type,
                            schema=ORDER_AVRO if schema_type == "AVRO" else ORDER_JSON)
    validator = SubjectValidator("bench-value", field="value", versions=[version], view=RegistryView())
    column = pa.array([frame(1, p) for p in payloads(schema_type, n, 0)], pa.binary())
    t0 = time.perf_counter()
    failures = validator.failures(column)
    took = time.perf_counter() - t0
    assert not failures, next(iter(failures.items()))
    return n / took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="Seconds per phase. Default: 6.")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="Off/on pairs per row. Default: 3.")
    parser.add_argument("--threads", type=int, default=8, help="Concurrent client connections. Default: 8.")
    parser.add_argument("--records", type=int, default=1000, help="Records per request. Default: 1000.")
    parser.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="A broker setting as LAKELOG_NAME=VALUE (repeatable). Default: none.")
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (tables, logs). Default: off.")
    parser.add_argument("--topic-config", action="append", default=[], metavar="NAME=VALUE",
                        help="A topic config of both topics of a pair (repeatable), e.g. lake.commit.interval.ms="
                             "600000 and lake.commit.bytes=1073741824 keep the flush (and the typed value_parsed "
                             "column it decodes) out of the phases: the produce path alone. Default: none.")
    args = parser.parse_args()
    rows: dict[str, dict[bool, list[Result]]] = {kind: {False: [], True: []} for kind, _ in ROWS}
    t_start = time.monotonic()
    with bench_cluster(console, prefix="lakelog-bench-validation-", env=parse_broker_env(args.broker_env),
                       keep=args.keep) as run:
        broker = run.broker
        spy = PySpy(None, broker.pid)
        with httpx.Client(base_url=broker.url, timeout=120.0) as admin:
            cluster_id = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
            subject = f"orders-{uuid.uuid4().hex[:6]}"
            for kind, label in ROWS:
                registered = admin.post(f"/subjects/{subject}-{kind.lower()}/versions", json={
                    "schema": ORDER_AVRO if kind == "AVRO" else ORDER_JSON, "schemaType": kind})
                registered.raise_for_status()
                schema_id = registered.json()["id"]
                bodies = [body(kind, schema_id, args.records, t * args.records) for t in range(args.threads)]
                for rep in range(args.repeat):
                    for enabled in ((False, True) if rep % 2 == 0 else (True, False)):
                        topic = f"validation-{kind.lower()}-{uuid.uuid4().hex[:8]}"
                        configs = [{"name": "value.schema.subject", "value": f"{subject}-{kind.lower()}"}] if enabled else []
                        configs += [{"name": k, "value": v} for k, _, v in (c.partition("=") for c in args.topic_config)]
                        created = admin.post(f"/v3/clusters/{cluster_id}/topics", json={
                            "topic_name": topic, "partitions_count": PARTITIONS, "replication_factor": 1,
                            "configs": configs})
                        if created.status_code != 201:
                            raise RuntimeError(f"creating {topic}: HTTP {created.status_code} {created.text[:300]}")

                        def job(client: httpx.Client, i: int, topic: str = topic) -> tuple[int, int, int]:
                            content = bodies[i]
                            check_json_offsets(client.post(f"/topics/{topic}", content=content, headers={
                                "Content-Type": "application/vnd.kafka.binary.v2+json"}))
                            return args.records, args.records * RECORD_BYTES, len(content)

                        result = Result(label, "binary-produce", RECORD_BYTES, f"{args.records} × {RECORD_BYTES} B")
                        r = Load(broker.url, args.threads, 10**12, args.seconds).run(result, broker, job, spy)
                        rows[kind][enabled].append(r)
                        console.print(f"  {label:<28} validation {'on ' if enabled else 'off'}  pair {rep + 1}/"
                                      f"{args.repeat}  {r.rate:>10,.0f} records/s  broker CPU "
                                      f"{r.broker_cpu / r.seconds:.2f} cores"
                                      + (f"  [red]{r.errors[0][:200]}[/]" if r.errors else ""))
    if run.return_code:
        return run.return_code
    console.print(on_off_table(f"binary produce records/s, schema validation on vs off (one broker, {args.threads} "
                               f"client threads, {args.records} records of {RECORD_BYTES} B per request, "
                               f"{args.seconds:g} s per phase)", ROWS, rows, target_ratio=TARGET_RATIO))
    for kind, label in ROWS:
        ratio = float(np.median([b.rate / a.rate for a, b in zip(rows[kind][False], rows[kind][True]) if a.rate]))
        cpu = {on: sum(r.broker_cpu for r in rows[kind][on]) / max(1, sum(r.records for r in rows[kind][on])) * 1e6
               for on in (False, True)}
        console.print(f"{label}: validation costs {100 * (1 - ratio):.1f}% of plain produce's records/s (the median "
                      f"on / off of the pairs; target ≤ {100 * (1 - TARGET_RATIO):.0f}%); broker CPU "
                      f"{cpu[True]:.1f} µs a record on vs {cpu[False]:.1f} off (+{100 * (cpu[True] / cpu[False] - 1):.0f}%);"
                      f" the validator alone: {validator_alone(kind):,.0f} records/s in one thread")
    console.print(f"total {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
