"""One scheduler for every log of a broker, on an injected clock: jobs run when the clock says they are due,
in due order, never twice at once; idle logs cost no task; the flusher's rounds and maintenance follow the
clock, not the wall."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyarrow as pa

from lakelog.clock import MockTime
from lakelog.config import TopicConfig
from lakelog.log_tables.flusher import LakeFlusher
from lakelog.log_tables.log_manager import LogManager
from lakelog.log_tables.log_scheduler import LogScheduler
from lakelog.log_tables.partition_log import PartitionLog

HOUR_MS = 3_600_000


class Job:
    """Records when it ran (on the clock) and returns the next due times it is given."""

    def __init__(self, clock: MockTime, name: str, ran: list[tuple[str, float]], *, every_s: float | None = None,
                 hold: asyncio.Event | None = None) -> None:
        self.clock, self.name, self.ran, self.every_s, self.hold = clock, name, ran, every_s, hold
        self.running = 0
        self.most_running = 0

    async def run_due(self) -> float | None:
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        self.ran.append((self.name, self.clock.monotonic()))
        if self.hold is not None:
            await self.hold.wait()
        self.running -= 1
        return None if self.every_s is None else self.clock.monotonic() + self.every_s


async def settle() -> None:
    """Let the event loop run what is ready (the scheduler's loop and the runs it started)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_jobs_run_when_the_clock_says_they_are_due_in_due_order():
    async def run() -> list[tuple[str, float]]:
        clock = MockTime()
        scheduler = LogScheduler(clock=clock)
        ran: list[tuple[str, float]] = []
        scheduler.schedule(Job(clock, "b", ran), 2.0)
        scheduler.schedule(Job(clock, "a", ran), 1.0)
        scheduler.schedule(Job(clock, "every 5 s", ran, every_s=5.0), 3.0)
        await asyncio.sleep(0.2)               # real time passing runs nothing
        assert ran == []
        for _ in range(10):
            clock.advance(1.0)
            await settle()
        return ran

    assert asyncio.run(run()) == [("a", 1.0), ("b", 2.0), ("every 5 s", 3.0), ("every 5 s", 8.0)]


def test_a_job_never_runs_twice_at_once_and_runs_again_when_scheduled_while_running():
    async def run() -> tuple[Job, list[tuple[str, float]]]:
        clock = MockTime()
        scheduler = LogScheduler(clock=clock)
        ran: list[tuple[str, float]] = []
        hold = asyncio.Event()
        job = Job(clock, "j", ran, hold=hold)
        scheduler.schedule(job, 0.0)
        await settle()
        assert scheduler.running == 1
        scheduler.schedule(job, 0.0)           # while it runs: once more after this run
        scheduler.schedule(job, 0.0)
        await settle()
        hold.set()
        await settle()
        return job, ran

    job, ran = asyncio.run(run())
    assert ran == [("j", 0.0), ("j", 0.0)] and job.most_running == 1


def test_at_most_max_running_jobs_run_at_once_the_rest_wait_for_a_slot():
    async def run() -> tuple[list[int], int]:
        clock = MockTime()
        scheduler = LogScheduler(clock=clock, max_running_jobs=3)
        ran: list[tuple[str, float]] = []
        hold = asyncio.Event()
        for i in range(10):
            scheduler.schedule(Job(clock, str(i), ran, hold=hold), 0.0)
        await settle()
        running = [scheduler.running]
        hold.set()
        await settle()
        running.append(scheduler.running)
        return running, len(ran)

    assert asyncio.run(run()) == ([3, 0], 10)


def test_an_idle_scheduler_has_no_task_and_a_removed_job_never_runs():
    async def run() -> tuple[bool, list[tuple[str, float]], int]:
        clock = MockTime()
        scheduler = LogScheduler(clock=clock)
        ran: list[tuple[str, float]] = []
        job = Job(clock, "j", ran)
        scheduler.schedule(job, 10.0)
        await settle()
        tasks_while_scheduled = len(asyncio.all_tasks())
        await scheduler.remove(job)
        await settle()
        clock.advance(20.0)
        await settle()
        return scheduler._task.done(), ran, tasks_while_scheduled

    loop_ended, ran, tasks = asyncio.run(run())
    assert loop_ended and ran == [] and tasks == 2      # this test's own task and the scheduler's loop


# -- the flusher on the scheduler -----------------------------------------------------------------

def open_log(path: Path, **configs) -> PartitionLog:
    config = TopicConfig.parse({k.replace("_", "."): str(v) for k, v in configs.items()})
    return PartitionLog.open(topic="t", partition=0, table_uri=path / "t-0", config=config)


async def until(condition, timeout_s: float = 10.0) -> bool:
    """Poll ``condition`` (worker threads finish in real time) until it holds or ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_idle_logs_cost_no_task_and_nothing_runs_until_their_maintenance_is_due(tmp_path):
    """A thousand partitions used to mean 3,000 timer tasks, each waking every lake.commit.interval.ms."""

    async def run() -> tuple[int, int, int, int]:
        clock = MockTime()
        manager = LogManager(tmp_path, tail_cache_max_bytes=1 << 20, segment_files_max=64, clock=clock)
        config = TopicConfig.parse({"lake.commit.interval.ms": "100"})
        logs = [await asyncio.to_thread(manager.open_log, topic="t", partition=p, topic_id="id", config=config,
                                        replicated=False) for p in range(20)]
        maintained: list[int] = []
        for plog in logs:
            plog.lifecycle.run = lambda **_: maintained.append(1)   # counts the rounds, does nothing
        flushers = [LakeFlusher(plog, maintenance_interval_ms=60_000) for plog in logs]
        await settle()
        tasks = len(asyncio.all_tasks())
        for _ in range(59):                                     # a minute less one second, a second at a time
            clock.advance(1.0)
            await settle()
        runs_before = manager.scheduler.runs
        clock.advance(1.0)                                      # the maintenance of every log is due
        await until(lambda: len(maintained) == len(logs))
        for flusher in flushers:
            await flusher.close()
        await manager.scheduler.close()
        return tasks, runs_before, len(maintained), manager.scheduler.runs

    tasks, runs_before, maintained, runs = asyncio.run(run())
    assert tasks == 2                     # this test's own task and the one scheduler loop, for 20 logs
    assert runs_before == 0 and maintained == 20 and runs == 20


def test_a_round_commits_at_the_next_point_of_the_commit_interval_on_the_injected_clock(tmp_path):
    async def run() -> tuple[int, int, int]:
        clock = MockTime()
        log = open_log(tmp_path, lake_commit_interval_ms=1000)
        log.lifecycle.clock = clock
        flusher = LakeFlusher(log, maintenance_interval_ms=HOUR_MS)
        clock.advance(2.5)                                      # idle: no round ran, none is due
        log.append(pa.table({"value": [b"x"] * 5}))
        log.advance_high_watermark(log.log_end_offset)          # a round is wanted: at 3.0 (opened at 0.0)
        await asyncio.sleep(0.2)
        before = log.lake_end_offset
        clock.advance(0.4)                                      # 2.9
        await asyncio.sleep(0.2)
        still = log.lake_end_offset
        clock.advance(0.1)                                      # 3.0: due
        await until(lambda: log.lake_end_offset == 5)
        flushed = log.lake_end_offset
        await flusher.close()
        log.close()
        return before, still, flushed

    assert asyncio.run(run()) == (0, 0, 5)
