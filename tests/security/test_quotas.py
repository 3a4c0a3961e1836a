"""Client quotas: Kafka's entity precedence and throttle time (pure), the quotas in a real ZooKeeper beside
users' SCRAM credentials, and a broker's followed copy."""

from __future__ import annotations

import json
import time

import pytest

from lakelog.security.authentication import Authenticator
from lakelog.security.errors import ClientQuotaExceededError, InvalidQuotaError, UnknownUserError
from lakelog.security.quotas import DEFAULT, FETCH, PRODUCE, REQUEST, ClientQuotaManager, QuotaCache, QuotaEntity, QuotaStore
from lakelog.security.quotas.entities import quota_limit, quota_metric_tags, resolve_quota
from lakelog.security.quotas.rate import SampledRate, throttle_time_ms
from lakelog.security.quotas.store import CLIENTS_PATH, entity_of_path, entity_path
from lakelog.security.scram import verify_password
from lakelog.security.user_credentials import USERS_PATH, UserCredentials
from tests.harness import CONDITION_WAIT_S

E = QuotaEntity
#: one quota at each of Kafka's eight levels, the value naming the level (1 = most specific)
LEVELS = {E("alice", "app"): 1, E("alice", DEFAULT): 2, E("alice", None): 3, E(DEFAULT, "app"): 4,
          E(DEFAULT, DEFAULT): 5, E(DEFAULT, None): 6, E(None, "app"): 7, E(None, DEFAULT): 8}


def test_kafkas_precedence_most_specific_first():
    quotas = dict(LEVELS)
    seen = []
    for entity in list(LEVELS):  # remove levels from the most specific: the next one applies
        seen.append(resolve_quota(quotas, "alice", "app")[1])
        del quotas[entity]
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8]
    assert resolve_quota({}, "alice", "app") == (("", "app"), None)  # no quota at all: unlimited


def test_metric_tags_say_who_shares_a_rate():
    # /config/users/alice: all of alice's client ids share one rate
    assert quota_metric_tags({E("alice", None): 10}, "alice", "a") == quota_metric_tags({E("alice", None): 10}, "alice", "b") == ("alice", "")
    # /config/users/<default>: each user has a rate of their own
    assert quota_metric_tags({E(DEFAULT, None): 10}, "bob", "a") == ("bob", "")
    # /config/clients/app: the client id's users share it; another user's own quota wins for that user
    quotas = {E(None, "app"): 10, E("carol", None): 99}
    assert resolve_quota(quotas, "alice", "app") == (("", "app"), 10)
    assert resolve_quota(quotas, "carol", "app") == (("carol", ""), 99)
    # user+client quotas: per (user, client id); the default client id of alice applies to her other ids
    assert resolve_quota({E("alice", DEFAULT): 5}, "alice", "x") == (("alice", "x"), 5)
    assert resolve_quota({E("alice", DEFAULT): 5}, "bob", "x") == (("", "x"), None)
    # a request without a client id: the default client id's quota
    assert quota_limit({E(None, DEFAULT): 7}, ("", "")) == 7


def test_sampled_rate_and_kafkas_throttle_time():
    rate = SampledRate(window_num=11, window_size_s=1)
    rate.record(5000, now_ms=0)
    # one sample so far: measured over (11 - 1) full windows, not over 0 ms
    assert rate.window_size_ms(0) == 10_000 and rate.rate(now_ms=0) == 500.0
    # quota 100 B/s: (500 - 100) / 100 * 10000 ms = 40 s of throttle
    assert rate.throttle_time_ms(100, now_ms=0) == 40_000 == throttle_time_ms(500, 100, window_ms=10_000)
    assert rate.throttle_time_ms(1000, now_ms=0) == 0
    for t in range(1, 15):  # a sample a second: the oldest ones expire after 11 windows
        rate.record(100, now_ms=t * 1000)
    assert rate.window_size_ms(14_000) == 10_000 and rate.rate(now_ms=14_000) == pytest.approx(110.0)
    assert SampledRate(window_num=2, window_size_s=0.5).window_size_ms(0) == 500
    with pytest.raises(ValueError, match="quota.window.num"):
        SampledRate(window_num=1)


def test_entity_znodes_are_kafkas():
    assert entity_path(E("alice", None)) == f"{USERS_PATH}/alice"
    assert entity_path(E("svc/a.b", DEFAULT)) == f"{USERS_PATH}/svc%2Fa%2Eb/clients/<default>"
    assert entity_path(E(None, "app.1")) == f"{CLIENTS_PATH}/app%2E1"
    assert entity_path(E("<default>", None)).endswith("/users/<default>")
    for entity in (E("alice", None), E("svc/a.b", DEFAULT), E(None, "app.1"), E(DEFAULT, "x")):
        assert entity_of_path(entity_path(entity)) == entity
    assert entity_of_path(f"{USERS_PATH}/alice/clients") is None
    with pytest.raises(InvalidQuotaError, match="needs a user"):
        entity_path(E(None, None))


