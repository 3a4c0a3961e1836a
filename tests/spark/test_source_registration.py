"""``format("lakelog")`` is there without calling ``register``: in :func:`lakelog.spark.session`'s
session, and in any SparkSession of a Python where lakelog is installed (Spark's automatic registration
of Python data sources, through the ``pyspark_lakelog`` module).

Each test reads a topic of a real broker in a fresh Python process with its own SparkSession
(``tests/spark/registration_app.py``): a registration is per session, and Spark looks the installed
data sources up once per JVM, so the test process's own session can not show either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("registration_app.py")


def produce(client, topic: str) -> list[list]:
    """Three records in each of two partitions; returns the rows the app must print."""
    expected = []
    for p in range(2):
        values = [f"{p}-{i}" for i in range(3)]
        client.produce_arrow(topic, p, pa.table({"value": [v.encode() for v in values]}))
        expected += [[p, i, v] for i, v in enumerate(values)]
    return expected


def run_app(mode: str, url: str, topic: str, cwd: Path, env: dict[str, str]) -> dict:
    # cwd is a fresh directory: Python workers run with the JVM's working directory on sys.path, so
    # one at the repository root would find the plugin module there, installed or not
    proc = subprocess.run([sys.executable, str(APP), mode, url, topic], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{mode}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_session_registers_the_source(client, create_topic, topic_name, tmp_path):
    create_topic(topic_name, partitions=2)
    expected = produce(client, topic_name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    out = run_app("session", client.urls[0], topic_name, tmp_path, env)
    assert out["rows"] == expected
    assert out["filtered"] == [r for r in expected if r[0] == 1 and r[1] >= 1]
    assert out["pushdown"] == "true"  # the session's source pushes filters down


def test_any_session_finds_the_installed_source(client, create_topic, topic_name, tmp_path):
    """A plain ``SparkSession.builder`` session, lakelog installed as a regular package (not imported)."""
    create_topic(topic_name, partitions=2)
    expected = produce(client, topic_name)
    # site-packages as `pip install lakelog` lays it out: the two top-level packages as plain directories
    # (an editable install's import hook is invisible to pkgutil.iter_modules, which Spark's lookup uses)
    site = tmp_path / "site"
    site.mkdir()
    (site / "lakelog").symlink_to(ROOT / "platform", target_is_directory=True)
    (site / "pyspark_lakelog").symlink_to(ROOT / "plugins" / "pyspark_lakelog", target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_DRIVER_PYTHON"}
    # the Python Spark looks data sources up with (PYSPARK_PYTHON) is the one lakelog is installed in
    env.update(PYTHONPATH=str(site), PYSPARK_PYTHON=sys.executable)
    out = run_app("plain", client.urls[0], topic_name, work, env)
    assert out["rows"] == expected
    # filters work without pushdown (PySpark 4.2 would refuse a reader with pushFilters here)
    assert out["filtered"] == [r for r in expected if r[0] == 1 and r[1] >= 1]
    assert out["pushdown"] in (None, "false")
    assert out["loaded_lakelog"] is False  # the driver process never imported lakelog
    # register() then replaces the found source with the one that pushes filters down
    assert out["registered_filtered"] == out["filtered"] and out["registered_pushdown"] == "true"
