"""The partition log: one Delta table per replica of a partition.

Offset assignment, group commit, reads by offset range, log start/end offsets, truncation and the
in-memory tail cache.
"""
