"""The memory of a burst of large produce requests goes back to the system once, after the burst."""

from __future__ import annotations

import asyncio

from lakelog.ingest_api.memory_release import MemoryReleaser


def test_one_release_after_a_burst():
    async def burst() -> MemoryReleaser:
        releaser = MemoryReleaser(quiet_ms=200)
        for _ in range(10):  # requests answered every 50 ms: the release waits for the burst's end
            await releaser.request_done()
            await asyncio.sleep(0.05)
            assert releaser.releases == 0
        while releaser.releases == 0:  # then it runs once, 200 ms after the last one
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        assert releaser.releases == 1
        await releaser.request_done()  # a later request: one more release
        while releaser.releases == 1:
            await asyncio.sleep(0.02)
        return releaser

    assert asyncio.run(burst()).releases == 2
