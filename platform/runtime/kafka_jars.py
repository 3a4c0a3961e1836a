"""Apache Kafka's broker and tools jars from Maven Central, for the benchmarks (``bench/``) and the
tests that run Kafka's own tools against lakelog (``kafka-topics``, ``kafka-configs``); lakelog itself
never runs them.

:func:`kafka_jars` puts ``org.apache.kafka:kafka_2.13`` and ``org.apache.kafka:kafka-tools`` with their
runtime dependencies (``mvn dependency:copy-dependencies`` of a generated pom) in
``~/.cache/lakelog-bench/kafka-{version}/libs`` once; later calls use the cache without network.
:func:`kafka_tool_command` is the ``java`` command line of one tool's main class on those jars, as
Kafka's ``kafka-run-class.sh`` builds it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from lakelog.runtime.zookeeper_server import find_java

__all__ = ["CACHE_DIR", "KAFKA_VERSION", "LOG4J2_WARN", "STREAMS_EXAMPLES_VERSION", "kafka_classpath",
           "kafka_connect_jars", "kafka_jars", "kafka_streams_jars", "kafka_tool_command"]

KAFKA_VERSION = "4.1.1"
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lakelog-bench"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>lakelog</groupId>
  <artifactId>lakelog-bench-kafka</artifactId>
  <version>0</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{v}</version></dependency>
  </dependencies>
</project>
"""

#: a log4j2 configuration that logs WARN and above to the console
LOG4J2_WARN = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
"""


#: Kafka Connect's file connectors and MirrorMaker 2 (``connect-runtime`` is already among the tools' jars),
#: and the SLF4J 1.x binding to log4j2 that Kafka's own distribution ships, so that Connect's and
#: MirrorMaker's logs reach the log4j2 configuration instead of SLF4J's no-op logger
_CONNECT_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>lakelog</groupId>
  <artifactId>lakelog-kafka-connect</artifactId>
  <version>0</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-file</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror-client</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.24.3</version></dependency>
  </dependencies>
</project>
"""


#: the newest ``kafka-streams-examples`` on Maven Central (Kafka stopped publishing it after 4.0); its
#: demos run on the ``kafka-streams`` of :data:`KAFKA_VERSION`
STREAMS_EXAMPLES_VERSION = "4.0.0"

#: Kafka Streams (with RocksDB, its default state store) and Kafka's Streams examples (``WordCountDemo``)
_STREAMS_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>lakelog</groupId>
  <artifactId>lakelog-kafka-streams</artifactId>
  <version>0</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-streams</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-streams-examples</artifactId><version>{examples}</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
  </dependencies>
</project>
"""


def _fetch(pom_text: str, libs: Path, *, what: str, transitive: bool = True) -> None:
    """``mvn dependency:copy-dependencies`` of ``pom_text`` into ``libs`` (written whole or not at all);
    ``transitive=False``: the named artifacts alone. One fetch at a time per machine (an exclusive lock on
    ``CACHE_DIR/.fetch.lock``): processes that ask for the same jars at once fetch them once, and no two
    ``mvn`` write ``~/.m2`` together."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not libs.exists():  # another process may have fetched them while this one waited
            _fetch_locked(pom_text, libs, what=what, transitive=transitive)


def _fetch_locked(pom_text: str, libs: Path, *, what: str, transitive: bool) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"{what} is not cached and 'mvn' is not on PATH to fetch it")
    partial = libs.with_name(libs.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="lakelog-kafka-pom-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(pom_text)
        done = subprocess.run([mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                               "-DincludeScope=runtime", f"-DoutputDirectory={partial}",
                               f"-DexcludeTransitive={'false' if transitive else 'true'}"],
                              capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"mvn could not fetch {what}:\n{(done.stdout + done.stderr)[-3000:]}")
    partial.rename(libs)


def kafka_jars(version: str = KAFKA_VERSION) -> Path:
    """The folder holding Kafka ``version``'s broker and tools jars with their runtime dependencies.

    Fetched once with ``mvn`` into ``~/.cache/lakelog-bench/kafka-{version}/libs`` (about 45 MB).
    Raises RuntimeError when ``mvn`` is missing or fails.
    """
    libs = CACHE_DIR / f"kafka-{version}" / "libs"
    if not (libs / f"kafka_2.13-{version}.jar").exists():
        _fetch(_POM.format(v=version), libs, what=f"Kafka {version}")
    return libs


def kafka_connect_jars(version: str = KAFKA_VERSION) -> Path:
    """The folder holding Kafka Connect's file connectors (``FileStreamSource``/``FileStreamSink``) and
    MirrorMaker 2 (``connect-mirror``) of Kafka ``version``, beside :func:`kafka_jars`' folder: a worker
    or MirrorMaker runs on both (:func:`kafka_classpath`).

    Fetched once with ``mvn`` into ``~/.cache/lakelog-bench/kafka-{version}/connect-libs`` (under 1 MB).
    Raises RuntimeError when ``mvn`` is missing or fails.
    """
    libs = CACHE_DIR / f"kafka-{version}" / "connect-libs"
    if not (libs / f"connect-mirror-{version}.jar").exists():
        # their dependencies are the tools' own (connect-runtime, kafka-clients, log4j2, slf4j-api)
        _fetch(_CONNECT_POM.format(v=version), libs, what=f"Kafka Connect {version}", transitive=False)
    return libs


def kafka_streams_jars(version: str = KAFKA_VERSION) -> Path:
    """The folder holding Kafka Streams ``version`` (with ``rocksdbjni``) and Kafka's Streams examples
    (:data:`STREAMS_EXAMPLES_VERSION`), to run beside :func:`kafka_jars`' folder (:func:`kafka_classpath`).

    Fetched once with ``mvn`` into ``~/.cache/lakelog-bench/kafka-{version}/streams-libs`` (about 60 MB,
    most of it RocksDB's native library). Raises RuntimeError when ``mvn`` is missing or fails.
    """
    libs = CACHE_DIR / f"kafka-{version}" / "streams-libs"
    if not (libs / f"kafka-streams-{version}.jar").exists():
        _fetch(_STREAMS_POM.format(v=version, examples=STREAMS_EXAMPLES_VERSION), libs,
               what=f"Kafka Streams {version}")
    return libs


def kafka_classpath(*folders: Path) -> str:
    """A ``java -cp`` value of every jar in ``folders`` (``folder/*`` each, joined by ``:``)."""
    return os.pathsep.join(str(folder / "*") for folder in folders)


def kafka_tool_command(main: str, *args: str, libs: Path, log4j2_file: Path, heap: str = "256m",
                       extra_libs: tuple[Path, ...] = ()) -> list[str]:
    """``java -Xmx{heap} -cp {libs}/* -Dlog4j2.configurationFile=... {main} {args}``: a Kafka tool
    (``org.apache.kafka.tools.TopicCommand``) on the jars of :func:`kafka_jars` (and ``extra_libs``, e.g.
    :func:`kafka_connect_jars`), logging as ``log4j2_file`` says (write :data:`LOG4J2_WARN` there)."""
    return [find_java(), f"-Xmx{heap}", "-cp", kafka_classpath(libs, *extra_libs),
            f"-Dlog4j2.configurationFile={log4j2_file.as_uri()}", main, *args]
