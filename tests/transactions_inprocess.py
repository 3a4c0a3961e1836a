"""An in-process broker whose gateway uvicorn serves on a background thread, and transactions written
straight into its partition logs (open, committed, aborted), for tests of the layers above the log.

The HTTP produce path of transactions is another part of the transactions work: these helpers append
transactional records and markers with :meth:`PartitionLog.append` and ``PartitionLog.transactions``
on the broker's event loop, then move the partition's high watermark as a leader append does.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pyarrow as pa
import uvicorn

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.ingest_api.app import create_app
from lakelog.log_tables.schema import TRANSACTIONAL_BIT
from lakelog.runtime.zookeeper_server import free_port


class ServedBroker:
    """A started :class:`~lakelog.broker.Broker` (id 0) with its gateway on ``url``, on a loop thread (the
    app's lifespan starts and stops the broker and its consumer instances).

    Use as a context manager; :meth:`run` runs a coroutine on the broker's loop and returns its result.
    """

    def __init__(self, zk_connect: str, log_dirs) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.broker = Broker(BrokerSettings(broker_id=0, port=self.port, log_dirs=log_dirs,
                                            zookeeper_connect=zk_connect, transaction_state_log_num_partitions=1))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="served-broker", daemon=True)
        self._server: uvicorn.Server | None = None
        self._serving: Future | None = None

    def run(self, coro):
        """``await coro`` on the broker's loop (from the test thread); its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=120)

    def __enter__(self) -> "ServedBroker":
        self._thread.start()
        self._server = uvicorn.Server(uvicorn.Config(create_app(self.broker), host="127.0.0.1", port=self.port,
                                                     lifespan="on", log_level="warning"))
        self._serving = asyncio.run_coroutine_threadsafe(self._server.serve(), self._loop)
        self.run(self._started())
        return self

    async def _started(self) -> None:
        while not self._server.started:
            if self._serving.done():
                self._serving.result()  # raises why it did not start
            await asyncio.sleep(0.02)

    def __exit__(self, *exc) -> None:
        try:
            if self._server is not None:
                self._server.should_exit = True
                self._serving.result(timeout=60)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()

    # -- transactions in a partition log ----------------------------------------------------------

    def append_transactional(self, topic: str, partition: int, values: list[bytes], *, producer_id: int,
                             epoch: int = 0) -> int:
        """Append ``values`` as records of ``producer_id``'s open transaction; the base offset."""
        n = len(values)
        producers = (pa.array([producer_id] * n, pa.int64()), pa.array([epoch] * n, pa.int16()),
                     pa.array(list(range(n)), pa.int32()))
        attributes = pa.array([TRANSACTIONAL_BIT] * n, pa.int8())
        return self.run(self._append(topic, partition, lambda log: log.append(
            pa.table({"value": values}), producer_columns=producers, attributes=attributes)))

    def end_transaction(self, topic: str, partition: int, *, producer_id: int, commit: bool, epoch: int = 0) -> int:
        """Write ``producer_id``'s commit or abort marker; its offset."""
        return self.run(self._append(topic, partition, lambda log: log.transactions.append_control(
            control="commit" if commit else "abort", producer_id=producer_id, producer_epoch=epoch,
            coordinator_epoch=0)))

    async def _append(self, topic: str, partition: int, write) -> int:
        part = self.broker.replica_manager.local_partition(topic, partition)
        info = await asyncio.to_thread(write, part.log)
        part.notify_log_end_offset()
        part.maybe_advance_high_watermark()  # one replica: the HW is the log end offset
        return info.base_offset
