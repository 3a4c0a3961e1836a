"""Helpers shared by the benchmarks: a temp dir with ZooKeeper and the benchmarked broker child process
for a bench's run (:func:`bench_cluster`; the broker's CPU use read from ``/proc``), the machine's and
this process's CPU, an optional py-spy recording of the broker, broker settings from ``--broker-env``
and a console wide enough for tables piped to a file.

The scripts in ``bench/`` run as ``python bench/NAME.py``, so this folder is on ``sys.path`` and they
import this module as ``_cluster``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lakelog.runtime.broker_process import BrokerProcess
from lakelog.runtime.zookeeper_server import ZooKeeperServer, free_port

CLK_TCK = os.sysconf("SC_CLK_TCK")


def make_console() -> Console:
    """A rich console; wide enough for the tables when piped to a file (rich would wrap at 80 columns)."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=200)


class Broker(BrokerProcess):
    """The benchmarked broker: a :class:`BrokerProcess` in its own session (a Ctrl-C in the terminal
    reaches only the bench script, which stops it), plus its CPU use read from ``/proc``."""

    def __init__(self, *, log_dirs: Path, log_file: Path, env: dict[str, str]) -> None:
        super().__init__(zookeeper_connect="", log_dirs=log_dirs, log_file=log_file, extra_env=env, new_session=True)

    def cpu_seconds(self) -> float:
        """user + system CPU seconds of the broker process (all its threads) and of its child processes (the
        typed columns' decode worker: :mod:`lakelog.schemas.decode_worker`) so far."""
        return process_tree_cpu(self.pid)

    def cpu_split(self) -> tuple[float, float]:
        """CPU seconds of (the main thread = the asyncio event loop, the other Python threads = asyncio.to_thread
        workers running appends and reads); the rest of :meth:`cpu_seconds` is native threads (delta-rs tokio,
        Arrow, jemalloc) and threads that ended."""
        return process_cpu_split(self.pid)


@dataclass
class BenchRun:
    """What :func:`bench_cluster` started. ``return_code``: 0, 130 after Ctrl-C/SIGTERM, 1 after an error."""

    tmp: Path
    zk: ZooKeeperServer
    broker: Broker
    return_code: int = 0

    @property
    def broker_pid(self) -> int:
        """The broker's pid, or 0 when it never started."""
        return self.broker.pid if self.broker.process is not None else 0


@contextlib.contextmanager
def bench_cluster(console: Console, *, prefix: str, env: dict[str, str], keep: bool) -> Iterator[BenchRun]:
    """A temp dir (``prefix`` + random) with ZooKeeper and one broker child process for a bench's run.

    The body runs once both answer. Ctrl-C and SIGTERM end it (return code 130), an error is printed
    with the tail of the broker's log (return code 1): neither propagates. Either way ZooKeeper and the
    broker are stopped by pid (a second Ctrl-C does not skip that) and the temp dir is removed unless
    ``keep``.
    """
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    run = BenchRun(tmp, ZooKeeperServer(data_dir=tmp / "zookeeper", client_port=free_port()),
                   Broker(log_dirs=tmp / "logs", log_file=tmp / "broker.log", env=env))

    def on_sigterm(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored (`cmd &`)
    try:
        with console.status("starting ZooKeeper"):
            run.zk.start()
        run.broker.zookeeper_connect = run.zk.connect_string
        with console.status("starting the broker"):
            took = run.broker.start().startup_s
        console.print(f"ZooKeeper {run.zk.connect_string} (pid {run.zk.pid}); broker {run.broker.url} "
                      f"(pid {run.broker.pid}, up in {took:.1f} s); data in {tmp}")
        yield run
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: stopping the broker and ZooKeeper[/]")
        run.return_code = 130
    except Exception as e:
        console.print(f"[red]error: {type(e).__name__}: {e}[/]")
        if run.broker.process is not None:
            console.print(f"[dim]broker log tail:\n{run.broker.log_tail()}[/]")
        run.return_code = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the cleanup
        run.broker.stop()
        run.zk.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if keep:
            console.print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def package_broker(package: Path | None, tmp: Path, *, extra_path: Sequence[str] = (),
                   extra_env: dict[str, str] | None = None) -> Iterator[BrokerProcess]:
    """ZooKeeper and one broker child process run from ``package`` (the ``platform/`` folder of another
    checkout, linked as ``lakelog`` first on the broker's ``PYTHONPATH``; None: the installed lakelog), with
    their files under ``tmp``; the broker is yielded once both answer, and both are stopped by pid after.

    ``extra_path``: folders put on the broker's ``PYTHONPATH`` before the package (e.g. a ``sitecustomize``).
    ``extra_env``: more environment for the broker.
    """
    path = list(extra_path)
    if package is not None:
        link_dir = tmp / "package"
        link_dir.mkdir()
        (link_dir / "lakelog").symlink_to(package.resolve())
        path.append(str(link_dir))
    env = dict(extra_env or {})
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    zk = ZooKeeperServer(data_dir=tmp / "zookeeper", client_port=free_port())
    broker = BrokerProcess(zookeeper_connect="", log_dirs=tmp / "logs", log_file=tmp / "broker.log", new_session=True,
                           extra_env=env)
    try:
        zk.start()
        broker.zookeeper_connect = zk.connect_string
        broker.start()
        yield broker
    finally:
        broker.stop()
        zk.stop()


def process_cpu(pid: int) -> float:
    """user + system CPU seconds of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def process_tree_cpu(pid: int) -> float:
    """user + system CPU seconds so far of process ``pid``, of its live children and of the children it
    waited for (``cutime``/``cstime``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15]) / CLK_TCK
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == pid:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                child = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(child[1]) == pid:
            total += (int(child[11]) + int(child[12])) / CLK_TCK
    return total


