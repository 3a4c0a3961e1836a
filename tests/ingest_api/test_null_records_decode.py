"""A large JSON produce body whose records have null keys and values (``{"value": null}``): the columns
cannot tell a null member from an absent one, so the per-record validator decodes it, a chunk at a time:
its Python objects stay bounded by the chunk, not the body (issue 38: memory per request for every JSON
shape; tracemalloc counts numpy's and Python's allocations); an absent member is still refused and named by its place in the whole body."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from lakelog.ingest_api import codecs, columnar_json
from lakelog.protocol.errors import InvalidBodyFieldError

N = 300_000


def test_null_records_decode_without_the_whole_bodys_python_objects(monkeypatch):
    monkeypatch.setattr(columnar_json, "CHUNK_BYTES", 1 << 16)  # the chunks' own temporaries stay small beside N
    body = orjson.dumps({"records": [{"value": None} for _ in range(N)]})
    tracemalloc.start()
    try:
        batch, partitions = codecs.decode_produce(bytearray(body), "json", consume=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert batch.num_rows == N and batch["value"].null_count == N and batch["key"].null_count == N
    assert partitions is None
    # the whole body through the validator at once: 22x the body; a chunk at a time: about 7x (the columnar
    # pass that finds the null records first costs most of it)
    assert peak < 10 * len(body), f"decoding took {peak / len(body):.1f}x the body"


@pytest.mark.parametrize("bad, message", [({}, "records[250001] has none of key, value, partition"),
                                          ({"value": None, "headers": [{"value": "YQ=="}]},
                                           "records[250001].headers[0] has no key")])
def test_a_bad_record_deep_in_a_large_body_is_named_by_its_place_in_the_body(bad, message):
    records = [{"value": None} for _ in range(N)]
    records[250001] = bad
    with pytest.raises(InvalidBodyFieldError, match=message.replace("[", r"\[").replace("]", r"\]")):
        codecs.decode_produce(bytearray(orjson.dumps({"records": records})), "json")


@pytest.mark.parametrize("fmt", ["binary", "json"])
@pytest.mark.parametrize("records, message", [
    ([{"value": "YQ=="}, {}], "records[1] has none of key, value, partition"),
    ([{"key": "YQ=="}, {"value": None}, {"timestamp": 5}], "records[2] has none of key, value, partition"),
    ([{"value": "YQ==", "headers": [{"value": "YQ=="}]}], "records[0].headers[0] has no key"),
    ([], "records: the list is empty"),
])
def test_a_small_body_refuses_an_empty_record_wherever_the_others_are_non_null(fmt, records, message):
    """A small body decodes per record; its shape rules are walked only where one can fail (a record with
    key, value and partition all None, or headers): a refusal is never skipped by that shortcut."""
    with pytest.raises(InvalidBodyFieldError, match=message.replace("[", r"\[").replace("]", r"\]")):
        codecs.decode_produce(orjson.dumps({"records": records}), fmt)


@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_a_small_body_of_present_null_members_is_accepted(fmt):
    records = [{"key": None}, {"value": None}, {"partition": 0}, {"value": "YQ==", "headers": [{"key": "h", "value": None}]}]
    batch, partitions = codecs.decode_produce(orjson.dumps({"records": records}), fmt)
    assert batch.num_rows == 4 and partitions.to_pylist() == [None, None, 0, None]
