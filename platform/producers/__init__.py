"""Producers: producer ids, per-partition producer state (idempotence). The transaction coordinator is
:mod:`lakelog.coordinators`."""
