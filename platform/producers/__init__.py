"""Producers: producer ids, per-partition producer state (idempotence), later the transaction coordinator."""
