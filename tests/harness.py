"""Test harness: real ZooKeeper, real broker processes, stopped by pid (the kazoo testing model).

``BrokerProcess`` (:mod:`lakelog.runtime.broker_process`) runs ``python -m lakelog.cli broker start`` as a child
process on a free port with its own log dir and ZooKeeper chroot; tests stop it with SIGTERM or kill
it with SIGKILL by pid. Every process the harness starts (brokers, the session's ZooKeeper) is started
through :func:`lakelog.processes.spawn`, so it dies with the test process even when that is killed.
The ``/proc`` helpers below find the processes a command left (by parent pid, by an argument).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from kazoo.client import KazooClient

from lakelog.runtime.broker_process import BrokerProcess
from lakelog.log_tables.schema import LOG_SCHEMA
from lakelog.log_tables.table_writes import commit_rewrite, recorded_lake_end_offset
from lakelog.processes import connected_ports, process_alive, process_cmdline
from lakelog.protocol import media_types


#: How long a test waits for a condition that is bound to come (a flush, a replica catching up, a session
#: expiring) before it fails: generous, so a slow or loaded machine passes as a fast one does; only a
#: failing test waits this long. A test that measures time drives an injected clock
#: (:class:`lakelog.clock.MockTime`) or states the bound it checks (``zookeeper.session.timeout.ms + 10 s``).
CONDITION_WAIT_S = 300.0


def wait_for(predicate, timeout_s: float = CONDITION_WAIT_S, what: str = "condition", interval_s: float = 0.05):
    """Poll ``predicate`` until it returns a truthy value (returned) or fail after ``timeout_s`` (default
    :data:`CONDITION_WAIT_S`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


async def wait_for_async(predicate, *, timeout_s: float = CONDITION_WAIT_S, what: str = "condition",
                         interval_s: float = 0.02):
    """:func:`wait_for` inside an event loop: polls with ``asyncio.sleep``, so the loop's tasks (a flusher, a
    fetcher) run meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(interval_s)


class NotLeaderAnswer(AssertionError):
    """A read answered 421 / 42101: the broker no longer leads the partition (leadership moved)."""


def read_partition(http: httpx.Client | str, topic: str, partition: int, *, start_offset: int = 0) -> list[dict]:
    """Every record of a partition (JSON records, binary key/value in base64), paging from
    ``start_offset`` (default 0; the log start offset once retention moved it).

    ``http`` is a client whose base URL is the broker, or the broker's URL.
    """
    if isinstance(http, str):
        with httpx.Client(base_url=http, timeout=30) as client:
            return read_partition(client, topic, partition, start_offset=start_offset)
    out, offset = [], start_offset
    while True:
        resp = http.get(f"/topics/{topic}/partitions/{partition}/records",
                        params={"offset": offset, "max_wait_ms": 0, "max_bytes": 64 * 1024 * 1024},
                        headers={"Accept": media_types.BINARY_V2})
        if resp.status_code == 421:
            raise NotLeaderAnswer(resp.text)
        assert resp.status_code == 200, resp.text
        page = resp.json()
        if not page:
            return out
        out += page
        offset = page[-1]["offset"] + 1


def new_chroot(zk_connect: str) -> str:
    """Create a fresh chroot znode and return ``host:port/chroot``."""
    chroot = f"/test-{uuid.uuid4().hex[:12]}"
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return zk_connect + chroot


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def child_pids(pid: int) -> list[int]:
    """Pids of the live processes whose parent is ``pid`` now (scans ``/proc/*/stat``; Linux)."""
    out = []
    for candidate in _all_pids():
        try:
            stat = Path(f"/proc/{candidate}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.append(candidate)
    return out


def pids_mentioning(text: str | os.PathLike) -> list[int]:
    """Pids of the live processes (other than this one) with ``text`` in an argument of their command
    line, e.g. a test's tmp dir (scans ``/proc/*/cmdline``; Linux)."""
    needle = str(text)
    return [pid for pid in _all_pids() if pid != os.getpid() and process_alive(pid)
            and any(needle in arg for arg in process_cmdline(pid) or [])]


def wait_gone(pids: list[int], timeout_s: float = CONDITION_WAIT_S, what: str = "processes") -> None:
    """Poll until none of ``pids`` is alive (zombies count as gone); AssertionError after ``timeout_s``."""
    wait_for(lambda: not any(process_alive(p) for p in pids), timeout_s=timeout_s, what=f"{what} {pids} to end")


__all__ = ["CONDITION_WAIT_S", "BrokerProcess", "child_pids", "connected_ports", "new_chroot", "pids_mentioning",
           "read_partition", "wait_for", "wait_for_async", "wait_gone"]


def compact_range(uri: str, first: int, last: int, *, keep: list[int] | None = None) -> list[int]:
    """What the log cleaner does to the offsets ``[first, last]`` of a partition table: one replaceWhere
    commit keeping the latest record per key (or the offsets ``keep``), offsets unchanged. Returns the
    offsets kept. The table's writer must be stopped (one writer per table)."""
    dt = DeltaTable(uri)
    rows = dt.to_pyarrow_table(filters=[("offset", ">=", first), ("offset", "<=", last)]).sort_by("offset")
    if keep is None:
        keep = sorted(rows.group_by("key").aggregate([("offset", "max")])["offset_max"].to_pylist())
    kept = rows.filter(pc.is_in(rows["offset"], pa.array(keep, pa.int64()))).cast(LOG_SCHEMA)
    commit_rewrite(dt, kept, first=first, last=last, compression_type="producer",
                   lake_end_offset=recorded_lake_end_offset(dt), target_file_size=1 << 20, row_group_rows=4)
    return keep


def table_offsets(uri: str) -> list[int]:
    """Every offset the partition table at ``uri`` holds, ascending (read from its files)."""
    return sorted(DeltaTable(uri).to_pyarrow_table(columns=["offset"])["offset"].to_pylist())


class Lake:
    """A lake on a test's object store: ``uri`` (``s3://bucket/prefix``), the broker settings that reach it
    (:meth:`broker_env`) and the delta-rs ``storage_options`` to read its tables."""

    def __init__(self, store, uri: str) -> None:
        self.store, self.uri = store, uri
        self.settings: dict[str, str] = store.lake_settings(uri)
        self.storage_options: dict[str, str] = {
            "AWS_ENDPOINT_URL": store.endpoint_url, "AWS_REGION": store.region,
            "AWS_ACCESS_KEY_ID": store.access_key_id, "AWS_SECRET_ACCESS_KEY": store.secret_access_key,
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "AWS_ALLOW_HTTP": "true"}

    def broker_env(self) -> dict[str, str]:
        """The lake settings as a broker's environment (``LAKELOG_LAKE_URI``, ...): ``extra_env`` of a
        :class:`BrokerProcess`."""
        return {"LAKELOG_" + k.replace(".", "_").upper(): v for k, v in self.settings.items()}

    def table_uris(self) -> list[str]:
        """The URIs of the Delta tables in the lake (each directory holding a ``_delta_log``), sorted."""
        bucket = Path(self.uri[len("s3://"):]).parts[0]
        root = self.store.buckets_dir / bucket
        return sorted("s3://" + str(p.parent.relative_to(self.store.buckets_dir))
                      for p in root.rglob("_delta_log") if p.is_dir())

    def partition_values(self, topic: str, partition: int = 0) -> list[bytes]:
        """The values in the table of ``topic``'s ``partition`` (``{uri}/{topic}-{topic id}/{partition}``), in
        offset order; [] while there is no such table."""
        uris = [u for u in self.table_uris() if u.startswith(f"{self.uri}/{topic}-") and u.endswith(f"/{partition}")]
        if not uris:
            return []
        t = DeltaTable(uris[0], storage_options=self.storage_options).to_pyarrow_table(columns=["offset", "value"])
        return [v for _, v in sorted(zip(t["offset"].to_pylist(), t["value"].to_pylist()))]

    def table_offsets(self, uri: str) -> list[int]:
        """Every offset the table at ``uri`` holds, in the order its rows are read (by file, as committed)."""
        table = DeltaTable(uri, storage_options=self.storage_options).to_pyarrow_table(columns=["offset"])
        return table["offset"].to_pylist()


def v3_links(body) -> list[str]:
    """Every non-null ``related`` and ``self`` URL anywhere in a REST v3 response body."""
    if isinstance(body, list):
        return [url for item in body for url in v3_links(item)]
    if not isinstance(body, dict):
        return []
    out = [v for k, v in body.items() if k in ("related", "self") and isinstance(v, str)]
    return out + [url for k, v in body.items() if k not in ("related", "self") for url in v3_links(v)]
