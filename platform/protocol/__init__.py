"""The wire vocabulary shared by the gateway and every client of it (layer 0).

- :mod:`~lakelog.protocol.media_types`: the content types of produce, fetch and replica bodies;
- :mod:`~lakelog.protocol.arrow_ipc`: Arrow IPC stream bodies;
- :mod:`~lakelog.protocol.partitioner`: Kafka's murmur2 key partitioner, bit for bit;
- :mod:`~lakelog.protocol.errors`: :func:`~lakelog.protocol.errors.error_from_response`, which turns a
  REST error body back into the :class:`~lakelog.errors.LakelogError` the server raised.

Nothing here imports from a higher layer: the broker, the HTTP client, the follower, consumer groups
and the Spark source all speak through these modules.
"""
