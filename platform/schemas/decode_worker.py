"""The typed columns' decode in a child process, so the flush does not hold the broker's GIL for it.

Decoding a schema'd record into Python objects and building the Arrow column takes about 3 µs a record
(:mod:`lakelog.schemas.record_columns`), all of it Python holding the interpreter lock: in the broker it
ran in a flusher's thread, and the request threads and the event loop waited for the lock meanwhile.
``bench/schema_validation.py`` (``bench/RESULTS.md``, 2026-11-29): Avro produce with validation and the typed
column at 0.666x of plain with the decode in the flusher's thread, 0.704x with it here (validation alone:
0.773x). :class:`ProcessRegistryColumns` is the broker's
:class:`~lakelog.log_tables.typed_columns.RecordDecoder`: it runs the checks in the broker
(:meth:`RegistryColumns.check <lakelog.schemas.record_columns.RegistryColumns.check>`: the registry view
caught up, the subject has a version, no schema id to wait for) and sends the decode itself to one child
process, ``python -m lakelog.schemas.decode_worker``, while the flusher's thread waits on a pipe without
the lock.

Steps of a decode:

1. the checks, in the broker (they raise :class:`~lakelog.errors.TypedColumnsNotReadyError` as before);
2. the request to the child on its stdin: the subject, the ``_schemas`` records of its versions (soft-deleted
   ones too) and of the versions they reference (:func:`subject_records`), and the column as an Arrow IPC
   stream;
3. the child folds the records into a fresh registry view and runs the same
   :class:`~lakelog.schemas.record_columns.RegistryColumns` (its readers kept between requests: a schema
   id always names the same schema), answering the typed column as an Arrow IPC stream on its stdout;
4. a child that died, hung up or answered nonsense is killed and the decode runs in the broker instead
   (logged); the next decode starts a new child. The result is the same either way.

The child is started on the first decode with :func:`lakelog.processes.spawn` (it dies with the broker,
and exits when its stdin closes) and stopped by pid at :meth:`ProcessRegistryColumns.close`. One child
serves every flusher thread, one request at a time: a second core decodes while the broker goes on.
"""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
import threading
from typing import BinaryIO

import orjson
import pyarrow as pa

from lakelog.processes import spawn, stop_child
from lakelog.schemas.record_columns import RegistryColumns
from lakelog.schemas.registry_state import RegistryView, SchemaVersion, schema_record

log = logging.getLogger(__name__)

__all__ = ["ProcessRegistryColumns", "subject_records"]

_REQUEST = struct.Struct(">IQ")   # header bytes, Arrow IPC bytes
_ANSWER = struct.Struct(">BQ")    # status, payload bytes
_COLUMN, _NO_SCHEMA, _FAILED = 0, 1, 2


class _DecodeWorkerError(Exception):
    """The child failed to answer (it died, hung up, or answered something else)."""


def subject_records(view: RegistryView, subject: str) -> list[tuple[str, str | None]]:
    """The ``_schemas`` records (key and value as text) of every version of ``subject``, soft-deleted ones
    too, and of every version they reference, transitively: what a fresh view needs to decode the subject's
    records as ``view`` does."""
    out: list[tuple[str, str | None]] = []
    seen: set[tuple[str, int]] = set()

    def add(version: SchemaVersion) -> None:
        if (version.subject, version.version) in seen:
            return
        seen.add((version.subject, version.version))
        key, value = schema_record(version)
        out.append((key.decode(), None if value is None else value.decode()))
        for ref in version.references:
            found = view.subjects.get(ref.subject, {}).get(ref.version)
            if found is not None:
                add(found)

    for version in view.versions(subject, deleted=True):
        add(version)
    return out


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    data = stream.read(n) if n else b""
    if len(data) != n:
        raise EOFError(f"expected {n} bytes, got {len(data)}")
    return data


