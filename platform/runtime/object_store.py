"""The embedded object store: a real S3-compatible server (s3proxy) run as a child process.

An S3 lake (``lake.uri=s3://bucket/prefix``) needs an S3 endpoint; for local use and the tests lakelog
runs `s3proxy <https://github.com/gaul/s3proxy>`_ (``org.gaul:s3proxy``, Apache-2.0) on its filesystem
backend (``jclouds.provider=filesystem``: buckets are directories under ``data_dir/buckets``; it
implements S3's conditional writes). Its jars come from Maven Central once, with the machine's Maven::

    mvn dependency:copy-dependencies -f <lakelog.defaults>/s3proxy-pom.xml -DoutputDirectory=<cache>

into ``~/.cache/lakelog/s3proxy-<version>/`` (``$XDG_CACHE_HOME`` honoured), by ``lakelog setup``
(``make install``) or lazily at the first start (:func:`ensure_s3proxy_jars`). The server runs as::

    java -Xmx256m -cp <cache>/* org.gaul.s3proxy.Main --properties <data_dir>/s3proxy.conf

with the machine's Java, logging at INFO to ``data_dir/s3proxy.log``. As the embedded ZooKeeper
(:mod:`lakelog.runtime.zookeeper_server`) it never outlives the process that started it (SIGTERM when
its parent dies, stopped at interpreter exit) and is stopped by pid.

Example::

    with ObjectStoreServer(data_dir=Path("data/s3")) as store:
        store.create_bucket("lake")
        settings = store.lake_settings("s3://lake/cluster-1")   # {"lake.uri": ..., "lake.storage.endpoint": ...}

For production, point ``lake.uri`` and ``lake.storage.*`` at a real object store instead.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import httpx

from lakelog.config import default_file
from lakelog.errors import ObjectStoreStartError, ZooKeeperStartError
from lakelog.processes import log_since, spawn, stop_child
from lakelog.runtime.zookeeper_server import find_java, free_port

__all__ = ["S3PROXY_VERSION", "ObjectStoreServer", "ensure_s3proxy_jars", "s3proxy_jars_dir"]

#: The s3proxy release lakelog runs (the version in ``lakelog/defaults/s3proxy-pom.xml``).
S3PROXY_VERSION = "4.0.0"
MAIN_CLASS = "org.gaul.s3proxy.Main"
#: The file in the jar cache that says the copy finished (a copy interrupted half-way is redone).
_COMPLETE_MARKER = ".complete"
_POLL_INTERVAL_S = 0.1
_LOG_TAIL_CHARS = 4000
_RUNNING: "set[ObjectStoreServer]" = set()


def s3proxy_jars_dir() -> Path:
    """Where s3proxy's jars are cached: ``$XDG_CACHE_HOME/lakelog/s3proxy-<version>/`` (default
    ``~/.cache/lakelog/...``)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "lakelog" / f"s3proxy-{S3PROXY_VERSION}"


