"""lakelog.processes: children die with their parent; other processes looked at and stopped by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lakelog.processes import (
    DEATH_SIGNAL_SUPPORTED,
    parent_pid,
    process_alive,
    process_cmdline,
    spawn,
    stop_pid,
)
from tests.harness import wait_for, wait_gone

linux_only = pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="PR_SET_PDEATHSIG is Linux-only")

# A parent that spawns `sleep` with the death signal, prints the child's pid, then sleeps itself.
PARENT = """
import sys, time
from lakelog.processes import spawn
child = spawn(["sleep", "300"])
print(child.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def reaper():
    """Pids to SIGKILL at the end of the test if they still run (nothing outlives a failed test)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@linux_only
def test_child_dies_when_its_parent_is_killed(reaper) -> None:
    parent = spawn([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    reaper.append(parent.pid)
    child_pid = int(parent.stdout.readline())
    reaper.append(child_pid)
    assert process_alive(child_pid) and parent_pid(child_pid) == parent.pid
    assert process_cmdline(child_pid) == ["sleep", "300"]

    parent.kill()  # SIGKILL: no handler, no atexit in the parent runs
    parent.wait(10)
    parent.stdout.close()
    wait_gone([child_pid], what="the child of a killed parent")


@linux_only
def test_child_spawned_from_a_short_lived_thread_outlives_the_thread(reaper) -> None:
    """PDEATHSIG fires when the forking *thread* ends: spawn() forks in a thread that never ends."""
    started: list[subprocess.Popen] = []
    thread = threading.Thread(target=lambda: started.append(spawn(["sleep", "300"])))
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and started
    child = started[0]
    reaper.append(child.pid)
    time.sleep(0.5)  # a death signal tied to the finished thread would have killed it by now
    assert child.poll() is None
    child.kill()
    child.wait(10)


def test_spawn_refuses_preexec_fn() -> None:
    with pytest.raises(TypeError, match="preexec_fn"):
        spawn(["true"], preexec_fn=lambda: None)


def test_spawn_errors_as_popen() -> None:
    with pytest.raises(OSError):
        spawn(["/nonexistent/lakelog-no-such-program"])


def test_stop_pid_terminates_then_kills(tmp_path: Path, reaper) -> None:
    # ignores SIGTERM: only the SIGKILL after the timeout ends it
    stubborn = subprocess.Popen([sys.executable, "-c",
                                 "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                 "open(__import__('sys').argv[1], 'w').close(); time.sleep(300)",
                                 str(tmp_path / "ready")])
    reaper.append(stubborn.pid)
    wait_for(lambda: (tmp_path / "ready").exists(), what="the SIGTERM handler installed")
    # reap it from a thread, so it does not linger as a zombie of this process
    threading.Thread(target=stubborn.wait, daemon=True).start()
    started = time.monotonic()
    assert stop_pid(stubborn.pid, timeout_s=0.5)
    assert time.monotonic() - started >= 0.5
    assert not process_alive(stubborn.pid)

    polite = subprocess.Popen(["sleep", "300"])
    reaper.append(polite.pid)
    threading.Thread(target=polite.wait, daemon=True).start()
    assert stop_pid(polite.pid, timeout_s=10)
    assert polite.wait(10) == -signal.SIGTERM


def test_stop_pid_sends_nothing_when_the_pid_is_not_ours(reaper) -> None:
    other = subprocess.Popen(["sleep", "300"])
    reaper.append(other.pid)
    assert stop_pid(other.pid, timeout_s=1, still_ours=lambda: False)
    assert other.poll() is None
    other.kill()
    other.wait(10)


def test_process_lookups_of_missing_processes() -> None:
    assert not process_alive(0) and not process_alive(-5)
    gone = subprocess.Popen(["true"])
    gone.wait(10)
    assert not process_alive(gone.pid)
    assert process_cmdline(gone.pid) is None and parent_pid(gone.pid) is None
    assert parent_pid(os.getpid()) == os.getppid()
    # this process: the interpreter, then pytest's script or a pytest-xdist worker's "-u -c ..."
    own = process_cmdline(os.getpid()) or []
    assert len(own) > 1 and Path(own[0]).name.startswith("python") and own[1] in (sys.argv[0], "-u")
