"""The HTTP gateway (FastAPI): Confluent REST Proxy v2/v3 compatible produce, fetch, metadata, admin."""
