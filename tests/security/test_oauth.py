"""JWT bearer tokens (authentication.methods=oauthbearer): keys made with cryptography, a JWKS file or a JWKS
served over real HTTP, tokens signed with PyJWT (or forged by hand for what PyJWT refuses to sign)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import os
import subprocess
import sys
import threading
import time

import httpx
import jwt
import pyarrow as pa
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from lakelog.client import BearerToken, LakelogClient
from lakelog.security.authentication import Authenticator
from lakelog.security.errors import AuthenticationError, SecurityError
from lakelog.security.oauth import InvalidTokenError, JwtValidator
from lakelog.security.user_credentials import UserCredentials

ISSUER, AUDIENCE = "https://idp.example", "lakelog"


class Key:
    """A private key with its kid, its public JWK and a way to sign tokens."""

    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        if kind == "RSA":
            self.private, self.alg, algo = rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256", RSAAlgorithm
        elif kind == "EC":
            self.private, self.alg, algo = ec.generate_private_key(ec.SECP256R1()), "ES256", ECAlgorithm
        else:
            self.private, self.alg, algo = ed25519.Ed25519PrivateKey.generate(), "EdDSA", OKPAlgorithm
        self.jwk = {**json.loads(algo.to_jwk(self.private.public_key())), "kid": kid, "use": "sig"}

    def sign(self, *, kid: str | None = None, **claims) -> str:
        now = int(time.time())
        body = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **claims}
        return jwt.encode({k: v for k, v in body.items() if v is not None}, self.private, algorithm=self.alg,
                          headers={"kid": kid or self.kid})

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: dict, claims: dict, secret: bytes | None) -> str:
    """A JWT PyJWT refuses to make: ``alg: none`` (no signature) or HS256 keyed with a public key."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = b"" if secret is None else hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def write_jwks(path, *keys: Key) -> str:
    path.write_text(json.dumps({"keys": [k.jwk for k in keys]}))
    return str(path)


@pytest.fixture(scope="module")
def keys() -> dict[str, Key]:
    return {"rsa": Key("rsa-1"), "ec": Key("ec-1", "EC"), "ed": Key("ed-1", "OKP"), "stranger": Key("rsa-1")}


@pytest.fixture
def validator(tmp_path, keys) -> JwtValidator:
    return JwtValidator(jwks_url=write_jwks(tmp_path / "jwks.json", keys["rsa"], keys["ec"], keys["ed"]),
                        expected_issuer=ISSUER, expected_audience=[AUDIENCE, "other"], clock_skew_s=30)


def test_valid_tokens_give_the_principal_of_their_claim(tmp_path, keys, validator):
    for name in ("rsa", "ec", "ed"):
        assert validator.principal(keys[name].sign()) == "User:alice"
    assert validator.principal(keys["rsa"].sign(exp=int(time.time()) - 10)) == "User:alice"  # within the skew
    assert validator.principal(keys["rsa"].sign(aud=["x", "other"])) == "User:alice"  # one of the audiences
    by_url = JwtValidator(jwks_url=(tmp_path / "jwks.json").as_uri(), principal_claim="client_id")
    assert by_url.principal(keys["ec"].sign(client_id="etl-job", iss="anyone", aud=None)) == "User:etl-job"


@pytest.mark.parametrize("case", ["expired", "not_yet_valid", "issued_in_the_future", "wrong_audience", "no_audience",
                                  "wrong_issuer", "unknown_kid", "signed_by_another_key", "alg_none",
                                  "hs256_with_the_public_key", "no_exp", "no_sub", "rs512_with_an_rs256_key", "garbage"])