def ensure_s3proxy_jars(*, timeout_s: float = 900.0) -> Path:
    """The directory of s3proxy's jars, fetched from Maven Central with ``mvn`` when not cached yet.

    Runs ``mvn -B -q dependency:copy-dependencies`` on the built-in ``s3proxy-pom.xml`` into a temporary
    directory beside the cache and renames it into place, so an interrupted copy is never taken for a
    complete one. ``timeout_s`` (seconds) bounds the Maven run.

    Raises:
        ObjectStoreStartError: Maven is not installed, or it failed (the message ends with its output).
    """
    target = s3proxy_jars_dir()
    if (target / _COMPLETE_MARKER).exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ObjectStoreStartError(
            f"Maven not found: the embedded object store fetches s3proxy {S3PROXY_VERSION}'s jars from Maven "
            "Central with 'mvn' once (into " + str(target) + "). Install Maven (e.g. apt-get install maven), "
            "or point lake.uri and lake.storage.* at a running object store instead.")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [mvn, "-B", "-q", "-f", str(default_file("s3proxy-pom.xml")), "dependency:copy-dependencies",
           f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        shutil.rmtree(partial, ignore_errors=True)
        raise ObjectStoreStartError(f"Fetching s3proxy's jars with Maven took more than {timeout_s:g} s") from e
    if done.returncode != 0 or not any(partial.glob("s3proxy-*.jar")):
        shutil.rmtree(partial, ignore_errors=True)
        output = (done.stdout + done.stderr)[-_LOG_TAIL_CHARS:]
        raise ObjectStoreStartError(
            f"Fetching s3proxy's jars with Maven failed (exit {done.returncode}): {' '.join(cmd)}\n{output}")
    (partial / _COMPLETE_MARKER).write_text(S3PROXY_VERSION)
    try:
        partial.rename(target)
    except OSError:  # another process finished the same copy first
        shutil.rmtree(partial, ignore_errors=True)
    return target


class ObjectStoreServer:
    """An s3proxy server on the filesystem backend, run from the cached jars as a child process.

    Args (keyword-only):
        data_dir: Directory of its buckets (``data_dir/buckets/<bucket>/...``), its ``s3proxy.conf``, its
            pid file ``s3proxy.pid`` and, by default, its log. Created if missing; keep it to keep the
            objects.
        port: TCP port of its S3 endpoint. Default: a free one (chosen at construction).
        host: Interface it binds to. Default: 127.0.0.1.
        access_key_id: The one identity it accepts (AWS signature v2 or v4). Default: ``lakelog``.
        secret_access_key: That identity's secret. Default: a random one per server.
        log_file: Where the server's log goes (appended). Default: ``data_dir/s3proxy.log``.
        heap_mb: Max Java heap (``-Xmx``) in MiB. Default: 256.

    Use as a context manager (start on enter, stop on exit) or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, *, data_dir: Path, port: int | None = None, host: str = "127.0.0.1",
                 access_key_id: str = "lakelog", secret_access_key: str | None = None,
                 log_file: Path | None = None, heap_mb: int = 256) -> None:
        if port is not None and not 1 <= port <= 65535:
            raise ValueError(f"port must be 1-65535, not {port}")
        if heap_mb <= 0:
            raise ValueError(f"heap_mb must be > 0, not {heap_mb}")
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.host = host
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key or secrets.token_hex(16)
        self.log_file = Path(log_file).resolve() if log_file is not None else self.data_dir / "s3proxy.log"
        self.heap_mb = heap_mb
        self.config_file = self.data_dir / "s3proxy.conf"
        self.buckets_dir = self.data_dir / "buckets"
        self.pid_file = self.data_dir / "s3proxy.pid"
        self.region = "us-east-1"
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def pid(self) -> int | None:
        """Process id of the server's JVM, or None before the first :meth:`start`."""
        return self._process.pid if self._process is not None else None

    @property
    def endpoint_url(self) -> str:
        """``http://host:port``: the S3 endpoint (``lake.storage.endpoint``)."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"http://{host}:{self.port}"

    def is_running(self) -> bool:
        """True while the server's JVM is alive."""
        return self._process is not None and self._process.poll() is None

    def storage_settings(self) -> dict[str, str]:
        """The ``lake.storage.*`` broker settings that reach this server (endpoint, region, credentials,
        path-style access, plain HTTP), Kafka-named as in a properties file."""
        return {
            "lake.storage.endpoint": self.endpoint_url,
            "lake.storage.region": self.region,
            "lake.storage.access.key.id": self.access_key_id,
            "lake.storage.secret.access.key": self.secret_access_key,
            "lake.storage.path.style.access": "true",
            "lake.storage.allow.http": "true",
        }

    def lake_settings(self, lake_uri: str) -> dict[str, str]:
        """``lake.uri`` = ``lake_uri`` (``s3://bucket/prefix``) and :meth:`storage_settings`: what every broker
        of a cluster on this store gets."""
        return {"lake.uri": lake_uri, **self.storage_settings()}

    def command(self) -> list[str]:
        """The ``java`` command line of the server (fetches the jars first when needed).

        Raises :class:`ObjectStoreStartError` when Java, Maven or the jars are missing.
        """
        try:
            java = find_java()
        except ZooKeeperStartError as e:  # the same Java rules as the embedded ZooKeeper's
            raise ObjectStoreStartError(str(e).replace("embedded ZooKeeper", "embedded object store")) from e
        jars = ensure_s3proxy_jars()
        return [java, f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                f"-Dlogback.configurationFile={default_file('logback-s3proxy.xml')}",
                "-cp", str(jars / "*"), MAIN_CLASS, "--properties", str(self.config_file)]

    def write_config(self) -> Path:
        """Write ``data_dir/s3proxy.conf`` (the filesystem backend under ``data_dir/buckets``, one identity)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.buckets_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"s3proxy.endpoint=http://{self.host}:{self.port}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.access_key_id}",
            f"s3proxy.credential={self.secret_access_key}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.buckets_dir}",
        ]
        self.config_file.write_text("\n".join(lines) + "\n")
        self.config_file.chmod(0o600)  # it holds the secret
        return self.config_file

    def start(self, *, timeout_s: float = 120.0) -> "ObjectStoreServer":
        """Start the server and wait until its endpoint answers HTTP; returns ``self``.

        ``timeout_s`` (seconds) bounds the wait (not the first fetch of the jars).

        Raises:
            ObjectStoreStartError: Java, Maven or the jars missing, the JVM exited, or it did not answer
                within ``timeout_s`` (it is stopped first); the message ends with the tail of its log.
            RuntimeError: this server is already running.
        """
        if self.is_running():
            raise RuntimeError(f"object store (pid {self.pid}) is already running on {self.endpoint_url}")
        cmd = self.command()
        self._check_port_free()
        self.write_config()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self._log_offset = log.tell()
            log.write(f"--- lakelog: starting s3proxy on {self.endpoint_url} at "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            log.flush()
            try:
                self._process = spawn(cmd, death_signal=signal.SIGTERM, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, cwd=self.data_dir, close_fds=True,
                                      start_new_session=True)
            except OSError as e:
                raise ObjectStoreStartError(f"Cannot run {cmd[0]}: {e}") from e
        _RUNNING.add(self)
        self.pid_file.write_text(f"{self._process.pid}\n")
        try:
            self._wait_until_serving(time.monotonic() + timeout_s, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, *, timeout_s: float = 10.0) -> None:
        """Stop the server: SIGTERM to its pid, SIGKILL after ``timeout_s`` seconds; waits for it to end.
        Does nothing if it is not running. The buckets stay in ``data_dir``."""
        process = self._process
        if process is None:
            return
        stop_child(process, timeout_s=timeout_s)
        self.pid_file.unlink(missing_ok=True)
        _RUNNING.discard(self)

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (S3 CreateBucket through pyarrow's S3 client; an existing bucket is kept).

        Raises :class:`OSError` when the server refuses it (a bad name: S3's bucket naming rules).
        """
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(access_key=self.access_key_id, secret_key=self.secret_access_key,
                               region=self.region, endpoint_override=self.endpoint_url,
                               allow_bucket_creation=True, force_virtual_addressing=False)
        if fs.get_file_info(name).type == pafs.FileType.NotFound:
            fs.create_dir(name)

    def __enter__(self) -> "ObjectStoreServer":
        if not self.is_running():
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"ObjectStoreServer({self.endpoint_url}, data_dir={str(self.data_dir)!r}, {state})"

    def _check_port_free(self) -> None:
        # a server already listening there would answer the probe and pass for this one: fail fast instead
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Java: a port in TIME_WAIT is free
            try:
                s.bind((self.host, self.port))
            except OSError as e:
                raise ObjectStoreStartError(
                    f"Cannot start the object store on {self.host}:{self.port}: {e.strerror or e} (another "
                    f"server there?). Stop it or choose another port. Log {self.log_file}") from e

    def _wait_until_serving(self, deadline: float, timeout_s: float) -> None:
        assert self._process is not None
        with httpx.Client(timeout=1.0) as http:
            while True:
                code = self._process.poll()
                if code is not None:
                    raise ObjectStoreStartError(f"s3proxy on {self.endpoint_url} exited with code {code} during "
                                                f"start. Log {self.log_file}:\n{self._log_tail()}")
                try:
                    # Any S3 answer (403 to an unsigned request) means it serves.
                    if http.get(self.endpoint_url + "/").status_code < 500:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() >= deadline:
                    raise ObjectStoreStartError(
                        f"s3proxy on {self.endpoint_url} did not answer within {timeout_s:g} s (pid "
                        f"{self._process.pid}, stopped). Log {self.log_file}:\n{self._log_tail()}")
                time.sleep(_POLL_INTERVAL_S)

    def _log_tail(self) -> str:
        text = log_since(self.log_file, self._log_offset)  # or why it cannot be read
        return (text[-_LOG_TAIL_CHARS:] if text else "(the log is empty)").replace(self.secret_access_key, "***")


@atexit.register
def _stop_all_at_exit() -> None:
    for server in list(_RUNNING):
        try:
            server.stop(timeout_s=5.0)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
