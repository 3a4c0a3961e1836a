"""The clock the broker's timers read: :class:`SystemTime` in the broker, :class:`MockTime` in tests.

Kafka passes a ``Time`` (``org.apache.kafka.common.utils.Time``; ``SystemTime``, and ``MockTime`` whose
``sleep`` advances it) to its ``LogManager``, ``KafkaScheduler`` and the logs, so a test moves time
forward instead of waiting on the wall clock. Here the log layer's scheduler
(:mod:`~lakelog.log_tables.log_scheduler`) and its timers read a :class:`Time` and wait through
:meth:`Time.wait`, which a :class:`MockTime` ends when it is advanced past the deadline.

Two readings, as Kafka's ``milliseconds()`` / ``nanoseconds()``: :meth:`Time.time` (wall clock, seconds
since the epoch: record timestamps, ``retention.ms``, Delta's ``deletionTimestamp``) and
:meth:`Time.monotonic` (seconds from an arbitrary start: intervals and deadlines). A wait costs a timer
handle, not a task: :meth:`Time.wait` sets the caller's event when it times out.
"""

from __future__ import annotations

import asyncio
import threading
import time as _time
from dataclasses import dataclass
from typing import Protocol

__all__ = ["MockTime", "SYSTEM_TIME", "SystemTime", "Time"]


class Time(Protocol):
    """What a timer reads (Kafka's ``org.apache.kafka.common.utils.Time``)."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back."""

    async def wait(self, event: asyncio.Event, timeout_s: float | None) -> bool:
        """Wait until ``event`` is set or ``timeout_s`` seconds of this clock passed (None: no limit); a
        timeout sets ``event`` too (the caller clears it before its next wait). Returns True when ``event``
        was set by someone else. No task is created: one waiting timer costs one timer handle."""


class SystemTime:
    """The machine's clocks (``time.time``, ``time.monotonic``); waits are event-loop timers (``call_later``)."""

    def time(self) -> float:
        return _time.time()

    def monotonic(self) -> float:
        return _time.monotonic()

    async def wait(self, event: asyncio.Event, timeout_s: float | None) -> bool:
        if event.is_set():
            return True
        if timeout_s is not None and timeout_s <= 0:
            return False
        timed_out = False

        def time_out() -> None:
            nonlocal timed_out
            timed_out = True
            event.set()

        handle = None if timeout_s is None else asyncio.get_running_loop().call_later(timeout_s, time_out)
        try:
            await event.wait()
        finally:
            if handle is not None:
                handle.cancel()
        return not timed_out


#: The broker's clock unless one is injected.
SYSTEM_TIME = SystemTime()


class MockTime:
    """A clock that moves only when :meth:`advance` (or :meth:`sleep`) moves it (Kafka's ``MockTime``).

    Args:
        start_s: the wall-clock reading at the start, seconds since the epoch. Default: the machine's now.
        monotonic_s: the monotonic reading at the start. Default: 0.

    :meth:`wait` returns when its event is set, or once :meth:`advance` moved the clock past its deadline
    (from any thread: it sets the event); real time passing ends nothing.
    """

    def __init__(self, *, start_s: float | None = None, monotonic_s: float = 0.0) -> None:
        self._wall_offset = (_time.time() if start_s is None else start_s) - monotonic_s
        self._monotonic = monotonic_s
        self._lock = threading.Lock()
        # every wait in progress: its deadline, event, event loop and whether it timed out
        self._waiters: list[_MockWait] = []

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
            due = [w for w in self._waiters if w.deadline <= self._monotonic and not w.timed_out]
            for w in due:
                w.timed_out = True
        for w in due:
            try:
                w.loop.call_soon_threadsafe(w.event.set)
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
        waiter = _MockWait(float("inf") if timeout_s is None else self._monotonic + timeout_s, event,
                           asyncio.get_running_loop())
        with self._lock:
            self._waiters.append(waiter)
        try:
            await event.wait()
        finally:
            with self._lock:
                self._waiters.remove(waiter)
        return not waiter.timed_out


@dataclass
class _MockWait:
    deadline: float
    event: asyncio.Event
    loop: asyncio.AbstractEventLoop
    timed_out: bool = False