def test_refused_tokens(case, keys, validator):
    now, rsa_key = int(time.time()), keys["rsa"]
    token = {
        "expired": lambda: rsa_key.sign(exp=now - 31 - 5),
        "not_yet_valid": lambda: rsa_key.sign(nbf=now + 120),
        "issued_in_the_future": lambda: rsa_key.sign(iat=now + 120),
        "wrong_audience": lambda: rsa_key.sign(aud="someone-else"),
        "no_audience": lambda: rsa_key.sign(aud=None),
        "wrong_issuer": lambda: rsa_key.sign(iss="https://evil.example"),
        "unknown_kid": lambda: rsa_key.sign(kid="not-there"),
        "signed_by_another_key": lambda: keys["stranger"].sign(),  # the same kid, another private key
        "alg_none": lambda: forged({"alg": "none", "kid": "rsa-1"},
                                   {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 600}, None),
        "hs256_with_the_public_key": lambda: forged({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"},
                                                    {"sub": "admin", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 600},
                                                    rsa_key.public_pem()),
        "no_exp": lambda: rsa_key.sign(exp=None),
        "no_sub": lambda: rsa_key.sign(sub=None),
        "rs512_with_an_rs256_key": lambda: jwt.encode({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 60},
                                                      rsa_key.private, algorithm="RS512", headers={"kid": "rsa-1"}),
        "garbage": lambda: "not.a.jwt",
    }[case]()
    with pytest.raises(InvalidTokenError) as e:
        validator.principal(token)
    assert token not in e.value.reason
    assert validator.cached_principal(token) is None


def test_a_refused_token_answers_401_with_the_bearer_challenge_and_is_logged_without_it(keys, validator, caplog):
    auth = Authenticator(method="oauthbearer", oauth=validator)
    token = keys["rsa"].sign(aud="someone-else")
    with caplog.at_level("WARNING", logger="lakelog.security"):
        with pytest.raises(AuthenticationError) as e:
            auth.authenticate(f"Bearer {token}", client_host="10.0.0.7", route="POST /topics/t")
    assert e.value.http_status == 401 and e.value.error_code == 40101
    assert e.value.response_headers["WWW-Authenticate"] == (
        'Bearer realm="lakelog", error="invalid_token", error_description="the token is not for this audience (aud)"')
    assert "10.0.0.7" in caplog.text and "POST /topics/t" in caplog.text and "'alice'" in caplog.text
    assert token not in caplog.text and token.split(".")[2] not in caplog.text
    with pytest.raises(AuthenticationError) as e:  # no credentials: the challenge alone (RFC 6750 3.1)
        auth.authenticate(None)
    assert e.value.response_headers["WWW-Authenticate"] == 'Bearer realm="lakelog"'
    assert "Authorization: Bearer" in e.value.message


def test_a_verified_token_is_remembered_until_it_expires(keys, validator):
    auth = Authenticator(method="oauthbearer", oauth=validator)
    token = keys["ec"].sign(sub="bob", exp=int(time.time()) + 2)
    assert auth.cached_principal(f"Bearer {token}") is None  # not checked yet: the slow path
    assert auth.authenticate(f"Bearer {token}") == "User:bob"
    assert auth.cached_principal(f"Bearer {token}") == "User:bob"  # a dict look-up
    assert auth.cached_principal(f"Bearer {token}x") is None and auth.cached_principal(None) is None
    time.sleep(2.1)
    assert auth.cached_principal(f"Bearer {token}") is None  # past exp: checked again (and within the skew)


def test_a_jwks_file_is_read_again_when_it_changes(tmp_path, keys):
    path = tmp_path / "jwks.json"
    validator = JwtValidator(jwks_url=write_jwks(path, keys["rsa"]))
    assert validator.principal(keys["rsa"].sign()) == "User:alice"
    rotated = Key("rsa-2")
    with pytest.raises(InvalidTokenError, match="no key 'rsa-2'"):
        validator.principal(rotated.sign())
    write_jwks(path, keys["rsa"], rotated)
    time.sleep(0.01)
    path.touch()
    assert validator.principal(rotated.sign(sub="carol")) == "User:carol"
    with pytest.raises(SecurityError, match="cannot read the JWKS file"):
        JwtValidator(jwks_url=str(tmp_path / "missing.json")).load()
    with pytest.raises(SecurityError, match="expected an http"):
        JwtValidator(jwks_url="ftp://idp/jwks")


class _JwksHandler(http.server.BaseHTTPRequestHandler):
    jwks: dict = {"keys": []}
    fetches = 0

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).fetches += 1
        body = json.dumps(type(self).jwks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def jwks_server():
    """A JWKS served by a real HTTP server on a free port (a thread of this process); yields its handler class."""
    handler = type("Handler", (_JwksHandler,), {"jwks": {"keys": []}, "fetches": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    yield handler
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_a_jwks_url_is_cached_and_fetched_again_for_a_rotated_key(jwks_server, keys):
    jwks_server.jwks = {"keys": [keys["rsa"].jwk]}
    validator = JwtValidator(jwks_url=jwks_server.url, expected_issuer=ISSUER, jwks_cooldown_s=0.5)
    validator.load()
    assert validator.principal(keys["rsa"].sign()) == "User:alice"
    assert validator.principal(keys["rsa"].sign(sub="bob")) == "User:bob"
    assert jwks_server.fetches == 1  # the set is cached
    rotated = Key("rsa-2")
    jwks_server.jwks = {"keys": [rotated.jwk]}  # the identity provider rotates its key
    time.sleep(0.6)  # past the cooldown of forced fetches
    assert validator.principal(rotated.sign(sub="carol")) == "User:carol"  # unknown kid: fetched again
    assert jwks_server.fetches == 2
    with pytest.raises(InvalidTokenError, match="no key 'rsa-1'"):  # the old key is gone (a new token of it)
        validator.principal(keys["rsa"].sign(sub="dave"))
    for _ in range(5):  # unknown kids within the cooldown do not make the broker fetch again
        with pytest.raises(InvalidTokenError):
            validator.principal(Key("x").sign())
    assert jwks_server.fetches <= 3


def test_a_jwks_is_not_fetched_over_plain_http_from_another_host():
    with pytest.raises(SecurityError, match="over https://"):
        JwtValidator(jwks_url="http://idp.example.com/.well-known/jwks.json")
    JwtValidator(jwks_url="https://idp.example.com/.well-known/jwks.json")  # https: fine (fetched on use)


def test_an_unreachable_jwks_url_refuses_tokens_without_blaming_them(keys):
    from lakelog.runtime.zookeeper_server import free_port

    validator = JwtValidator(jwks_url=f"http://127.0.0.1:{free_port()}/jwks", jwks_timeout_s=2)
    auth = Authenticator(method="oauthbearer", oauth=validator).start()  # logged, not fatal: fetched again on use
    with pytest.raises(AuthenticationError) as e:
        auth.authenticate(f"Bearer {keys['rsa'].sign()}")
    assert "retry later" in e.value.message and "invalid_token" not in e.value.response_headers["WWW-Authenticate"]


def test_basic_and_oauthbearer_together_and_the_inter_broker_user(zk_client, tmp_path, keys):
    UserCredentials(zk_client).upsert("alice", "alice-pw")
    UserCredentials(zk_client).upsert("broker", "broker-pw")
    jwks = write_jwks(tmp_path / "jwks.json", keys["rsa"])
    basic = lambda user, pw: "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()  # noqa: E731
    both = Authenticator(method="basic, oauthbearer", zk=zk_client, oauth=JwtValidator(jwks_url=jwks)).start()
    only_bearer = Authenticator(method="oauthbearer", zk=zk_client, oauth=JwtValidator(jwks_url=jwks),
                                inter_broker_user="broker").start()
    try:
        assert both.authenticate(basic("alice", "alice-pw")) == "User:alice"
        assert both.authenticate(f"Bearer {keys['rsa'].sign(sub='bob')}") == "User:bob"
        with pytest.raises(AuthenticationError) as e:
            both.authenticate(None)
        assert e.value.response_headers["WWW-Authenticate"] == (
            'Basic realm="lakelog", charset="UTF-8", Bearer realm="lakelog"')
        with pytest.raises(AuthenticationError, match="not base64") as e:
            both.authenticate("Basic !!")
        assert "Bearer" in e.value.response_headers["WWW-Authenticate"]
        assert only_bearer.authenticate(basic("broker", "broker-pw")) == "User:broker"  # brokers between themselves
        assert only_bearer.cached_principal(basic("broker", "broker-pw")) == "User:broker"
        with pytest.raises(AuthenticationError, match="HTTP Basic is for the brokers only") as e:  # others: tokens
            only_bearer.authenticate(basic("alice", "alice-pw"))
        assert e.value.response_headers["WWW-Authenticate"] == 'Bearer realm="lakelog"'
        assert only_bearer.cached_principal(basic("alice", "alice-pw")) is None
        # a token naming the brokers' user is not a broker (brokers never send tokens), verified or remembered
        posing = f"Bearer {keys['rsa'].sign(sub='broker')}"
        for _ in range(2):
            with pytest.raises(AuthenticationError, match="may not name the brokers' user"):
                only_bearer.authenticate(posing)
            assert only_bearer.cached_principal(posing) is None
    finally:
        both.close()
        only_bearer.close()


def test_settings(tmp_path):
    from lakelog.config import BrokerSettings
    from lakelog.errors import ConfigError
    from lakelog.security.oauth import jwt_validator

    with pytest.raises(ConfigError, match="needs oauth.jwks.url"):
        BrokerSettings.load(authentication_methods="oauthbearer", inter_broker_password="pw")
    with pytest.raises(ConfigError, match="inter.broker.password must be set"):
        BrokerSettings.load(authentication_methods="oauthbearer", oauth_jwks_url="/x.json")
    with pytest.raises(ConfigError, match="comma-separated list of basic, oauthbearer and mtls"):
        BrokerSettings.load(authentication_methods="none,basic")
    props = tmp_path / "server.properties"  # Kafka's names are aliases of lakelog's
    props.write_text("authentication.methods=OAuthBearer, basic\ninter.broker.password=pw\n"
                     "sasl.oauthbearer.jwks.endpoint.url=https://idp.example/jwks\n"
                     "sasl.oauthbearer.expected.audience=a, b\nsasl.oauthbearer.clock.skew.seconds=5\n"
                     "sasl.oauthbearer.sub.claim.name=client_id\noauth.expected.issuer=https://idp.example\n")
    settings = BrokerSettings.load(config_file=props)
    assert settings.authentication_methods == "basic,oauthbearer" and settings.authenticates
    validator = jwt_validator(settings)
    assert validator.fetched and validator.expected_audience == ["a", "b"] and validator.clock_skew_s == 5
    assert validator.principal_claim == "client_id" and validator.expected_issuer == "https://idp.example"
    assert jwt_validator(BrokerSettings.load()) is None


def lakelog_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, timeout=60,
                          env={**clean, "COLUMNS": "400", **(env or {})})


def test_a_broker_with_oauthbearer_takes_tokens_and_refuses_requests_without(broker_factory, tmp_path, keys,
                                                                             topic_name):
    jwks = write_jwks(tmp_path / "jwks.json", keys["rsa"])
    broker = broker_factory(extra_env={
        "LAKELOG_AUTHENTICATION_METHODS": "oauthbearer", "LAKELOG_INTER_BROKER_PASSWORD": "inter-broker-s3cret",
        "LAKELOG_OAUTH_JWKS_URL": jwks, "LAKELOG_OAUTH_EXPECTED_ISSUER": ISSUER,
        "LAKELOG_OAUTH_EXPECTED_AUDIENCE": AUDIENCE})
    token = keys["rsa"].sign(sub="etl")
    with LakelogClient(broker.url, auth=BearerToken(token)) as etl:
        etl.create_topic(topic_name, partitions=1)
        etl.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"a", b"b", b"c"])}))
        assert etl.fetch_page(topic_name, 0, 0, max_bytes=1 << 20, form="arrow").records.column(
            "value").to_pylist() == [b"a", b"b", b"c"]
    r = httpx.post(f"{broker.url}/topics/{topic_name}", json={"records": [{"value": "eA=="}]},
                   headers={"Content-Type": "application/vnd.kafka.binary.v2+json"})
    assert r.status_code == 401 and r.json()["error_code"] == 40101
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="lakelog"'
    expired = keys["rsa"].sign(sub="etl", exp=int(time.time()) - 120)
    r = httpx.get(f"{broker.url}/topics", headers={"Authorization": f"Bearer {expired}"})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["WWW-Authenticate"]
    assert "the token has expired" in r.json()["message"]
    with LakelogClient(broker.url, auth=token) as etl:  # a str is a token too
        assert topic_name in etl.admin.list_topics()
    # the CLI: LAKELOG_TOKEN, or sasl.oauthbearer.token in a --command-config file
    assert topic_name in lakelog_cli("topics", "list", "-b", broker.url, env={"LAKELOG_TOKEN": token}).stdout.decode()
    props = tmp_path / "client.properties"
    props.write_text(f"sasl.oauthbearer.token={token}\n")
    out = lakelog_cli("--command-config", str(props), "topics", "list", "-b", broker.url)
    assert topic_name in out.stdout.decode(), out.stderr.decode()
    refused = lakelog_cli("topics", "list", "-b", broker.url)
    assert refused.returncode == 1 and "Authentication failed: no credentials" in refused.stderr.decode()
    assert token.split(".")[2] not in broker.log_tail(400) and expired.split(".")[2] not in broker.log_tail(400)


