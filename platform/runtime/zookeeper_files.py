"""The embedded ZooKeeper's files in its data dir: the ``zoo.cfg`` it runs on and its pid file.

:func:`write_config` renders the built-in ``zookeeper.properties`` (:mod:`lakelog.defaults`) into ``<data_dir>/zoo.cfg``;
for a node of an ensemble it adds the ``server.N`` lines (:class:`QuorumServer`) and writes ``<data_dir>/myid``,
as ZooKeeper's Administrator's Guide lays out a replicated server.
:class:`ZooKeeperPidFile` keeps ``<data_dir>/zookeeper.pid`` (``{"pid": <JVM>, "parent_pid": <the
process that started it>, "client_port": <port>}``) and reclaims a server left behind on the data dir
by a process that died. :class:`lakelog.runtime.zookeeper_server.ZooKeeperServer` uses both.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lakelog.config import default_file
from lakelog.processes import parent_pid, process_alive, process_cmdline, stop_pid
from lakelog.replication.errors import ZooKeeperStartError

__all__ = ["INIT_LIMIT_TICKS", "MAIN_CLASS", "MYID_FILE_NAME", "PID_FILE_NAME", "QuorumServer", "SYNC_LIMIT_TICKS",
           "ZOOKEEPER_CONFIG_TEMPLATE", "ZOOKEEPER_LOG4J2_CONFIG", "ZooKeeperPidFile", "write_config",
           "write_myid"]

# lakelog's built-in defaults (package data of lakelog.defaults).
ZOOKEEPER_CONFIG_TEMPLATE = default_file("zookeeper.properties")
ZOOKEEPER_LOG4J2_CONFIG = default_file("log4j2-zookeeper.properties")

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

#: Name of the pid file in the data dir: ``{"pid": <JVM>, "parent_pid": <the process that started it>,
#: "client_port": <port>}``.
PID_FILE_NAME = "zookeeper.pid"

#: The file in the data dir of an ensemble's node that holds its server id (ZooKeeper's own name).
MYID_FILE_NAME = "myid"

#: An ensemble's ``initLimit`` and ``syncLimit`` (ticks): how long a follower may take to connect and sync
#: to the leader, and how far it may lag behind it (ZooKeeper's Administrator's Guide uses 10 and 5).
INIT_LIMIT_TICKS = 10
SYNC_LIMIT_TICKS = 5


@dataclass(frozen=True)
class QuorumServer:
    """One server of a ZooKeeper ensemble, as ``zoo.cfg`` names it: ``server.{myid}={host}:{quorum_port}:{election_port}``.

    Attributes:
        myid: the server id (1-255), the number in its data dir's ``myid`` file.
        host: the address the other servers reach it at (its quorum and election ports bind there).
        quorum_port: the port followers connect to the leader on (ZooKeeper's example: 2888).
        election_port: the port of leader election (ZooKeeper's example: 3888).
    """

    myid: int
    host: str
    quorum_port: int
    election_port: int

    def __post_init__(self) -> None:
        if not 1 <= self.myid <= 255:
            raise ValueError(f"A ZooKeeper server id (myid) is 1-255, not {self.myid}")
        for name in ("quorum_port", "election_port"):
            port = getattr(self, name)
            if not 1 <= port <= 65535:
                raise ValueError(f"{name} of server.{self.myid} must be 1-65535, not {port}")

    @classmethod
    def parse(cls, text: str) -> "QuorumServer":
        """Parse ``ID=HOST:QUORUM_PORT:ELECTION_PORT`` (``lakelog zookeeper start --server``), also with a
        leading ``server.``, e.g. ``1=zk1.example.com:2888:3888``.

        Raises:
            ValueError: another shape, a port or id out of range.
        """
        match = re.fullmatch(r"\s*(?:server\.)?(\d+)\s*=\s*([^:\s]+|\[[0-9a-fA-F:]+\]):(\d+):(\d+)\s*", text)
        if match is None:
            raise ValueError(f"A ZooKeeper server is ID=HOST:QUORUM_PORT:ELECTION_PORT (e.g. 1=zk1:2888:3888), "
                             f"not {text!r}")
        myid, host, quorum_port, election_port = match.groups()
        return cls(int(myid), host, int(quorum_port), int(election_port))

    def config_line(self) -> str:
        """Its ``zoo.cfg`` line, e.g. ``server.1=127.0.0.1:2888:3888``."""
        return f"server.{self.myid}={self.host}:{self.quorum_port}:{self.election_port}"


def _render_template(template: str, values: dict[str, object], *, source: Path) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ZooKeeperStartError(f"{source}: unknown placeholder {{{name}}}; known: {sorted(values)}")
        return str(values[name])

    return re.sub(r"\{([a-z_]+)\}", fill, template)


def _properties_escape(value: str) -> str:
    # Java .properties treats backslash as an escape character.
    return value.replace("\\", "\\\\")


def write_config(config_file: Path, *, data_dir: Path, client_port: int, host: str, tick_time_ms: int,
                 max_client_cnxns: int, myid: int | None = None, quorum: Sequence[QuorumServer] = ()) -> Path:
    """Write ``config_file`` (``zoo.cfg``) from the built-in ``zookeeper.properties`` and return its path.

    With ``quorum`` (every server of the ensemble, this one included as ``myid``), the file also gets
    ``initLimit``, ``syncLimit`` and one ``server.N`` line per server, and ``data_dir/myid`` holds
    ``myid``: the node runs replicated. Without, it runs standalone.

    Creates ``data_dir``. Raises :class:`ZooKeeperStartError` when the template is missing or has an
    unknown placeholder.
    """
    try:
        template = ZOOKEEPER_CONFIG_TEMPLATE.read_text()
    except OSError as e:
        raise ZooKeeperStartError(f"Cannot read the ZooKeeper config template {ZOOKEEPER_CONFIG_TEMPLATE}: {e}") from e
    text = _render_template(
        template,
        {
            "data_dir": _properties_escape(str(data_dir)),
            "client_port": client_port,
            "client_port_address": host,
            "tick_time_ms": tick_time_ms,
            "max_client_cnxns": max_client_cnxns,
        },
        source=ZOOKEEPER_CONFIG_TEMPLATE,
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    if quorum:
        text += (f"\n# The ensemble (written by lakelog): {len(quorum)} servers; this one is server.{myid} "
                 f"(data dir file {MYID_FILE_NAME}).\n"
                 f"initLimit={INIT_LIMIT_TICKS}\nsyncLimit={SYNC_LIMIT_TICKS}\n"
                 + "".join(server.config_line() + "\n" for server in quorum))
        write_myid(data_dir, myid)
    config_file.write_text(text)
    return config_file


def write_myid(data_dir: Path, myid: int | None) -> Path:
    """Write ``data_dir/myid`` (ZooKeeper reads a replicated server's id there) and return its path.

    Raises :class:`ValueError` when ``myid`` is not 1-255.
    """
    if myid is None or not 1 <= myid <= 255:
        raise ValueError(f"A node of an ensemble needs a server id (myid) of 1-255, not {myid}")
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / MYID_FILE_NAME
    path.write_text(f"{myid}\n")
    return path


class ZooKeeperPidFile:
    """The pid file ``path`` of the ZooKeeper that runs on ``config_file`` (its data dir's ``zoo.cfg``)."""

    def __init__(self, path: Path, *, config_file: Path, data_dir: Path) -> None:
        self.path = path
        self.config_file = config_file
        self.data_dir = data_dir

    def is_our_server(self, pid: int) -> bool:
        """Whether process ``pid`` runs ZooKeeper's main class on this data dir's ``zoo.cfg``."""
        args = process_cmdline(pid)
        return args is not None and MAIN_CLASS in args and str(self.config_file) in args

    def write(self, pid: int, *, client_port: int) -> None:
        """Record ``pid`` (started by this process, serving ``client_port``), atomically."""
        record = {"pid": pid, "parent_pid": os.getpid(), "client_port": client_port}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(record) + "\n")
        os.replace(tmp, self.path)

    def remove(self, pid: int) -> None:
        """Remove the pid file if it still names ``pid`` (a later server may have written its own)."""
        try:
            if json.loads(self.path.read_text()).get("pid") == pid:
                self.path.unlink(missing_ok=True)
        except (OSError, ValueError, AttributeError):
            pass

    def reclaim(self, *, timeout_s: float = 10.0) -> int | None:
        """Stop a ZooKeeper left behind on this data dir by a process that died; remove a stale pid file.

        Reads the pid file. When its pid is alive and ``/proc/PID/cmdline`` shows our ZooKeeper
        (``QuorumPeerMain``) for this data dir's ``zoo.cfg``, and its parent is no longer the process that
        started it, that JVM is stopped: SIGTERM, then SIGKILL after ``timeout_s`` seconds. A pid file
        naming a dead process, an unrelated process or nothing readable is removed; no other process is
        ever signalled.

        Returns:
            The pid of the ZooKeeper it stopped, or None when there was none.

        Raises:
            ZooKeeperStartError: the ZooKeeper of this data dir is still the child of a running process
                (another ``lakelog`` uses this data dir), or it could not be stopped.
        """
        try:
            record = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            record = None
        pid = record.get("pid") if isinstance(record, dict) else None
        if not isinstance(pid, int) or pid <= 0 or not self.is_our_server(pid) or not process_alive(pid):
            self.path.unlink(missing_ok=True)  # stale
            return None
        owner = record.get("parent_pid")
        if parent_pid(pid) == owner:
            raise ZooKeeperStartError(
                f"The ZooKeeper data dir {self.data_dir} is in use by ZooKeeper pid {pid}, started by pid "
                f"{owner}, which still runs (another lakelog on this data dir?). Stop it, or use another "
                "data dir."
            )
        try:
            gone = stop_pid(pid, timeout_s=timeout_s, still_ours=lambda: self.is_our_server(pid))
        except PermissionError as e:
            raise ZooKeeperStartError(
                f"Cannot stop the ZooKeeper (pid {pid}) left behind on {self.data_dir}: {e}"
            ) from e
        if not gone:
            raise ZooKeeperStartError(
                f"The ZooKeeper (pid {pid}) left behind on {self.data_dir} is still running after SIGKILL."
            )
        self.path.unlink(missing_ok=True)
        return pid
