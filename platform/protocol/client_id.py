"""Kafka's ``client.id`` over HTTP: the request header that names the client (client quotas, logs).

A client sends ``X-Lakelog-Client-Id: <client.id>`` with each request
(:class:`~lakelog.client.LakelogClient` does when given ``client_id``); brokers measure and
enforce client quotas per user, per client id and per (user, client id) (:mod:`lakelog.security.quotas`).
A request without the header has the empty client id, to which ``lakelog quotas alter --client-id
'<default>'`` applies.
"""

from __future__ import annotations

__all__ = ["CLIENT_ID_HEADER"]

#: The request header carrying Kafka's ``client.id``.
CLIENT_ID_HEADER = "X-Lakelog-Client-Id"
