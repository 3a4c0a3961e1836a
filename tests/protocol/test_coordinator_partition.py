"""Kafka's coordinator partition rule: ``Utils.abs(id.hashCode) % n`` with Java's ``String.hashCode``."""

from __future__ import annotations

import pytest

from lakelog.protocol.partitioner import coordinator_partition, java_string_hash


@pytest.mark.parametrize("s, expected", [
    ("", 0),
    ("foo", 101574),
    ("hello", 99162322),
    ("polygenelubricants", -(1 << 31)),  # Integer.MIN_VALUE
    ("Aa", 2112),
    ("BB", 2112),  # Java's classic collision with "Aa"
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a surrogate pair counts as two UTF-16 code units
    ("é", 233),
])
def test_java_string_hash_matches_javas_string_hashcode(s, expected):
    assert java_string_hash(s) == expected


def test_java_string_hash_wraps_like_a_java_int():
    # values printed by a JVM (String.hashCode); long strings overflow 32 bits and wrap
    assert java_string_hash("console-consumer-1") == 35782224
    assert java_string_hash("abcdefghijklmnopqrstuvwxyz") == 958031277
    assert java_string_hash("my-transactional-id") == -959806496


def test_coordinator_partition_is_the_absolute_hash_modulo_the_partition_count():
    assert coordinator_partition("foo", 50) == 24  # 101574 % 50
    assert coordinator_partition("hello", 12) == 10  # 99162322 % 12
    assert coordinator_partition("console-consumer-1", 7) == 2  # 35782224 % 7
    assert coordinator_partition("my-transactional-id", 50) == 46  # abs(-959806496) % 50


def test_coordinator_partition_of_integer_min_value_hash_is_zero():
    # Utils.abs(Integer.MIN_VALUE) == 0, where Math.abs would stay negative
    assert coordinator_partition("polygenelubricants", 12) == 0
    assert coordinator_partition("polygenelubricants", 7) == 0


@pytest.mark.parametrize("n", [0, -1, 2**31])
def test_coordinator_partition_refuses_a_partition_count_out_of_range(n):
    with pytest.raises(ValueError):
        coordinator_partition("foo", n)
