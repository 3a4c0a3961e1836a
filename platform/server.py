"""Running a broker process: the gateway app under uvicorn, stopped cleanly by SIGINT/SIGTERM."""

from __future__ import annotations

import logging

import uvicorn

from lakelog.config import BrokerSettings
from lakelog.ingest_api.app import create_app


def configure_logging(level: str = "INFO") -> None:
    """Log lines as ``time level logger: message`` to stderr."""
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def run_broker(settings: BrokerSettings, *, log_level: str = "info") -> None:
    """Serve one broker in the foreground until SIGINT or SIGTERM (uvicorn's graceful shutdown).

    Uvicorn stops accepting requests, in-flight requests finish, then the app's lifespan stops the
    broker: queued appends are committed, logs closed, the ZooKeeper session ended.
    """
    app = create_app(settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level,
                            access_log=False, timeout_graceful_shutdown=10, loop="uvloop", http="httptools")
    uvicorn.Server(config).run()
