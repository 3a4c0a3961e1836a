"""The data files of a partition table snapshot, with the statistics reads are planned by.

A partition log table's files each hold a run of offsets; Delta keeps ``min``/``max`` statistics of the
``offset``, ``timestamp`` and ``leader_epoch`` columns per file in its log, so a read by offset range
opens only the files (:class:`DataFile`) whose ``[min.offset, max.offset]`` overlaps the range, and a
read with timestamp bounds only those whose ``[min.timestamp, max.timestamp]`` may meet them.
:class:`FileSnapshot` is such a file list, frozen, together with the filesystem to open the files with:
the broker keeps one in memory for its own table (refreshed after its commits), readers outside the
broker build one from a :class:`deltalake.DeltaTable` snapshot (:meth:`FileSnapshot.of_table`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable

from lakelog.log_tables.schema import timestamps_us

__all__ = ["DataFile", "FileSnapshot", "data_files", "file_path", "filesystem", "open_table"]


@dataclass(frozen=True)
class DataFile:
    """One data file of a table snapshot.

    Attributes:
        path: location as the Delta log lists it (relative to the table root, URL-decoded), or an
            absolute URI.
        min_offset: ``min.offset`` statistic, None when the file has no statistics.
        max_offset: ``max.offset`` statistic, None when the file has no statistics.
        max_timestamp_us: ``max.timestamp`` statistic in microseconds since the epoch, or None.
        num_records: row count, or None when unknown.
        size_bytes: file size in bytes.
        min_leader_epoch: ``min.leader_epoch`` statistic, or None.
        max_leader_epoch: ``max.leader_epoch`` statistic, or None.
        min_timestamp_us: ``min.timestamp`` statistic in microseconds since the epoch, or None.

    Delta writes timestamp statistics truncated to milliseconds, so a file's timestamps lie in
    ``[min_timestamp_us, max_timestamp_us + 999]`` (:meth:`may_hold_timestamps`).
    """

    path: str
    min_offset: int | None
    max_offset: int | None
    max_timestamp_us: int | None
    num_records: int | None
    size_bytes: int
    min_leader_epoch: int | None = None
    max_leader_epoch: int | None = None
    min_timestamp_us: int | None = None

    @property
    def has_offset_stats(self) -> bool:
        """True when both ``min.offset`` and ``max.offset`` are known."""
        return self.min_offset is not None and self.max_offset is not None

    def may_hold_timestamps(self, low_us: int | None, high_us: int | None) -> bool:
        """False only when the ``timestamp`` statistics prove no record of the file has a timestamp in
        ``[low_us, high_us]`` (microseconds since the epoch, inclusive; None = unbounded).

        The statistics are read as Delta writes them, truncated to milliseconds: the file's largest
        timestamp may be up to 999 µs above ``max.timestamp``. Without statistics: True.
        """
        if low_us is not None and self.max_timestamp_us is not None and self.max_timestamp_us + 999 < low_us:
            return False
        if high_us is not None and self.min_timestamp_us is not None and self.min_timestamp_us > high_us:
            return False
        return True

    def overlaps(self, start: int, end: int) -> bool:
        """True when the file may hold an offset in ``[start, end)`` (always, without statistics)."""
        if not self.has_offset_stats:
            return True
        return self.max_offset >= start and self.min_offset < end


def open_table(table: "str | DeltaTable", *, version: int | None = None,
               storage_options: dict[str, str] | None = None) -> DeltaTable:
    """``table`` as a :class:`DeltaTable` snapshot (opened at ``version``, default the newest).

    Raises:
        deltalake.exceptions.TableNotFoundError: no Delta table at that URI.
    """
    if isinstance(table, DeltaTable):
        if version is not None and table.version() != version:
            table = DeltaTable(table.table_uri, version=version, storage_options=storage_options)
        return table
    return DeltaTable(table, version=version, storage_options=storage_options)


def _us(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return int(value)


def data_files(table: DeltaTable) -> list[DataFile]:
    """The data files of the snapshot, ordered by ``min.offset`` (files without statistics last).

    Reads only the Delta log's ``add`` actions (no data file is opened).
    """
    # through the Arrow C stream: pa.table() of this arro3 table would import pandas (pyarrow checks for a
    # DataFrame first), about 0.2-0.8 s in each fresh process, e.g. each Spark Python worker's first read
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    if actions.num_rows == 0:
        return []
    names = set(actions.column_names)

    def column(name: str) -> list:
        if name not in names:
            return [None] * actions.num_rows
        col = actions[name]
        return timestamps_us(col).to_pylist()

    files = [
        DataFile(path=unquote(path), min_offset=lo, max_offset=hi, max_timestamp_us=_us(thi), num_records=n,
                 size_bytes=int(size), min_leader_epoch=elo, max_leader_epoch=ehi, min_timestamp_us=_us(tlo))
        for path, lo, hi, tlo, thi, n, size, elo, ehi in zip(
            column("path"), column("min.offset"), column("max.offset"), column("min.timestamp"),
            column("max.timestamp"), column("num_records"), column("size_bytes"), column("min.leader_epoch"),
            column("max.leader_epoch"))
    ]
    files.sort(key=lambda f: (f.min_offset is None, f.min_offset if f.min_offset is not None else 0, f.path))
    return files


def filesystem(dt: DeltaTable, storage_options: dict[str, str] | None = None) -> tuple[pafs.FileSystem, str]:
    """A filesystem to read the table's data files with, and the table root within it.

    Local tables use pyarrow's local filesystem; object stores use delta-rs' own storage handler, so
    the same ``storage_options`` (credentials, endpoints) reach both the Delta log and the Parquet
    files, and the root is ``""`` (paths are relative to the table).
    """
    uri = dt.table_uri
    if uri.startswith("file://"):
        uri = unquote(uri[len("file://"):])
    if "://" not in uri:
        return pafs.LocalFileSystem(), uri.rstrip("/")
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(dt.table_uri, storage_options)), ""


def file_path(root: str, path: str) -> str:
    """The path to open a data file at, from the table ``root`` and the file's ``path`` in the Delta log."""
    if "://" in path:  # an absolute URI in the log (e.g. a shallow clone): only local ones are read
        return unquote(path[len("file://"):]) if path.startswith("file://") else path
    if path.startswith("/") or not root:
        return path
    return f"{root}/{path}"


