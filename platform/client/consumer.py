"""A REST Proxy v2 consumer instance seen from the client: :class:`HttpConsumer` (like a ``KafkaConsumer``
over HTTP), made by :meth:`lakelog.client.groups.GroupsClient.create_consumer`."""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Sequence
from typing import Any

import httpx
import orjson

from lakelog.client.answers import GatewayError, answered
from lakelog.client.tls import describe_tls_failure, disconnect_hint
from lakelog.protocol import media_types
from lakelog.protocol.client_id import CLIENT_ID_HEADER

__all__ = ["HttpConsumer"]


class HttpConsumer:
    """A REST Proxy v2 consumer instance seen from the client (like a ``KafkaConsumer`` over HTTP).

    Made by :meth:`lakelog.client.groups.GroupsClient.create_consumer`. Methods raise :class:`GatewayError` with REST Proxy's
    codes (40403 unknown instance, 40601 format mismatch, 40901/40903 subscription conflicts, 40904
    commit from a stale generation). Use as a context manager to delete the instance at the end.
    """

    def __init__(self, base_uri: str, *, group: str, instance_id: str, format: str = "binary",
                 timeout_s: float = 60.0, auth: httpx.Auth | None = None, client_id: str | None = None,
                 verify: ssl.SSLContext | bool = True) -> None:
        self.base_uri = base_uri.rstrip("/")
        self.group = group
        self.instance_id = instance_id
        self.format = format
        self.timeout_s = timeout_s
        self.http = httpx.Client(timeout=timeout_s, auth=auth, verify=verify,
                                 headers={CLIENT_ID_HEADER: client_id} if client_id else {})
        self.closed = False
        self.last_generation: int | None = None

    def _call(self, method: str, path: str = "", *, body: Any = None, **kwargs: Any) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if body is not None:
            kwargs["content"] = orjson.dumps(body)
            headers.setdefault("Content-Type", media_types.V2)

        def send() -> httpx.Response:
            try:
                return self.http.request(method, self.base_uri + path, headers=headers, **kwargs)
            except httpx.TransportError as e:  # as LakelogClient: the builtin ConnectionError, never httpx's
                raise ConnectionError(describe_tls_failure(e, url=self.base_uri) or f"the consumer instance at "
                                      f"{self.base_uri} did not answer: {e}{disconnect_hint(e, url=self.base_uri)}") from e

        return answered(send, timeout_s=self.timeout_s)

    def subscribe(self, topics: Sequence[str] | None = None, *, pattern: str | None = None) -> None:
        """Subscribe to ``topics`` or to the topics matching the regex ``pattern`` (now and later)."""
        self._call("POST", "/subscription", body={"topics": list(topics)} if pattern is None else {"topic_pattern": pattern})

    def subscription(self) -> list[str]:
        return self._call("GET", "/subscription").json()["topics"]

    def unsubscribe(self) -> None:
        self._call("DELETE", "/subscription")

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Manual assignment of ``[(topic, partition)]``."""
        self._call("POST", "/assignments", body={"partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    def assignment(self) -> list[tuple[str, int]]:
        """The partitions the instance reads now (empty until its group's rebalance completes)."""
        return [(p["topic"], p["partition"]) for p in self._call("GET", "/assignments").json()["partitions"]]

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._call("POST", "/positions", body={"offsets": [{"topic": topic, "partition": partition, "offset": offset}]})

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._call("POST", "/positions/beginning", body={"partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    def seek_to_end(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._call("POST", "/positions/end", body={"partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    def poll(self, *, timeout_ms: int = 1000, max_bytes: int | None = None) -> list[dict]:
        """``GET .../records``: REST Proxy records ``{"topic", "key", "value", "partition", "offset", ...}``
        (binary format: base64 keys and values). ``last_generation`` is then the group generation
        they were read in (None outside group membership)."""
        params: dict[str, int] = {"timeout": timeout_ms}
        if max_bytes is not None:
            params["max_bytes"] = max_bytes
        accept = media_types.BINARY_V2 if self.format == "binary" else media_types.JSON_V2
        resp = self._call("GET", "/records", params=params, headers={"Accept": accept})
        generation = resp.headers.get("X-Lakelog-Generation")
        self.last_generation = int(generation) if generation is not None else None
        return orjson.loads(resp.content)

    def commit(self, offsets: Sequence[dict] | None = None) -> None:
        """Commit ``[{"topic", "partition", "offset"}]`` (offset = last record processed), or with None
        every record fetched so far."""
        self._call("POST", "/offsets", body={"offsets": list(offsets)} if offsets else None)

    def committed(self, partitions: Iterable[tuple[str, int]]) -> list[dict]:
        """The group's committed offsets (the next offset to read) of ``partitions``."""
        body = {"partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        return self._call("GET", "/offsets", body=body).json()["offsets"]

    def close(self) -> None:
        """Delete the instance (``DELETE``; with auto commit its positions are committed first)."""
        if not self.closed:
            self.closed = True
            try:
                self._call("DELETE")
            except GatewayError as e:
                if e.error_code != 40403:  # already gone (expired): nothing to delete
                    raise
            finally:
                self.http.close()

    def __enter__(self) -> "HttpConsumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
