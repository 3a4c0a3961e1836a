"""The clock the broker's timers read: :class:`SystemTime` in the broker, :class:`MockTime` in tests.

Kafka passes a ``Time`` (``org.apache.kafka.common.utils.Time``; ``SystemTime``, and ``MockTime`` whose
``sleep`` advances it) to its ``LogManager``, ``KafkaScheduler`` and the logs, so a test moves time
forward instead of waiting on the wall clock. Here the log layer's scheduler
(:mod:`~lakelog.log_tables.log_scheduler`) and its timers read a :class:`Time` and wait through
:meth:`Time.wait`, which a :class:`MockTime` ends when it is advanced past the deadline.

Two readings, as Kafka's ``milliseconds()`` / ``nanoseconds()``: :meth:`Time.time` (wall clock, seconds
since the epoch: record timestamps, ``retention.ms``, Delta's ``deletionTimestamp``) and
:meth:`Time.monotonic` (seconds from an arbitrary start: intervals and deadlines).
"""

from __future__ import annotations

import asyncio
import threading
import time as _time
from typing import Protocol

__all__ = ["MockTime", "SYSTEM_TIME", "SystemTime", "Time"]


class Time(Protocol):
    """What a timer reads (Kafka's ``org.apache.kafka.common.utils.Time``)."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back."""

    async def wait(self, event: asyncio.Event, timeout_s: float | None) -> bool:
        """Wait until ``event`` is set or ``timeout_s`` seconds of this clock passed (None: no limit).
        Returns True when ``event`` was set."""


class SystemTime:
    """The machine's clocks (``time.time``, ``time.monotonic``); waits are asyncio timeouts."""

    def time(self) -> float:
        return _time.time()

    def monotonic(self) -> float:
        return _time.monotonic()

    async def wait(self, event: asyncio.Event, timeout_s: float | None) -> bool:
        if event.is_set():
            return True
        if timeout_s is not None and timeout_s <= 0:
            return False
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True


#: The broker's clock unless one is injected.
SYSTEM_TIME = SystemTime()


class MockTime:
    """A clock that moves only when :meth:`advance` (or :meth:`sleep`) moves it (Kafka's ``MockTime``).

    Args:
        start_s: the wall-clock reading at the start, seconds since the epoch. Default: the machine's now.
        monotonic_s: the monotonic reading at the start. Default: 0.

    :meth:`wait` returns when its event is set, or once :meth:`advance` moved the clock past its deadline
    (from any thread); real time passing ends nothing.
    """

    def __init__(self, *, start_s: float | None = None, monotonic_s: float = 0.0) -> None:
        self._wall_offset = (_time.time() if start_s is None else start_s) - monotonic_s
        self._monotonic = monotonic_s
        self._lock = threading.Lock()
        # (deadline, event, loop) of every wait in progress
        self._waiters: list[tuple[float, asyncio.Event, asyncio.AbstractEventLoop]] = []

    def time(self) -> float:
        return self._wall_offset + self._monotonic

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward; the waits whose deadline it passed return."""
        if seconds < 0:
            raise ValueError(f"a clock never goes back ({seconds} s)")
        with self._lock:
            self._monotonic += seconds
            due = [w for w in self._waiters if w[0] <= self._monotonic]
        for _, event, loop in due:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that event loop is closed
                pass

    def sleep(self, seconds: float) -> None:
        """As Kafka's ``MockTime.sleep``: advance the clock, return at once."""
        self.advance(seconds)

    async def wait(self, event: asyncio.Event, timeout_s: float | None) -> bool:
        if event.is_set():
            return True
        if timeout_s is not None and timeout_s <= 0:
            return False
        deadline = float("inf") if timeout_s is None else self._monotonic + timeout_s
        woken = asyncio.Event()
        waiter = (deadline, woken, asyncio.get_running_loop())
        with self._lock:
            self._waiters.append(waiter)
        try:
            setter = asyncio.ensure_future(event.wait())
            timer = asyncio.ensure_future(woken.wait())
            try:
                await asyncio.wait({setter, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                setter.cancel()
                timer.cancel()
            return event.is_set()
        finally:
            with self._lock:
                self._waiters.remove(waiter)
