"""``lakelog consume --group`` and ``lakelog groups describe`` against a real broker."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading

from tests.harness import wait_for


def lakelog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, timeout=60, check=True)


@contextlib.contextmanager
def kept_alive(consumer):
    """Touch the instance every 0.2 s meanwhile: this module's consumer.instance.timeout.ms is 1.5 s, and
    starting the CLI in a subprocess can take longer on a busy machine (the instance would expire)."""
    stop = threading.Event()

    def touch() -> None:
        while not stop.wait(0.2):
            consumer.assignment()

    thread = threading.Thread(target=touch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def test_consume_with_group_resumes_and_describe_shows_members(api, gw, topic_name, group):
    b = ["--bootstrap-server", gw.url]
    api.create_topic(topic_name, partitions=2)
    for p in range(2):
        api.produce_binary(topic_name, [(None, f"v{p}-{i}".encode()) for i in range(10)], partition=p)
    first = lakelog("consume", topic_name, "--group", group, "--from-beginning", "--max-messages", "15", *b)
    assert len(first.stdout.splitlines()) == 15 and "Processed a total of 15 messages" in first.stderr.decode()
    rest = lakelog("consume", topic_name, "--group", group, "--from-beginning", *b)
    lines = first.stdout.decode().splitlines() + rest.stdout.decode().splitlines()
    assert sorted(lines) == sorted(f"v{p}-{i}" for p in range(2) for i in range(10))  # resumed, nothing twice
    again = lakelog("consume", topic_name, "--group", group, *b)
    assert again.stdout == b"" and "Processed a total of 0 messages" in again.stderr.decode()

    described = lakelog("groups", "describe", group, *b).stdout.decode()
    assert "Total lag: 0" in described and "State: Empty" in described
    with api.groups.create_consumer(group, name="console-member") as c:
        c.subscribe([topic_name])
        wait_for(lambda: len(c.assignment()) == 2, what="assignment")
        with kept_alive(c):
            described = lakelog("groups", "describe", group, *b).stdout.decode()
        assert "console-member" in described and "State: Stable" in described
        assert f"{topic_name}-0,{topic_name}-1" in described
