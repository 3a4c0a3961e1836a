"""Loaded by the broker child of ``bench/request_calls.py`` (this directory is first on its PYTHONPATH).

With ``LAKELOG_BENCH_PROFILE_OUT`` set, SIGUSR1 starts a ``cProfile`` of the main thread (the broker's
asyncio event loop) and SIGUSR2 stops it and writes ``{LAKELOG_BENCH_PROFILE_OUT}.{n}`` (n = 0, 1, ...).
Without it nothing happens.
"""

import os

if os.environ.get("LAKELOG_BENCH_PROFILE_OUT"):
    import cProfile
    import itertools
    import signal

    _windows = itertools.count()
    _profile: list[cProfile.Profile] = []

    def _start(signum, frame) -> None:
        _profile[:] = [cProfile.Profile()]
        _profile[0].enable()

    def _stop(signum, frame) -> None:
        _profile[0].disable()
        _profile[0].dump_stats(f"{os.environ['LAKELOG_BENCH_PROFILE_OUT']}.{next(_windows)}")

    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
