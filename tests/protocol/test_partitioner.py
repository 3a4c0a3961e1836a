"""Tests of lakelog.protocol.partitioner: Kafka-compatible murmur2 key partitioning."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from lakelog.protocol.partitioner import (
    murmur2,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

# Kafka's own vectors: UtilsTest.testMurmur2
# (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
KAFKA_UTILS_TEST_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (bytes([ord("a"), ord("b"), ord("c")]), 479470107),
]

# Partition among 1000 as Kafka's Java producer picks it (kafka-python's
# test_murmur2_java_compatibility, "compare with output from Kafka's ...Partitioner").
JAVA_PARTITIONS_OF_1000 = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]

# Bytes >= 0x80 (negative Java bytes, masked with & 0xff) and every tail length 0-3. Computed on a
# JVM with a verbatim copy of Utils.murmur2.
JVM_HIGH_BYTE_VECTORS = [
    (b"", 275646681),
    (b"\x00", 375494588),
    (b"\xff", -311467685),
    (b"\x80\x81", 1642145146),
    (b"\xff\xfe\xfd", 998637092),
    (b"\xa4\xa4\xa4\xa4", -1849524238),
    (b"\xff\xfe\xfd\xfc\xfb", 524068735),
    (b"\x80\x90\xa0\xb0\xc0\xd0\xe0", 1668561609),
    (b"\x81" * 1000, -525506620),
    ("héllo-ключ-🔑".encode(), 965253488),
]


def _random_keys(rng: random.Random, n: int, distinct: int) -> list[bytes]:
    pool = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40))) for _ in range(distinct)]
    return [rng.choice(pool) for _ in range(n)]


# --- murmur2 / to_positive / partition_for_key -------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), KAFKA_UTILS_TEST_MURMUR2)
def test_murmur2_matches_kafka_utils_test(data, expected):
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), JVM_HIGH_BYTE_VECTORS)
def test_murmur2_matches_jvm_on_high_bytes_and_tails(data, expected):
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "partition"), JAVA_PARTITIONS_OF_1000)
def test_partition_for_key_matches_java_producer(data, partition):
    assert partition_for_key(data, 1000) == partition


def test_murmur2_is_a_signed_java_int():
    rng = random.Random(7)
    for key in _random_keys(rng, 2000, 2000):
        h = murmur2(key)
        assert -(2**31) <= h <= 2**31 - 1


def test_murmur2_accepts_bytearray_and_memoryview():
    assert murmur2(bytearray(b"foobar")) == -790332482
    assert murmur2(memoryview(b"xxfoobarxx")[2:-2]) == -790332482


def test_murmur2_refuses_str():
    with pytest.raises(TypeError):
        murmur2("foobar")  # type: ignore[arg-type]


def test_to_positive_is_kafka_mask_not_abs():
    assert to_positive(0) == 0
    assert to_positive(5) == 5
    assert to_positive(2**31 - 1) == 2**31 - 1
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(-(2**31)) == 0
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF == 1173551340


def test_partition_for_key_is_the_kafka_formula():
    assert partition_for_key(b"21", 12) == 1173551340 % 12
    assert partition_for_key(b"anything", 1) == 0


@pytest.mark.parametrize("bad", [0, -3, 2**31])
def test_num_partitions_out_of_range(bad):
    with pytest.raises(ValueError):
        partition_for_key(b"k", bad)
    with pytest.raises(ValueError):
        partitions_for_keys(pa.array([b"k"]), bad)


@pytest.mark.parametrize("bad", [2.0, "3", True, None])
def test_num_partitions_wrong_type(bad):
    with pytest.raises(TypeError):
        partition_for_key(b"k", bad)
    with pytest.raises(TypeError):
        partitions_for_keys(pa.array([b"k"]), bad)


def test_num_partitions_numpy_integer_accepted():
    assert partition_for_key(b"abc", np.int64(1000)) == 107
    assert partitions_for_keys(pa.array([b"abc"]), np.int32(1000)).to_pylist() == [107]


# --- partitions_for_keys -----------------------------------------------------------------------


@pytest.mark.parametrize("key_type", [pa.binary(), pa.large_binary()])
@pytest.mark.parametrize("num_partitions", [1, 3, 12, 1000, 2**31 - 1])
def test_columnar_agrees_with_scalar_on_random_keys(key_type, num_partitions):
    rng = random.Random(num_partitions)
    keys = _random_keys(rng, 5000, 700)
    out = partitions_for_keys(pa.array(keys, type=key_type), num_partitions)
    assert isinstance(out, pa.Int32Array)
    assert out.type == pa.int32()
    assert out.null_count == 0
    values = out.to_pylist()
    assert values == [partition_for_key(k, num_partitions) for k in keys]
    assert all(0 <= p < num_partitions for p in values)


def test_columnar_known_vectors():
    keys = [k for k, _ in JAVA_PARTITIONS_OF_1000]
    expected = [p for _, p in JAVA_PARTITIONS_OF_1000]
    assert partitions_for_keys(pa.array(keys, type=pa.binary()), 1000).to_pylist() == expected


def test_nulls_give_null_partitions():
    keys = pa.array([b"a", None, b"abc", None, b"a", b""], type=pa.binary())
    out = partitions_for_keys(keys, 1000)
    assert out.to_pylist() == [524, None, 107, None, 524, 681]
    assert out.null_count == 2


def test_all_null_keys():
    out = partitions_for_keys(pa.array([None, None, None], type=pa.binary()), 8)
    assert out.type == pa.int32()
    assert out.to_pylist() == [None, None, None]
    out = partitions_for_keys(pa.array([None, None]), 8)  # inferred type: null
    assert out.type == pa.int32()
    assert out.to_pylist() == [None, None]


@pytest.mark.parametrize(
    "key_type", [pa.binary(), pa.large_binary(), pa.string(), pa.large_string(), pa.null()])
def test_empty_array(key_type):
    out = partitions_for_keys(pa.array([], type=key_type), 10)
    assert isinstance(out, pa.Int32Array)
    assert len(out) == 0


def test_empty_chunked_array():
    out = partitions_for_keys(pa.chunked_array([], type=pa.binary()), 10)
    assert isinstance(out, pa.Int32Array)
    assert len(out) == 0
    out = partitions_for_keys(pa.chunked_array([pa.array([], pa.binary())] * 2), 10)
    assert isinstance(out, pa.Int32Array)
    assert len(out) == 0


def test_chunked_array_matches_flat():
    rng = random.Random(3)
    keys = _random_keys(rng, 3000, 300)
    keys[5] = None
    keys[2999] = None
    bounds = [(0, 1000), (1000, 1000), (1000, 2999), (2999, 3000)]  # includes an empty chunk
    chunks = [pa.array(keys[a:b], type=pa.binary()) for a, b in bounds]
    chunked = pa.chunked_array(chunks, type=pa.binary())
    out = partitions_for_keys(chunked, 17)
    assert isinstance(out, pa.Int32Array)
    assert len(out) == len(keys)
    assert out.to_pylist() == partitions_for_keys(pa.array(keys, type=pa.binary()), 17).to_pylist()
    assert out.to_pylist() == [None if k is None else partition_for_key(k, 17) for k in keys]


def test_sliced_array():
    keys = pa.array([b"x", b"a", b"ab", None, b"abc", b"y"], type=pa.binary())
    assert partitions_for_keys(keys.slice(1, 4), 1000).to_pylist() == [524, 434, None, 107]


@pytest.mark.parametrize("key_type", [pa.string(), pa.large_string()])
def test_string_keys_hash_their_utf8_bytes(key_type):
    texts = ["21", "foobar", "héllo-ключ-🔑", "", None, "abc", "foobar"]
    out = partitions_for_keys(pa.array(texts, type=key_type), 2**31 - 1)
    expected = [None if t is None else to_positive(murmur2(t.encode("utf-8"))) for t in texts]
    assert out.to_pylist() == expected
    as_binary = partitions_for_keys(
        pa.array([None if t is None else t.encode() for t in texts], type=pa.binary()), 2**31 - 1)
    assert out.to_pylist() == as_binary.to_pylist()


def test_chunked_string_keys():
    chunked = pa.chunked_array([["21", None], ["foobar", "21"]], type=pa.string())
    assert partitions_for_keys(chunked, 1000).to_pylist() == [
        1173551340 % 1000, None, to_positive(-790332482) % 1000, 1173551340 % 1000]


def test_dictionary_input_is_accepted():
    keys = pa.array([b"a", None, b"abc", b"a"], type=pa.binary())
    out = partitions_for_keys(keys.dictionary_encode(), 1000)
    assert out.to_pylist() == [524, None, 107, 524]


def test_chunked_dictionary_input_with_different_dictionaries():
    chunked = pa.chunked_array([
        pa.array([b"a", b"abc"]).dictionary_encode(),
        pa.array([b"ab", None, b"a"]).dictionary_encode(),
    ])
    assert partitions_for_keys(chunked, 1000).to_pylist() == [524, 107, 434, None, 524]


@pytest.mark.parametrize("bad", [pa.array([1, 2, 3]), pa.array([1.0]), pa.array([[b"a"]])])
def test_unsupported_arrow_type(bad):
    with pytest.raises(TypeError):
        partitions_for_keys(bad, 4)


def test_not_an_arrow_array():
    with pytest.raises(TypeError):
        partitions_for_keys([b"a", b"b"], 4)  # type: ignore[arg-type]


def test_hashes_each_distinct_key_once(monkeypatch):
    import lakelog.protocol.partitioner as partitioner

    calls = []
    real = partitioner.murmur2
    monkeypatch.setattr(partitioner, "murmur2", lambda data: calls.append(data) or real(data))
    keys = pa.array([b"k1", b"k2", b"k1", None, b"k2", b"k1"] * 1000, type=pa.binary())
    out = partitioner.partitions_for_keys(keys, 10)
    assert sorted(calls) == [b"k1", b"k2"]
    assert out.null_count == 1000
