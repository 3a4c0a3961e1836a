"""What starts and runs lakelog's processes (layer 5): the embedded ZooKeeper server
(``zookeeper_server``, its files in ``zookeeper_files``), a broker under uvicorn (``server``: the entry point
of ``lakelog broker start`` and ``lakelog up``), broker child processes (``broker_process``: ``lakelog
cluster up``, the tests and benches) and the demo (``demo``, ``demo_secure``). The broker itself is wired
by the composition root :mod:`lakelog.broker`; the ``lakelog`` command lives in :mod:`lakelog.cli`.
"""
