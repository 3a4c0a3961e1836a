"""Requests about consumer groups' committed offsets (``/consumers/{group}/offsets``, lag, reset, delete,
members); mixed into :class:`~lakelog.protocol.http_client.LakelogClient`."""

from __future__ import annotations

from typing import Any, Sequence

import httpx

__all__ = ["GroupOffsetRequests"]


class GroupOffsetRequests:
    """Group offset requests; the class mixing this in provides ``_request``."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

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
        return self._request("POST", f"/consumers/{group}/offsets", json=body).json()

    def committed_offsets(self, group: str, topic: str | None = None) -> list[dict]:
        """The group's committed offsets: ``[{"topic", "partition", "offset", "metadata", ...}]``."""
        params = {"topic": topic} if topic else None
        return self._request("GET", f"/consumers/{group}/offsets", params=params).json()["offsets"]

    def list_groups(self) -> list[str]:
        """The groups with committed offsets (those the principal may Describe, with ACLs checked)."""
        return self._request("GET", "/consumers").json()

    def group_lag(self, group: str) -> dict:
        """Committed offset, log end offset, high watermark and lag per partition of the group's topics."""
        return self._request("GET", f"/consumers/{group}/lag").json()

    def reset_offsets(self, group: str, *, to: str, value: int | None = None, topics: Sequence[str] | None = None,
                      partitions: Sequence[tuple[str, int]] | None = None, dry_run: bool = False) -> dict:
        """Move a group without active members (``POST /consumers/{group}/offsets/reset``): ``to`` one of
        ``earliest``, ``latest``, ``timestamp``, ``offset``, ``current``, ``shift``, ``duration`` (``value``:
        ms since the epoch, an offset, a shift, ms before now); ``topics`` (all their partitions) and/or
        ``partitions`` (``(topic, partition)`` s); ``dry_run``: answer the offsets, commit nothing.
        Returns ``{"committed": bool, "offsets": [...]}``."""
        body = {"to": to, "value": value, "topics": list(topics) if topics else None, "dry_run": dry_run,
                "partitions": [{"topic": t, "partition": p} for t, p in partitions] if partitions else None}
        return self._request("POST", f"/consumers/{group}/offsets/reset", json=body).json()

    def delete_offsets(self, group: str, topic: str, partitions: Sequence[int] | None = None) -> list[dict]:
        """Delete a group's committed offsets of ``topic`` (``partitions``, default all): the
        ``[{"topic", "partition"}]`` deleted (``POST /consumers/{group}/offsets/delete``)."""
        body = {"topic": topic, "partitions": list(partitions) if partitions is not None else None}
        return self._request("POST", f"/consumers/{group}/offsets/delete", json=body).json()["deleted"]

    def group_members(self, group: str) -> dict:
        """Members of ``group`` cluster-wide with generation and assignment (``GET /lakelog/v1/consumers/{group}/members``)."""
        return self._request("GET", f"/lakelog/v1/consumers/{group}/members").json()
