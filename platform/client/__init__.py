"""The HTTP client of the gateway (layer 0.5: it imports only the wire vocabulary, errors and config).

- :class:`LakelogClient` (:mod:`~lakelog.client.transport`): bootstrap servers, retries, leader routing,
  produce and fetch; an idempotent producer by default (``enable_idempotence=False`` turns it off;
  :mod:`~lakelog.client.idempotent_producer`). Its facades, by composition: ``client.admin`` (topics,
  configs, partitions), ``client.groups`` (consumer instances, offsets), ``client.security`` (ACLs, users,
  quotas), ``client.transactions`` (producer ids, the transactional producer).
- :class:`HttpConsumer`: a REST Proxy v2 consumer instance (``client.groups.create_consumer(...)``).
- :class:`ClientSettings`: the connection settings with Kafka's client names, read from flags,
  ``LAKELOG_*``, a ``--command-config`` file or Spark options; ``.client()`` builds a :class:`LakelogClient`.
- :class:`BearerToken` (:mod:`~lakelog.client.auth`), TLS (:mod:`~lakelog.client.tls`).

An error answer comes back as the class the server raised (``UnknownTopicError``, ``NotLeaderError``,
``IllegalGenerationError``, ``OutOfOrderSequenceError``, ...: every class of :mod:`lakelog.errors`), always
also a :class:`GatewayError`; no answer at all (connection refused or dropped, a timeout, a TLS failure) is
the builtin ``ConnectionError``, never an httpx error.
"""

from __future__ import annotations

from lakelog.client.answers import GatewayError
from lakelog.client.auth import BearerToken
from lakelog.client.consumer import HttpConsumer
from lakelog.client.settings import ClientSettings
from lakelog.client.transport import FetchPage, LakelogClient, arrow_body, parse_bootstrap

__all__ = ["BearerToken", "ClientSettings", "FetchPage", "GatewayError", "HttpConsumer", "LakelogClient",
           "arrow_body", "parse_bootstrap"]
