"""The Kafka listeners of one broker: asyncio servers started and stopped with the broker.

Per connection, as Kafka's ``SocketServer`` and ``KafkaRequestHandler`` do: one request at a time, in
order (Kafka mutes a connection while its request is in flight, so pipelined requests wait in the socket
buffer); the 4-byte size prefix is checked against ``socket.request.max.bytes`` before the body is read;
the header's API key and version are read first: an ApiVersions request above the served maximum is
answered in v0 with UNSUPPORTED_VERSION (KIP-511), any other request of an API or version not served
closes the connection with a WARN line naming the peer, the client id, the API key and version (Kafka
has no schema to answer it with); a connection idle for ``connections.max.idle.ms`` is closed with an INFO
line; a connection beyond ``max.connections`` (all Kafka listeners together, Kafka's broker-wide limit)
is closed at once with a WARN line.

Security per listener protocol: SSL and SASL_SSL connections are TLS (:mod:`lakelog.kafka.tls`);
SASL_PLAINTEXT and SASL_SSL connections authenticate first (:mod:`lakelog.kafka.sasl`). Every request
then runs with a :class:`~lakelog.requests.RequestContext` of the connection's principal (SASL's, else
an SSL client certificate's, else ``User:ANONYMOUS``), so the request layer's ACLs decide as for HTTP;
the same client quotas too, applied as Kafka applies them (:mod:`lakelog.kafka.quotas`: the answer
carries the throttle time, then the connection is muted for it).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from lakelog.config import BrokerSettings
from lakelog.errors import AuthenticationError, ConfigError, SecurityError
from lakelog.kafka.codec import decode_request, encode_response, peek_header, unsupported_api_versions
from lakelog.kafka.handlers import CLOSE, NO_RESPONSE, KafkaApis
from lakelog.kafka.listeners import ListenerSpec, advertised_endpoint, parse_listeners
from lakelog.kafka.quotas import ListenerQuotas
from lakelog.kafka.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslSession, illegal_state_response
from lakelog.kafka.tls import certificate_principal, server_ssl_context
from lakelog.kafka.versions import SERVED, accepts
from lakelog.requests import RequestContext, RequestHandler
from lakelog.security.authentication import Authenticator
from lakelog.security.quotas import ClientQuotaManager

__all__ = ["KafkaListeners"]

log = logging.getLogger(__name__)

_ANONYMOUS = "User:ANONYMOUS"  # a PLAINTEXT listener's principal, as Kafka's


def _client_id(frame: bytes) -> str:
    """The request header's client id (int16 length and bytes after key, version and correlation id), for
    log lines about a request that is not decoded."""
    try:
        (n,) = struct.unpack_from(">h", frame, 8)
        return "" if n < 0 else frame[10:10 + n].decode("utf-8", "replace")
    except struct.error:
        return ""


@dataclass
class _Listener:
    spec: ListenerSpec
    server: asyncio.Server
    apis: KafkaApis
    endpoint: str


class KafkaListeners:
    """The broker's Kafka listeners (``listeners``; none when it is empty).

    Args:
        settings: ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``,
            ``socket.request.max.bytes``, ``connections.max.idle.ms``, ``host`` (advertised for a listener
            that binds every interface).
        requests: the broker's request layer. cluster_id: the cluster's id once the broker started.
        authenticator: the broker's users, JWT checks and certificate mapping (SSL and SASL listeners);
            None: a default one (no users: for PLAINTEXT listeners only).

    Raises (from the constructor): ConfigError for malformed listener settings, or a SASL listener without
    an authenticator following the users' credentials or tokens.
    """

    def __init__(self, settings: BrokerSettings, *, requests: RequestHandler, cluster_id: Callable[[], str],
                 authenticator: Authenticator | None = None,
                 client_quotas: Callable[[], ClientQuotaManager | None] = lambda: None) -> None:
        self.settings = settings
        self.quotas = ListenerQuotas(client_quotas)
        self.requests = requests
        self.cluster_id = cluster_id
        self.specs = parse_listeners(settings.listeners, protocol_map=settings.listener_security_protocol_map,
                                     has_certificate=settings.ssl_certfile is not None)
        self.authenticator = authenticator or Authenticator()
        if any(spec.sasl for spec in self.specs) and authenticator is None:
            raise ConfigError("a SASL listener needs the broker's authenticator (the users' credentials)")
        self._listeners: list[_Listener] = []
        self._connections: set[asyncio.Task] = set()

    @property
    def endpoints(self) -> tuple[str, ...]:
        """``NAME://host:port`` of each open listener, as registered in ZooKeeper."""
        return tuple(listener.endpoint for listener in self._listeners)

    async def start(self) -> None:
        """Bind every listener (port 0: a free one, then advertised with the bound port).

        Raises:
            OSError: a port in use or an address not of this machine.
        """
        context = server_ssl_context(self.settings) if any(spec.tls for spec in self.specs) else None
        for spec in self.specs:
            apis = KafkaApis(requests=self.requests, listener=spec.name, cluster_id=self.cluster_id)
            server = await asyncio.start_server(
                lambda r, w, spec=spec, apis=apis: self._accept(r, w, spec, apis), spec.host or None, spec.port,
                ssl=context if spec.tls else None)
            port = server.sockets[0].getsockname()[1]
            endpoint = advertised_endpoint(spec, bound_port=port, advertised_listeners=self.settings.advertised_listeners,
                                           broker_host=self.settings.host)
            self._listeners.append(_Listener(spec, server, apis, endpoint))
            log.info("Kafka listener %s on %s:%d (advertised %s)", spec.name, spec.host or "*", port, endpoint)

    async def stop(self) -> None:
        """Stop accepting, close every open connection."""
        for listener in self._listeners:
            listener.server.close()
        for task in list(self._connections):
            task.cancel()
        for listener in self._listeners:
            await listener.server.wait_closed()
        self._listeners.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, spec: ListenerSpec,
                      apis: KafkaApis) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self.settings.max_connections:
            peer = writer.get_extra_info("peername")
            log.warning("Kafka connection from %s on listener %s closed: max.connections (%d) connections are open",
                        peer[0] if peer else "-", spec.name, self.settings.max_connections)
            writer.close()
            return
        self._connections.add(task)
        try:
            await self._serve(reader, writer, spec, apis)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("Kafka connection on listener %s failed", spec.name)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, spec: ListenerSpec,
                     apis: KafkaApis) -> None:
        peer = writer.get_extra_info("peername")
        host = peer[0] if peer else "-"
        max_bytes = self.settings.socket_request_max_bytes
        idle_s = self.settings.connections_max_idle_ms / 1000
        principal = _ANONYMOUS
        if spec.protocol == "SSL":
            try:
                principal = certificate_principal(writer.get_extra_info("ssl_object"),
                                                  self.authenticator.principal_mapper)
            except SecurityError as e:
                log.warning("Kafka connection from %s on listener %s closed: %s", host, spec.name, e)
                return
        sasl = SaslSession(mechanisms=self.settings.sasl_mechanism_list, authenticator=self.authenticator,
                           client_host=host, listener=spec.name) if spec.sasl else None
        while True:
            try:
                head = await asyncio.wait_for(reader.readexactly(4), timeout=idle_s)
            except TimeoutError:
                log.info("Kafka connection from %s idle for connections.max.idle.ms (%d ms): closed", host,
                         self.settings.connections_max_idle_ms)
                return
            (size,) = struct.unpack(">i", head)
            if not 0 < size <= max_bytes:
                log.warning("Kafka connection from %s closed: request size %d is not within 1 to "
                            "socket.request.max.bytes (%d)", host, size, max_bytes)
                return
            if sasl is not None and not sasl.authenticated and size > self.settings.sasl_server_max_receive_size:
                log.warning("Kafka connection from %s closed: a %d-byte request before SASL authentication is over "
                            "sasl.server.max.receive.size (%d)", host, size, self.settings.sasl_server_max_receive_size)
                return
            frame = await reader.readexactly(size)
            if sasl is not None and sasl.expects_raw_token:  # after SaslHandshake v0: a raw SASL token (KIP-43)
                try:
                    answer = await sasl.raw_token(frame)
                except AuthenticationError as e:
                    log.warning("Kafka connection from %s closed: %s", host, e.message)
                    return
                writer.write(struct.pack(">i", len(answer)) + answer)
                await writer.drain()
                continue
            if size < 8:
                log.warning("Kafka connection from %s closed: a %d-byte request has no header", host, size)
                return
            api_key, version, correlation_id = peek_header(frame)
            if api_key == 18 and version > SERVED[18].max:
                writer.write(unsupported_api_versions(correlation_id=correlation_id, max_version=SERVED[18].max))
                await writer.drain()
                continue
            if not accepts(api_key, version):
                log.warning("Kafka connection from %s (client %r) closed: API key %d version %d is not served "
                            "(see ApiVersions)", host, _client_id(frame), api_key, version)
                return
            if sasl is not None and not sasl.authenticated and api_key not in (18, SASL_HANDSHAKE, SASL_AUTHENTICATE):
                log.warning("Kafka connection from %s (client %r) closed: ILLEGAL_SASL_STATE (34): API key %d before "
                            "SASL authentication (SaslHandshake, SaslAuthenticate)", host, _client_id(frame), api_key)
                return
            try:
                request = decode_request(frame)
            except Exception as e:  # kafka-python raises plain exceptions on malformed input
                log.warning("Kafka connection from %s closed: API key %d version %d does not decode: %r",
                            host, api_key, version, e)
                return
            if request.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                if sasl is None:  # Kafka's KafkaApis answers these so on a listener without SASL
                    response, close = illegal_state_response(request, f"listener {spec.name} is {spec.protocol}"), False
                else:
                    response, close = await sasl.handle(request)
                writer.write(encode_response(response, correlation_id=correlation_id))
                await writer.drain()
                if close:
                    return
                continue
            context = RequestContext(principal=sasl.principal if sasl is not None and sasl.principal else principal,
                                     host=host, client_id=request.client_id, listener=spec.name)
            started = time.perf_counter()
            response = await apis.handle(request, context)
            if response is CLOSE:
                log.warning("Kafka connection from %s (client %r) closed: an acks=0 produce failed", host,
                            request.client_id)
                return
            answer = b"" if response is NO_RESPONSE else encode_response(response, correlation_id=correlation_id)
            throttle_ms = self.quotas.throttle_time_ms(
                api_key=api_key, principal=context.principal, client_id=request.client_id or "", request_bytes=size,
                response_bytes=len(answer), elapsed_s=time.perf_counter() - started)
            if throttle_ms and answer and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle_ms  # the client backs off by it too (KIP-219)
                answer = encode_response(response, correlation_id=correlation_id)
            if answer:
                writer.write(answer)
                await writer.drain()
            if throttle_ms:  # Kafka mutes the channel for the throttle time: the next request waits
                await asyncio.sleep(throttle_ms / 1000.0)
