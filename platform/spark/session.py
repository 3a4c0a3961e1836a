"""A SparkSession with Delta Lake, configured from lakelog's built-in defaults (:mod:`lakelog.defaults`) (DESIGN.md, "Interfaces users touch").

:func:`session` builds (or returns the running) SparkSession with delta-spark wired in the way
delta-spark's pip package documents (:func:`delta.configure_spark_with_delta_pip`: the Delta jars come
from Maven as ``spark.jars.packages``), the SQL extension and catalog Delta needs, lakelog's Spark
defaults (``spark-defaults.conf``) and log4j2 config (``log4j2.properties``), both in :mod:`lakelog.defaults`.

Delta's JVM jars (``io.delta:delta-spark_4.2_2.13``, see :func:`delta_maven_coordinates`, and its
dependencies: ``delta-storage``, the ``delta-kernel-*`` jars and what they need) are resolved at JVM
start by Spark's Ivy resolver, which looks in this order: ``~/.m2/repository`` (Maven's local
repository), the Ivy cache dir (``spark.jars.ivy``; Spark 4's default is ``~/.ivy2.5.2``, a stable
per-user dir, so lakelog does not set ``spark.jars.ivy``), then Maven Central. A cached resolution
needs no network (checked: a session starts, and the Spark tests pass, in a network namespace with
loopback only); it still costs some Ivy work and prints Ivy's resolution report on stderr at every
JVM start.
:func:`ensure_delta_jars` fills the cache once (e.g. while building an image or in CI set-up), falling
back to ``mvn dependency:get`` into ``~/.m2`` when Spark's resolver can not reach the repository.

Precedence of settings, highest first: ``conf=`` argument; ``master=`` argument; the settings
``spark-submit`` gave a driver it started (``--master``, ``--conf``, ...; see :func:`submitted_conf`);
env ``LAKELOG_SPARK_MASTER`` (``spark.master`` only); the built-in ``spark-defaults.conf``; the defaults below
(``local[*]``, ``spark.sql.session.timeZone=UTC``, ``spark.ui.enabled=false``); Spark's own defaults.

Under ``spark-submit`` the driver's JVM is running before :func:`session` is called, so JVM settings
(``spark.jars.packages``, driver memory and Java options) must be given to ``spark-submit`` itself:
Delta's jars with ``--packages io.delta:delta-spark_4.2_2.13:<delta-spark version>``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import TYPE_CHECKING

from lakelog.config import default_file, read_properties
from lakelog.processes import spawn
from lakelog.spark.errors import DeltaJarsError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SPARK_DEFAULTS_FILE = default_file("spark-defaults.conf")
LOG4J2_FILE = default_file("log4j2.properties")

MASTER_ENV = "LAKELOG_SPARK_MASTER"
DEFAULT_MASTER = "local[*]"

DELTA_SQL_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
SCALA_BINARY_VERSION = "2.13"

#: Settings lakelog applies unless the conf file or the ``conf=`` argument says otherwise.
BUILTIN_DEFAULTS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
}


def delta_version() -> str:
    """Version of the installed ``delta-spark`` pip package (the JVM jars must match it)."""
    return _dist_version("delta-spark")


def spark_minor_version() -> str:
    """``major.minor`` of the installed ``pyspark`` pip package, e.g. ``"4.2"``."""
    return ".".join(_dist_version("pyspark").split(".")[:2])


def delta_maven_coordinates() -> list[str]:
    """Maven coordinates of Delta's JVM jars for the installed delta-spark: ``[delta-spark, delta-storage]``.

    Since Delta 4.1 the delta-spark jar is built once per Spark minor version and its artifact id names
    it: ``io.delta:delta-spark_{spark major.minor}_{scala}:{delta version}``, e.g.
    ``io.delta:delta-spark_4.2_2.13:4.4.0`` for pyspark 4.2.x. This is the name delta-spark's own
    :func:`delta.configure_spark_with_delta_pip` puts in ``spark.jars.packages`` (``delta/pip_utils.py``).
    """
    v = delta_version()
    artifact = f"delta-spark_{spark_minor_version()}_{SCALA_BINARY_VERSION}"
    return [f"io.delta:{artifact}:{v}", f"io.delta:delta-storage:{v}"]


def read_spark_defaults(path: str | Path = SPARK_DEFAULTS_FILE) -> dict[str, str]:
    """Parse a ``spark-defaults.conf`` (Java properties: ``key value``, ``key=value`` or ``key: value``).

    ``#``/``!`` lines are comments; a value starting with ``~`` has it expanded to the home directory
    (Spark itself does not). A missing file gives ``{}``; an unreadable one raises :class:`ConfigError`.
    """
    return {key: _expand_home(value) for key, value in read_properties(path, missing_ok=True).items()}


def _expand_home(value: str) -> str:
    return os.path.expanduser(value) if value == "~" or value.startswith("~/") else value


#: Default stack size of the driver JVM's threads (``-Xss``), unless extraJavaOptions set one.
DRIVER_THREAD_STACK = "16m"


def session_conf(*, master: str | None = None, app_name: str = "lakelog",
                 conf: dict[str, str] | None = None, submitted: dict[str, str] | None = None) -> dict[str, str]:
    """The complete Spark configuration :func:`session` starts with, without starting anything.

    ``submitted`` is what ``spark-submit`` gave the driver (:func:`submitted_conf`): it wins over
    ``LAKELOG_SPARK_MASTER`` and the built-in ``spark-defaults.conf``, so ``spark-submit --master spark://...``
    runs on that master and not on the conf file's ``local[*]``.

    Returns ``{key: value}`` with the precedence described in the module docstring, plus the settings
    Delta needs (``spark.sql.extensions``, ``spark.sql.catalog.spark_catalog``,
    ``spark.jars.packages``) and the log4j2 config file in ``spark.driver.extraJavaOptions``, and
    ``spark.sql.python.filterPushdown.enabled=true`` (the ``lakelog`` source's filter pushdown).
    """
    submitted = dict(submitted or {})
    values: dict[str, str] = dict(BUILTIN_DEFAULTS)
    values.update(read_spark_defaults())
    file_master = values.get("spark.master")
    values.update(submitted)
    values["spark.master"] = (master or submitted.get("spark.master") or os.environ.get(MASTER_ENV) or file_master
                              or DEFAULT_MASTER)
    values["spark.app.name"] = app_name
    values.update({k: _expand_home(str(v)) for k, v in (conf or {}).items()})

    extensions = [e.strip() for e in values.get("spark.sql.extensions", "").split(",") if e.strip()]
    if DELTA_SQL_EXTENSION not in extensions:
        extensions.insert(0, DELTA_SQL_EXTENSION)
    values["spark.sql.extensions"] = ",".join(extensions)
    values["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG

    packages = [p.strip() for p in values.get("spark.jars.packages", "").split(",") if p.strip()]
    delta_spark = delta_maven_coordinates()[0]
    values["spark.jars.packages"] = ",".join([delta_spark] + [p for p in packages if p != delta_spark])

    if LOG4J2_FILE.exists():
        option = f"-Dlog4j2.configurationFile={LOG4J2_FILE.as_uri()}"
        java_opts = values.get("spark.driver.extraJavaOptions", "")
        if "log4j2.configurationFile" not in java_opts:
            values["spark.driver.extraJavaOptions"] = f"{option} {java_opts}".strip()

    # A bigger default thread stack for the driver's threads: with the JVM's 1 MiB default, a
    # streaming query's execution thread died once with a StackOverflowError deep in java.util.regex
    # while the demo produced at full speed. Threads commit stack memory only as they use it.
    java_opts = values.get("spark.driver.extraJavaOptions", "")
    if "-Xss" not in java_opts:
        values["spark.driver.extraJavaOptions"] = f"-Xss{DRIVER_THREAD_STACK} {java_opts}".strip()

    # The lakelog source's batch reader pushes filters down (lakelog.spark.source.pushdown); PySpark 4.2
    # calls pushFilters only with this on, and refuses to plan such a reader with it off (its default).
    values["spark.sql.python.filterPushdown.enabled"] = "true"

    # Local Python workers must run this interpreter (it has pyspark and pyarrow), not whatever
    # "python3" is first on PATH, which is pyspark's default.
    if (values["spark.master"].startswith("local") and "spark.pyspark.python" not in values
            and "PYSPARK_PYTHON" not in os.environ):
        values["spark.pyspark.python"] = sys.executable
    return values


def session(*, master: str | None = None, app_name: str = "lakelog",
            conf: dict[str, str] | None = None) -> "SparkSession":
    """Get or create the SparkSession with Delta Lake configured, for lakelog's SQL and jobs.

    Args:
        master: ``spark.master``. Default: ``spark-submit``'s ``--master`` when ``spark-submit`` started
            this driver, else env ``LAKELOG_SPARK_MASTER``, else ``spark.master`` from
            the built-in ``spark-defaults.conf``, else ``local[*]``.
        app_name: ``spark.app.name``. Default: ``lakelog``.
        conf: extra Spark settings; they win over everything else except the Delta extension, the
            Delta catalog and the Delta package (which are always set).

    Returns:
        A :class:`pyspark.sql.SparkSession` in which ``format("lakelog")`` is registered
        (:func:`lakelog.spark.source.register`), for ``read``, ``readStream``, ``write`` and
        ``writeStream``. As with ``SparkSession.builder.getOrCreate()``, when a SparkContext is
        already running in this process it is reused and only runtime (SQL) settings take effect;
        JVM settings (master, memory, jars) need ``spark.stop()`` first.

    The first start downloads Delta's jars from Maven Central unless they are cached (see
    :func:`ensure_delta_jars`); later starts resolve them from the local cache without network.
    """
    from delta import configure_spark_with_delta_pip
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    submitted = submitted_conf()
    values = session_conf(master=master, app_name=app_name, conf=conf, submitted=submitted)
    if submitted and not _has_delta_jars(submitted):
        log.warning("This driver was started by spark-submit without Delta's jars, and they can not be added "
                    "now (the JVM is running): Delta tables will not work. Pass --packages %s to spark-submit",
                    delta_maven_coordinates()[0])
    builder = SparkSession.builder
    for key, value in values.items():
        if key != "spark.jars.packages":
            builder = builder.config(key, value)
    extra_packages = values["spark.jars.packages"].split(",")[1:]
    builder = configure_spark_with_delta_pip(builder, extra_packages=extra_packages)

    # Python workers are started with PYSPARK_PYTHON (default: "python3" on PATH, which may not have
    # lakelog); the spark.pyspark.python setting alone does not reach them. Only a local master gets
    # this interpreter (session_conf): a cluster's executors have their own Python.
    if "spark.pyspark.python" in values:
        os.environ.setdefault("PYSPARK_PYTHON", values["spark.pyspark.python"])
    running = SparkContext._active_spark_context is not None
    started = time.monotonic()
    spark = builder.getOrCreate()
    if running:
        log.info("Reusing the running SparkSession (master=%s); JVM settings were not re-applied",
                 spark.sparkContext.master)
    else:
        log.info("Started SparkSession in %.1f s (master=%s, delta-spark %s)",
                 time.monotonic() - started, spark.sparkContext.master, delta_version())
    from lakelog.spark.source import register  # the data source imports pyspark's, so only once Spark is used

    register(spark)
    return spark


def submitted_conf() -> dict[str, str]:
    """The settings ``spark-submit`` gave this driver, or ``{}`` when ``spark-submit`` did not start it.

    ``spark-submit app.py`` starts the driver's JVM first and then this Python, telling it the JVM's
    port in env ``PYSPARK_GATEWAY_PORT``; the JVM's system properties hold ``--master``, ``--conf``,
    ``--packages`` (``spark.jars.packages``) and the jars they resolved (``spark.jars``). Read before
    a SparkContext runs (a running context's settings are not re-applied anyway): ``{}`` after that.
    """
    from pyspark import SparkConf, SparkContext

    if "PYSPARK_GATEWAY_PORT" not in os.environ or SparkContext._active_spark_context is not None:
        return {}
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    return dict(SparkConf().getAll())  # loadDefaults: the JVM's spark.* system properties


def _has_delta_jars(settings: dict[str, str]) -> bool:
    """Whether ``spark.jars.packages`` or ``spark.jars`` in ``settings`` has Delta's delta-spark jar."""
    artifact = delta_maven_coordinates()[0].split(":")[1]
    return any(artifact in settings.get(key, "") for key in ("spark.jars.packages", "spark.jars"))


# Child process of ensure_delta_jars: start a small session, prove Delta works (write and read a
# one-row table), stop.
_PROBE = """
import tempfile
from lakelog.spark.session import session
spark = session(master="local[1]", app_name="lakelog-ensure-delta-jars",
                conf={"spark.driver.memory": "512m", "spark.ui.enabled": "false"})
try:
    with tempfile.TemporaryDirectory(prefix="lakelog-delta-probe-") as tmp:
        spark.range(1).write.format("delta").save(tmp)
        assert spark.read.format("delta").load(tmp).count() == 1
finally:
    spark.stop()
"""


def _run(cmd: list[str], timeout_s: float) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; kill the whole group on timeout. Returns (rc, output).

    The child dies with this process (:func:`lakelog.processes.spawn`)."""
    proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                 start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=max(timeout_s, 1))
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


_RESOLVER_ERROR = re.compile(r"unresolved dependency|UNRESOLVED|not found|Exception|Error", re.IGNORECASE)


def _tail(text: str, lines: int = 15) -> str:
    """The lines of a child's output that say what went wrong: resolver/error lines, then the last few."""
    all_lines = text.strip().splitlines()
    errors = [line for line in all_lines[:-lines] if _RESOLVER_ERROR.search(line) and not line.startswith("\tat ")]
    return "\n".join(errors[-10:] + all_lines[-lines:])


def _resolve_with_spark(timeout_s: float) -> tuple[bool, str]:
    """Start and stop a local session in a child process so Spark's Ivy resolver caches the jars."""
    rc, out = _run([sys.executable, "-c", _PROBE], timeout_s)
    if rc == 0:
        return True, out
    reason = "timed out" if rc is None else f"exited with {rc}"
    return False, f"Spark's resolver {reason}:\n{_tail(out)}"


_MAVEN_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>lakelog</groupId>
  <artifactId>lakelog-delta-jars</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_MAVEN_DEPENDENCY = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
      <exclusions><exclusion><groupId>org.scala-lang</groupId><artifactId>scala-library</artifactId></exclusion></exclusions>
    </dependency>"""


def _resolve_with_maven(timeout_s: float) -> None:
    """Download Delta's jars, their runtime dependencies and parent POMs into ``~/.m2/repository``.

    Runs ``mvn dependency:resolve`` on a throw-away POM that depends on :func:`delta_maven_coordinates`.
    (``mvn dependency:get -Dartifact=io.delta:delta-spark_4.2_2.13:<v>`` would also work, but it resolves
    the artifact as a root project, so it downloads delta-spark's *provided* dependencies too, all of
    Spark, Hive and the AWS SDK: gigabytes and minutes instead of its runtime dependencies alone.)
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DeltaJarsError("Cannot fetch Delta's jars with Maven: 'mvn' is not on PATH")
    dependencies = "\n".join(
        _MAVEN_DEPENDENCY.format(group=g, artifact=a, version=v)
        for g, a, v in (c.split(":") for c in delta_maven_coordinates()))
    with tempfile.TemporaryDirectory(prefix="lakelog-delta-jars-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_MAVEN_POM.format(dependencies=dependencies))
        rc, out = _run([mvn, "-B", "-q", "-f", str(pom), "dependency:resolve"], timeout_s)
    if rc != 0:
        reason = "timed out" if rc is None else f"exited with {rc}"
        raise DeltaJarsError(f"mvn dependency:resolve of {', '.join(delta_maven_coordinates())} {reason}:\n{_tail(out)}")


def ensure_delta_jars(*, timeout_s: float = 600) -> None:
    """Make sure Delta's JVM jars are cached locally, so later sessions start without network.

    First tries Spark's own resolver (starts and stops a ``local[1]`` session in a child process,
    which fills the Ivy cache, Spark 4 default ``~/.ivy2.5.2``, or ``spark.jars.ivy``). If that fails
    (repository unreachable, e.g. only a Maven mirror/proxy configured in ``~/.m2/settings.xml`` works),
    falls back to Maven (``mvn dependency:resolve`` of ``io.delta:delta-spark_4.2_2.13`` and
    ``io.delta:delta-storage`` at the installed delta-spark version, see :func:`_resolve_with_maven`),
    which puts them in ``~/.m2/repository``, where Spark's resolver looks first, and then checks with
    Spark again. When the jars are cached already it costs one local JVM start and a one-row Delta
    write (about 10-30 s on two cores).

    Raises :class:`DeltaJarsError` if the jars still can not be resolved within ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    started = time.monotonic()
    ok, detail = _resolve_with_spark(timeout_s)
    if ok:
        log.info("Delta jars are cached (Spark resolver, %.1f s)", time.monotonic() - started)
        return
    log.warning("Spark could not resolve Delta's jars, trying Maven: %s", detail)
    _resolve_with_maven(deadline - time.monotonic())
    ok, detail = _resolve_with_spark(deadline - time.monotonic())
    if not ok:
        raise DeltaJarsError(f"Delta's jars are in ~/.m2 but Spark still can not start with them: {detail}")
    log.info("Delta jars are cached (Maven fallback, %.1f s)", time.monotonic() - started)
