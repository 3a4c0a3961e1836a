#!/usr/bin/env python
"""Broker memory per produce request: peak RSS growth for ONE request of 1,000,000 records.

Usage::

    python bench/produce_memory.py                      # 1,000,000 records of 100 B, JSON, binary, Arrow,
                                                        # and the JSON shapes below
    python bench/produce_memory.py --records 200000 --value-size 1024 --only json
    python bench/produce_memory.py --only json-number,json-object   # some of the JSON shapes

For each kind (JSON ``vnd.kafka.json.v2+json``, binary ``vnd.kafka.binary.v2+json``, Arrow IPC stream) a
fresh broker child process is started (shared ZooKeeper, temp dir, ``socket.request.max.bytes`` raised
to 1 GiB so the body is admitted), a one-partition topic is created, its RSS high-water mark is reset
(``/proc/PID/clear_refs``) after a warm-up request of 5,000 records of the kind (the first large request
of a kind loads its decoder's modules), one produce request is sent, and the growth of ``VmHWM`` over the RSS before
the request is printed with the body size and its ratio to the body. Targets (issue 9): JSON <= 4x the
body, binary and Arrow <= 2x. ``bench/`` never asserts; targets are printed beside the figures.

The JSON shapes (issue 38) are JSON-format requests of ``--records`` tiny records whatever
``--value-size``: ``json-number`` ``{"value": 1}``, ``json-object`` ``{"value": {"id": 7, "ok": true}}``,
``json-array`` ``{"value": [7, 8.5]}``, ``json-null`` ``{"value": null}``, ``json-string``
``{"value": "s7"}`` (numbers vary by record); their target is the JSON one. ``arrow-number`` sends the
records of ``json-number`` as an Arrow IPC stream: what the log itself costs for that many tiny records,
with no JSON to decode. The append builds the log's columns (offset, timestamp and leader epoch: 20 bytes a
record; null producer columns, keys and headers and zero attributes take no resident memory,
:mod:`lakelog.log_tables.zero_columns`) and writes them to the segment tail; the tail cache then keeps
the newest batch without the offsets, timestamps and epochs when each is one run
(:class:`lakelog.log_tables.tail_cache.DenseBatch`): its values and their offsets, 7 to 8 bytes a record here.

Two figures per kind, each from its own fresh broker:

- **request**: from the body's first byte to the answer, the topic's flusher held off
  (``lake.commit.interval.ms`` and ``lake.commit.bytes`` set out of reach), so the figure is the
  request's own: reading, decoding, the segment append, the answer. The targets apply to it.
- **after**: the request's RSS growth once answered (the broker gives the memory of a large request back
  to the system after it: :mod:`lakelog.ingest_api.memory_release`), read when the growth stops falling;
  the log's tail cache keeps the newest batch (``log.tail.cache.max.bytes``, and always the newest).
  **after 4**: the same once three more such requests were answered (memory that stays does not add up).
- **+ Delta flush**: default topic configs, measured until the records are in the Delta table (lake end
  offset = high watermark): the request plus the flusher's Delta commits of its records, which run
  as soon as ``lake.commit.bytes`` (64 MiB) are waiting and cost what delta-rs needs to write one
  ``lake.commit.bytes`` commit (about 2.7x it), however large the request.
"""

from __future__ import annotations

import argparse
import base64
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

from lakelog.runtime.broker_process import BrokerProcess
from lakelog.client import LakelogClient
from lakelog.ingest_api.memory_release import RELEASE_QUIET_MS
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port

TYPES = {"json": "application/vnd.kafka.json.v2+json", "binary": "application/vnd.kafka.binary.v2+json",
         "arrow": "application/vnd.apache.arrow.stream"}
TARGETS = {"json": 4.0, "binary": 2.0, "arrow": 2.0}
#: the JSON shapes: a record's value by its number
SHAPES = {"json-number": lambda i: i % 1000, "json-object": lambda i: {"id": i % 1000, "ok": True},
          "json-array": lambda i: [i % 1000, 8.5], "json-null": lambda i: None, "json-string": lambda i: f"s{i % 10}"}
KINDS = ["json", "binary", "arrow", *SHAPES, "arrow-number"]
_LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8)


def body_for(kind: str, n: int, size: int) -> bytes:
    if kind in SHAPES:
        value = SHAPES[kind]
        return orjson.dumps({"records": [{"value": value(i)} for i in range(n)]})
    if kind == "arrow-number":
        texts = pa.array([orjson.dumps(SHAPES["json-number"](i)) for i in range(n)], pa.binary())
        return _ipc(pa.table({"value": texts}))
    raw = _LETTERS[np.random.default_rng(0).integers(0, len(_LETTERS), size=n * size)].tobytes()
    values = [raw[i * size:(i + 1) * size] for i in range(n)]
    keys = [b"key-%d" % i for i in range(n)]
    if kind == "json":  # the value's JSON text is `size` bytes: a string of size-2 letters and quotes
        return orjson.dumps({"records": [{"key": k.decode(), "value": v[:size - 2].decode()}
                                         for k, v in zip(keys, values)]})
    if kind == "binary":
        b64 = base64.b64encode
        return orjson.dumps({"records": [{"key": b64(k).decode(), "value": b64(v).decode()}
                                         for k, v in zip(keys, values)]})
    return _ipc(pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())}))


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def settled_kb(pid: int) -> int:
    """The RSS (kB) once it stops falling: the broker releases a burst's memory ``RELEASE_QUIET_MS`` after
    its last large request was answered; from then on read every 0.2 s until a reading is no lower than
    the one before."""
    time.sleep(RELEASE_QUIET_MS / 1000 + 0.2)
    last = status_kb(pid, "VmRSS")
    while True:
        time.sleep(0.2)
        now = status_kb(pid, "VmRSS")
        if now >= last:
            return now
        last = now


