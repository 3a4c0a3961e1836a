"""The segment tail's files: framing, recovery of a torn or corrupt tail, rolling, release, truncation."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from lakelog.log_tables.records import to_log_batch
from lakelog.log_tables.frames import FRAME_HEADER, encode_frame
from lakelog.log_tables.segments import SegmentLog, segment_name


def batch(base: int, n: int, *, epoch: int = 0) -> pa.RecordBatch:
    values = [b"v%d" % (base + i) for i in range(n)]
    table = to_log_batch(pa.table({"value": values}), base_offset=base, leader_epoch=epoch, now_ms=1_700_000_000_000)
    return table.combine_chunks().to_batches()[0]


def write(seg: SegmentLog, base: int, sizes: list[int]) -> int:
    for n in sizes:
        seg.published(seg.append(base, batch(base, n)))
        base += n
    return base


def offsets(tail) -> list[int]:
    return [o for _, b in tail.batches for o in b.column("offset").to_pylist()]


def test_frames_round_trip_through_recovery(tmp_path):
    seg = SegmentLog(tmp_path / "s")
    end = write(seg, 0, [1, 5, 3])
    seg.close()
    tail = SegmentLog(tmp_path / "s").recover(0)
    assert tail.log_end_offset == end == 9
    assert offsets(tail) == list(range(9))
    assert [f.base_offset for f in tail.view.frames] == [0, 1, 6]
    assert tail.batches[1][1].column("value").to_pylist() == [b"v%d" % i for i in range(1, 6)]
    # the frames' payloads are what a read returns
    out: list[pa.Table] = []
    assert tail.view.read(2, 9, 1 << 20, out) == (9, pytest.approx(1 << 20, abs=10_000))
    assert pa.concat_tables(out)["offset"].to_pylist() == list(range(2, 9))


def test_recovery_starts_at_the_lake_end_offset_and_deletes_flushed_segments(tmp_path):
    seg = SegmentLog(tmp_path / "s", segment_bytes=1)  # every frame rolls a new file
    write(seg, 0, [2, 2, 2])
    seg.close()
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [segment_name(0), segment_name(2), segment_name(4)]
    tail = SegmentLog(tmp_path / "s").recover(3)  # offsets 0..2 are in Delta
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [segment_name(2), segment_name(4)]
    assert offsets(tail) == [2, 3, 4, 5] and tail.log_end_offset == 6


@pytest.mark.parametrize("cut", [1, FRAME_HEADER.size - 1, FRAME_HEADER.size + 3])
def test_a_torn_last_frame_is_dropped_and_the_file_cut(tmp_path, cut):
    seg = SegmentLog(tmp_path / "s")
    write(seg, 0, [3, 4])
    seg.close()
    path = tmp_path / "s" / segment_name(0)
    good = path.stat().st_size
    # a crash while writing the next frame: only its first bytes reached the file
    header, payload = encode_frame(7, batch(7, 2))
    with open(path, "ab") as f:
        f.write((header + payload.to_pybytes())[:cut])
    tail = SegmentLog(tmp_path / "s").recover(0)
    assert tail.log_end_offset == 7 and path.stat().st_size == good
    # the log goes on from there
    seg = SegmentLog(tmp_path / "s")
    seg.recover(0)
    seg.published(seg.append(7, batch(7, 1)))
    seg.close()
    assert SegmentLog(tmp_path / "s").recover(0).log_end_offset == 8


def test_a_corrupt_frame_cuts_the_log_there_and_later_segments_go(tmp_path):
    seg = SegmentLog(tmp_path / "s", segment_bytes=1)
    write(seg, 0, [2, 2, 2])
    seg.close()
    path = tmp_path / "s" / segment_name(2)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # a flipped bit in the payload: CRC mismatch
    path.write_bytes(bytes(data))
    tail = SegmentLog(tmp_path / "s").recover(0)
    assert tail.log_end_offset == 2 and offsets(tail) == [0, 1]
    # segment 2 was cut to nothing: an empty segment after another one is removed too
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [segment_name(0)]


def test_segments_roll_by_bytes_and_by_age(tmp_path):
    one = len(batch(0, 1).serialize()) + FRAME_HEADER.size
    seg = SegmentLog(tmp_path / "b", segment_bytes=2 * one + 10)
    write(seg, 0, [1, 1, 1, 1, 1])
    seg.close()
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [segment_name(0), segment_name(2), segment_name(4)]
    seg = SegmentLog(tmp_path / "t", segment_ms=50)
    write(seg, 0, [1, 1])
    time.sleep(0.06)
    write(seg, 2, [1])
    seg.close()
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == [segment_name(0), segment_name(2)]


def test_release_leaves_files_until_delete_released_and_rolls_the_active_one(tmp_path):
    seg = SegmentLog(tmp_path / "s")
    write(seg, 0, [3, 3])
    assert seg.release_below(4) == 0  # part of the active segment is in Delta: it rolls
    assert seg.view.first_offset == 3  # frames wholly below 4 left the view
    write(seg, 6, [2])
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [segment_name(0), segment_name(6)]
    assert seg.release_below(8) == 1  # segment 0 is wholly below: released, on disk until the view is published
    assert (tmp_path / "s" / segment_name(0)).exists()
    assert seg.delete_released() == 1
    assert not (tmp_path / "s" / segment_name(0)).exists()
    assert seg.delete_released() == 0
    seg.close()


def test_a_roll_at_the_flush_lets_that_flush_release_the_segment_it_read(tmp_path):
    """The writer rolls when a flush reads the tail: the records appended during the Delta commit go to a
    new file, so the flushed segment is released and deleted by the same flush."""
    seg = SegmentLog(tmp_path / "s")
    write(seg, 0, [3, 3])
    seg.roll_at_next_append()                # a flush reads offsets 0..5
    write(seg, 6, [2])                        # appended during its commit: a new file
    assert seg.release_below(6) == 1         # segment 0 lies wholly below: released by this flush
    assert seg.delete_released() == 1 and not (tmp_path / "s" / segment_name(0)).exists()
    write(seg, 8, [2])
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [segment_name(6)]
    assert offsets(seg.recover(6)) == [6, 7, 8, 9]
    empty = SegmentLog(tmp_path / "e")
    empty.roll_at_next_append()              # nothing written yet: nothing to roll
    write(empty, 0, [1])
    assert sorted(p.name for p in (tmp_path / "e").iterdir()) == [segment_name(0)]
    seg.close()
    empty.close()


def test_truncation_inside_a_frame_keeps_the_rows_below_it(tmp_path):
    seg = SegmentLog(tmp_path / "s", segment_bytes=1)
    write(seg, 0, [3, 4, 2])  # segments 0, 3, 7
    seg.truncate_to(5)
    tail = seg.recover(0)
    assert offsets(tail) == [0, 1, 2, 3, 4] and tail.log_end_offset == 5
    assert not (tmp_path / "s" / segment_name(7)).exists()
    seg.published(seg.append(5, batch(5, 1)))
    seg.close()
    assert offsets(SegmentLog(tmp_path / "s").recover(0)) == [0, 1, 2, 3, 4, 5]