def test_store_keeps_scram_credentials_and_quotas_side_by_side(zk_client):
    users, store = UserCredentials(zk_client), QuotaStore(zk_client)
    users.upsert("alice", "s3cret")
    assert store.alter(E("alice", None), set={PRODUCE: 1048576, FETCH: 2048.5}) == {PRODUCE: 1048576, FETCH: 2048.5}
    doc = json.loads(zk_client.get(f"{USERS_PATH}/alice")[0])
    assert doc["config"]["producer_byte_rate"] == "1048576" and "SCRAM-SHA-512" in doc["config"]
    users.upsert("alice", "n3w")  # a new password keeps the quotas
    assert store.get(E("alice", None)) == {PRODUCE: 1048576, FETCH: 2048.5}
    assert verify_password(users.get("alice"), "n3w")
    store.alter(E("bob", "etl"), set={REQUEST: 50})  # creates /users/bob (no credential) and its client
    store.alter(E(None, DEFAULT), set={PRODUCE: 10})
    assert users.names() == ["alice"]  # bob has quotas, not a credential
    with pytest.raises(UnknownUserError):
        users.get("bob")
    users.delete("alice")  # the credential goes, the quotas stay
    assert store.get(E("alice", None)) == {PRODUCE: 1048576, FETCH: 2048.5} and users.names() == []
    assert store.describe() == [(E("alice", None), {PRODUCE: 1048576, FETCH: 2048.5}), (E("bob", "etl"), {REQUEST: 50}),
                                (E(None, DEFAULT), {PRODUCE: 10})]
    assert store.describe(user="bob") == [(E("bob", "etl"), {REQUEST: 50})]
    assert store.describe(user="bob", strict=True) == []
    assert store.describe(client_id=DEFAULT) == [(E(None, DEFAULT), {PRODUCE: 10})]
    store.alter(E("alice", None), remove=[PRODUCE, FETCH])  # nothing left: the znode goes
    assert not zk_client.exists(f"{USERS_PATH}/alice")
    for bad, match in (({"x_rate": 1}, "Unknown client quota"), ({PRODUCE: 0}, "number > 0"),
                       ({PRODUCE: "fast"}, "number > 0")):
        with pytest.raises(InvalidQuotaError, match=match):
            store.alter(E("carol", None), set=bad)
    with pytest.raises(InvalidQuotaError, match="both set and deleted"):
        store.alter(E("carol", None), set={PRODUCE: 1}, remove=[PRODUCE])
    assert store.get(E("carol", None)) == {} and not zk_client.exists(f"{USERS_PATH}/carol")


def test_followed_quotas_throttle_and_the_authenticator_ignores_quota_znodes(zk_client):
    store = QuotaStore(zk_client)
    UserCredentials(zk_client).upsert("alice", "s3cret")
    store.alter(E("alice", None), set={PRODUCE: 1000})
    store.alter(E(DEFAULT, None), set={FETCH: 1000})  # the literal <default> znode: no user, no error
    auth = Authenticator(method="basic", zk=zk_client).start()
    cache = QuotaCache(zk_client).start()
    try:
        assert auth.cached_principal(None) is None and "alice" in auth._credentials and "<default>" not in auth._credentials
        assert cache.by_type[PRODUCE] == {E("alice", None): 1000}
        manager = ClientQuotaManager(cache, exempt_principals={"User:broker"})
        manager.record(PRODUCE, 50_000, user="alice", client_id="a", now_ms=0)
        manager.check([FETCH, REQUEST], user="alice", client_id="a", now_ms=0)  # other quotas: not over them
        with pytest.raises(ClientQuotaExceededError) as e:  # 50000 B over 10 s = 5000 B/s: (5000-1000)/1000*10 s
            manager.check([PRODUCE, REQUEST], user="alice", client_id="b", now_ms=0)  # her client ids share it
        assert e.value.retry_after_s == 40 and e.value.response_headers == {"Retry-After": "40"}
        assert e.value.http_status == 429 and e.value.error_code == 42902 and e.value.retriable
        assert "producer_byte_rate=1000 of user=alice" in e.value.message and manager.throttled[PRODUCE] == 1
        manager.check([PRODUCE], user="bob", client_id="a", now_ms=0)  # bob has no producer quota
        assert manager.is_exempt("User:broker") and not manager.is_exempt("User:alice")
        store.alter(E("alice", None), remove=[PRODUCE])  # followed: the limit is lifted
        deadline = time.monotonic() + CONDITION_WAIT_S
        while cache.by_type[PRODUCE] and time.monotonic() < deadline:
            time.sleep(0.02)
        manager.check([PRODUCE], user="alice", client_id="b", now_ms=0)
    finally:
        cache.close()
        auth.close()
