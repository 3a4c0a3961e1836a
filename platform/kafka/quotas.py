"""Client quotas on the Kafka listener, as Kafka's broker applies them: measure, answer, then mute.

The same quotas as HTTP decide (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``
of the user and client id, Kafka's precedence: :mod:`lakelog.security.quotas`, one broker-wide
:class:`~lakelog.security.quotas.manager.ClientQuotaManager` for both doors). Where the HTTP gateway
refuses a request over its quota (429), the Kafka listener does what Kafka's broker does (KIP-219): it
serves the request, records what it used (a Produce request's frame bytes, a Fetch answer's bytes, every
request's time as a percentage of a second), answers with the entity's throttle time in the response's
``throttle_time_ms`` (the client backs off by it too), and then reads nothing more from the connection
for that long (Kafka mutes the channel). The brokers' own principal is never throttled.
"""

from __future__ import annotations

from collections.abc import Callable

from lakelog.security.quotas import FETCH, PRODUCE, REQUEST, ClientQuotaManager
from lakelog.security.quotas.entities import user_name

__all__ = ["ListenerQuotas"]

_PRODUCE_KEY, _FETCH_KEY = 0, 1
#: APIs whose time is mostly waiting (Fetch's long-poll, JoinGroup and SyncGroup's rebalance): not counted
#: against ``request_percentage``
_WAITING_KEYS = frozenset({1, 11, 14})


class ListenerQuotas:
    """The Kafka listeners' view of the broker's client quotas.

    Args:
        manager_of: ``() -> ClientQuotaManager | None``: the broker's (None: no quotas, e.g. a listener
            started alone).
    """

    def __init__(self, manager_of: Callable[[], ClientQuotaManager | None]) -> None:
        self.manager_of = manager_of

    def throttle_time_ms(self, *, api_key: int, principal: str, client_id: str, request_bytes: int,
                         response_bytes: int, elapsed_s: float) -> int:
        """Record what one served request used and return how long its connection is to wait, in ms (0
        while the entity is within its quotas, or no quota is set anywhere).

        Args:
            api_key: the request's API (0 Produce counts ``request_bytes`` against ``producer_byte_rate``,
                1 Fetch ``response_bytes`` against ``consumer_byte_rate``); every request counts
                ``elapsed_s`` against ``request_percentage``.
            principal, client_id: the entity (the connection's principal, the request header's client id).
            elapsed_s: the request's time; not counted for Fetch, JoinGroup and SyncGroup, whose time is
                mostly a wait (Kafka counts its handler threads' time only).
        """
        manager = self.manager_of()
        if manager is None or not manager.active or manager.is_exempt(principal):
            return 0
        user = user_name(principal)
        types = [REQUEST]
        if api_key == _PRODUCE_KEY:
            manager.record(PRODUCE, request_bytes, user=user, client_id=client_id)
            types.append(PRODUCE)
        elif api_key == _FETCH_KEY:
            manager.record(FETCH, response_bytes, user=user, client_id=client_id)
            types.append(FETCH)
        if api_key not in _WAITING_KEYS:  # Kafka counts a handler thread's time, never a long-poll's wait
            manager.record(REQUEST, elapsed_s * 100.0, user=user, client_id=client_id)  # Kafka's nanosToPercentage
        return max(manager.throttle_time_ms(t, user, client_id) for t in types)
