"""Kafka-compatible key partitioning: a key lands on the partition Kafka's Java producer picks.

Kafka's Java producer (``org.apache.kafka.clients.producer.internals.BuiltInPartitioner.partitionForKey``,
and before Kafka 3.3 ``DefaultPartitioner``) maps a record with a non-null serialized key to::

    Utils.toPositive(Utils.murmur2(serializedKey)) % numPartitions

where ``Utils`` is ``org.apache.kafka.common.utils.Utils``. :func:`murmur2` and :func:`to_positive` below
reproduce those two methods bit for bit (Java's wrapping signed 32-bit ``int`` arithmetic), so the
gateway places a key on the same partition number a Java client would, and consumers that rely on
key → partition stickiness see no difference.

Keyless records (null keys) are not placed here: Kafka spreads them with its sticky partitioner, and
the caller does its own spreading. :func:`partitions_for_keys` therefore answers null for them.

Coordinators are found by another rule: a consumer group's or a transactional id's partition of its
internal topic (``__consumer_offsets``, ``__transaction_state``) is ``Utils.abs(id.hashCode) % n``
with Java's ``String.hashCode`` (:func:`java_string_hash`, :func:`coordinator_partition`).
"""

from __future__ import annotations

import operator
import struct

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["murmur2", "to_positive", "partition_for_key", "partitions_for_keys", "java_string_hash",
           "coordinator_partition"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK32 = 0xFFFFFFFF
_MAX_PARTITIONS = 0x7FFFFFFF  # Java int partition count

# Arrow key types accepted by partitions_for_keys, and the binary type each is viewed as (zero copy).
_AS_BINARY = {
    pa.binary(): pa.binary(),
    pa.large_binary(): pa.large_binary(),
    pa.string(): pa.binary(),
    pa.large_string(): pa.large_binary(),
}


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """32-bit murmur2 hash of a byte string, exactly as Kafka's ``Utils.murmur2(byte[])`` returns it.

    Port of ``org.apache.kafka.common.utils.Utils.murmur2``: seed ``0x9747b28c``, mixing constants
    ``m = 0x5bd1e995`` and ``r = 24``, little-endian 4-byte blocks, the trailing 1-3 bytes folded in
    by the Java ``switch (length % 4)`` with its ``case 3 → 2 → 1`` fall-through, then the final
    avalanche (``h ^= h >>> 13; h *= m; h ^= h >>> 15``). Arithmetic wraps at 32 bits like Java
    ``int``; ``>>>`` is the unsigned shift.

    Args:
        data: the serialized key, any length (0 included). A ``str`` is refused: encode it first
            (Kafka's ``StringSerializer`` uses UTF-8).

    Returns:
        The hash as Java's signed ``int``: an ``int`` in ``[-2**31, 2**31 - 1]``.
        E.g. ``murmur2(b"21") == -973932308`` (Kafka's ``UtilsTest.testMurmur2``).
    """
    if isinstance(data, memoryview):
        data = data.tobytes()
    elif not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"murmur2 hashes bytes, not {type(data).__name__}")
    length = len(data)
    m = _M
    h = (_SEED ^ length) & _MASK32

    # Body: length // 4 little-endian blocks, each mixed into h.
    for k in struct.unpack_from(f"<{length >> 2}I", data):
        k = (k * m) & _MASK32
        k ^= k >> _R
        k = (k * m) & _MASK32
        h = ((h * m) & _MASK32) ^ k

    # Tail: Java's switch (length % 4) { case 3: ...; case 2: ...; case 1: ...; h *= m; }.
    tail = length & 3
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & _MASK32

    # Final mix.
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive(int)``: ``n & 0x7fffffff``, an ``int`` in ``[0, 2**31 - 1]``.

    Not ``abs``: a negative ``n`` keeps its low 31 bits (``to_positive(-1) == 2**31 - 1``,
    ``to_positive(-2**31) == 0``), which is what keeps partition numbers Java-compatible.
    """
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """Partition of one serialized key, as Kafka's ``BuiltInPartitioner.partitionForKey`` computes it.

    ``to_positive(murmur2(key)) % num_partitions`` (the same rule as the pre-3.3
    ``DefaultPartitioner``).

    Args:
        key: the serialized key bytes (not null: keyless records are spread by the caller).
        num_partitions: partition count of the topic, ``1 <= num_partitions <= 2**31 - 1``.

    Returns:
        The partition number, an ``int`` in ``[0, num_partitions)``.
    """
    num_partitions = _check_num_partitions(num_partitions)
    return to_positive(murmur2(key)) % num_partitions


def partitions_for_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> pa.Int32Array:
    """Partition of every key of a column, as Kafka's Java producer would pick it.

    Columnar: the keys are dictionary-encoded (``pyarrow.compute.dictionary_encode``), only the
    distinct keys are hashed (:func:`partition_for_key`, in Python), and the per-distinct-key
    partitions are spread back over the rows with ``take`` on the dictionary indices, so the cost in
    Python is per distinct key, not per record.

    Args:
        keys: N keys, a ``pa.Array`` or ``pa.ChunkedArray`` of type ``binary``, ``large_binary``,
            ``string`` or ``large_string`` (strings hash their UTF-8 bytes, as Kafka's
            ``StringSerializer`` sends them), or of type ``null`` (all keys null). A dictionary array
            of one of those value types is accepted as is.
        num_partitions: partition count of the topic, ``1 <= num_partitions <= 2**31 - 1``.

    Returns:
        A single (not chunked) ``pa.Int32Array`` of length N: row i holds the partition of
        ``keys[i]`` in ``[0, num_partitions)``, or null where ``keys[i]`` is null (the caller spreads
        keyless records itself).

    Raises:
        TypeError: ``keys`` is not an Arrow array of an accepted type.
        ValueError: ``num_partitions`` is out of range.
    """
    num_partitions = _check_num_partitions(num_partitions)
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        raise TypeError(f"keys must be a pyarrow Array or ChunkedArray, not {type(keys).__name__}")

    key_type = keys.type
    if pa.types.is_null(key_type):
        return pa.nulls(len(keys), type=pa.int32())
    if pa.types.is_dictionary(key_type):
        value_type = key_type.value_type
        encoded = keys
    else:
        value_type = key_type
        encoded = None
    if value_type not in _AS_BINARY:
        raise TypeError(
            f"keys must be binary, large_binary, string or large_string, not {key_type}")
    if encoded is None:
        encoded = pc.dictionary_encode(keys)  # nulls become null indices (null_encoding="mask")

    if isinstance(encoded, pa.ChunkedArray):
        if encoded.num_chunks == 0:
            return pa.array([], type=pa.int32())
        # One shared dictionary for every chunk, so the distinct keys are hashed once.
        encoded = encoded.unify_dictionaries()
        dictionary = encoded.chunk(0).dictionary
        indices = pa.concat_arrays([chunk.indices for chunk in encoded.chunks])
    else:
        dictionary = encoded.dictionary
        indices = encoded.indices

    # Hash the distinct keys as bytes: string → binary is a zero-copy view of the UTF-8 data.
    distinct = dictionary.cast(_AS_BINARY[value_type]).to_pylist()
    per_key = pa.array(
        [None if key is None else to_positive(murmur2(key)) % num_partitions for key in distinct],
        type=pa.int32())
    return pc.take(per_key, indices)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` of ``s``: ``s[0]*31^(n-1) + ... + s[n-1]`` over its UTF-16 code units
    (a character outside the BMP counts as its surrogate pair, as on the JVM), wrapping like Java's
    32-bit signed ``int``.

    Returns:
        An ``int`` in ``[-2**31, 2**31 - 1]``; e.g. ``java_string_hash("foo") == 101574`` and
        ``java_string_hash("polygenelubricants") == -2**31`` (``Integer.MIN_VALUE``).
    """
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def coordinator_partition(key: str, num_partitions: int) -> int:
    """The partition of an internal topic whose leader coordinates ``key`` (a group id or a transactional
    id): ``Utils.abs(key.hashCode) % num_partitions``, Kafka's ``GroupMetadataManager.partitionFor`` and
    ``TransactionStateManager.partitionFor``.

    ``Utils.abs`` (``org.apache.kafka.common.utils.Utils.abs``) maps ``Integer.MIN_VALUE`` to 0, unlike
    ``Math.abs``; every other hash keeps its absolute value (not :func:`to_positive`'s low 31 bits), so an
    id lands on the same partition number as in Kafka.

    Args:
        key: the group id or transactional id.
        num_partitions: the internal topic's partition count, ``1 <= num_partitions <= 2**31 - 1``.

    Returns:
        The partition number, an ``int`` in ``[0, num_partitions)``.

    Raises:
        ValueError: ``num_partitions`` is out of range.
    """
    num_partitions = _check_num_partitions(num_partitions)
    h = java_string_hash(key)
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


def _check_num_partitions(num_partitions: int) -> int:
    """``num_partitions`` as a Python ``int`` (numpy integers accepted), checked to be a Java int >= 1."""
    if isinstance(num_partitions, bool):
        raise TypeError("num_partitions must be an int, not bool")
    try:
        n = operator.index(num_partitions)
    except TypeError:
        raise TypeError(f"num_partitions must be an int, not {type(num_partitions).__name__}") from None
    if not 1 <= n <= _MAX_PARTITIONS:
        raise ValueError(f"num_partitions must be in [1, {_MAX_PARTITIONS}], got {n}")
    return n
