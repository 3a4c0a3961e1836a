"""Producer id blocks in a real ZooKeeper (Kafka's ZkProducerIdManager): disjoint ids across brokers, a
new block when one is used up, the znode's JSON as Kafka writes it, is_allocated."""

from __future__ import annotations

import json
import threading

import pytest
from kazoo.client import KazooClient

from lakelog.coordinators.producer_id_manager import ProducerIdManager
from lakelog.producers.errors import TransactionsNotSupportedError
from lakelog.producers.producer_ids import PRODUCER_ID_BLOCK_PATH, ProducerIdAndEpoch
from lakelog.replication.errors import ZooKeeperUnavailableError


def _znode(zk: KazooClient) -> dict:
    return json.loads(zk.get(PRODUCER_ID_BLOCK_PATH)[0])


def test_first_block_and_its_znode(zk_client):
    manager = ProducerIdManager(zk_client, broker_id=7)
    assert zk_client.exists(PRODUCER_ID_BLOCK_PATH) is None  # nothing before the first id
    assert [manager.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    # Kafka's ProducerIdBlockZNode: ids as decimal strings, both ends inclusive
    assert _znode(zk_client) == {"version": 1, "broker": 7, "block_start": "0", "block_end": "999"}


def test_a_new_block_when_one_is_used_up(zk_client):
    manager = ProducerIdManager(zk_client, broker_id=1, block_size=3)
    assert [manager.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    assert _znode(zk_client)["block_end"] == "2"
    version = zk_client.exists(PRODUCER_ID_BLOCK_PATH).version
    assert manager.generate_producer_id() == 3
    assert _znode(zk_client) == {"version": 1, "broker": 1, "block_start": "3", "block_end": "5"}
    assert zk_client.exists(PRODUCER_ID_BLOCK_PATH).version == version + 1


def test_two_managers_hand_out_disjoint_ids(zk_client):
    a = ProducerIdManager(zk_client, broker_id=0, block_size=10)
    b = ProducerIdManager(zk_client, broker_id=1, block_size=10)
    got: dict[str, list[int]] = {"a": [], "b": []}

    def take(name: str, manager: ProducerIdManager) -> None:
        for _ in range(95):
            got[name].append(manager.generate_producer_id())

    threads = [threading.Thread(target=take, args=(n, m)) for n, m in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(got["a"]) == len(got["b"]) == 95
    assert not set(got["a"]) & set(got["b"])
    assert got["a"] == sorted(got["a"]) and got["b"] == sorted(got["b"])  # increasing within a manager
    # every id comes from a block of 10 its manager reserved: blocks never overlap
    assert {i // 10 for i in got["a"]}.isdisjoint({i // 10 for i in got["b"]})
    assert int(_znode(zk_client)["block_end"]) == 10 * 20 - 1  # 10 blocks each, reserved one after another


def test_threads_sharing_a_manager_get_unique_ids(zk_client):
    manager = ProducerIdManager(zk_client, broker_id=0, block_size=7)
    ids: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(50):
            i = manager.generate_producer_id()
            with lock:
                ids.append(i)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(ids) == list(range(200))


def test_continues_after_an_existing_block(zk_client):
    # a znode as Kafka (or an earlier broker) left it
    zk_client.create(PRODUCER_ID_BLOCK_PATH, b'{"version":1,"broker":3,"block_start":"5000","block_end":"5999"}',
                     makepath=True)
    manager = ProducerIdManager(zk_client, broker_id=0)
    assert manager.generate_producer_id() == 6000
    assert _znode(zk_client) == {"version": 1, "broker": 0, "block_start": "6000", "block_end": "6999"}


def test_is_allocated(zk_client):
    a = ProducerIdManager(zk_client, broker_id=0, block_size=5)
    b = ProducerIdManager(zk_client, broker_id=1, block_size=5)
    assert not b.is_allocated(0)  # no block yet
    assert a.generate_producer_id() == 0
    assert b.is_allocated(0) and b.is_allocated(4)  # b reads ZooKeeper: block 0-4 is taken
    assert not b.is_allocated(5) and not b.is_allocated(-1)
    assert b.generate_producer_id() == 5
    assert a.is_allocated(9)  # a knows only its own block (end 4): it reads the latest again
    assert not a.is_allocated(10)
    assert not a.is_allocated(2**63 - 1)


def test_init_producer_id_refuses_a_transactional_id(zk_client):
    manager = ProducerIdManager(zk_client, broker_id=0)
    assert manager.init_producer_id() == ProducerIdAndEpoch(0, 0)
    with pytest.raises(TransactionsNotSupportedError) as e:
        manager.init_producer_id(transactional_id="tx-1")
    assert e.value.error_code == 40010 and e.value.http_status == 400 and not e.value.retriable
    assert "transaction coordinator" in e.value.message
    assert manager.generate_producer_id() == 1  # the refusal took no id


def test_zookeeper_errors_are_wrapped(zk_connect):
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=15)
    zk.stop()
    zk.close()
    manager = ProducerIdManager(zk, broker_id=0)
    with pytest.raises(ZooKeeperUnavailableError) as e:
        manager.generate_producer_id()
    assert e.value.retriable and e.value.error_code == 50304
    with pytest.raises(ZooKeeperUnavailableError):
        manager.is_allocated(3)
