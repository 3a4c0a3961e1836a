"""The embedded ZooKeeper server: a real, standalone ZooKeeper run as a child process.

lakelog needs no ZooKeeper download for local use: the pyspark wheel already ships ZooKeeper
(``pyspark/jars/zookeeper-3.9.x.jar``, ``zookeeper-jute``, and the SLF4J, log4j2, Netty, metrics and
commons-io jars it needs). :class:`ZooKeeperServer` writes a ``zoo.cfg`` from the template
the built-in ``zookeeper.properties`` and runs::

    java -Xmx256m -cp <site-packages>/pyspark/jars/* \\
        org.apache.zookeeper.server.quorum.QuorumPeerMain <data_dir>/zoo.cfg

with the machine's Java (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``). The server logs at INFO to
one file (``<data_dir>/zookeeper.log`` by default) through the built-in ``log4j2-zookeeper.properties``.

The JVM never outlives the process that started it: on Linux it gets SIGTERM when its parent dies
(:func:`lakelog.processes.spawn`), and it is stopped at interpreter exit. Its pid is kept in
``<data_dir>/zookeeper.pid``; a server started on a data dir whose ZooKeeper was left behind (its
parent died on a system without the death signal, or the signal is still on its way) stops that one
first, after checking by ``/proc/PID/cmdline`` that the pid is our ZooKeeper for this very data dir.

Example::

    with ZooKeeperServer(data_dir=Path("data/zookeeper"), client_port=free_port()) as zk:
        client = KazooClient(hosts=zk.connect_string)

A node of an ensemble is the same server given its ``myid`` and every server of the ensemble
(``quorum``, :class:`QuorumServer`); :class:`lakelog.runtime.zookeeper_ensemble.ZooKeeperEnsemble` runs
three or five of them on one machine, and ``lakelog zookeeper start --myid N --server ...`` one per host.
A ``zoo.cfg`` of your own runs as written (:meth:`ZooKeeperServer.from_config_file`).
"""

from __future__ import annotations

import atexit
import errno
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from lakelog.config import read_properties
from lakelog.errors import LakelogError
from lakelog.processes import log_since, spawn, stop_child
from lakelog.replication.errors import ZooKeeperStartError
# zoo.cfg and the pid file live in zookeeper_files.
from lakelog.runtime.zookeeper_files import (
    MAIN_CLASS,
    PID_FILE_NAME,
    ZOOKEEPER_LOG4J2_CONFIG,
    QuorumServer,
    ZooKeeperPidFile,
    write_config,
    write_myid,
)

__all__ = [
    "MAIN_CLASS",
    "PID_FILE_NAME",
    "QuorumServer",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "find_java",
    "four_letter_word",
    "free_port",
    "zookeeper_classpath",
]

# Four-letter words the template whitelists; start() relies on ruok and srvr.
_NOT_SERVING = "not currently serving requests"
_LOG_TAIL_LINES = 40
_LOG_TAIL_CHARS = 6000
_POLL_INTERVAL_S = 0.05
_PROBE_LINE = re.compile(r"Processing (ruok|srvr) command from")
# The first line of a Java stack trace: "java.net.BindException: Address already in use".
_JAVA_EXCEPTION = re.compile(r"^[\w.$]+(?:Exception|Error)(?::.*)?$", re.MULTILINE)

# Servers started by this process and not stopped yet, stopped at interpreter exit so no JVM outlives
# its parent's normal exit (the JVM runs in its own process group, so a Ctrl-C in a terminal does not
# reach it). A strong reference: a server dropped without stop() is still stopped at exit.
_RUNNING: "set[ZooKeeperServer]" = set()


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (bind port 0, read it, close the socket).

    Another process may take the port before it is used; good enough for tests and local setups.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_java() -> str:
    """Path of the ``java`` executable: ``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else ``java`` on PATH.

    Raises :class:`ZooKeeperStartError` when JAVA_HOME is set but holds no ``bin/java``, or when no
    ``java`` is on PATH.
    """
    exe = "java.exe" if os.name == "nt" else "java"
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise ZooKeeperStartError(
            f"JAVA_HOME is set to {java_home!r}, but {candidate} is not an executable. The embedded "
            "ZooKeeper needs Java 17 or newer (the same Java PySpark 4 uses): fix or unset JAVA_HOME."
        )
    found = shutil.which(exe)
    if found is None:
        raise ZooKeeperStartError(
            "Java not found: JAVA_HOME is not set and there is no 'java' on PATH. The embedded ZooKeeper "
            "needs Java 17 or newer (the same Java PySpark 4 uses); install one (e.g. apt-get install "
            "openjdk-17-jre-headless) or set JAVA_HOME, or point zookeeper.connect at a running "
            "ZooKeeper instead."
        )
    return found


