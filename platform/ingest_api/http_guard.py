"""Slow and idle HTTP clients: read timeouts and a cap on open connections, in uvicorn's protocol.

uvicorn's httptools protocol has no header or body read timeout: a connection that sends nothing, or
its request a byte at a time, is held open forever (only the keep-alive timeout after a response
closes connections). :func:`guarded_protocol` builds a subclass of it that, per connection:

1. **idle**: a connection with no request in progress is closed after ``connections.max.idle.ms``
   (from its accept, and after each response: uvicorn's keep-alive timer gets the same value);
2. **headers**: from a request's first byte, its headers must be complete within
   ``request.header.timeout.ms``, else 408 / 40802 is answered and the connection closed;
3. **body**: from the end of the headers, the body must be complete by ``request.body.timeout.ms``
   plus one second per ``request.body.min.bytes.per.sec`` bytes received (Apache mod_reqtimeout's
   rule: a fast upload keeps extending its deadline, a trickle does not); while the server itself has
   paused reading (the app has not consumed the body yet), the clock restarts. Else 408 / 40802 if no
   answer was started, and the connection is closed (the app sees a client disconnect);
4. **cap**: a connection accepted while ``max.connections`` are open is answered 503 / 50305
   (retriable, ``Retry-After: 1``, ``Connection: close``) as soon as its request headers arrive,
   without reaching the app.

While the app works on a request (a long-poll fetch, an acks=all produce) no timer runs: the app's
own timeouts apply.

On a TLS connection the protocol fills in the ASGI TLS extension (``scope["extensions"]["tls"]``: the
client's certificate as PEM in ``client_cert_chain``, its RFC 4514 subject in ``client_cert_name``,
``tls_version``, ``cipher_suite``; ``server_cert`` and ``client_cert_error`` are None: Python's ``ssl``
gives neither, and a certificate failing verification ends the handshake). uvicorn 0.54 does not provide
that extension (uvicorn#1119, #3133); it is read once per connection, after the handshake.

The protocol also sends an answer's head and its first body chunk in one write (uvicorn writes the head
as soon as the app starts the answer): one socket write, and one wake-up of the client, per small
answer instead of two. A head whose body does not follow within the same event-loop iteration (a
streamed answer) is written at the end of that iteration.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import dataclass
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from lakelog.errors import RETRIABLE_HEADER, LakelogError
from lakelog.ingest_api.errors import RequestTimeoutError, TooManyConnectionsError
from lakelog.security.tls_principal import certificate_subject

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits of :func:`guarded_protocol` (see the module docstring), in seconds and bytes."""

    idle_s: float
    header_timeout_s: float
    body_timeout_s: float
    body_min_bytes_per_s: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: Any) -> "ConnectionLimits":
        """From a :class:`~lakelog.config.BrokerSettings`."""
        return cls(idle_s=settings.connections_max_idle_ms / 1000.0,
                   header_timeout_s=settings.request_header_timeout_ms / 1000.0,
                   body_timeout_s=settings.request_body_timeout_ms / 1000.0,
                   body_min_bytes_per_s=float(settings.request_body_min_bytes_per_sec),
                   max_connections=settings.max_connections)


