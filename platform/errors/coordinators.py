"""Errors of the coordinators: the leaders of internal topics' partitions (``__consumer_offsets``,
``__transaction_state``), shared by the group coordinator and the transaction coordinator; re-exported by
``lakelog.replication.errors`` and ``lakelog.consumer_groups.errors``."""

from __future__ import annotations

from lakelog.errors.replication import ReplicationError

__all__ = ["CoordinatorLoadInProgressError", "NotCoordinatorError"]


class NotCoordinatorError(ReplicationError):
    """This broker is not the coordinator of the group or transactional id (it does not lead its partition
    of the internal topic, ``__consumer_offsets`` or ``__transaction_state``), or the coordinator could not
    be reached. Kafka: NOT_COORDINATOR (16). 503 / 50320, retriable: the coordinator moves when its
    partition's leader changes; send the request again."""

    http_status = 503
    error_code = 50320
    retriable = True


class CoordinatorLoadInProgressError(ReplicationError):
    """The coordinator is still loading its partition of the internal topic (``__consumer_offsets``,
    ``__transaction_state``): it just became the partition's leader, or its load failed and is tried
    again. Kafka: COORDINATOR_LOAD_IN_PROGRESS (14). 503 / 50321, retriable."""

    http_status = 503
    error_code = 50321
    retriable = True
