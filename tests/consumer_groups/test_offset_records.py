"""The records of ``__consumer_offsets``: Kafka's partition rule for a group, deterministic keys, and the
fold of commits, tombstones and foreign records into the coordinator's view."""

from __future__ import annotations

import json

import pyarrow as pa

from lakelog.consumer_groups.offset_records import (
    CommittedOffset,
    GroupOffsets,
    apply_records,
    commit_records,
    java_string_hash,
    offset_key,
    partition_for,
    tombstone_records,
)


def test_java_string_hash_and_kafkas_partition_rule():
    # values of java.lang.String#hashCode
    assert java_string_hash("") == 0
    assert java_string_hash("foo") == 101574
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # two UTF-16 code units (a surrogate pair)
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # Utils.abs(hashCode) % n; Utils.abs(Integer.MIN_VALUE) == 0
    assert partition_for("polygenelubricants", 12) == 0
    assert partition_for("foo", 50) == 101574 % 50
    assert partition_for("hello", 12) == 99162322 % 12
    h = java_string_hash("console-consumer-1")
    assert partition_for("console-consumer-1", 7) == abs(h) % 7


def test_keys_are_deterministic_bytes_and_commits_fold_with_tombstones():
    assert offset_key("g", "t", 3) == b'{"type":"offset","group":"g","topic":"t","partition":3}'
    commits = [CommittedOffset("g", "t", 0, 5, "m", 2, 1000, "app", 7), CommittedOffset("g", "t", 1, 9, None, 2, 1000, "app", 7)]
    rows = commit_records(commits)
    assert rows.num_rows == 3  # two offsets and the application's version
    assert json.loads(rows["key"][2].as_py()) == {"type": "app", "group": "g", "app_id": "app"}
    newer = commit_records([CommittedOffset("g", "t", 0, 6, None, 3, 2000)])
    gone = tombstone_records("g", [("t", 1)])
    other = pa.table({"key": pa.array([b"not json", None], pa.binary()), "value": pa.array([b"x", b"y"], pa.binary())})
    groups: dict[str, GroupOffsets] = {}
    applied = apply_records(groups, pa.concat_tables([rows, newer, gone, other]))
    assert applied == 5  # the two foreign records are skipped
    g = groups["g"]
    assert {tp: c.offset for tp, c in g.offsets.items()} == {("t", 0): 6}
    assert g.generation == 3 and g.app_versions == {"app": 7}
    # a group whose last offset is deleted and that has no application version is forgotten
    groups = {}
    apply_records(groups, pa.concat_tables([commit_records([CommittedOffset("h", "t", 0, 1, None, None, 1)]),
                                            tombstone_records("h", [("t", 0)])]))
    assert groups == {}
    # nor one whose last offsets and applications' versions are deleted together (a deleted topic's cleanup)
    rows = tombstone_records("g", [("t", 0)], app_ids=["app"])
    assert rows.num_rows == 2 and rows["value"].null_count == 2
    groups = {}
    apply_records(groups, pa.concat_tables([commit_records([CommittedOffset("g", "t", 0, 1, None, None, 1, "app", 4)]),
                                            rows]))
    assert groups == {}
