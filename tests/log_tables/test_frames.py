"""Frames of the segment tail: a large batch is streamed into the file with the same bytes as a small
one's ``serialize`` + ``writev``, and without a copy of its records."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from lakelog.log_tables.frames import FRAME_HEADER, STREAMED_FRAME_MIN_BYTES, PreparedFrame, encode_frame
from lakelog.log_tables.records import to_log_batch
from lakelog.log_tables.segments import SegmentLog


def big_batch(base: int, n: int, value_bytes: int) -> pa.RecordBatch:
    """``n`` records with random values of ``value_bytes`` and a few headers, offsets from ``base``."""
    rng = np.random.default_rng(base)
    data = rng.integers(0, 256, n * value_bytes, dtype=np.uint8)
    values = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(0, n * value_bytes + 1, value_bytes,
                                                                                       dtype=np.int32)),
                                                          pa.py_buffer(data)])
    headers = pa.array([[{"key": "h", "value": b"x"}] if i % 3 == 0 else None for i in range(n)],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    produce = pa.table({"key": pa.array([b"k%d" % i for i in range(n)]), "value": values, "headers": headers})
    table = to_log_batch(produce, base_offset=base, leader_epoch=3, now_ms=1_700_000_000_000)
    return table.combine_chunks().to_batches()[0]


def written(tmp_path, name: str, base: int, batch: pa.RecordBatch) -> bytes:
    path = tmp_path / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        PreparedFrame(base, batch).write(fd)
    finally:
        os.close(fd)
    return path.read_bytes()


def test_a_streamed_frame_has_the_bytes_of_a_serialized_one(tmp_path):
    batch = big_batch(40, 20_000, 300)
    assert batch.nbytes >= STREAMED_FRAME_MIN_BYTES  # this one is streamed
    header, payload = encode_frame(40, batch)
    assert written(tmp_path, "streamed", 40, batch) == header + payload.to_pybytes()
    # a slice (non-zero array offsets) streams the same bytes as its serialization too
    part = batch.slice(7, 15_000)
    header, payload = encode_frame(47, part)
    assert written(tmp_path, "slice", 47, part) == header + payload.to_pybytes()


def test_a_streamed_frame_copies_no_records(tmp_path):
    batch = big_batch(0, 40_000, 500)  # 20 MB of values
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        pool = pa.default_memory_pool()
        before = pool.bytes_allocated()
        frame = PreparedFrame(0, batch)
        frame.write(fd)
        assert pool.bytes_allocated() - before < 1 << 20
        assert frame.size == FRAME_HEADER.size + pa.ipc.get_record_batch_size(batch)
    finally:
        os.close(fd)


def test_streamed_frames_recover_like_small_ones(tmp_path):
    seg = SegmentLog(tmp_path / "s")
    big = big_batch(0, 30_000, 200)
    seg.published(seg.append(0, big))
    seg.published(seg.append(30_000, big_batch(30_000, 2, 10)))
    seg.close()
    tail = SegmentLog(tmp_path / "s").recover(0)
    assert tail.log_end_offset == 30_002
    assert tail.batches[0][1].equals(big)
    # a torn streamed frame is cut at recovery, as any torn frame
    path = next((tmp_path / "s").iterdir())
    size = path.stat().st_size
    with open(path, "ab") as f:
        header, payload = encode_frame(30_002, big_batch(30_002, 30_000, 200))
        f.write(header + payload.to_pybytes()[: payload.size // 2])
    assert SegmentLog(tmp_path / "s").recover(0).log_end_offset == 30_002
    assert path.stat().st_size == size
