"""How the clients read the gateway's answers: an error answer raised as the server's error class
(:data:`GatewayError`), and a request refused for a quota (429 with ``Retry-After``) sent again.

Shared by :class:`~lakelog.client.LakelogClient` and :class:`~lakelog.client.HttpConsumer`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from lakelog.protocol.errors import RemoteError, error_from_response

__all__ = ["GatewayError", "answered", "throttled_for_s"]

#: What every request method raises when the gateway answers an error: the server's own error class where
#: the code is known (``UnknownTopicError``, ``NotLeaderError``, ...), always also a :class:`GatewayError`.
GatewayError = RemoteError


def answered(send: Callable[[], httpx.Response], *, timeout_s: float) -> httpx.Response:
    """``send()``'s answer; a 429 (a client quota, 42902, or the broker's produce bytes in flight, 42901) is
    sent again after its ``Retry-After`` while that stays within ``timeout_s`` of the first try.

    Raises:
        GatewayError: the final answer is an error (:func:`~lakelog.protocol.errors.error_from_response`).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        resp = send()
        wait_s = throttled_for_s(resp)
        if wait_s is None or time.monotonic() + wait_s > deadline:
            break
        time.sleep(wait_s)
    if resp.status_code >= 400:
        raise error_from_response(resp)
    return resp


def throttled_for_s(resp: httpx.Response) -> float | None:
    """Seconds to wait before sending a request again that was answered 429 with ``Retry-After`` (a client
    quota, 42902, or the broker's produce bytes in flight, 42901); None for any other answer. At least 10 ms."""
    if resp.status_code != 429:
        return None
    try:
        return max(float(resp.headers.get("Retry-After", "1")), 0.01)
    except ValueError:
        return 1.0
