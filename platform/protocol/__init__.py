"""The wire vocabulary shared by the gateway and every client of it (layer 0).

- :mod:`~lakelog.protocol.media_types`: the content types of produce, fetch and replica bodies;
- :mod:`~lakelog.protocol.arrow_ipc`: Arrow IPC stream bodies;
- :mod:`~lakelog.protocol.partitioner`: Kafka's murmur2 key partitioner, bit for bit;
- :mod:`~lakelog.protocol.producer_headers`, :mod:`~lakelog.protocol.fetch_requests`,
  :mod:`~lakelog.protocol.client_id`: the headers and parameters of produce and fetch requests and the
  client id header;
- :mod:`~lakelog.protocol.log_info`: a partition log's offsets and table, as the gateway answers them;
- :mod:`~lakelog.protocol.errors`: :func:`~lakelog.protocol.errors.error_from_response`, which turns a
  REST error body back into the :class:`~lakelog.errors.LakelogError` the server raised.

Nothing here imports from a higher layer: the broker, the HTTP client (:mod:`lakelog.client`), the
follower, consumer groups and the Spark source all speak through these modules.
"""