def measure(kind: str, body: bytes, warm: bytes, zk: ZooKeeperServer, tmp: Path, *, flush: bool
            ) -> tuple[float, float, float, int, float, float]:
    """(RSS before MB, peak growth MB, seconds, HTTP status, growth after MB, growth after three more
    requests MB; flush: 0) of one request to a fresh broker, after a ``warm`` request of the same kind; with ``flush`` the peak runs until the records are in
    the Delta table, else the flusher is held off."""
    name = f"{kind}-{'flush' if flush else 'request'}"
    broker = BrokerProcess(zookeeper_connect=f"{zk.connect_string}/mem-{name}", log_dirs=tmp / f"logs-{name}",
                           extra_env={"LAKELOG_SOCKET_REQUEST_MAX_BYTES": str(1 << 30)}, new_session=True)
    held_off = {} if flush else {"lake.commit.interval.ms": "3600000", "lake.commit.bytes": str(1 << 40)}
    broker.start()
    try:
        with LakelogClient(broker.url, timeout_s=600) as client:
            client.create_topic("mem", partitions=1, configs=held_off)
            path = "/topics/mem/partitions/0" + ("/records" if kind.startswith("arrow") else "")
            headers = {"Content-Type": TYPES[kind.split("-")[0]]}
            # a warm-up request of the kind (its decoder's modules load on the first large request)
            client.http.post(path, content=warm, headers=headers).raise_for_status()
            time.sleep(1.5)  # the warm-up records' flush
            Path(f"/proc/{broker.pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            before = status_kb(broker.pid, "VmRSS")
            t0 = time.monotonic()
            resp = client.http.post(path, content=body, headers=headers)
            while flush and resp.status_code == 200:
                log = client.topic_logs("mem")[0]
                if log["lake_end_offset"] >= log["high_watermark"]:
                    break
                time.sleep(0.05)
            took = time.monotonic() - t0
            peak = status_kb(broker.pid, "VmHWM")
            after = settled_kb(broker.pid)
            if resp.status_code != 200:
                print(f"  {kind}: HTTP {resp.status_code} {resp.text[:300]}")
            more = before
            if not flush:
                for _ in range(3):
                    client.http.post(path, content=body, headers=headers).raise_for_status()
                more = settled_kb(broker.pid)
        return (before / 1024, (peak - before) / 1024, took, resp.status_code, (after - before) / 1024,
                (more - before) / 1024)
    finally:
        broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="Records in the request. Default: 1,000,000.")
    parser.add_argument("--value-size", type=int, default=100, help="Bytes of each value. Default: 100.")
    parser.add_argument("--only", default=",".join(KINDS), help=f"Comma-separated kinds of {', '.join(KINDS)}. "
                                                                 "Default: all.")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakelog-mem-"))
    zk = ZooKeeperServer(data_dir=tmp / "zookeeper", client_port=free_port())
    try:
        zk.start()
        print(f"{args.records:,} records of {args.value_size} B in one request, a fresh broker per figure")
        print(f"{'kind':<12}{'body MB':>9}{'request peak MB':>17}{'x body':>8}{'s':>6}{'after MB':>10}"
              f"{'after 4 MB':>12}  "
              f"{'target':<22}{'+ Delta flush MB':>17}{'x body':>8}{'s':>6}")
        for kind in args.only.split(","):
            body = body_for(kind, args.records, args.value_size)
            warm = body_for(kind, 5000, args.value_size)
            mb = len(body) / 2**20
            target = TARGETS[kind.split("-")[0]]
            _, growth, took, status, after, after4 = measure(kind, body, warm, zk, tmp, flush=False)
            _, flushed, flush_took, flush_status, _, _ = measure(kind, body, warm, zk, tmp, flush=True)
            verdict = "met" if growth / mb <= target else "MISSED"
            failed = "" if status == flush_status == 200 else f"  (HTTP {status}/{flush_status})"
            print(f"{kind:<12}{mb:>9.1f}{growth:>17.0f}{growth / mb:>8.2f}{took:>6.1f}{after:>10.0f}{after4:>12.0f}  "
                  f"{f'<= {target:.0f}x body: {verdict}':<22}{flushed:>17.0f}{flushed / mb:>8.2f}"
                  f"{flush_took:>6.1f}{failed}")
            del body
    finally:
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
