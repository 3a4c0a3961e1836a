"""``lakelog demo --secure``: the demo's broker with TLS, authentication and ACLs, its clients as one user.

:func:`prepare_secure_demo` makes (or reuses) under ``{data_dir}/tls`` what ``lakelog cluster up --secure``
makes (:func:`lakelog.security.secure_setup.prepare_secure_cluster`: a CA, the broker's certificate, the
super user ``admin``) plus the password of the demo user :data:`DEMO_USER` (``{data_dir}/tls/flights-app.password``,
``0600``). The broker serves HTTPS only, with ``authentication.methods=basic,mtls`` and
``authorizer.enabled=true`` (``super.users=User:admin``). The super user creates the demo user and grants it
exactly :func:`demo_acls`; then every client step of the demo (producer, fetch, the Spark source with
``lakelog.auth.*`` and ``lakelog.ssl.cafile``, the SQL views' look-ups) runs as that user over TLS, and
:meth:`SecureDemo.show_denial` shows the authorizer refusing it a topic it has no ACL for (403 / 40301).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from lakelog.client import ClientSettings, GatewayError
from lakelog.security.certificates import write_private
from lakelog.security.secure_setup import SUPER_USER, SecureCluster, prepare_secure_cluster

__all__ = ["DEMO_USER", "DENIED_TOPIC", "SecureDemo", "demo_acls", "prepare_secure_demo"]

#: The user every client step of the secure demo runs as.
DEMO_USER = "flights-app"
#: The topic the demo user is shown to be refused (no ACL grants it anything there).
DENIED_TOPIC = "__consumer_offsets"


def demo_acls(*, topic: str, group: str, principal: str = f"User:{DEMO_USER}") -> list[dict[str, str]]:
    """The ACLs the demo's clients need, in the shape of
    :meth:`~lakelog.client.security.SecurityClient.create_acls` (literal, any host, Allow).

    Write on ``topic`` (produce; it also lets an idempotent producer get its producer id, KIP-679), Read
    (fetch, the Spark source) and Describe (offsets, logs, the SQL views' look-ups) on ``topic``, Read on
    ``group`` (the source commits the group's offsets; it implies Describe: the lag). The pipeline writes its
    output to Delta through ``foreachBatch``, not to a topic: no transactional id is needed. The super user
    creates the topic.

    Args:
        topic: the demo topic.
        group: the pipeline's consumer group.
        principal: whom they allow. Default: ``User:flights-app``.
    """
    acl = {"pattern_type": "LITERAL", "principal": principal, "host": "*", "permission": "ALLOW"}
    return ([{**acl, "resource_type": "TOPIC", "resource_name": topic, "operation": op}
             for op in ("WRITE", "READ", "DESCRIBE")]
            + [{**acl, "resource_type": "GROUP", "resource_name": group, "operation": "READ"}])


@dataclass
class SecureDemo:
    """The secure demo's files and credentials.

    Attributes:
        tls: the CA, broker certificate and super user (:class:`SecureCluster`) under ``{data_dir}/tls``.
        password: :data:`DEMO_USER`'s password.
    """

    tls: SecureCluster
    password: str = field(repr=False)

    def broker_kwargs(self) -> dict:
        """:class:`~lakelog.runtime.broker_process.BrokerProcess` keyword arguments of broker 0: the security
        environment (:meth:`SecureCluster.broker_env`) and its TLS files."""
        return {"extra_env": self.tls.broker_env(), "ssl_certfile": self.tls.brokers[0].certfile,
                "ssl_keyfile": self.tls.brokers[0].keyfile, "ssl_cafile": self.tls.cafile}

    def client_settings(self, url: str = "localhost:8082") -> ClientSettings:
        """The connection settings of the demo user at ``url``: Basic credentials (``sasl.username``,
        ``sasl.password``) and the CA (``ssl.cafile``)."""
        return ClientSettings(**{"bootstrap.servers": url, "sasl.username": DEMO_USER, "sasl.password": self.password,
                                 "ssl.cafile": str(self.tls.cafile)})

    def admin_settings(self, url: str = "localhost:8082") -> ClientSettings:
        """The connection settings of the super user ``admin`` at ``url``."""
        return ClientSettings(**{"bootstrap.servers": url, "sasl.username": SUPER_USER,
                                 "sasl.password": self.tls.admin_password, "ssl.cafile": str(self.tls.cafile)})

    def client_kwargs(self) -> dict:
        """:class:`LakelogClient` keyword arguments of the demo user (:meth:`client_settings`)."""
        return self.client_settings().client_kwargs()

    def admin_kwargs(self) -> dict:
        """:class:`LakelogClient` keyword arguments of the super user ``admin`` (:meth:`admin_settings`)."""
        return self.admin_settings().client_kwargs()

    def spark_options(self) -> dict[str, str]:
        """The Spark source options of the demo user (``lakelog.auth.*``, ``lakelog.ssl.cafile``): the same
        settings as :meth:`client_settings` (:meth:`ClientSettings.as_spark_options`)."""
        return self.client_settings().as_spark_options(bootstrap=False)

    def grant(self, url: str, *, topic: str, group: str) -> list[dict[str, str]]:
        """As the super user: create (or reset the password of) :data:`DEMO_USER` and store :func:`demo_acls`
        (storing an existing ACL again changes nothing). Returns the ACLs.

        Raises:
            lakelog.client.GatewayError: the broker refused (e.g. 401 / 40101: the stored super user's
                password is not ``admin.password``'s).
        """
        acls = demo_acls(topic=topic, group=group)
        with self.admin_settings(url).client() as admin:
            admin.security.upsert_user(DEMO_USER, self.password)
            admin.security.create_acls(acls)
        return acls

    def show_denial(self, url: str) -> str:
        """Fetch :data:`DENIED_TOPIC` as the demo user, which must be refused; returns the refusal as
        ``"HTTP 403 / 40301"``.

        Raises:
            SystemExit: the fetch was not refused with 403.
        """
        with self.client_settings(url).client() as client:
            try:
                client.fetch_arrow(DENIED_TOPIC, 0, 0)
            except GatewayError as e:
                if e.http_status != 403:
                    raise SystemExit(f"demo failed: expected 403 reading {DENIED_TOPIC}, got {e}") from e
                return f"HTTP {e.http_status} / {e.error_code}"
        raise SystemExit(f"demo failed: {DEMO_USER} read {DENIED_TOPIC} without an ACL")


def prepare_secure_demo(data_dir: Path, *, zookeeper_connect: str) -> SecureDemo:
    """Make (or reuse) the CA, broker 0's certificate, the super user and the demo user's password under
    ``{data_dir}/tls``, and create the super user's credential in ZooKeeper unless it exists.

    Args:
        data_dir: the demo's data dir.
        zookeeper_connect: the demo's ZooKeeper (``host:port``), already serving.

    Raises:
        OSError: ``data_dir`` cannot be written.
        kazoo.handlers.threading.KazooTimeoutError: ZooKeeper not reachable within 15 s.
    """
    tls = prepare_secure_cluster(data_dir, broker_ids=[0], hosts=[])
    tls.ensure_super_user(zookeeper_connect)
    password_file = tls.directory / f"{DEMO_USER}.password"
    if not password_file.exists():
        write_private(password_file, (secrets.token_urlsafe(18) + "\n").encode())
    return SecureDemo(tls, password_file.read_text().strip())