def process_cpu_split(pid: int) -> tuple[float, float]:
    """CPU seconds of a Python process's (main thread, other threads named ``python*``); see
    :meth:`Broker.cpu_split`."""
    loop = workers = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        if task.name == str(pid):
            loop = cpu
        elif comm.startswith("python"):
            workers += cpu
    return loop, workers


def py_spy_executable() -> str | None:
    """``py-spy`` on PATH or beside this Python (the venv's ``bin/``), else None."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else None


class PySpy:
    """``py-spy record`` of the broker during one scenario (``out_dir`` None: does nothing).

    Args:
        out_dir: where the recordings go, one file per :meth:`start` name.
        pid: the broker's pid.
        fmt: ``flamegraph`` (``.svg``), ``raw`` (collapsed stacks, ``.txt``) or ``speedscope`` (``.json``).
        native: ``--native`` (C/Rust frames too; pauses the broker for every sample).
        gil: ``--gil`` (only the thread holding the GIL).
        rate: samples per second.
    """

    def __init__(self, out_dir: Path | None, pid: int, fmt: str = "flamegraph", native: bool = False,
                 gil: bool = False, rate: int = 200) -> None:
        self.out_dir, self.pid, self.fmt, self.native, self.gil, self.process = out_dir, pid, fmt, native, gil, None
        self.rate = rate
        self.output: Path | None = None

    def start(self, name: str) -> None:
        if self.out_dir is None:
            return
        exe = py_spy_executable()
        if exe is None:
            raise RuntimeError("py-spy is not installed: pip install -e '.[bench]' (or pip install py-spy)")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        ext = {"flamegraph": "svg", "raw": "txt"}.get(self.fmt, "json")
        self.output = self.out_dir / f"{name}.{ext}"
        cmd = [exe, "record", "--pid", str(self.pid), "--rate", str(self.rate), "--threads", "--format", self.fmt,
               "-o", str(self.output)]
        # --native must pause the broker for each sample (no --nonblocking): figures get lower
        cmd += ["--native"] if self.native else ["--nonblocking"]
        cmd += ["--gil"] if self.gil else []
        with open(self.out_dir / f"{name}.py-spy.log", "wb") as log:
            self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self.process = None


def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine so far (all processes), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)  # user nice system irq softirq steal
    return busy / CLK_TCK


def client_cpu() -> float:
    """user + system CPU seconds of this process (all its threads) so far."""
    t = os.times()
    return t.user + t.system


def broker_env(items: list[str]) -> dict[str, str]:
    """``--broker-env NAME=VALUE`` items as the broker's environment (``LAKELOG_`` added when missing)."""
    env = {}
    for item in items:
        name, _, value = item.partition("=")
        name = name.upper()
        env[name if name.startswith("LAKELOG_") else f"LAKELOG_{name}"] = value
    return env


def on_off_table(title: str, rows: Sequence[tuple[str, str]], results: dict, *, target_ratio: float) -> Table:
    """A table of paired phases: per row (``(kind, label)`` of ``rows``) the records/s with a setting off and on
    (``results[kind][False]`` / ``[True]``: lists of results with ``rate``, pair by pair), the on / off ratio
    of each pair, their median and whether it meets ``target_ratio``."""
    table = Table(title=title)
    for column in ("row", "off, per pair", "on, per pair", "on / off per pair", "median", f"target ≥ {target_ratio}x"):
        table.add_column(column, justify="left" if column == "row" else "right")
    for kind, label in rows:
        off, on = results[kind][False], results[kind][True]
        ratios = [b.rate / a.rate for a, b in zip(off, on) if a.rate]
        median = statistics.median(ratios) if ratios else 0.0
        table.add_row(label, ", ".join(f"{r.rate:,.0f}" for r in off), ", ".join(f"{r.rate:,.0f}" for r in on),
                      ", ".join(f"{x:.3f}x" for x in ratios), f"{median:.3f}x",
                      "met" if median >= target_ratio else "MISSED")
    return table