def pinned_pyspark() -> str:
    """The pyspark requirement lakelog is installed with, e.g. ``"pyspark==4.2.0"`` (its ``pyproject.toml``).

    Read from the installed lakelog's metadata, so messages name the version its ZooKeeper jars were
    checked with; ``"pyspark"`` when lakelog's metadata is not there (running from a source tree).
    """
    try:
        requires = importlib.metadata.requires("lakelog") or []
    except importlib.metadata.PackageNotFoundError:
        return "pyspark"
    for requirement in requires:
        if re.match(r"pyspark\s*[=<>!~]", requirement):
            return requirement.split(";")[0].replace(" ", "")
    return "pyspark"


def _pyspark_jars_dir() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ZooKeeperStartError(
            "pyspark is not installed: the embedded ZooKeeper runs from the jars in the pyspark wheel "
            f"(pip install '{pinned_pyspark()}'), or point zookeeper.connect at a running ZooKeeper."
        )
    for location in spec.submodule_search_locations:
        jars = Path(location) / "jars"
        if jars.is_dir():
            return jars
    raise ZooKeeperStartError(
        f"pyspark at {list(spec.submodule_search_locations)} has no jars/ folder; the embedded ZooKeeper "
        "needs the jars of the pyspark wheel."
    )


def zookeeper_classpath() -> str:
    """The Java classpath of the embedded ZooKeeper: the ZooKeeper jars of pyspark, then ``pyspark/jars/*``.

    The ZooKeeper jars come first so the JVM finds their classes without scanning the other ~200 jars;
    the wildcard brings what ZooKeeper depends on (SLF4J, log4j2, Netty, metrics, commons-io) at the
    versions Spark tested together. Raises :class:`ZooKeeperStartError` when pyspark or its ZooKeeper
    jar is missing.
    """
    jars = _pyspark_jars_dir()
    zk_jars = sorted(p for p in jars.glob("zookeeper-*.jar") if p.name[len("zookeeper-"):][:1].isdigit())
    jute_jars = sorted(jars.glob("zookeeper-jute-*.jar"))
    if not zk_jars or not jute_jars:
        raise ZooKeeperStartError(
            f"No zookeeper-<version>.jar and zookeeper-jute-<version>.jar in {jars}: this pyspark does not "
            f"ship ZooKeeper. Install '{pinned_pyspark()}', or point zookeeper.connect at a running ZooKeeper."
        )
    entries = [str(zk_jars[-1]), str(jute_jars[-1]), str(jars / "*")]
    return os.pathsep.join(entries)


