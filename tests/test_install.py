"""lakelog installed as users install it: a wheel in a fresh virtualenv, and ``make install``'s venv.

``python -m build --wheel`` makes the wheel; a new virtualenv installs it (not editable; dependencies pinned
by ``requirements.lock`` as constraints, so the run is reproducible) and, from a directory outside the
checkout, runs ``lakelog up`` (the embedded ZooKeeper from the package's own defaults, one broker), a
produce and a fetch with the ``lakelog`` command, and a plain ``spark-submit`` job that reads the topic with
``readStream.format("lakelog")`` without importing lakelog (Apache Spark's
``structured_kafka_wordcount.py`` with only its format name changed): Spark finds the source through the
``pyspark_lakelog`` module by itself. The same job runs under ``make install``'s editable venv.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from lakelog.processes import spawn
from lakelog.runtime.zookeeper_server import free_port
from tests.harness import wait_for

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "words"
LINES = ["the quick brown fox", "jumps over the lazy dog", "the end"]
EXPECTED_COUNTS = {"the": 3, "quick": 1, "brown": 1, "fox": 1, "jumps": 1, "over": 1, "lazy": 1, "dog": 1,
                   "end": 1}

#: Apache Spark's examples/src/main/python/sql/streaming/structured_kafka_wordcount.py, with
#: format("kafka") -> format("lakelog"), a finite trigger and a memory sink so the test can read the counts.
WORDCOUNT_JOB = '''
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import explode, split

bootstrap_servers, subscribe_type, topics = sys.argv[1:4]
spark = SparkSession.builder.appName("StructuredLakelogWordCount").getOrCreate()
lines = (spark.readStream.format("lakelog")
         .option("kafka.bootstrap.servers", bootstrap_servers)
         .option(subscribe_type, topics)
         .option("startingOffsets", "earliest")
         .load()
         .selectExpr("CAST(value AS STRING)"))
words = lines.select(explode(split(lines.value, " ")).alias("word"))
word_counts = words.groupBy("word").count()
query = (word_counts.writeStream.outputMode("complete").format("memory").queryName("word_counts")
         .trigger(availableNow=True).start())
query.awaitTermination()
for row in spark.sql("SELECT word, count FROM word_counts").collect():
    print(f"COUNT {row['word']} {row['count']}")
print("LAKELOG IMPORTED BY THE JOB:", any(m == "lakelog" or m.startswith("lakelog.") for m in sys.modules))
spark.stop()
'''


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would make the checkout or this venv importable."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env.update(extra)
    return env


def _run(args: list, *, cwd: Path, env: dict[str, str] | None = None, timeout_s: float = 600,
         input_text: str | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env or _clean_env(), input=input_text,
                          capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, f"{args} exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    return done.stdout


def _constraints(tmp: Path) -> Path:
    """requirements.lock without its hashes, as a pip constraints file (pins only what the wheel asks for)."""
    text = (ROOT / "requirements.lock").read_text()
    text = re.sub(r"\s*\\\n\s*--hash=\S+", "", text)
    path = tmp / "constraints.txt"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with lakelog installed from the wheel ``python -m build`` makes; its bin dir."""
    tmp = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", tmp / "dist", ROOT], cwd=tmp)
    wheels = list((tmp / "dist").glob("lakelog-*.whl"))
    assert len(wheels) == 1, wheels
    _run([sys.executable, "-m", "venv", tmp / "venv"], cwd=tmp)
    bin_dir = tmp / "venv" / "bin"
    _run([bin_dir / "pip", "install", "--quiet", "-c", _constraints(tmp), wheels[0]], cwd=tmp)
    _run([bin_dir / "pip", "check"], cwd=tmp)
    where = _run([bin_dir / "python", "-c", "import lakelog.defaults, pyspark_lakelog; "
                  "print(lakelog.defaults.__file__); print(pyspark_lakelog.__file__)"], cwd=tmp)
    assert all("site-packages" in line for line in where.split()), where  # the wheel's copy, not the checkout
    return bin_dir


@pytest.fixture(scope="module")
def wheel_broker(wheel_venv, tmp_path_factory):
    """``lakelog up`` of the wheel venv (embedded ZooKeeper + broker), run outside the checkout; its URL."""
    work = tmp_path_factory.mktemp("up")
    port, zk_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    log = (work / "up.log").open("wb")
    up = spawn([str(wheel_venv / "lakelog"), "up", "--data-dir", str(work / "data"), "--port", str(port),
                "--zookeeper-port", str(zk_port), "--kafka-port", "0", "--log-level", "warning"],
               cwd=work, env=_clean_env(), stdout=log, stderr=subprocess.STDOUT, death_signal=signal.SIGTERM)

    def serving() -> bool:
        assert up.poll() is None, (work / "up.log").read_text()[-4000:]
        try:
            return httpx.get(f"{url}/v3/clusters", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(serving, what="lakelog up from the wheel to serve")
        _run([wheel_venv / "lakelog", "topics", "create", TOPIC, "--partitions", 2, "-b", url], cwd=work)
        _run([wheel_venv / "lakelog", "produce", TOPIC, "-b", url], cwd=work, input_text="\n".join(LINES) + "\n")
        yield url, work
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait(10)
        log.close()


def test_the_wheel_serves_a_produce_and_a_fetch(wheel_venv, wheel_broker):
    url, work = wheel_broker
    out = _run([wheel_venv / "lakelog", "consume", TOPIC, "--from-beginning", "-b", url], cwd=work)
    assert sorted(out.splitlines()) == sorted(LINES)


def _word_counts(spark_submit: Path, python: Path, url: str, work: Path) -> dict[str, int]:
    job = work / "structured_lakelog_wordcount.py"
    job.write_text(WORDCOUNT_JOB)
    out = _run([spark_submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                "--conf", "spark.sql.shuffle.partitions=2", job, url, "subscribe",
                TOPIC], cwd=work, env=_clean_env(PYSPARK_PYTHON=str(python)))
    assert "LAKELOG IMPORTED BY THE JOB: False" in out, out
    return {word: int(n) for word, n in re.findall(r"^COUNT (\S+) (\d+)$", out, flags=re.M)}


@pytest.mark.spark
def test_a_plain_spark_submit_job_reads_format_lakelog_from_the_wheel(wheel_venv, wheel_broker):
    url, work = wheel_broker
    assert _word_counts(wheel_venv / "spark-submit", wheel_venv / "python", url, work) == EXPECTED_COUNTS


@pytest.mark.spark
def test_a_plain_spark_submit_job_reads_format_lakelog_from_the_make_install_venv(wheel_broker):
    """``make install``'s editable venv: its ``lakelog-spark-plugin.pth`` lets Spark list ``pyspark_lakelog``."""
    url, work = wheel_broker
    bin_dir = Path(sys.executable).parent
    if not (Path(sys.prefix) / ".lakelog-installed").exists():
        pytest.skip("not running in make install's venv")
    assert _word_counts(bin_dir / "spark-submit", bin_dir / "python", url, work) == EXPECTED_COUNTS
