"""LogManager: a dropped log's directory leaves its place at once and the disk in the background; a
previous run's leftovers are removed at start."""

from __future__ import annotations

import asyncio

import pyarrow as pa

from lakelog.config import TopicConfig
from lakelog.log_tables.log_manager import DELETED_DIR_SUFFIX, LogManager


def test_a_deleted_log_is_renamed_at_once_and_removed_in_the_background(tmp_path):
    async def run() -> tuple[bool, list[str], list[str]]:
        manager = LogManager(tmp_path, tail_cache_max_bytes=0, segment_files_max=None)
        manager.ensure_dirs()
        plog = await asyncio.to_thread(manager.open_log, topic="t", partition=0, topic_id="a",
                                       config=TopicConfig(), replicated=False)
        plog.append(pa.table({"value": [b"x"]}))
        await manager.drop_log(plog, delete_data=True)
        gone_at_once = not (tmp_path / "t-0").exists()
        renamed = [p.name for p in tmp_path.iterdir()]
        for _ in range(100):
            if not any(tmp_path.iterdir()):
                break
            await asyncio.sleep(0.02)
        again = await asyncio.to_thread(manager.open_log, topic="t", partition=0, topic_id="b",
                                        config=TopicConfig(), replicated=False)
        assert again.log_end_offset == 0   # the same name again: an empty log
        return gone_at_once, renamed, [p.name for p in tmp_path.iterdir()]

    gone_at_once, renamed, after = asyncio.run(run())
    assert gone_at_once and len(renamed) == 1 and renamed[0].startswith("t-0.")
    assert renamed[0].endswith(DELETED_DIR_SUFFIX)
    assert after == ["t-0"]


def test_leftovers_of_deleted_logs_are_removed_at_start(tmp_path):
    (tmp_path / f"t-0.abc{DELETED_DIR_SUFFIX}" / "_delta_log").mkdir(parents=True)
    (tmp_path / "t-1").mkdir()
    LogManager(tmp_path, tail_cache_max_bytes=0, segment_files_max=None).ensure_dirs()
    assert [p.name for p in tmp_path.iterdir()] == ["t-1"]
