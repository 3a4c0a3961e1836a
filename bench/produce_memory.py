#!/usr/bin/env python
"""Broker memory per produce request: peak RSS growth for ONE request of 1,000,000 records.

Usage::

    python bench/produce_memory.py                      # 1,000,000 records of 100 B, JSON, binary, Arrow
    python bench/produce_memory.py --records 200000 --value-size 1024 --only json

For each kind (JSON ``vnd.kafka.json.v2+json``, binary ``vnd.kafka.binary.v2+json``, Arrow IPC stream) a
fresh broker child process is started (shared ZooKeeper, temp dir, ``socket.request.max.bytes`` raised
to 1 GiB so the body is admitted), a one-partition topic is created, its RSS high-water mark is reset
(``/proc/PID/clear_refs``), one produce request is sent, and the growth of ``VmHWM`` over the RSS before
the request is printed with the body size and its ratio to the body. Targets (issue 9): JSON <= 4x the
body, binary and Arrow <= 2x. ``bench/`` never asserts; targets are printed beside the figures.

Two figures per kind, each from its own fresh broker:

- **request**: from the body's first byte to the answer, the topic's flusher held off
  (``lake.commit.interval.ms`` and ``lake.commit.bytes`` set out of reach), so the figure is the
  request's own: reading, decoding, the segment append, the answer. The targets apply to it.
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
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port

TYPES = {"json": "application/vnd.kafka.json.v2+json", "binary": "application/vnd.kafka.binary.v2+json",
         "arrow": "application/vnd.apache.arrow.stream"}
TARGETS = {"json": 4.0, "binary": 2.0, "arrow": 2.0}
_LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8)


def body_for(kind: str, n: int, size: int) -> bytes:
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
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def measure(kind: str, body: bytes, zk: ZooKeeperServer, tmp: Path, *, flush: bool) -> tuple[float, float, float, int]:
    """(RSS before MB, peak growth MB, seconds, HTTP status) of one request to a fresh broker; with
    ``flush`` the peak runs until the records are in the Delta table, else the flusher is held off."""
    name = f"{kind}-{'flush' if flush else 'request'}"
    broker = BrokerProcess(zookeeper_connect=f"{zk.connect_string}/mem-{name}", log_dirs=tmp / f"logs-{name}",
                           extra_env={"LAKELOG_SOCKET_REQUEST_MAX_BYTES": str(1 << 30)}, new_session=True)
    held_off = {} if flush else {"lake.commit.interval.ms": "3600000", "lake.commit.bytes": str(1 << 40)}
    broker.start()
    try:
        with LakelogClient(broker.url, timeout_s=600) as client:
            client.create_topic("mem", partitions=1, configs=held_off)
            client.produce_binary("mem", [(None, b"warm")], partition=0)
            time.sleep(1.5)  # the warm-up record's flush
            Path(f"/proc/{broker.pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            before = status_kb(broker.pid, "VmRSS")
            path = "/topics/mem/partitions/0" + ("/records" if kind == "arrow" else "")
            t0 = time.monotonic()
            resp = client.http.post(path, content=body, headers={"Content-Type": TYPES[kind]})
            while flush and resp.status_code == 200:
                log = client.topic_logs("mem")[0]
                if log["lake_end_offset"] >= log["high_watermark"]:
                    break
                time.sleep(0.05)
            took = time.monotonic() - t0
            peak = status_kb(broker.pid, "VmHWM")
            if resp.status_code != 200:
                print(f"  {kind}: HTTP {resp.status_code} {resp.text[:300]}")
        return before / 1024, (peak - before) / 1024, took, resp.status_code
    finally:
        broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="Records in the request. Default: 1,000,000.")
    parser.add_argument("--value-size", type=int, default=100, help="Bytes of each value. Default: 100.")
    parser.add_argument("--only", default="json,binary,arrow", help="Comma-separated kinds. Default: all three.")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakelog-mem-"))
    zk = ZooKeeperServer(data_dir=tmp / "zookeeper", client_port=free_port())
    try:
        zk.start()
        print(f"{args.records:,} records of {args.value_size} B in one request, a fresh broker per figure")
        print(f"{'kind':<8}{'body MB':>9}{'request peak MB':>17}{'x body':>8}{'s':>6}  {'target':<22}"
              f"{'+ Delta flush MB':>17}{'x body':>8}{'s':>6}")
        for kind in args.only.split(","):
            body = body_for(kind, args.records, args.value_size)
            mb = len(body) / 2**20
            _, growth, took, status = measure(kind, body, zk, tmp, flush=False)
            _, flushed, flush_took, flush_status = measure(kind, body, zk, tmp, flush=True)
            verdict = "met" if growth / mb <= TARGETS[kind] else "MISSED"
            failed = "" if status == flush_status == 200 else f"  (HTTP {status}/{flush_status})"
            print(f"{kind:<8}{mb:>9.1f}{growth:>17.0f}{growth / mb:>8.2f}{took:>6.1f}  "
                  f"{f'<= {TARGETS[kind]:.0f}x body: {verdict}':<22}{flushed:>17.0f}{flushed / mb:>8.2f}"
                  f"{flush_took:>6.1f}{failed}")
            del body
    finally:
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
