"""Child processes that never outlive their parent, and looking at other processes by pid.

Layer 0: imports only the standard library, so every layer may use it (the embedded ZooKeeper in
``replication/``, :mod:`lakelog.runtime.broker_process`, the CLI, the demo, the tests).

:func:`spawn` starts a child with :class:`subprocess.Popen` and, on Linux, asks the kernel to send it
a signal when its parent dies (``prctl(PR_SET_PDEATHSIG, sig)`` in the child between ``fork`` and
``exec``): a ``kill -9`` of ``lakelog up`` takes its ZooKeeper with it instead of leaving a JVM that
holds the port. Elsewhere (macOS, Windows) it is a plain ``Popen``; the embedded ZooKeeper then relies
on its pid file to reclaim a server left behind.

The kernel sends the signal when the *thread* that forked the child exits, not the process. So
:func:`spawn` forks from the main thread when called there, and otherwise hands the ``Popen`` to one
daemon thread, ``lakelog-spawner``, that this module starts once and that never returns (it blocks on
its queue until the process exits). Either way the forking thread lives exactly as long as the
process.

The ``prctl`` function is looked up when this module is imported (in the parent), so the child runs
no ``dlopen`` between ``fork`` and ``exec``: only the ``prctl`` and ``getppid`` system calls.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = [
    "DEATH_SIGNAL_SUPPORTED",
    "connected_ports",
    "parent_pid",
    "process_alive",
    "process_cmdline",
    "spawn",
    "stop_pid",
]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter already has loaded
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()

#: True where :func:`spawn` can tie a child's life to its parent's (Linux with a usable ``prctl``).
DEATH_SIGNAL_SUPPORTED = _PRCTL is not None


def _die_with_parent(death_signal: int, parent: int) -> Callable[[], None]:
    """The ``preexec_fn`` of a child: ``prctl(PR_SET_PDEATHSIG)``, then check the parent is still there."""
    prctl = _PRCTL
    assert prctl is not None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        # The parent may have died between fork and prctl: the signal would never come. The child has
        # been re-parented by then, so its parent pid changed: deliver the signal ourselves.
        if os.getppid() != parent:
            os.kill(os.getpid(), death_signal)

    return preexec


# -- the spawner thread --------------------------------------------------------------------------

_spawner_lock = threading.Lock()
_spawner_queue: "queue.SimpleQueue[tuple[Callable[[], Any], Future]] | None" = None


def _spawner_loop(jobs: "queue.SimpleQueue[tuple[Callable[[], Any], Future]]") -> None:
    while True:  # never returns: the children it forks get their death signal when the process ends
        job, future = jobs.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(job())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            future.set_exception(e)


def _in_long_lived_thread(job: Callable[[], Any]) -> Any:
    """Run ``job`` in a thread that lives as long as the process: this one if it is the main thread,
    else the spawner thread (started on first use). Returns its result or raises its exception."""
    global _spawner_queue
    if threading.current_thread() is threading.main_thread():
        return job()
    with _spawner_lock:
        if _spawner_queue is None:
            jobs: "queue.SimpleQueue[tuple[Callable[[], Any], Future]]" = queue.SimpleQueue()
            threading.Thread(target=_spawner_loop, args=(jobs,), name="lakelog-spawner", daemon=True).start()
            _spawner_queue = jobs
        jobs = _spawner_queue
    future: Future = Future()
    jobs.put((job, future))
    return future.result()


def spawn(args: Sequence[str], *, death_signal: int = signal.SIGKILL, **popen_kwargs: Any) -> subprocess.Popen:
    """Start ``args`` as a child process that gets ``death_signal`` when this process dies.

    Args:
        args: the command line, as for :class:`subprocess.Popen`.
        death_signal: the signal the kernel sends the child when its parent dies (Linux). Default:
            SIGKILL (a crash: nothing can block it). Use SIGTERM for a child whose graceful stop is
            quick and matters.
        popen_kwargs: any other :class:`subprocess.Popen` argument (``stdout``, ``env``, ``cwd``,
            ``start_new_session``, ...) except ``preexec_fn``, which this function owns.

    Returns:
        The :class:`subprocess.Popen`. Where the death signal is not supported (not Linux) the child
        is started all the same, without it (see :data:`DEATH_SIGNAL_SUPPORTED`).

    Raises:
        TypeError: ``preexec_fn`` was given.
        OSError: the command cannot be run (as :class:`subprocess.Popen` raises it).
    """
    if "preexec_fn" in popen_kwargs:
        raise TypeError("spawn() sets preexec_fn itself")
    if _PRCTL is not None and os.name == "posix":
        popen_kwargs["preexec_fn"] = _die_with_parent(int(death_signal), os.getpid())
    return _in_long_lived_thread(lambda: subprocess.Popen(list(args), **popen_kwargs))


# -- other processes, by pid ---------------------------------------------------------------------

def process_cmdline(pid: int) -> list[str] | None:
    """The command line of process ``pid`` as a list of arguments, or None when it cannot be read.

    None for a process that does not exist, a zombie, one we may not look at, or on a system without
    ``/proc`` (then it asks ``ps``, split at whitespace: an argument with spaces in it does not compare
    equal to the original). A process whose main thread already exited while other threads still run
    (a JVM shutting down) is read through one of those threads.
    """
    proc = Path("/proc")
    if proc.is_dir():
        candidates = [proc / str(pid) / "cmdline"]
        try:
            candidates += [task / "cmdline" for task in (proc / str(pid) / "task").iterdir()]
        except OSError:
            pass
        for candidate in candidates:
            try:
                raw = candidate.read_bytes()
            except OSError:
                continue
            if raw:
                return [a.decode("utf-8", errors="surrogateescape") for a in raw.rstrip(b"\0").split(b"\0")]
        return None
    if os.name != "posix":
        return None
    try:
        out = subprocess.run(["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.split() or None


def connected_ports(pid: int, ports: set[int] | Sequence[int]) -> list[int]:
    """Which of ``ports`` process ``pid`` holds an established IPv4 TCP connection to, ascending: e.g. the
    client port of the ZooKeeper node a broker's session is connected to (the fault tests and the ensemble
    benchmark pick the node to kill so).

    Matches the socket inodes of ``/proc/PID/fd`` against ``/proc/PID/net/tcp``; an empty list for a process
    that is gone, one we may not look at, or on a system without ``/proc``.
    """
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in table:
        fields = line.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        remote_port = int(remote.split(":")[1], 16)
        if state == "01" and inode in inodes and remote_port in ports:  # 01: ESTABLISHED
            found.append(remote_port)
    return sorted(found)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/{pid}/stat`` after the command name (state first, then ppid), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def parent_pid(pid: int) -> int | None:
    """The pid of ``pid``'s parent now (1 or a subreaper's pid once its parent died), or None when
    ``pid`` does not exist or cannot be looked at."""
    fields = _proc_stat(pid)
    if fields is not None:
        return int(fields[1])
    if Path("/proc").is_dir() or os.name != "posix":
        return None
    try:
        out = subprocess.run(["ps", "-o", "ppid=", "-p", str(pid)], capture_output=True, text=True, timeout=10)
        return int(out.stdout.strip()) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def process_alive(pid: int) -> bool:
    """True while process ``pid`` exists and has not exited: a zombie (exited, not reaped yet) counts as
    gone, unless only its main thread exited and other threads still run (a JVM shutting down still
    holds its files and ports). A process of another user counts as alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _proc_stat(pid)
    if fields is None or fields[0] not in ("Z", "X"):
        return fields is not None or not Path("/proc").is_dir()
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def log_since(path: "os.PathLike[str] | str", offset: int) -> str:
    """The text a child process wrote to its log file ``path`` from byte ``offset`` on (what this start
    wrote), decoded leniently; ``(cannot read the log: ...)`` when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", errors="replace")
    except OSError as e:
        return f"(cannot read the log: {e})"


def stop_child(process: subprocess.Popen, *, timeout_s: float = 10.0) -> None:
    """Stop a child process by its pid: SIGTERM, then SIGKILL if it is still alive after ``timeout_s``
    seconds; wait for it to end (and reap it). Does nothing if it has ended already."""
    if process.poll() is not None:
        return
    try:
        os.kill(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()  # SIGKILL
        process.wait()


def stop_pid(pid: int, *, timeout_s: float = 10.0, still_ours: Callable[[], bool] | None = None) -> bool:
    """Stop a process that is not our child, by pid: SIGTERM, then SIGKILL if it is still alive after
    ``timeout_s`` seconds; wait (up to ``timeout_s`` more) until it is gone.

    Args:
        pid: the process.
        timeout_s: seconds to wait after SIGTERM, and again after SIGKILL.
        still_ours: checked before each signal; when it returns False (the pid now names another
            process) nothing more is sent. Default: always True.

    Returns:
        True when the process is gone (or ``still_ours`` said the pid names another process now),
        False when it still runs after SIGKILL and the wait.

    Raises:
        PermissionError: the process belongs to another user.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not process_alive(pid):
            return True
        if still_ours is not None and not still_ours():
            return True
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not process_alive(pid):
                return True
            time.sleep(0.05)
    return not process_alive(pid)