def _probe_host(host: str) -> str:
    """The address to reach a server bound to ``host`` (a wildcard address is reached via loopback)."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "::1"
    return host


def four_letter_word(host: str, port: int, word: str, *, timeout_s: float = 2.0) -> str:
    """Send a ZooKeeper four-letter word (``ruok``, ``srvr``, ``stat``, ``mntr``) and return the reply.

    ``timeout_s`` (seconds) bounds the connect and each read. Raises :class:`OSError` when the server
    cannot be reached (refused, timed out). A word the server does not whitelist answers
    ``"<word> is not executed because it is not in the whitelist."``.
    """
    if len(word) != 4:
        raise ValueError(f"A four-letter word has four letters, not {word!r}")
    with socket.create_connection((_probe_host(host), port), timeout=timeout_s) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperServer:
    """A standalone ZooKeeper server run from the pyspark jars as a child process.

    Args (keyword-only):
        data_dir: Directory of the server's data (snapshots and transaction log under ``version-2/``),
            its generated ``zoo.cfg``, its pid file ``zookeeper.pid`` (:attr:`pid_file`, while it runs)
            and, by default, its log. Created if missing. Keep it to keep the data: a server started
            again on the same directory has every znode it had. One running server per directory.
        client_port: TCP port clients connect to (1-65535). Default: 2181.
        host: Interface the client port binds to (``clientPortAddress``). Default: 127.0.0.1.
        tick_time_ms: ZooKeeper's tick in milliseconds; client session timeouts must be 2 to 20 ticks.
            Default: 2000.
        max_client_cnxns: Max concurrent connections from one IP address; 0 = unlimited. Default: 0.
        log_file: Where the server's log and the JVM's stdout/stderr go (appended). Default:
            ``data_dir/zookeeper.log``.
        heap_mb: Max Java heap (``-Xmx``) in MiB. Default: 256.
        myid: This server's id in its ensemble (1-255, written to ``data_dir/myid``); with ``quorum``.
            Default: None (standalone).
        quorum: Every server of the ensemble, this one (``myid``) included: ``zoo.cfg`` gets their
            ``server.N`` lines and the node serves once a majority of them runs. Default: none (standalone).
        config_file: A ``zoo.cfg`` of your own, run as written instead of the one lakelog writes (its
            ``dataDir``, ``clientPort`` and ``clientPortAddress`` must be ``data_dir``, ``client_port`` and
            ``host``: :meth:`from_config_file` reads them). Default: ``data_dir/zoo.cfg``, written at start.

    Raises :class:`ValueError` for an out-of-range argument, or a ``quorum`` without ``myid`` among it. Use as a context manager (start on enter
    unless already running, stop on exit) or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        client_port: int = 2181,
        host: str = "127.0.0.1",
        tick_time_ms: int = 2000,
        max_client_cnxns: int = 0,
        log_file: Path | None = None,
        heap_mb: int = 256,
        myid: int | None = None,
        quorum: Sequence[QuorumServer] = (),
        config_file: Path | None = None,
    ) -> None:
        if not 1 <= client_port <= 65535:
            raise ValueError(f"client_port must be 1-65535, not {client_port}")
        if tick_time_ms <= 0:
            raise ValueError(f"tick_time_ms must be > 0, not {tick_time_ms}")
        if max_client_cnxns < 0:
            raise ValueError(f"max_client_cnxns must be >= 0 (0 = unlimited), not {max_client_cnxns}")
        if heap_mb <= 0:
            raise ValueError(f"heap_mb must be > 0, not {heap_mb}")
        if quorum and myid not in {server.myid for server in quorum}:
            raise ValueError(f"myid {myid} is not among the ensemble's servers "
                             f"{sorted(server.myid for server in quorum)}")
        if len({server.myid for server in quorum}) != len(quorum):
            raise ValueError(f"The ensemble's server ids repeat: {sorted(server.myid for server in quorum)}")
        self.data_dir = Path(data_dir).resolve()
        self.client_port = client_port
        self.host = host
        self.tick_time_ms = tick_time_ms
        self.max_client_cnxns = max_client_cnxns
        self.log_file = Path(log_file).resolve() if log_file is not None else self.data_dir / "zookeeper.log"
        self.heap_mb = heap_mb
        self.myid = myid
        self.quorum = tuple(quorum)
        #: whether :meth:`start` writes :attr:`config_file` (False for a ``zoo.cfg`` of your own)
        self.writes_config = config_file is None
        self.config_file = self.data_dir / "zoo.cfg" if config_file is None else Path(config_file).resolve()
        self.pid_file = self.data_dir / PID_FILE_NAME
        self._pid_record = ZooKeeperPidFile(self.pid_file, config_file=self.config_file, data_dir=self.data_dir)
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @classmethod
    def from_config_file(cls, config_file: Path, *, myid: int | None = None, **kwargs) -> "ZooKeeperServer":
        """A server that runs the ``zoo.cfg`` ``config_file`` as written (ZooKeeper's own format).

        Its ``dataDir``, ``clientPort`` (default 2181) and ``clientPortAddress`` (default 127.0.0.1) are read
        from the file; ``myid`` (1-255), when given, is written to ``dataDir/myid`` at start (a file with
        ``server.N`` lines needs one there). ``kwargs``: the other constructor arguments (``log_file``,
        ``heap_mb``).

        Raises:
            ZooKeeperStartError: the file cannot be read, has no ``dataDir``, or a ``clientPort`` that is
                not a number.
        """
        try:
            props = read_properties(config_file)
        except LakelogError as e:
            raise ZooKeeperStartError(f"Cannot read the ZooKeeper config {config_file}: {e}") from e
        if not props.get("dataDir"):
            raise ZooKeeperStartError(f"{config_file} has no dataDir: ZooKeeper needs one (dataDir=/var/lib/zookeeper)")
        try:
            client_port = int(props.get("clientPort", "2181"))
        except ValueError:
            raise ZooKeeperStartError(f"{config_file}: clientPort must be a port number, "
                                      f"not {props['clientPort']!r}") from None
        quorum = tuple(QuorumServer.parse(f"{key}={value.split(';')[0]}") for key, value in props.items()
                       if re.fullmatch(r"server\.\d+", key))
        data_dir = Path(props["dataDir"])
        if not data_dir.is_absolute():
            data_dir = Path(config_file).resolve().parent / data_dir
        server = cls(data_dir=data_dir, client_port=client_port, host=props.get("clientPortAddress", "127.0.0.1"),
                     config_file=config_file, **kwargs)
        server.myid, server.quorum = myid, quorum
        return server

    # ------------------------------------------------------------------ properties

    @property
    def pid(self) -> int | None:
        """Process id of the server's JVM, or None before the first :meth:`start`."""
        return self._process.pid if self._process is not None else None

    @property
    def connect_string(self) -> str:
        """The ``host:port`` a client (kazoo, ``zookeeper.connect``) connects to; a wildcard host reads as loopback."""
        return f"{_probe_host(self.host)}:{self.client_port}"

    def is_running(self) -> bool:
        """True while the server's JVM is alive (started and not exited), whether or not it serves yet."""
        return self._process is not None and self._process.poll() is None

    # ------------------------------------------------------------------ lifecycle

    def write_config(self) -> Path:
        """Write ``data_dir/zoo.cfg`` from the built-in ``zookeeper.properties`` and return its path.

        Raises :class:`ZooKeeperStartError` when the template is missing or has an unknown placeholder.
        """
        return write_config(self.config_file, data_dir=self.data_dir, client_port=self.client_port,
                            host=self.host, tick_time_ms=self.tick_time_ms, max_client_cnxns=self.max_client_cnxns,
                            myid=self.myid, quorum=self.quorum)

    def command(self) -> list[str]:
        """The ``java`` command line that runs the server (resolves Java and the classpath).

        Raises :class:`ZooKeeperStartError` when Java or the ZooKeeper jars are missing.
        """
        return [
            find_java(),
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            # ZooKeeper would register log4j 1.x JMX beans through Spark's log4j-1.2-api bridge; they
            # control nothing here (logging is log4j2) and log a DEBUG line past the INFO level.
            "-Dzookeeper.jmx.log4j.disable=true",
            f"-Dlog4j2.configurationFile={ZOOKEEPER_LOG4J2_CONFIG}",
            f"-Dzookeeper.log.dir={self.log_file.parent}",
            f"-Dzookeeper.log.file={self.log_file.name}",
            "-cp",
            zookeeper_classpath(),
            MAIN_CLASS,
            str(self.config_file),
        ]

    def start(self, *, timeout_s: float = 30.0) -> None:
        """Start the server and wait until it serves clients.

        First stops a ZooKeeper left behind on this data dir (see :meth:`reclaim`). Then writes
        ``zoo.cfg``, launches the JVM in its own process group (stdout and stderr appended to
        ``log_file``) so that it gets SIGTERM when this process dies (Linux), records its pid in
        :attr:`pid_file`, and polls the client port until ``ruok`` answers ``imok`` and ``srvr``
        reports a serving server. ``timeout_s`` (seconds) bounds the wait.

        Raises :class:`ZooKeeperStartError` (message ends with the tail of the log) when Java or the jars
        are missing, the data dir is in use by a ZooKeeper whose parent still runs, the client port is
        already in use, the JVM exits, or it does not serve within ``timeout_s``; the JVM is stopped
        before the error is raised. Raises :class:`RuntimeError` if this server is already running.

        A node of an ensemble serves only once a majority of the ensemble runs: start the nodes with
        :meth:`launch`, then :meth:`wait_until_serving` on each (what ``ZooKeeperEnsemble.start`` does).
        """
        deadline = time.monotonic() + timeout_s
        self.launch()
        self.wait_until_serving(timeout_s=max(deadline - time.monotonic(), 0.0))

    def launch(self) -> None:
        """The first half of :meth:`start`: launch the JVM and record its pid, without waiting for it to serve.

        Raises what :meth:`start` raises, but for the wait.
        """
        if self.is_running():
            raise RuntimeError(f"ZooKeeper server (pid {self.pid}) is already running on {self.connect_string}")
        cmd = self.command()
        self.reclaim()
        self._check_port_free()
        if self.writes_config:
            self.write_config()
        elif self.myid is not None:
            write_myid(self.data_dir, self.myid)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self._log_offset = log.tell()
            log.write(
                f"--- lakelog: starting ZooKeeper on {self.host}:{self.client_port} at "
                f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(cmd)}\n".encode()
            )
            log.flush()
            popen_kwargs: dict = {}
            if os.name == "nt":
                popen_kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
            else:
                popen_kwargs["start_new_session"] = True
            try:
                # SIGTERM when we die: the JVM exits at once (its shutdown hooks only flush the log).
                self._process = spawn(
                    cmd, death_signal=signal.SIGTERM, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, cwd=self.data_dir, close_fds=True, **popen_kwargs,
                )
            except OSError as e:
                raise ZooKeeperStartError(f"Cannot run {cmd[0]}: {e}") from e
        _RUNNING.add(self)
        try:
            self._pid_record.write(self._process.pid, client_port=self.client_port)
        except BaseException:
            self.stop()
            raise

    def wait_until_serving(self, *, timeout_s: float = 30.0) -> None:
        """The second half of :meth:`start`: poll the client port until the server serves (``ruok`` answers
        ``imok``, ``srvr`` reports a loaded database). ``timeout_s`` (seconds) bounds the wait.

        Raises :class:`ZooKeeperStartError` (with the log's tail) when the JVM exits or does not serve within
        ``timeout_s``; the JVM is stopped first.
        """
        try:
            self._wait_until_serving(time.monotonic() + timeout_s, timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self, *, timeout_s: float = 10.0) -> None:
        """Stop the server: SIGTERM to its pid, SIGKILL if it is still alive after ``timeout_s`` seconds.

        Waits for the process to end (and reaps it). Does nothing if the server is not running. Data
        written before the stop stays in ``data_dir``.
        """
        process = self._process
        if process is None:
            return
        stop_child(process, timeout_s=timeout_s)
        self._pid_record.remove(process.pid)
        _RUNNING.discard(self)

    def kill(self) -> None:
        """SIGKILL the server's JVM (a crash: no shutdown hook runs) and reap it; its data stays in ``data_dir``.

        Does nothing if the server is not running. :meth:`start` starts it again on the same data dir.
        """
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
            process.wait()
        self._pid_record.remove(process.pid)
        _RUNNING.discard(self)

    def mode(self) -> str | None:
        """What ``srvr`` reports of the server's role: ``"leader"``, ``"follower"`` or ``"standalone"``; None
        while it does not serve (not running, or a node without a quorum)."""
        try:
            reply = four_letter_word(self.host, self.client_port, "srvr", timeout_s=1.0)
        except OSError:
            return None
        match = re.search(r"^Mode: (\w+)", reply, re.MULTILINE)
        return match.group(1) if match and _NOT_SERVING not in reply else None

    def reclaim(self, *, timeout_s: float = 10.0) -> int | None:
        """Stop a ZooKeeper left behind on this data dir by a process that died; remove a stale pid file.

        A ZooKeeper named by :attr:`pid_file` is stopped only when ``/proc/PID/cmdline`` shows it runs on
        this data dir's ``zoo.cfg`` and its parent is no longer the process that started it (SIGTERM,
        then SIGKILL after ``timeout_s`` seconds); see :meth:`ZooKeeperPidFile.reclaim`. :meth:`start`
        calls this first.

        Returns:
            The pid of the ZooKeeper it stopped, or None when there was none.

        Raises:
            ZooKeeperStartError: the ZooKeeper of this data dir is still the child of a running process
                (another ``lakelog`` uses this data dir), or it could not be stopped.
        """
        return self._pid_record.reclaim(timeout_s=timeout_s)

    def __enter__(self) -> "ZooKeeperServer":
        if not self.is_running():
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"ZooKeeperServer({self.connect_string}, data_dir={str(self.data_dir)!r}, {state})"

    # ------------------------------------------------------------------ internals

    def _check_port_free(self) -> None:
        # A server already listening there would answer our ruok and pass for ours; fail fast instead.
        try:
            infos = socket.getaddrinfo(self.host or None, self.client_port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        except socket.gaierror as e:
            raise ZooKeeperStartError(f"Cannot resolve ZooKeeper host {self.host!r}: {e}") from e
        family, socktype, proto, _, address = infos[0]
        with socket.socket(family, socktype, proto) as s:
            if os.name != "nt":
                # As Java's ServerSocket does: a port in TIME_WAIT (a server just stopped) is free.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(address)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise ZooKeeperStartError(
                        f"Cannot start ZooKeeper on {self.host}:{self.client_port}: the port is already in "
                        "use by another process (another ZooKeeper?). Stop it, or choose another "
                        "client port."
                    ) from e
                raise ZooKeeperStartError(
                    f"Cannot start ZooKeeper on {self.host}:{self.client_port}: {e.strerror or e}"
                ) from e

    def _wait_until_serving(self, deadline: float, timeout_s: float) -> None:
        assert self._process is not None
        while True:
            code = self._process.poll()
            if code is not None:
                tail = self._log_tail()
                cause = _JAVA_EXCEPTION.search(tail)
                raise ZooKeeperStartError(
                    f"ZooKeeper on {self.host}:{self.client_port} exited with code {code} during start"
                    + (f": {cause.group(0).strip()}" if cause else "")
                    + f". Log {self.log_file}:\n{tail}"
                )
            if self._serving():
                if self._process.poll() is None:
                    return
                continue  # it died right after answering: report the exit above
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(
                    f"ZooKeeper on {self.host}:{self.client_port} did not serve within {timeout_s:g} s "
                    f"(pid {self._process.pid}, stopped). Log {self.log_file}:\n{self._log_tail()}"
                )
            time.sleep(_POLL_INTERVAL_S)

    def _serving(self) -> bool:
        try:
            if four_letter_word(self.host, self.client_port, "ruok", timeout_s=1.0).strip() != "imok":
                return False
            # ruok answers as soon as the port is open; srvr tells whether the database is loaded.
            reply = four_letter_word(self.host, self.client_port, "srvr", timeout_s=1.0)
        except OSError:
            return False
        return _NOT_SERVING not in reply and "Zookeeper version" in reply

    def _log_tail(self) -> str:
        text = log_since(self.log_file, self._log_offset)  # or why it cannot be read
        # Leave out start()'s own probes: a server that answers ruok but never serves logs two of
        # them every poll, and they would push the real error out of the tail.
        lines = [line for line in text.splitlines() if not _PROBE_LINE.search(line)][-_LOG_TAIL_LINES:]
        tail = "\n".join(lines)
        if len(tail) > _LOG_TAIL_CHARS:
            tail = "..." + tail[-_LOG_TAIL_CHARS:]
        return tail or "(the log is empty)"


@atexit.register
def _stop_all_at_exit() -> None:
    for server in list(_RUNNING):
        try:
            server.stop(timeout_s=5.0)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
