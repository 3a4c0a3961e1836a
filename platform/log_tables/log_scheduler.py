"""One timer loop for every partition log of a broker (Kafka's ``KafkaScheduler`` under ``LogManager``).

Kafka's ``LogManager`` schedules ``cleanupLogs()`` and ``flushDirtyLogs()`` for all its logs on one
``KafkaScheduler`` with an injected ``Time``; no log owns a thread or a timer. Here each log's timed work
(the flusher's rounds, maintenance, VACUUM timer and retention trigger:
:class:`~lakelog.log_tables.flusher.LakeFlusher`) is a *job* with a next-due time on this scheduler's heap,
and one loop sleeps until the earliest is due:

1. pop every job due now (the heap holds ``(due, sequence, job)``; an entry whose job was rescheduled or
   removed since is skipped) and start its run, at most :data:`MAX_RUNNING_JOBS` at a time (the rest wait
   for a free slot, earliest due first): a run is a short task (its Delta I/O in worker threads) that
   returns the job's next due time, or None when nothing is due until an event reschedules it;
2. sleep, on the injected :class:`~lakelog.clock.Time`, until the next due time or until a job is
   scheduled earlier (:meth:`LogScheduler.schedule`, also from other threads through the event loop);
3. when no job is scheduled or running, the loop task ends; the next :meth:`LogScheduler.schedule`
   starts it again. An idle broker therefore has no timer task at all, and an idle log costs a heap entry
   at most (its next maintenance), not a task.

A job never runs twice at once: scheduling a running job records the time, and the run's end schedules
the job at the earlier of that and what the run returned.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from typing import Protocol

from lakelog.clock import SYSTEM_TIME, Time

log = logging.getLogger(__name__)

__all__ = ["LogJob", "LogScheduler", "MAX_RUNNING_JOBS"]

#: Job runs at once (Kafka's ``background.threads`` is 10): a burst of due logs (thousands opened together
#: reach their maintenance together) queues here, not in the worker threads the appends share.
MAX_RUNNING_JOBS = 8


class LogJob(Protocol):
    """The timed work of one log."""

    async def run_due(self) -> float | None:
        """Do what is due now; return the next due time (the scheduler clock's ``monotonic()`` seconds), or
        None when nothing is due until the job is scheduled again. An exception is logged and the job is
        not rescheduled."""


class LogScheduler:
    """The timer loop of a broker's logs (module docstring).

    Args:
        clock: what the due times are read on and the loop sleeps on. Default: the system clock.
        max_running_jobs: job runs at once. Default: :data:`MAX_RUNNING_JOBS`.

    Use from one event loop: :meth:`schedule` and :meth:`remove` in it (other threads go through
    ``loop.call_soon_threadsafe``).
    """

    def __init__(self, *, clock: Time = SYSTEM_TIME, max_running_jobs: int = MAX_RUNNING_JOBS) -> None:
        self.clock = clock
        self.max_running_jobs = max_running_jobs
        self._heap: list[tuple[float, int, LogJob]] = []
        self._due: dict[LogJob, float] = {}          # job -> its due time on the heap
        self._running: dict[LogJob, asyncio.Task] = {}
        self._again: dict[LogJob, float] = {}        # running job -> scheduled again for then
        self._removed: set[LogJob] = set()           # running jobs whose run's end schedules nothing
        self._sequence = itertools.count()
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        #: job runs started (for tests and metrics)
        self.runs = 0

    @property
    def scheduled(self) -> int:
        """Jobs waiting on the heap (not running)."""
        return len(self._due)

    @property
    def running(self) -> int:
        """Job runs in progress."""
        return len(self._running)

    def next_due(self) -> float | None:
        """The earliest due time of a waiting job (the clock's ``monotonic()`` seconds), or None."""
        return min(self._due.values(), default=None)

    def schedule(self, job: LogJob, at: float) -> None:
        """Run ``job`` at ``at`` (the clock's ``monotonic()`` seconds) or earlier if it is due earlier
        already. In the event loop."""
        if job in self._running:
            self._again[job] = min(at, self._again.get(job, at))
            return
        due = self._due.get(job)
        if due is not None and due <= at:
            return
        self._due[job] = at
        heapq.heappush(self._heap, (at, next(self._sequence), job))
        if self._task is None or self._task.done():
            self._changed = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="log-scheduler")
        elif self._heap[0][2] is job:  # earlier than what the loop sleeps until
            self._changed.set()

    async def remove(self, job: LogJob) -> None:
        """Schedule ``job`` no more; returns once its run in progress, if any, has ended."""
        self._due.pop(job, None)
        self._again.pop(job, None)
        if self._changed is not None:  # the loop drops the entry (and ends when it was the last)
            self._changed.set()
        task = self._running.get(job)
        if task is None:
            return
        self._removed.add(job)
        try:
            await asyncio.shield(task)
        except Exception:  # logged by the run
            pass
        finally:
            self._removed.discard(job)

    async def close(self) -> None:
        """Drop every job and cancel the runs in progress (the flushers were closed first: nothing is lost
        but a maintenance or VACUUM the next start does again)."""
        self._heap.clear()
        self._due.clear()
        self._again.clear()
        tasks = [t for t in (self._task, *self._running.values()) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _loop(self) -> None:
        changed = self._changed
        while self._heap or self._running:
            changed.clear()
            now = self.clock.monotonic()
            # 1. start the runs of the due jobs (up to max_running_jobs at once)
            while self._heap and len(self._running) < self.max_running_jobs:
                at, _, job = self._heap[0]
                if self._due.get(job) != at:  # rescheduled or removed meanwhile
                    heapq.heappop(self._heap)
                    continue
                if at > now:
                    break
                heapq.heappop(self._heap)
                del self._due[job]
                self.runs += 1
                task = asyncio.get_running_loop().create_task(self._run(job))
                self._running[job] = task
            # 2. sleep until the next due time, an earlier job, or a run's end
            if len(self._running) >= self.max_running_jobs or not self._heap:
                wait_s = None
            else:
                wait_s = max(0.0, self._heap[0][0] - now)
            if self._heap or self._running:
                await self.clock.wait(changed, wait_s)
        # 3. nothing scheduled, nothing running: the loop ends until the next schedule()

    async def _run(self, job: LogJob) -> None:
        next_at = None
        try:
            next_at = await job.run_due()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("a scheduled run of %r failed", job)
        finally:
            del self._running[job]
            again = self._again.pop(job, None)
            if again is not None:
                next_at = again if next_at is None else min(next_at, again)
            if next_at is not None and job not in self._removed:
                self.schedule(job, next_at)
            if self._changed is not None:
                self._changed.set()
