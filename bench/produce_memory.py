#!/usr/bin/env python
"""Broker memory per produce request: peak RSS growth for ONE request of 1,000,000 records.

Usage::

    python bench/produce_memory.py                      # 1,000,000 records of 100 B, JSON, binary, Arrow
    python bench/produce_memory.py --records 200000 --value-size 1024 --only json

For each kind (JSON ``vnd.kafka.json.v2+json``, binary ``vnd.kafka.binary.v2+json``, Arrow IPC stream) a
fresh broker child process is started (embedded ZooKeeper, temp dir, ``socket.request.max.bytes`` raised
to 1 GiB so the body is admitted), a one-partition topic is created, its RSS high-water mark is reset
(``/proc/PID/clear_refs``), one produce request is sent, and the growth of ``VmHWM`` over the RSS before
the request is printed with the body size and its ratio to the body. Targets (issue 9): JSON <= 4x the
body, binary and Arrow <= 2x. ``bench/`` never asserts; targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import base64
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import pyarrow as pa

from lakelog.broker_process import BrokerProcess
from lakelog.replication.zookeeper_server import ZooKeeperServer, free_port

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


def measure(kind: str, body: bytes, zk: ZooKeeperServer, tmp: Path) -> tuple[float, float, float, int]:
    """(RSS before MB, peak growth MB, seconds, HTTP status) of one request to a fresh broker."""
    broker = BrokerProcess(zookeeper_connect=f"{zk.connect_string}/mem-{kind}", log_dirs=tmp / f"logs-{kind}",
                           extra_env={"LAKELOG_SOCKET_REQUEST_MAX_BYTES": str(1 << 30)}, new_session=True)
    broker.start()
    try:
        with httpx.Client(base_url=broker.url, timeout=600) as http:
            cid = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
            r = http.post(f"/v3/clusters/{cid}/topics", json={"topic_name": "mem", "partitions_count": 1})
            assert r.status_code in (200, 201), r.text
            warm = http.post("/topics/mem/partitions/0", json={"records": [{"value": "d2FybQ=="}]},
                             headers={"Content-Type": TYPES["binary"]})
            assert warm.status_code == 200, warm.text
            time.sleep(0.5)
            Path(f"/proc/{broker.pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            before = status_kb(broker.pid, "VmRSS")
            path = "/topics/mem/partitions/0" + ("/records" if kind == "arrow" else "")
            t0 = time.monotonic()
            resp = http.post(path, content=body, headers={"Content-Type": TYPES[kind]})
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
        print(f"{args.records:,} records of {args.value_size} B in one request, a fresh broker per kind")
        print(f"{'kind':<8}{'body MB':>10}{'RSS before MB':>15}{'peak growth MB':>16}{'x body':>8}{'s':>7}  target")
        for kind in args.only.split(","):
            body = body_for(kind, args.records, args.value_size)
            before, growth, took, status = measure(kind, body, zk, tmp)
            ratio = growth / (len(body) / 2**20)
            verdict = "met" if ratio <= TARGETS[kind] else "MISSED"
            print(f"{kind:<8}{len(body) / 2**20:>10.1f}{before:>15.0f}{growth:>16.0f}{ratio:>8.2f}{took:>7.1f}  "
                  f"<= {TARGETS[kind]:.0f}x body: {verdict}{'' if status == 200 else f' (HTTP {status})'}")
            del body
    finally:
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
