"""Requests about consumer groups: REST Proxy v2 consumer instances (:class:`~lakelog.client.HttpConsumer`),
committed offsets (``/consumers/{group}/offsets``), lag, reset, delete, members: :class:`GroupsClient`,
:attr:`LakelogClient.groups <lakelog.client.LakelogClient.groups>` (``kafka-consumer-groups``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from lakelog.client.consumer import HttpConsumer
from lakelog.protocol import media_types
from lakelog.protocol.fetch_requests import IsolationLevel

if TYPE_CHECKING:
    from lakelog.client.transport import LakelogClient

__all__ = ["GroupsClient"]


class GroupsClient:
    """Consumer group requests of one :class:`~lakelog.client.LakelogClient` (its transport sends them).

    Every method raises :class:`~lakelog.client.GatewayError` (the server's error class) for an error
    answer and ``ConnectionError`` when no gateway answers.
    """

    def __init__(self, transport: "LakelogClient") -> None:
        self.transport = transport

    def create_consumer(self, group: str, *, name: str | None = None, format: str = "binary",
                        auto_offset_reset: str = "latest", auto_commit: bool = True, assignor: str | None = None,
                        request_timeout_ms: int | None = None,
                        isolation_level: IsolationLevel | None = None) -> HttpConsumer:
        """Create a REST Proxy v2 consumer instance in ``group`` (``POST /consumers/{group}``); its
        ``isolation.level`` is ``isolation_level`` (None: the default, read_uncommitted, as Kafka's).

        Returns an :class:`~lakelog.client.HttpConsumer` talking to the instance's ``base_uri`` (the broker
        that holds it). Raises :class:`~lakelog.client.GatewayError` (40902 when the name is taken, 42204 for
        a bad config); ConnectionError when the instance lives on a plain-HTTP broker and this client talks HTTPS.
        """
        body: dict[str, Any] = {"format": format, "auto.offset.reset": auto_offset_reset,
                                "auto.commit.enable": "true" if auto_commit else "false"}
        if name is not None:
            body["name"] = name
        if assignor is not None:
            body["partition.assignment.strategy"] = assignor
        if request_timeout_ms is not None:
            body["consumer.request.timeout.ms"] = request_timeout_ms
        if isolation_level is not None:
            body["isolation.level"] = isolation_level
        t = self.transport
        data = t.request("POST", f"/consumers/{group}", content=orjson.dumps(body),
                         headers={"Content-Type": media_types.V2}).json()
        if t.downgrades(data["base_uri"]):
            raise ConnectionError(f"the consumer instance lives at {data['base_uri']}, plain HTTP, but this client "
                                  "talks HTTPS: give every broker TLS (ssl.certfile) before sending credentials there")
        return HttpConsumer(data["base_uri"], group=group, instance_id=data["instance_id"], format=format,
                            timeout_s=t.http.timeout.read or 60.0, auth=t.auth, client_id=t.client_id,
                            verify=t.verify)

    def commit_offsets(self, group: str, offsets: Sequence[dict], *, transaction_app_id: str | None = None,
                       transaction_version: int | None = None, generation_id: int | None = None) -> dict:
        """Commit ``[{"topic", "partition", "offset"}]`` for ``group`` in one Delta transaction.

        With ``transaction_app_id``/``transaction_version`` a replay of the same (or an older) version
        is a no-op (the answer has ``"committed": false``). Raises :class:`GatewayError`
        (40904 when ``generation_id`` is older than the group's).
        """
        body: dict = {"offsets": [dict(o) for o in offsets]}
        if generation_id is not None:
            body["generation_id"] = generation_id
        if transaction_app_id is not None and transaction_version is not None:
            body["transaction"] = {"app_id": transaction_app_id, "version": transaction_version}
        return self.transport.request("POST", f"/consumers/{group}/offsets", json=body).json()

    def committed_offsets(self, group: str, topic: str | None = None) -> list[dict]:
        """The group's committed offsets: ``[{"topic", "partition", "offset", "metadata", ...}]``."""
        params = {"topic": topic} if topic else None
        return self.transport.request("GET", f"/consumers/{group}/offsets", params=params).json()["offsets"]

    def list_groups(self) -> list[str]:
        """The groups with committed offsets (those the principal may Describe, with ACLs checked)."""
        return self.transport.request("GET", "/consumers").json()

    def group_lag(self, group: str) -> dict:
        """Committed offset, log end offset, high watermark and lag per partition of the group's topics."""
        return self.transport.request("GET", f"/consumers/{group}/lag").json()

    def reset_offsets(self, group: str, *, to: str, value: int | None = None, topics: Sequence[str] | None = None,
                      partitions: Sequence[tuple[str, int]] | None = None, dry_run: bool = False) -> dict:
        """Move a group without active members (``POST /consumers/{group}/offsets/reset``): ``to`` one of
        ``earliest``, ``latest``, ``timestamp``, ``offset``, ``current``, ``shift``, ``duration`` (``value``:
        ms since the epoch, an offset, a shift, ms before now); ``topics`` (all their partitions) and/or
        ``partitions`` (``(topic, partition)`` s); ``dry_run``: answer the offsets, commit nothing.
        Returns ``{"committed": bool, "offsets": [...]}``."""
        body = {"to": to, "value": value, "topics": list(topics) if topics else None, "dry_run": dry_run,
                "partitions": [{"topic": t, "partition": p} for t, p in partitions] if partitions else None}
        return self.transport.request("POST", f"/consumers/{group}/offsets/reset", json=body).json()

    def delete_offsets(self, group: str, topic: str, partitions: Sequence[int] | None = None) -> list[dict]:
        """Delete a group's committed offsets of ``topic`` (``partitions``, default all): the
        ``[{"topic", "partition"}]`` deleted (``POST /consumers/{group}/offsets/delete``)."""
        body = {"topic": topic, "partitions": list(partitions) if partitions is not None else None}
        return self.transport.request("POST", f"/consumers/{group}/offsets/delete", json=body).json()["deleted"]

    def group_members(self, group: str) -> dict:
        """Members of ``group`` cluster-wide with generation and assignment (``GET /lakelog/v1/consumers/{group}/members``)."""
        return self.transport.request("GET", f"/lakelog/v1/consumers/{group}/members").json()
