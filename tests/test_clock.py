"""The injected clock: :class:`MockTime` moves only when advanced, and its waits end then, not with real time."""

from __future__ import annotations

import asyncio
import time

from lakelog.clock import SYSTEM_TIME, MockTime


def test_mock_time_moves_only_when_advanced():
    clock = MockTime(start_s=1_000.0)
    assert clock.time() == 1_000.0 and clock.monotonic() == 0.0
    time.sleep(0.01)
    assert clock.time() == 1_000.0
    clock.advance(2.5)
    assert clock.time() == 1_002.5 and clock.monotonic() == 2.5


def test_a_wait_on_mock_time_ends_when_the_clock_passes_its_deadline_or_its_event_is_set():
    async def run() -> list[tuple[str, bool]]:
        clock = MockTime()
        timer, forever = asyncio.Event(), asyncio.Event()
        ended: list[tuple[str, bool]] = []

        async def waiter(name: str, event: asyncio.Event, timeout_s: float | None) -> None:
            ended.append((name, await clock.wait(event, timeout_s)))

        tasks = [asyncio.create_task(waiter("10s", timer, 10.0)), asyncio.create_task(waiter("forever", forever, None))]
        await asyncio.sleep(0.2)                         # real time passing ends nothing
        assert ended == []
        clock.advance(9.0)
        await asyncio.sleep(0.05)
        assert ended == []
        clock.advance(1.0)                               # the 10 s deadline passed
        await asyncio.sleep(0.05)
        assert ended == [("10s", False)]
        forever.set()
        await asyncio.gather(*tasks)
        return ended

    assert asyncio.run(run()) == [("10s", False), ("forever", True)]


def test_a_wait_on_system_time_times_out_in_real_time():
    async def run() -> tuple[bool, bool]:
        event = asyncio.Event()
        timed_out = await SYSTEM_TIME.wait(event, 0.05)
        event.set()
        return timed_out, await SYSTEM_TIME.wait(event, 10.0)

    assert asyncio.run(run()) == (False, True)