@dataclass(frozen=True, eq=False)
class FileSnapshot:
    """The data files of one table state, ordered by ``min.offset``, and where to read them.

    Immutable: the broker swaps in a new one after its commits; readers keep theirs for one read.

    Attributes:
        uri: the table URI (for messages and :class:`~lakelog.log_tables.offset_scan.DataLoss`).
        files: the data files, sorted by ``min.offset`` (files without statistics last).
        fs: the filesystem the files are opened with.
        root: the table root within ``fs`` (``""`` for delta-rs storage handlers).
        storage_options: delta-rs storage options (to open newer snapshots of the same table).
    """

    uri: str
    files: tuple[DataFile, ...]
    fs: pafs.FileSystem
    root: str
    storage_options: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def of_table(cls, dt: DeltaTable, *, storage_options: dict[str, str] | None = None,
                 fs: tuple[pafs.FileSystem, str] | None = None) -> "FileSnapshot":
        """The snapshot of ``dt``'s current version (``fs``: a ``(filesystem, root)`` to reuse)."""
        fs_root = fs if fs is not None else filesystem(dt, storage_options)
        return cls(dt.table_uri, tuple(data_files(dt)), fs_root[0], fs_root[1], storage_options)

    @classmethod
    def newest(cls, uri: str, *, storage_options: dict[str, str] | None = None) -> "FileSnapshot":
        """The snapshot of the newest version of the table at ``uri``."""
        return cls.of_table(DeltaTable(uri, storage_options=storage_options), storage_options=storage_options)

    def path(self, f: DataFile) -> str:
        """Where to open ``f`` in :attr:`fs`."""
        return file_path(self.root, f.path)

    @property
    def disjoint(self) -> bool:
        """True when every file has offset statistics and no two files' offset ranges overlap (a healthy
        table: reads find a file by binary search, the log cleaner may rewrite ranges)."""
        return self._disjoint_mins is not None

    @cached_property
    def _disjoint_mins(self) -> list[int] | None:
        """``min.offset`` of each file when all have statistics and their ranges are disjoint, else None."""
        files = self.files
        if any(not f.has_offset_stats for f in files):
            return None
        if any(files[k].max_offset >= files[k + 1].min_offset for k in range(len(files) - 1)):
            return None
        return [f.min_offset for f in files]

    def overlapping(self, start: int, end: int) -> list[DataFile]:
        """The files that may hold an offset in ``[start, end)``, in ``min.offset`` order.

        A binary search when the files' offset ranges are disjoint (a healthy table), else a scan.
        """
        mins = self._disjoint_mins
        if mins is None:
            return [f for f in self.files if f.overlaps(start, end)]
        i = max(0, bisect.bisect_right(mins, start) - 1)
        j = bisect.bisect_left(mins, end)
        return [f for f in self.files[i:j] if f.max_offset >= start]

    @cached_property
    def first_offset(self) -> int | None:
        """The first offset the files hold: min of ``min.offset``; files without statistics are read.

        None when the files hold no record.
        """
        candidates = [f.min_offset for f in self.files if f.has_offset_stats and (f.num_records or 0) > 0]
        first = min(candidates) if candidates else None
        for f in self.files:
            if not f.has_offset_stats:
                offsets = pq.read_table(self.path(f), filesystem=self.fs, columns=["offset"])["offset"]
                if len(offsets):
                    lo = pc.min(offsets).as_py()
                    first = lo if first is None else min(first, lo)
        return first

    @property
    def end_offset(self) -> int | None:
        """One past the largest ``max.offset`` statistic, or None when no file has statistics."""
        last = [f.max_offset for f in self.files if f.has_offset_stats]
        return max(last) + 1 if last else None
