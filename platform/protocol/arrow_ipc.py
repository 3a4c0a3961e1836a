"""Arrow IPC stream bodies (``application/vnd.apache.arrow.stream``): every Arrow produce, fetch and
replica fetch body is one stream of record batches."""

from __future__ import annotations

import pyarrow as pa


def arrow_ipc(table: pa.Table) -> bytes:
    """``table`` as the bytes of one Arrow IPC stream (its schema, then its record batches)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_arrow_ipc(body: bytes | memoryview) -> pa.Table:
    """The table of one Arrow IPC stream body (zero copy over ``body``).

    Raises:
        pyarrow.ArrowInvalid: ``body`` is not an Arrow IPC stream.
    """
    return pa.ipc.open_stream(pa.py_buffer(body)).read_all()
