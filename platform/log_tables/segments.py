"""The segment tail of a partition log: append-only files of framed Arrow record batches (the hot tier).

The leader appends each group commit here (a follower each batch it fetched) and acknowledges it once
the write returned; a flusher (:mod:`~lakelog.log_tables.flusher`) later commits the records below the
high watermark to the Delta table in large files, and the segments wholly below the table's end (the
*lake end offset*) are deleted. Kafka's log segments, with Arrow IPC in place of Kafka's record batches.

Layout: ``{table}/_lakelog_segments/{base offset:020d}.log``. Delta (delta-rs and delta-spark alike)
never lists, vacuums nor reads a directory whose name starts with ``_``, so the tail lives inside the
table's directory (dropped with it) where VACUUM cannot reach it.

A segment is a sequence of frames, one per appended batch, contiguous in offsets across files::

    magic u32 "LKL2" | payload length u32 | crc32 u32 | base offset i64 | record count u32 | payload

(little-endian, 24 header bytes). The payload is one Arrow IPC record batch message of
:data:`~lakelog.log_tables.schema.TAIL_SCHEMA` (``RecordBatch.serialize``; frames of magic "LKL1",
written before transactions, hold the log schema and are read with attributes 0); the CRC (zlib's CRC-32)
covers base offset, count and payload (:mod:`~lakelog.log_tables.frames`). A frame is written with one
``writev`` (a large one streamed from the batch's buffers) and acknowledged after the write returned: a
process crash (kill -9) keeps it (the page cache survives); only a power loss can lose what was not
fsynced, which Kafka's ``flush.messages`` / ``flush.ms`` opt into. Recovery
(:meth:`SegmentLog.recover`) checks every frame above the lake end offset and cuts the log at the first
torn or corrupt one (the file is truncated there, later segments are deleted).

Segments roll (a new file starts) at ``segment.bytes`` or ``segment.ms`` (Kafka's topic configs) and
also once the flusher committed part of the active segment to Delta, so that every segment soon lies
wholly below the lake end offset and can be deleted: the tail holds about one flush interval of records.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from lakelog.clock import SYSTEM_TIME, Time
from lakelog.config import INT64_MAX
from lakelog.log_tables.frames import FRAME_HEADER, FRAME_MAGIC, FRAME_MAGICS, PreparedFrame, decode_frame, frame_crc

log = logging.getLogger(__name__)

__all__ = ["SEGMENT_DIR", "Frame", "RecoveredTail", "SegmentLog", "SegmentView", "read_frame", "segment_name"]

#: Directory of the segment files inside the partition table's directory.
SEGMENT_DIR = "_lakelog_segments"
_SUFFIX = ".log"


def segment_name(base_offset: int) -> str:
    """File name of the segment whose first offset is ``base_offset`` (Kafka's 20-digit names)."""
    return f"{base_offset:020d}{_SUFFIX}"


@dataclass(frozen=True)
class Frame:
    """One framed batch: offsets ``base_offset .. base_offset + count - 1`` at ``position`` of ``segment``.

    Attributes:
        segment: base offset of the segment file holding it (its name).
        base_offset: first offset of the batch.
        count: records in it.
        position: byte position of the frame header in the file.
        length: payload bytes (the frame is ``FRAME_HEADER.size + length`` bytes).
        magic: the frame's magic (:data:`~lakelog.log_tables.frames.FRAME_MAGICS`): how its payload reads.
    """

    segment: int
    base_offset: int
    count: int
    position: int
    length: int
    magic: int = FRAME_MAGIC

    @property
    def end_offset(self) -> int:
        """One past the last offset."""
        return self.base_offset + self.count


class SegmentView:
    """The frames of the tail at one moment (immutable to its readers, who never lock): ascending and
    contiguous in offsets.

    Views share one append-only list of frames and each looks at its own slice of it, so the writer's
    append (:meth:`with_frame`) and the flusher's release (:meth:`from_offset`) cost O(1), not a copy.

    Args:
        directory: the segment directory.
        frames: the frames at or above the lake end offset (the first may start below it).
    """

    def __init__(self, directory: Path, frames: tuple[Frame, ...] | list[Frame] = (), *,
                 _shared: tuple[list[Frame], list[int]] | None = None, _lo: int = 0, _hi: int | None = None,
                 _nbytes: int | None = None) -> None:
        self.directory = directory
        if _shared is None:
            _shared = (list(frames), [f.base_offset for f in frames])
        self._frames, self._bases = _shared
        self._lo = _lo
        self._hi = len(self._frames) if _hi is None else _hi
        #: payload bytes of the frames
        self.nbytes = sum(f.length for f in self.frames) if _nbytes is None else _nbytes

    @property
    def frames(self) -> tuple[Frame, ...]:
        """The frames, oldest first."""
        return tuple(self._frames[self._lo:self._hi])

    @property
    def bases(self) -> tuple[int, ...]:
        """First offset of each frame."""
        return tuple(self._bases[self._lo:self._hi])

    @property
    def first_offset(self) -> int | None:
        """The oldest offset the frames hold, or None when empty."""
        return self._bases[self._lo] if self._hi > self._lo else None

    def with_frame(self, frame: Frame) -> "SegmentView":
        """This view plus ``frame`` (appended)."""
        if self._hi != len(self._frames):  # another view appended to the shared list: copy
            return SegmentView(self.directory, [*self.frames, frame])
        self._frames.append(frame)
        self._bases.append(frame.base_offset)
        return SegmentView(self.directory, _shared=(self._frames, self._bases), _lo=self._lo, _hi=self._hi + 1,
                           _nbytes=self.nbytes + frame.length)

    def from_offset(self, offset: int) -> "SegmentView":
        """This view without the frames wholly below ``offset``."""
        i = bisect.bisect_right(self._bases, offset, self._lo, self._hi) - 1
        if i >= self._lo and self._frames[i].end_offset <= offset:
            i += 1  # that frame is wholly below too
        if i <= self._lo:
            return self
        dropped = sum(f.length for f in self._frames[self._lo:i])
        if i * 2 > len(self._frames) and self._hi == len(self._frames):  # start a fresh list now and then
            return SegmentView(self.directory, self._frames[i:self._hi], _nbytes=self.nbytes - dropped)
        return SegmentView(self.directory, _shared=(self._frames, self._bases), _lo=i, _hi=self._hi,
                           _nbytes=self.nbytes - dropped)

    def read(self, offset: int, upper: int, budget: int, out: list[pa.Table]) -> tuple[int, int]:
        """Append to ``out`` the rows ``offset <= o < upper`` read from the segment files, up to about
        ``budget`` Arrow bytes (the first piece holds at least one row, KIP-74).

        Returns:
            ``(next offset, budget left)``.

        Raises:
            FileNotFoundError: a segment was deleted under the view (the flusher moved on): take a
                fresh view and read again.
        """
        i = max(bisect.bisect_right(self._bases, offset, self._lo, self._hi) - 1, self._lo)
        files: dict[int, BinaryIO] = {}
        try:
            while i < self._hi and offset < upper and budget > 0:
                frame = self._frames[i]
                if frame.end_offset > offset:
                    f = files.get(frame.segment)
                    if f is None:
                        f = files[frame.segment] = open(self.directory / segment_name(frame.segment), "rb")
                    batch = read_frame(f, frame)
                    lo = offset - frame.base_offset
                    piece = pa.Table.from_batches([batch.slice(lo, min(frame.count, upper - frame.base_offset) - lo)])
                    cut = budget < piece.nbytes
                    if cut:
                        piece = piece.slice(0, max(1, int(piece.num_rows * budget / max(piece.nbytes, 1))))
                    out.append(piece)
                    budget -= piece.nbytes
                    offset += piece.num_rows
                    if cut:
                        break  # the budget ends inside this frame (the next frame starts after its rest)
                i += 1
        finally:
            for f in files.values():
                f.close()
        return offset, budget


def read_frame(f: BinaryIO, frame: Frame) -> pa.RecordBatch:
    """The record batch of ``frame`` from its open segment file ``f``.

    Raises:
        FileNotFoundError: the file was cut under the frame (a reader's view is older than a truncation).
    """
    f.seek(frame.position + FRAME_HEADER.size)
    payload = f.read(frame.length)
    if len(payload) != frame.length:
        raise FileNotFoundError(f"segment {segment_name(frame.segment)} was cut")
    return decode_frame(payload, magic=frame.magic)


@dataclass(frozen=True)
class RecoveredTail:
    """What :meth:`SegmentLog.recover` found above the lake end offset.

    Attributes:
        view: the frames (contiguous from the lake end offset).
        log_end_offset: one past the last recovered offset (the lake end offset when the tail is empty).
        batches: ``(base offset, batch)`` of each frame, oldest first, for the leader epoch cache and
            the tail cache.
    """

    view: SegmentView
    log_end_offset: int
    batches: list[tuple[int, pa.RecordBatch]]


@dataclass
class _Segment:
    base_offset: int
    size: int
    created_s: float


class SegmentLog:
    """The segment files of one partition log (not thread-safe: the log's writer serialises calls).

    Args:
        directory: the segment directory (created on first append).
        segment_bytes: roll to a new file before a frame would make the active one larger
            (``segment.bytes``). Default: 1 GiB.
        segment_ms: roll when the active file is older (``segment.ms``). Default: 7 days.
        flush_messages: fsync after this many records since the last fsync (``flush.messages``).
            Default: never.
        flush_ms: fsync when the last fsync is older than this on an append or :meth:`sync_if_due`
            (``flush.ms``). Default: never.
        clock: what ``segment.ms`` and ``flush.ms`` are measured on. Default: the system clock.
    """

    def __init__(self, directory: Path, *, segment_bytes: int = 1 << 30, segment_ms: int = 7 * 86_400_000,
                 flush_messages: int = INT64_MAX, flush_ms: int = INT64_MAX, clock: Time = SYSTEM_TIME) -> None:
        self.directory = directory
        self._clock = clock
        self.configure(segment_bytes=segment_bytes, segment_ms=segment_ms, flush_messages=flush_messages,
                       flush_ms=flush_ms)
        self._segments: list[_Segment] = []
        self._retired: list[int] = []
        self._fd: int | None = None
        self._unsynced = 0
        self._synced_at = self._clock.monotonic()
        #: frames at or above the lake end offset (readers take it as it is)
        self.view = SegmentView(directory)

    def configure(self, *, segment_bytes: int, segment_ms: int, flush_messages: int, flush_ms: int) -> None:
        """Take new ``segment.bytes``, ``segment.ms``, ``flush.messages``, ``flush.ms`` (a topic config
        change); the next append rolls or fsyncs by them."""
        self.segment_bytes, self.segment_s = segment_bytes, segment_ms / 1000.0
        self.flush_messages, self.flush_s = flush_messages, flush_ms / 1000.0
        #: True when ``flush.messages`` or ``flush.ms`` ask for fsyncs (Kafka's default: never)
        self.fsyncs = flush_messages < INT64_MAX or flush_ms < INT64_MAX

    # -- recovery -------------------------------------------------------------------------------

    def recover(self, lake_end_offset: int) -> RecoveredTail:
        """Read the segments back after a restart (or a truncation): the frames from ``lake_end_offset`` on.

        Steps: 1. segments wholly below the lake end offset are deleted (the flusher committed them);
        2. the others are read frame by frame, each checked (magic, length, CRC, contiguous offsets);
        3. at the first bad frame (a torn write of a crash) the file is truncated there and later
        segments are deleted: the log ends at the last good frame.

        Raises:
            OSError: the directory is unreadable.
        """
        self.close()
        self._segments, self._retired = [], []
        bases = sorted(int(p.name[:-len(_SUFFIX)]) for p in self.directory.glob("*" + _SUFFIX)) \
            if self.directory.is_dir() else []
        frames: list[Frame] = []
        batches: list[tuple[int, pa.RecordBatch]] = []
        expected = lake_end_offset
        for i, base in enumerate(bases):
            path = self.directory / segment_name(base)
            # 1. wholly below the lake end offset: flushed
            if i + 1 < len(bases) and bases[i + 1] <= lake_end_offset:
                path.unlink(missing_ok=True)
                continue
            # 2. check each frame
            good, cut = self._read_segment(path, base, expected, frames, batches)
            expected = frames[-1].end_offset if frames else expected
            self._segments.append(_Segment(base, good, self._clock.time()))
            if cut:
                # 3. cut the log at the bad frame
                log.warning("segment %s: cut at byte %d (%s); later segments dropped", path, good, cut)
                with open(path, "r+b") as f:
                    f.truncate(good)
                for later in bases[i + 1:]:
                    (self.directory / segment_name(later)).unlink(missing_ok=True)
                break
        if self._segments and self._segments[-1].size == 0 and len(self._segments) > 1:
            empty = self._segments.pop()
            (self.directory / segment_name(empty.base_offset)).unlink(missing_ok=True)
        self.view = SegmentView(self.directory, frames)
        return RecoveredTail(self.view, expected, batches)

    @staticmethod
    def _read_segment(path: Path, base: int, expected: int, frames: list[Frame],
                      batches: list[tuple[int, pa.RecordBatch]]) -> tuple[int, str | None]:
        """Append the good frames of ``path`` at or above ``expected``; ``(good bytes, why cut or None)``."""
        data = path.read_bytes()
        pos, size = 0, len(data)
        while pos < size:
            if size - pos < FRAME_HEADER.size:
                return pos, "torn frame header"
            magic, length, crc, first, count = FRAME_HEADER.unpack_from(data, pos)
            end = pos + FRAME_HEADER.size + length
            if magic not in FRAME_MAGICS or end > size or count == 0:
                return pos, "torn or unknown frame"
            payload = memoryview(data)[pos + FRAME_HEADER.size:end]
            if first + count > expected:  # not flushed yet: check it and keep it
                if frame_crc(first, count, payload) != crc:
                    return pos, "CRC mismatch"
                if first > expected:
                    return pos, f"offset gap: frame starts at {first}, the log at {expected}"
                batch = decode_frame(pa.py_buffer(payload), magic=magic)
                if batch.num_rows != count:
                    return pos, "record count mismatch"
                frames.append(Frame(base, first, count, pos, length, magic))
                batches.append((first, batch))
                expected = first + count
            pos = end
        return pos, None

    # -- appends --------------------------------------------------------------------------------

    def append(self, base_offset: int, batch: pa.RecordBatch) -> Frame:
        """Write ``batch`` (tail schema, or the log schema: attributes 0; offsets from ``base_offset``,
        continuing the tail) as one frame.

        The offsets are dense (a frame covers ``base_offset + count``): a follower's replicated range with
        gaps goes to the Delta table instead (:meth:`LogWriter.append_replicated
        <lakelog.log_tables.log_writer.LogWriter.append_replicated>`).

        Rolls first when ``segment.bytes`` or ``segment.ms`` says so; fsyncs after when
        ``flush.messages`` or ``flush.ms`` says so. Returns the frame (not yet in :attr:`view`:
        :meth:`published` adds it once the log's state moved).

        Raises:
            OSError: the write failed (nothing of the frame counts: the file is cut back).
        """
        prepared = PreparedFrame(base_offset, batch)
        frame_bytes = prepared.size
        active = self._segments[-1] if self._segments else None
        if (active is None or (active.size and (active.size + frame_bytes > self.segment_bytes
                                                 or self._clock.time() - active.created_s >= self.segment_s))):
            active = self._roll(base_offset)
        elif self._fd is None:
            self._fd = os.open(self.directory / segment_name(active.base_offset), os.O_WRONLY | os.O_APPEND)
        try:
            prepared.write(self._fd)
        except OSError:
            os.ftruncate(self._fd, active.size)
            raise
        frame = Frame(active.base_offset, base_offset, batch.num_rows, active.size, prepared.length, prepared.magic)
        active.size += frame_bytes
        self._unsynced += batch.num_rows
        if self.fsyncs and (self._unsynced >= self.flush_messages
                            or self._clock.monotonic() - self._synced_at >= self.flush_s):
            self.sync()
        return frame

    def published(self, frame: Frame) -> None:
        """Add an appended frame to :attr:`view`."""
        self.view = self.view.with_frame(frame)

    def _roll(self, base_offset: int) -> _Segment:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._fd is not None:
            if self._unsynced and self.fsyncs:
                os.fsync(self._fd)
            os.close(self._fd)
        self._fd = os.open(self.directory / segment_name(base_offset), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        segment = _Segment(base_offset, 0, self._clock.time())
        self._segments.append(segment)
        return segment

    def roll_at_next_append(self) -> None:
        """Start a new file at the next append (the active one is closed now), whatever its size or age.

        :meth:`release_below` calls it when a flush committed part of the active segment. Called by the
        writer, under its lock, when a flush reads the tail (before its Delta commit), the segment it
        reads ends where the flush does: once committed it lies wholly below the lake end offset and is
        released (and deleted) by that same flush, instead of holding the records appended during the
        commit and waiting for the next flush. The tail on disk is then about one flush interval of
        records (plus the records appended while the flush commits) instead of two.
        """
        active = self._segments[-1] if self._segments else None
        if active is not None and active.size:
            self.close()
            active.created_s = 0.0  # older than any segment.ms: the next append rolls

    def sync(self) -> None:
        """fsync the active segment (Kafka's log flush)."""
        if self._fd is not None:
            os.fsync(self._fd)
        self._unsynced, self._synced_at = 0, self._clock.monotonic()

    def sync_if_due(self) -> None:
        """fsync when ``flush.ms`` passed since the last one and records are unsynced."""
        if self._unsynced and self._clock.monotonic() - self._synced_at >= self.flush_s:
            self.sync()

    # -- after a flush, truncation --------------------------------------------------------------

    def release_below(self, lake_end_offset: int) -> int:
        """The flusher committed everything below ``lake_end_offset`` to Delta: let the tail go.

        Frames wholly below it leave :attr:`view`; segments wholly below it are released (the caller
        publishes the new view, then deletes them with :meth:`delete_released`); the active segment rolls
        (its next append starts a new file) when part of it was committed. Returns the number of segments
        released.
        """
        self.view = self.view.from_offset(lake_end_offset)
        keep: list[_Segment] = []
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
            if nxt is not None and nxt <= lake_end_offset:
                self._retired.append(seg.base_offset)
            else:
                keep.append(seg)
        released = len(self._segments) - len(keep)
        self._segments = keep
        if keep and keep[-1].base_offset < lake_end_offset:
            self.roll_at_next_append()
        return released

    def delete_released(self) -> int:
        """Delete the segment files :meth:`release_below` released; returns how many.

        Called once readers find the new lake end offset (the Delta table holds those records): a reader
        still on an older view that opens a deleted file gets FileNotFoundError and reads again on a fresh
        view, from Delta (:func:`~lakelog.log_tables.fetch.read_log`); one already reading an unlinked
        file keeps reading it. Deleting at once, rather than one flush later, keeps the tail on disk at
        about one flush interval of records instead of two (bench/soak.py).
        """
        for base in self._retired:
            (self.directory / segment_name(base)).unlink(missing_ok=True)
        deleted, self._retired = len(self._retired), []
        return deleted

    def truncate_to(self, offset: int) -> None:
        """Remove every frame at or above ``offset`` (a frame that straddles it keeps its rows below).

        The files are cut (and later ones deleted); call :meth:`recover` afterwards for the new view.
        """
        frames = self.view.frames
        i = bisect.bisect_right(self.view.bases, offset) - 1
        keep_rows: tuple[int, pa.RecordBatch] | None = None
        cut: Frame | None = None
        if i >= 0 and frames[i].end_offset > offset:
            cut = frames[i]
            if offset > cut.base_offset:
                with open(self.directory / segment_name(cut.segment), "rb") as f:
                    keep_rows = (cut.base_offset, read_frame(f, cut).slice(0, offset - cut.base_offset))
        elif i + 1 < len(frames):
            cut = frames[i + 1]
        self.close()
        if cut is None:
            return
        for seg in list(self._segments):
            if seg.base_offset > cut.segment:
                (self.directory / segment_name(seg.base_offset)).unlink(missing_ok=True)
        with open(self.directory / segment_name(cut.segment), "r+b") as f:
            f.truncate(cut.position)
        self._segments = [s for s in self._segments if s.base_offset <= cut.segment]
        if self._segments:
            self._segments[-1].size = cut.position
        if keep_rows is not None:
            self.append(keep_rows[0], keep_rows[1])

    def delete_all(self) -> None:
        """Delete every segment (the Delta table was cut below the tail: an unclean truncation)."""
        self.close()
        if self.directory.is_dir():
            for p in self.directory.glob("*" + _SUFFIX):
                p.unlink(missing_ok=True)
        self._segments, self._retired = [], []
        self.view = SegmentView(self.directory)

    def close(self) -> None:
        """Close the active file (appends reopen it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
