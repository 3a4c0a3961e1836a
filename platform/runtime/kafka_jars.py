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

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from lakelog.runtime.zookeeper_server import find_java

__all__ = ["CACHE_DIR", "KAFKA_VERSION", "LOG4J2_WARN", "kafka_jars", "kafka_tool_command"]

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


def kafka_jars(version: str = KAFKA_VERSION) -> Path:
    """The folder holding Kafka ``version``'s broker and tools jars with their runtime dependencies.

    Fetched once with ``mvn`` into ``~/.cache/lakelog-bench/kafka-{version}/libs`` (about 45 MB).
    Raises RuntimeError when ``mvn`` is missing or fails.
    """
    libs = CACHE_DIR / f"kafka-{version}" / "libs"
    if (libs / f"kafka_2.13-{version}.jar").exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Kafka's jars are not cached and 'mvn' is not on PATH to fetch them")
    partial = libs.with_name("libs.partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="lakelog-bench-kafka-pom-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(v=version))
        done = subprocess.run([mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                               "-DincludeScope=runtime", f"-DoutputDirectory={partial}"],
                              capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"mvn could not fetch Kafka {version}:\n{(done.stdout + done.stderr)[-3000:]}")
    partial.rename(libs)
    return libs


def kafka_tool_command(main: str, *args: str, libs: Path, log4j2_file: Path, heap: str = "256m") -> list[str]:
    """``java -Xmx{heap} -cp {libs}/* -Dlog4j2.configurationFile=... {main} {args}``: a Kafka tool
    (``org.apache.kafka.tools.TopicCommand``) on the jars of :func:`kafka_jars`, logging as
    ``log4j2_file`` says (write :data:`LOG4J2_WARN` there)."""
    return [find_java(), f"-Xmx{heap}", "-cp", str(libs / "*"), f"-Dlog4j2.configurationFile={log4j2_file.as_uri()}",
            main, *args]