@pytest.mark.cluster
def test_oauthbearer_brokers_replicate_with_the_inter_broker_user(broker_factory, tmp_path, keys, topic_name):
    env = {"LAKELOG_AUTHENTICATION_METHODS": "oauthbearer", "LAKELOG_INTER_BROKER_PASSWORD": "inter-broker-s3cret",
           "LAKELOG_OAUTH_JWKS_URL": write_jwks(tmp_path / "jwks.json", keys["ec"]),
           "LAKELOG_AUTHORIZER_ENABLED": "true", "LAKELOG_SUPER_USERS": "User:etl"}
    brokers = [broker_factory(i, extra_env=env) for i in range(2)]
    with LakelogClient(",".join(b.url for b in brokers), auth=BearerToken(keys["ec"].sign(sub="etl"))) as etl:
        etl.create_topic(topic_name, partitions=2, replication_factor=2)
        for p in range(2):  # acks=all: each answer waits for the follower's replica fetch (Basic, as the brokers)
            etl.produce_arrow(topic_name, p, pa.table({"value": pa.array([b"v%d" % i for i in range(5)])}))
        assert all(log["high_watermark"] == 5 for log in etl.topic_logs(topic_name))
        etl.security.upsert_user("alice", "alice-pw")
    r = httpx.get(f"{brokers[1].url}/topics", auth=("alice", "alice-pw"))  # Basic is for the brokers only
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == 'Bearer realm="lakelog"'
    assert httpx.get(f"{brokers[1].url}/topics", auth=("broker", "inter-broker-s3cret")).status_code == 200