def raw_error_response(exc: LakelogError, *, extra_headers: dict[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 error answer with REST Proxy's body and ``Connection: close``, as bytes."""
    body = orjson.dumps(exc.to_body())
    reason = {408: "Request Timeout", 503: "Service Unavailable"}.get(exc.http_status, "Error")
    headers = {"content-type": "application/json", "content-length": str(len(body)), "connection": "close",
               RETRIABLE_HEADER: "true" if exc.retriable else "false", **(extra_headers or {})}
    head = f"HTTP/1.1 {exc.http_status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


async def _too_many_connections(scope, receive, send) -> None:
    """ASGI app answering 503 / 50305 (a connection over ``max.connections``)."""
    exc = TooManyConnectionsError("Too many open connections to this broker (max.connections); retry later.")
    body = orjson.dumps(exc.to_body())
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"), (b"retry-after", b"1"), (RETRIABLE_HEADER.lower().encode(), b"true")]})
    await send({"type": "http.response.body", "body": body})


class _HeadWithBody:
    """The transport as one request's answer sees it: the first write (the head) is held until the next
    write (the body), or until the end of this event-loop iteration, and both go out as one write."""

    __slots__ = ("_transport", "_held", "_first")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: bytes | None = None
        self._first = True

    def write(self, data: bytes) -> None:
        if self._first:
            self._first = False
            self._held = data
            asyncio.get_running_loop().call_soon(self.flush)
            return
        if self._held is not None:
            data, self._held = self._held + data, None
        self._transport.write(data)

    def flush(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the read timeouts and the connection cap above.

    Build with :func:`guarded_protocol` (the limits are a class attribute of the built subclass)."""

    limits: ConnectionLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._body_started = 0.0
        self._body_received = 0
        self._tls: dict | None = None

    # -- phases ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        over = len(self.connections) >= self.limits.max_connections
        super().connection_made(transport)
        if over:
            self.app = _too_many_connections
        self._tls = tls_extension(transport)
        self._arm(self.limits.idle_s, self._on_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[typeddict-unknown-key]
        self._unset_keepalive_if_required()
        self._arm(self.limits.header_timeout_s, self._on_header_timeout)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        if self.cycle is not None:
            self.cycle.transport = _HeadWithBody(self.transport)  # type: ignore[assignment]
        if self._has_body():
            self._body_started = time.monotonic()
            self._body_received = 0
            self._arm(self.limits.body_timeout_s, self._on_body_deadline)

    def on_body(self, body: bytes) -> None:
        self._body_received += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _has_body(self) -> bool:
        for name, value in self.headers:
            if name == b"content-length":
                return value.strip() not in (b"0", b"")
            if name == b"transfer-encoding":
                return True
        return False

    # -- timers ---------------------------------------------------------------------------------

    def _arm(self, delay_s: float, callback) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay_s, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_idle(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _on_header_timeout(self) -> None:
        self._timer = None
        self._answer_timeout(f"The request headers did not arrive within request.header.timeout.ms="
                             f"{self.limits.header_timeout_s * 1000:.0f}.")

    def _on_body_deadline(self) -> None:
        self._timer = None
        now = time.monotonic()
        if self.flow is not None and self.flow.read_paused:
            # the server stopped reading (the app has not consumed the body yet): not the client's fault
            self._body_started, self._body_received = now, 0
        deadline = self._body_started + self.limits.body_timeout_s + \
            self._body_received / max(self.limits.body_min_bytes_per_s, 1e-9)
        if now < deadline:
            self._arm(deadline - now, self._on_body_deadline)
            return
        self._answer_timeout(f"The request body did not arrive in time: {self._body_received} bytes after "
                             f"{now - self._body_started:.1f} s (request.body.timeout.ms="
                             f"{self.limits.body_timeout_s * 1000:.0f}, request.body.min.bytes.per.sec="
                             f"{self.limits.body_min_bytes_per_s:.0f}).")

    def _answer_timeout(self, message: str) -> None:
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(raw_error_response(RequestTimeoutError(message)))
        if self.cycle is not None:  # the app (if reading the body) sees a disconnect, its answer goes nowhere
            self.cycle.keep_alive = False
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        log.debug("closing a slow connection from %s: %s", self.client, message)
        self.transport.close()


def tls_extension(transport: asyncio.BaseTransport) -> dict | None:
    """The ASGI TLS extension's dict of a connection (None when it is not TLS): ``client_cert_chain``
    (``[PEM]``, empty without a client certificate), ``client_cert_name`` (its RFC 4514 subject, or None),
    ``tls_version`` (e.g. ``0x0304``), ``cipher_suite`` (its name: Python gives no IANA number), and
    ``server_cert`` / ``client_cert_error`` (None)."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    try:
        name = certificate_subject(der) if der else None
    except ValueError:  # verified by OpenSSL but not parsed by cryptography: no name, so no mtls principal
        log.warning("cannot read the subject of the client certificate of %s", transport.get_extra_info("peername"))
        name = None
    cipher = ssl_object.cipher()
    version = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}.get(ssl_object.version() or "")
    return {"server_cert": None, "client_cert_error": None, "tls_version": version,
            "cipher_suite": cipher[0] if cipher else None,
            "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
            "client_cert_name": name}


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedHttpToolsProtocol]:
    """A :class:`GuardedHttpToolsProtocol` subclass with ``limits`` (pass it as uvicorn's ``http=``)."""
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"limits": limits})
