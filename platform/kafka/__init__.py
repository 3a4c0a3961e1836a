"""The Kafka listener (layer 4, a front door beside :mod:`lakelog.ingest_api`): unchanged Kafka clients
produce to and consume from lakelog over Kafka's own wire protocol.

Each broker opens the listeners of ``listeners`` (:mod:`lakelog.kafka.listeners`) and registers their
``advertised.listeners`` in ZooKeeper beside its HTTP URL. A connection (:mod:`lakelog.kafka.server`)
reads one size-prefixed request at a time, as Kafka does; :mod:`lakelog.kafka.codec` decodes it with
kafka-python's ``kafka.protocol`` (one class per API, built from Kafka's JSON message specs) and
:mod:`lakelog.kafka.handlers` turns it into the request layer's typed operations
(:class:`~lakelog.requests.handler.RequestHandler`), so every rule (validation, authorization, leader
routing, idempotence) is the same as over HTTP. Record batches are decoded to and built from the log's
Arrow columns by :mod:`lakelog.kafka.records`; :mod:`lakelog.kafka.errors` maps lakelog's errors to
Kafka's error codes in one table; :mod:`lakelog.kafka.versions` is the one table of the APIs and
versions served.
"""