def _ipc(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Buffer:
    table = pa.table({name: column})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


class ProcessRegistryColumns:
    """A :class:`~lakelog.log_tables.typed_columns.RecordDecoder` decoding in a child process (see the module
    docstring).

    Args:
        local: the broker's :class:`~lakelog.schemas.record_columns.RegistryColumns`: its checks run first
            (and give the registry view to send), and it decodes in the broker when the child fails.
        command: the child's command line. Default: this interpreter running this module.
    """

    def __init__(self, local: RegistryColumns, *, command: list[str] | None = None) -> None:
        self._local = local
        self._command = command or [sys.executable, "-m", "lakelog.schemas.decode_worker"]
        self._child: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        child = self._child
        return None if child is None or child.poll() is not None else child.pid

    def __call__(self, *, subject: str, data: pa.Array | pa.ChunkedArray) -> pa.Array | None:
        """The typed column of ``data`` against ``subject``, as :class:`RegistryColumns` gives it.

        Raises:
            TypedColumnsNotReadyError: as :meth:`RegistryColumns.check`.
        """
        view = self._local.check(subject=subject, data=data)  # 1.
        if view is None:
            return None
        records = subject_records(view, subject)
        try:
            return self._decode(subject, records, data)  # 2., 3.
        except _DecodeWorkerError as e:  # 4.
            log.warning("typed columns of subject '%s': the decode worker failed (%s); decoding in the broker",
                        subject, e)
            return self._local(subject=subject, data=data)

    def _decode(self, subject: str, records: list, data: pa.Array | pa.ChunkedArray) -> pa.Array | None:
        header = orjson.dumps({"subject": subject, "records": records})
        body = _ipc(data, "data")
        with self._lock:
            if self._closed:
                raise _DecodeWorkerError("closed")
            try:
                child = self._started()
                child.stdin.write(_REQUEST.pack(len(header), body.size))
                child.stdin.write(header)
                child.stdin.write(memoryview(body))
                child.stdin.flush()
                status, size = _ANSWER.unpack(_read_exact(child.stdout, _ANSWER.size))
                payload = _read_exact(child.stdout, size)
            except (OSError, EOFError, ValueError, struct.error) as e:
                self._kill()
                raise _DecodeWorkerError(f"{type(e).__name__}: {e}") from None
        if status == _NO_SCHEMA:
            return None
        if status != _COLUMN:
            raise _DecodeWorkerError(payload.decode(errors="replace"))
        return pa.ipc.open_stream(payload).read_all().column(0).combine_chunks()

    def _started(self) -> subprocess.Popen:
        if self._child is None or self._child.poll() is not None:
            self._child = spawn(self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            log.info("typed columns: decode worker started (pid %d)", self._child.pid)
        return self._child

    def _kill(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            try:
                child.kill()
                child.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def close(self) -> None:
        """Stop the child by pid (its stdin closed first: it exits by itself); later decodes run in the broker."""
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
        if child is not None:
            try:
                child.stdin.close()
            except OSError:
                pass
            stop_child(child, timeout_s=10)


def main() -> None:
    """The child: answer decode requests from stdin until it closes (step 3)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the answers: fd 1 is stderr from here on
    stdin = sys.stdin.buffer
    current = [RegistryView()]
    decoder = RegistryColumns(lambda: current[0])
    while True:
        head = stdin.read(_REQUEST.size)
        if len(head) < _REQUEST.size:
            return
        header_size, body_size = _REQUEST.unpack(head)
        header = orjson.loads(_read_exact(stdin, header_size))
        body = _read_exact(stdin, body_size)
        try:
            view = RegistryView()
            for key, value in header["records"]:
                view.apply(key.encode(), None if value is None else value.encode())
            current[0] = view
            column = decoder(subject=header["subject"], data=pa.ipc.open_stream(body).read_all().column(0))
            status, payload = (_NO_SCHEMA, b"") if column is None else (_COLUMN, _ipc(column, "typed").to_pybytes())
        except Exception as e:  # noqa: BLE001 - answered, and the broker decodes itself
            status, payload = _FAILED, f"{type(e).__name__}: {e}".encode()
        out.write(_ANSWER.pack(status, len(payload)))
        out.write(payload)
        out.flush()


if __name__ == "__main__":
    main()
