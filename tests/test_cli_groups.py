"""``lakelog groups`` (kafka-consumer-groups' style) against real brokers: reset-offsets with every target,
``--dry-run`` versus ``--execute``, ``--topic t:0,2`` selections, delete-offsets, describe from any broker,
and the messages of bad input."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone

import pyarrow as pa

from lakelog.client import LakelogClient


def lakelog(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, timeout=60,
                          check=check, text=True)


def _text(s: str) -> str:
    """``s`` with its whitespace runs made single spaces (rich wraps stderr at 80 columns)."""
    return " ".join(s.split())


def _cells(stdout: str, group: str) -> list[list[str]]:
    """The cells of each row of a rich table whose first column is ``group``."""
    rows = [[c.strip() for c in line.strip("│┃ ").replace("┃", "│").split("│")] for line in stdout.splitlines()]
    return [cells for cells in rows if cells[0] == group]


def _rows(stdout: str, group: str) -> list[tuple[str, int, int]]:
    """``(topic, partition, new offset)`` of each row of a GROUP TOPIC PARTITION NEW-OFFSET table."""
    return [(c[1], int(c[2]), int(c[3])) for c in _cells(stdout, group) if len(c) == 4]


def _committed(client: LakelogClient, group: str) -> dict[tuple[str, int], int]:
    return {(o["topic"], o["partition"]): o["offset"] for o in client.committed_offsets(group)}


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def test_reset_offsets_plans_without_execute_and_commits_with_it(broker, client, topic_name):
    """Without --execute only the plan is printed (with or without --dry-run); --execute commits it; the
    targets latest, earliest, shift-by (negative, clamped), to-current and to-offset, on all topics or
    on the partitions named by --topic t:0,1."""
    client.create_topic(topic_name, partitions=2)
    client.produce_binary(topic_name, [(None, b"x")] * 10, partition=0)
    client.produce_binary(topic_name, [(None, b"y")] * 4, partition=1)
    group = _group()
    client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 2},
                                  {"topic": topic_name, "partition": 1, "offset": 1}])
    b = ["--bootstrap-server", broker.url]
    t = topic_name

    plan = lakelog("groups", "reset-offsets", group, "--to-latest", *b)
    assert _rows(plan.stdout, group) == [(t, 0, 10), (t, 1, 4)]
    assert "Dry run: nothing was committed. Add --execute" in _text(plan.stdout)
    assert _committed(client, group) == {(t, 0): 2, (t, 1): 1}
    plan = lakelog("groups", "reset-offsets", group, "--to-earliest", "--dry-run", "--all-topics", *b)
    assert _rows(plan.stdout, group) == [(t, 0, 0), (t, 1, 0)] and "Dry run" in plan.stdout
    assert _committed(client, group) == {(t, 0): 2, (t, 1): 1}

    done = lakelog("groups", "reset-offsets", group, "--to-latest", "--execute", *b)
    assert _rows(done.stdout, group) == [(t, 0, 10), (t, 1, 4)] and "Dry run" not in done.stdout
    assert _committed(client, group) == {(t, 0): 10, (t, 1): 4}

    lakelog("groups", "reset-offsets", group, "--shift-by", "-3", "--execute", *b)
    assert _committed(client, group) == {(t, 0): 7, (t, 1): 1}
    lakelog("groups", "reset-offsets", group, "--shift-by=-100", "--topic", f"{t}:1", "--execute", *b)
    assert _committed(client, group) == {(t, 0): 7, (t, 1): 0}  # clamped to the log start offset
    lakelog("groups", "reset-offsets", group, "--shift-by", "2", "--topic", f"{t}:0", "--execute", *b)
    assert _committed(client, group) == {(t, 0): 9, (t, 1): 0}

    current = lakelog("groups", "reset-offsets", group, "--to-current", "--topic", f"{t}:0", *b)
    assert _rows(current.stdout, group) == [(t, 0, 9)]
    offset = lakelog("groups", "reset-offsets", group, "--to-offset", "5", "--topic", f"{t}:0,1", "--execute", *b)
    assert _rows(offset.stdout, group) == [(t, 0, 5), (t, 1, 4)]  # 5 is past partition 1's high watermark
    assert _committed(client, group) == {(t, 0): 5, (t, 1): 4}
    whole = lakelog("groups", "reset-offsets", group, "--to-earliest", "--topic", t, "--execute", *b)
    assert _rows(whole.stdout, group) == [(t, 0, 0), (t, 1, 0)]

    # a group with an active member is refused with the gateway's message
    with client.groups.create_consumer(group, name="active") as c:
        c.subscribe([t])
        busy = lakelog("groups", "reset-offsets", group, "--to-latest", "--execute", *b, check=False)
    assert busy.returncode == 1 and "active member" in _text(busy.stderr)
    assert _committed(client, group) == {(t, 0): 0, (t, 1): 0}


def test_reset_offsets_by_duration_and_to_datetime(broker, client, topic_name):
    """--by-duration (ISO-8601, as Java's Duration) and --to-datetime find the first offset at or after
    a time: 5 records two hours old, then 5 records now."""
    client.create_topic(topic_name, partitions=1)
    now_ms = int(time.time() * 1000)
    old = pa.table({"key": pa.array([None] * 5, pa.binary()), "value": pa.array([b"old"] * 5, pa.binary()),
                    "timestamp": pa.array([now_ms - 2 * 3600_000 + i for i in range(5)], pa.int64())})
    client.produce_arrow(topic_name, 0, old)
    client.produce_binary(topic_name, [(None, b"new")] * 5, partition=0)
    group = _group()
    client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 10}])
    b = ["--bootstrap-server", broker.url]

    def reset(*target: str) -> int:
        out = lakelog("groups", "reset-offsets", group, *target, "--topic", topic_name, "--execute", *b)
        (row,) = _rows(out.stdout, group)
        assert _committed(client, group) == {(topic_name, 0): row[2]}
        return row[2]

    assert reset("--by-duration", "PT1H30M") == 5
    assert reset("--by-duration", "P1D") == 0
    assert reset("--by-duration", "PT1H") == 5
    assert reset("--by-duration", "P0DT3H") == 0
    ninety_minutes_ago = datetime.fromtimestamp((now_ms - 90 * 60_000) / 1000, tz=timezone.utc)
    assert reset("--to-datetime", ninety_minutes_ago.strftime("%Y-%m-%dT%H:%M:%S.000Z")) == 5
    assert reset("--to-datetime", "2000-01-01T00:00:00Z") == 0
    assert reset("--by-duration", "PT0S") == 10  # nothing at or after now: the high watermark


def test_delete_offsets_of_topics_and_partitions(broker, client, topic_name):
    other = f"{topic_name}-b"
    client.create_topic(topic_name, partitions=3)
    client.create_topic(other, partitions=1)
    group = _group()
    client.commit_offsets(group, [{"topic": topic_name, "partition": p, "offset": 0} for p in range(3)]
                          + [{"topic": other, "partition": 0, "offset": 0}])
    b = ["--bootstrap-server", broker.url]

    out = lakelog("groups", "delete-offsets", group, "--topic", f"{topic_name}:0,2", *b)
    assert _cells(out.stdout, group) == [[group, topic_name, "0", "Successful"], [group, topic_name, "2", "Successful"]]
    assert "Deleted the committed offsets of 2 partition(s)" in out.stdout
    assert set(_committed(client, group)) == {(topic_name, 1), (other, 0)}

    out = lakelog("groups", "delete-offsets", group, "--topic", other, "--topic", f"{topic_name}:1", *b)
    assert "Deleted the committed offsets of 2 partition(s)" in out.stdout
    assert _committed(client, group) == {}

    again = lakelog("groups", "delete-offsets", group, "--topic", other, *b, check=False)
    assert again.returncode == 1 and f"has no committed offsets of topic '{other}'" in _text(again.stderr)
    none = lakelog("groups", "delete-offsets", group, *b, check=False)
    assert none.returncode == 1 and "name what to delete with --topic TOPIC" in _text(none.stderr)
    bad = lakelog("groups", "delete-offsets", group, "--topic", f"{topic_name}:a", *b, check=False)
    assert bad.returncode == 1 and "must be numbers >= 0" in _text(bad.stderr)


def test_bad_reset_options_say_what_to_fix(broker, client, topic_name):
    client.create_topic(topic_name, partitions=1)
    group = _group()
    client.commit_offsets(group, [{"topic": topic_name, "partition": 0, "offset": 0}])
    b = ["--bootstrap-server", broker.url]
    cases = [
        ((), "no reset target; give exactly one of --to-earliest, --to-latest, --to-current"),
        (("--to-earliest", "--shift-by", "1"), "several reset targets: --to-earliest, --shift-by; give exactly one"),
        (("--by-duration", "1h"), "--by-duration '1h' is not an ISO-8601 duration PnDTnHnMn.nS: use e.g. PT1H30M"),
        (("--by-duration", "P1M"), "no months or years"),
        (("--to-datetime", "yesterday"), "--to-datetime 'yesterday' is not an ISO-8601 date-time"),
        (("--to-latest", "--topic", f"{topic_name}:0,x"),
         f"--topic '{topic_name}:0,x': the partitions after ':' must be numbers >= 0 separated by commas"),
        (("--to-latest", "--topic", topic_name, "--all-topics"), "--all-topics and --topic exclude each other"),
        (("--to-latest", "--dry-run", "--execute"), "--dry-run and --execute exclude each other"),
    ]
    for args, message in cases:
        out = lakelog("groups", "reset-offsets", group, *args, *b, check=False)
        assert out.returncode == 1, (args, out.stdout)
        assert message in _text(out.stderr), (args, out.stderr)
    assert _committed(client, group) == {(topic_name, 0): 0}  # nothing was reset
    missing = lakelog("groups", "reset-offsets", group, "--to-latest", "--topic", f"{topic_name}:3", "--execute",
                      *b, check=False)
    assert missing.returncode == 1 and "has partitions 0 to 0" in _text(missing.stderr)


def test_describe_answers_the_same_from_every_broker(broker_factory, topic_name):
    """The group's lag and members come from its coordinator and ZooKeeper, whichever broker is asked."""
    brokers = [broker_factory(broker_id=i) for i in range(2)]
    with LakelogClient(brokers[0].url) as client:
        client.create_topic(topic_name, partitions=2)
        client.produce_binary(topic_name, [(None, b"x")] * 6, partition=0)
        groups = [_group() for _ in range(4)]  # spread over __consumer_offsets: coordinators on both brokers
        for g in groups:
            client.commit_offsets(g, [{"topic": topic_name, "partition": 0, "offset": 2}])
    for g in groups:
        outs = [lakelog("groups", "describe", g, "--bootstrap-server", b.url).stdout for b in brokers]
        assert outs[0] == outs[1]
        assert _cells(outs[0], g) == [[g, topic_name, "0", "2", "6", "6", "4", "-"],
                                      [g, topic_name, "1", "-", "0", "0", "0", "-"]]
        assert "Total lag: 4" in outs[0] and "State: Empty" in outs[0]
    listed = [set(lakelog("groups", "list", "--bootstrap-server", b.url).stdout.split()) for b in brokers]
    assert set(groups) <= listed[0] and listed[0] == listed[1]
