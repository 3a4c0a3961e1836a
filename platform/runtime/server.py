"""Running a broker process: the gateway app under uvicorn, stopped cleanly by SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Literal

import uvicorn
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.ingest_api.app import create_app
from lakelog.ingest_api.http_guard import ConnectionLimits, guarded_protocol

log = logging.getLogger(__name__)


#: ``--log-format``: ``text`` lines ``time level logger: message``; ``json`` one object per line.
LogFormat = Literal["text", "json"]


def configure_logging(level: str = "INFO", *, log_format: LogFormat = "text", broker_id: int | None = None) -> None:
    """Send every log record to stderr.

    Args:
        level: the root level (``debug``, ``info``, ``warning``, ...). Default: ``INFO``.
        log_format: ``text``: ``time level logger: message`` lines; ``json``: one JSON object per line with
            ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, ``broker_id`` (when given) and the
            record's extras (``topic`` and ``partition`` where a log call names a partition), for log
            shippers (python-json-logger). Default: ``text``.
        broker_id: the process's broker, stamped on every JSON line. Default: None.
    """
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter(
            "%(levelname)s %(name)s %(message)s", timestamp="time",
            rename_fields={"levelname": "level", "name": "logger"},
            reserved_attrs=[*RESERVED_ATTRS, "color_message"],  # uvicorn's ANSI-coloured copy of the message
            static_fields={} if broker_id is None else {"broker_id": broker_id}))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler], force=True)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)


class _BrokerServer(uvicorn.Server):
    """uvicorn's server with Kafka's controlled shutdown in front of its graceful shutdown.

    The first SIGTERM/SIGINT first moves the broker's leaderships to other in-sync replicas (while it
    still serves requests, so in-flight acks=all produces complete and new ones are redirected), then
    lets uvicorn stop: no new connections, in-flight requests finish, the lifespan stops the broker.
    A second signal stops at once.
    """

    def __init__(self, config: uvicorn.Config, broker) -> None:
        super().__init__(config)
        self.broker = broker
        self._shutting_down = False

    def handle_exit(self, sig, frame) -> None:
        if self._shutting_down or self.should_exit:
            return super().handle_exit(sig, frame)
        self._shutting_down = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return super().handle_exit(sig, frame)

        async def controlled_then_exit() -> None:
            try:
                await asyncio.wait_for(self.broker.controlled_shutdown(), timeout=15)
            except Exception:
                log.exception("controlled shutdown did not complete")
            super(_BrokerServer, self).handle_exit(sig, frame)

        loop.create_task(controlled_then_exit())


def run_broker(settings: BrokerSettings, *, log_level: str = "info", log_format: LogFormat = "text") -> None:
    """Serve one broker in the foreground until SIGINT or SIGTERM.

    Steps on SIGTERM: 1. controlled shutdown (leaderships move away, ``controlled.shutdown.enable``);
    2. uvicorn stops accepting requests and in-flight requests finish; 3. the app's lifespan stops the
    broker: queued appends are committed, logs closed, the ZooKeeper session ended.
    """
    broker = Broker(settings)
    config = uvicorn_config(create_app(broker), settings, log_level=log_level, log_format=log_format)
    _BrokerServer(config, broker).run()


def uvicorn_config(app, settings: BrokerSettings, *, log_level: str = "info", lifespan: str = "auto",
                   loop: str = "uvloop", log_format: LogFormat = "text") -> uvicorn.Config:
    """uvicorn's configuration of a broker's gateway: uvloop, httptools guarded against slow and idle
    clients (:mod:`lakelog.ingest_api.http_guard`: ``connections.max.idle.ms``,
    ``request.header.timeout.ms``, ``request.body.timeout.ms``, ``request.body.min.bytes.per.sec``,
    ``max.connections``); HTTPS with ``ssl.certfile`` (uvicorn's own TLS: ``ssl.keyfile``, ``ssl.cafile`` the
    clients' certificates are verified against, ``ssl.client.auth`` as ``CERT_NONE``/``CERT_OPTIONAL``/
    ``CERT_REQUIRED``). ``log_format="json"``: uvicorn's own loggers keep no handlers of their own,
    so their records reach the root handler of :func:`configure_logging` (JSON) too."""
    limits = ConnectionLimits.from_settings(settings)
    extra: dict = {"log_config": None} if log_format == "json" else {}
    if settings.ssl_certfile is not None:  # HTTPS only (ssl.certfile, ssl.keyfile, ssl.cafile, ssl.client.auth)
        extra.update(ssl_certfile=str(settings.ssl_certfile),
                     ssl_keyfile=None if settings.ssl_keyfile is None else str(settings.ssl_keyfile),
                     ssl_ca_certs=None if settings.ssl_cafile is None else str(settings.ssl_cafile),
                     ssl_cert_reqs={"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                                    "required": ssl.CERT_REQUIRED}[settings.ssl_client_auth])
    return uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level, access_log=False, **extra,
                          timeout_graceful_shutdown=10, loop=loop, lifespan=lifespan,
                          http=guarded_protocol(limits),
                          # uvicorn's keep-alive timer (armed after each answer) is the idle timeout
                          timeout_keep_alive=limits.idle_s,  # type: ignore[arg-type]
                          backlog=max(2048, min(limits.max_connections, 65535)))
