"""Kafka's rate measurement of client quotas: a rate over sampled windows, and the throttle time.

:class:`SampledRate` is Kafka's ``Rate`` over a ``SampledStat`` of ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1) each: a value is added to the current sample; a sample older than
``window_num * window_size`` is reset; the rate is the samples' total over the time they cover, counting at
least ``window_num - 1`` full windows (so a first burst is not measured over a few milliseconds):
``Rate.windowSize``::

    elapsed = now - oldest sample's start
    if elapsed // window < window_num - 1: elapsed += (window_num - 1 - elapsed // window) * window
    rate = total / max(elapsed, 1 ms)

:func:`throttle_time_ms` is Kafka's ``QuotaUtils.throttleTime`` (``ClientQuotaManager.throttleTime``):
``round((rate - quota) / quota * window_size_of_the_rate)`` ms, the time after which the measured rate is
back at the quota if nothing more is recorded.
"""

from __future__ import annotations

import math

__all__ = ["SampledRate", "throttle_time_ms"]


class SampledRate:
    """A rate in units per second over ``window_num`` sampled windows (Kafka's ``Rate`` / ``SampledStat``).

    Args:
        window_num: samples kept (``quota.window.num``, >= 2). Default: 11.
        window_size_s: seconds a sample covers (``quota.window.size.seconds``, > 0). Default: 1.

    Not thread-safe: the gateway's event loop is its only user.

    Raises:
        ValueError: a setting out of range.
    """

    __slots__ = ("window_num", "window_ms", "_starts", "_values", "_current")

    def __init__(self, *, window_num: int = 11, window_size_s: float = 1.0) -> None:
        if window_num < 2 or window_size_s <= 0:
            raise ValueError(f"quota.window.num must be >= 2 and quota.window.size.seconds > 0, not {window_num} "
                             f"and {window_size_s}")
        self.window_num = window_num
        self.window_ms = window_size_s * 1000.0
        self._starts: list[float] = []   # start (ms) of each sample
        self._values: list[float] = []   # sum recorded in each sample
        self._current = 0

    def record(self, value: float, *, now_ms: float) -> None:
        """Add ``value`` (bytes, percent) at ``now_ms`` (a monotonic clock in ms)."""
        if not self._starts:
            self._starts.append(now_ms)
            self._values.append(0.0)
        elif now_ms >= self._starts[self._current] + self.window_ms:  # the current sample is complete
            self._current = (self._current + 1) % self.window_num
            if self._current >= len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[self._current] = now_ms
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def _purge(self, now_ms: float) -> None:
        """Reset the samples older than ``window_num`` windows (Kafka's ``purgeObsoleteSamples``)."""
        expire_ms = self.window_num * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire_ms:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """The time the rate is measured over at ``now_ms``, in ms (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed_ms = now_ms - oldest
        full_windows = int(elapsed_ms // self.window_ms)
        if full_windows < self.window_num - 1:
            elapsed_ms += (self.window_num - 1 - full_windows) * self.window_ms
        return max(elapsed_ms, 1.0)

    def rate(self, *, now_ms: float) -> float:
        """Units per second at ``now_ms`` (Kafka's ``Rate.measure``)."""
        window_ms = self.window_size_ms(now_ms)
        return sum(self._values) / window_ms * 1000.0

    def throttle_time_ms(self, quota: float, *, now_ms: float) -> int:
        """ms to wait until the rate is back at ``quota`` (0 when it is not above it); see :func:`throttle_time_ms`."""
        window_ms = self.window_size_ms(now_ms)
        return throttle_time_ms(sum(self._values) / window_ms * 1000.0, quota, window_ms=window_ms)


def throttle_time_ms(rate: float, quota: float, *, window_ms: float) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: ``round((rate - quota) / quota * window_ms)`` for a rate above
    the quota, else 0.

    Args:
        rate: the measured rate (units/s). quota: the bound (units/s, > 0). window_ms: the window the rate is
            measured over (:meth:`SampledRate.window_size_ms`).
    """
    if rate <= quota or quota <= 0:
        return 0 if quota > 0 else math.ceil(window_ms)
    return round((rate - quota) / quota * window_ms)
