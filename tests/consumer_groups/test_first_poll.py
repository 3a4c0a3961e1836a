"""REST Proxy v2: a fresh member's first ``GET .../records?timeout=`` after subscribing waits for the
member's first assignment and then for records, within the timeout, instead of answering ``[]`` at once
(issue 9, item 7)."""

from __future__ import annotations

import base64
import time
import uuid

GROUPS = 5
TIMEOUT_MS = 5000


def test_first_poll_after_subscribe_returns_the_records_in_one_call(api, topic_name):
    api.create_topic(topic_name, partitions=2)
    for p in range(2):
        api.produce_binary(topic_name, [(None, f"p{p}-{i}".encode()) for i in range(3)], partition=p)
    for n in range(GROUPS):
        group = f"first-poll-{uuid.uuid4().hex[:8]}"
        with api.groups.create_consumer(group, auto_offset_reset="earliest", auto_commit=False) as c:
            c.subscribe([topic_name])
            started = time.monotonic()
            got = c.poll(timeout_ms=TIMEOUT_MS)  # the first call, no retry
            elapsed = time.monotonic() - started
            assert got, f"group {n}: the first poll answered [] after {elapsed:.2f} s"
            assert elapsed < TIMEOUT_MS / 1000 + 5
            # fetch.min.bytes=1: the poll answers once a round has records; the partitions' records
            # may come in one round or, if one partition became readable later, in the next polls
            while len(got) < 6:
                more = c.poll(timeout_ms=TIMEOUT_MS)
                assert more, f"group {n}: records missing after {len(got)}"
                got.extend(more)
            assert sorted(base64.b64decode(r["value"]) for r in got) == \
                sorted(f"p{p}-{i}".encode() for p in range(2) for i in range(3))


def test_first_poll_without_records_waits_for_the_timeout(api, topic_name):
    api.create_topic(topic_name, partitions=1)
    with api.groups.create_consumer(f"first-poll-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest") as c:
        c.subscribe([topic_name])
        started = time.monotonic()
        assert c.poll(timeout_ms=1500) == []
        assert time.monotonic() - started >= 1.4  # waited: assignment, then records, up to the timeout
