"""What ``lakelog cluster up --secure`` makes under its data dir: a CA, the brokers' certificates, the
inter-broker password, a super user with a password and a client certificate, and the client settings.

Layout (``{data_dir}/tls/``; keys, passwords and ``client.properties`` ``0600``)::

    ca.pem, ca-key.pem              the CA (ssl.cafile of brokers and clients)
    broker-N.pem, broker-N-key.pem  broker N: CN=broker,OU=lakelog, SAN localhost, 127.0.0.1, the advertised host
    admin.pem, admin-key.pem        the super user's client certificate: CN=admin,OU=lakelog
    inter-broker.password           inter.broker.password
    admin.password                  the super user's password
    client.properties               ssl.cafile, ssl.certfile, ssl.keyfile (Kafka's client names): the super
                                    user's certificate, a ``lakelog --command-config`` file (mtls)

A second run on the same data dir reuses every file (the users' credentials in ZooKeeper keep their
passwords), so only the first run prints the password. The brokers get ``ssl.certfile``/``ssl.keyfile``/
``ssl.cafile``, ``ssl.client.auth=requested``, ``authentication.methods=basic,mtls``,
``authorizer.enabled=true``, ``super.users=User:admin`` and ``ssl.principal.mapping.rules``
:data:`MAPPING_RULES`, which map the certificates made here to their CN (``User:broker``, ``User:admin``),
the same principals as their passwords': a client authenticates with either.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from lakelog.security.certificates import CertificateAuthority, TlsFiles, write_private
from lakelog.security.user_credentials import UserCredentials

__all__ = ["MAPPING_RULES", "SUPER_USER", "SecureCluster", "prepare_secure_cluster"]

#: The super user ``cluster up --secure`` creates.
SUPER_USER = "admin"
#: The inter-broker user (``inter.broker.username``'s default).
BROKER_USER = "broker"
#: The OU of every certificate made here, and the rule mapping those to their CN.
UNIT = "lakelog"
MAPPING_RULES = f"RULE:^CN=([^,]+),OU={UNIT}$/$1/,DEFAULT"


@dataclass
class SecureCluster:
    """The files and secrets of a secure local cluster (:func:`prepare_secure_cluster`).

    Attributes:
        directory: ``{data_dir}/tls``.
        brokers: each broker's :class:`TlsFiles`, by broker id.
        admin: the super user's client certificate files.
        admin_password: the super user's password.
        inter_broker_password: ``inter.broker.password``.
        password_file: where ``admin_password`` is (``0600``).
        created: whether this run made them (False: an earlier run's files were reused).
    """

    directory: Path
    brokers: dict[int, TlsFiles]
    admin: TlsFiles
    admin_password: str = field(repr=False)
    inter_broker_password: str = field(repr=False)
    password_file: Path
    created: bool

    @property
    def cafile(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def client_properties(self) -> Path:
        """``{directory}/client.properties`` (written by :meth:`write_client_properties`)."""
        return self.directory / "client.properties"

    def broker_env(self) -> dict[str, str]:
        """The brokers' security settings as ``LAKELOG_*`` environment (besides their TLS files)."""
        return {"LAKELOG_AUTHENTICATION_METHODS": "basic,mtls", "LAKELOG_INTER_BROKER_USERNAME": BROKER_USER,
                "LAKELOG_INTER_BROKER_PASSWORD": self.inter_broker_password, "LAKELOG_SSL_CLIENT_AUTH": "requested",
                "LAKELOG_SSL_PRINCIPAL_MAPPING_RULES": MAPPING_RULES, "LAKELOG_AUTHORIZER_ENABLED": "true",
                "LAKELOG_SUPER_USERS": f"User:{SUPER_USER}"}

    def write_client_properties(self) -> Path:
        """Write :attr:`client_properties` (``0600``): the super user's TLS files (``ssl.cafile``,
        ``ssl.certfile``, ``ssl.keyfile``), a ``lakelog --command-config`` file that authenticates with mtls."""
        lines = [f"{k}={v}" for k, v in self.admin.as_properties().items()]
        write_private(self.client_properties, ("\n".join(lines) + "\n").encode())
        return self.client_properties

    def ensure_super_user(self, zookeeper_connect: str) -> None:
        """Create the super user's SCRAM credential in ZooKeeper unless it exists (its password is kept).

        Raises:
            kazoo.handlers.threading.KazooTimeoutError: ZooKeeper not reachable within 15 s.
        """
        client = KazooClient(hosts=zookeeper_connect, timeout=10.0)
        client.start(timeout=15.0)
        try:
            users = UserCredentials(client)
            if SUPER_USER not in users.names():
                users.upsert(SUPER_USER, self.admin_password)
        finally:
            client.stop()
            client.close()


def _secret(path: Path) -> tuple[str, bool]:
    """The secret in ``path``, or a new one written there (``0600``); and whether it was made now."""
    if path.exists():
        return path.read_text().strip(), False
    value = secrets.token_urlsafe(18)
    write_private(path, (value + "\n").encode())
    return value, True


def prepare_secure_cluster(data_dir: Path, *, broker_ids: list[int], hosts: list[str]) -> SecureCluster:
    """Make (or reuse) the CA, certificates and passwords of a secure cluster under ``{data_dir}/tls``.

    Args:
        data_dir: the cluster's data dir.
        broker_ids: the brokers to make certificates for (one each; an existing one is reused).
        hosts: host names and addresses of the brokers' SubjectAlternativeName besides ``localhost`` and
            ``127.0.0.1`` (the advertised host).

    Raises:
        OSError: the directory cannot be written.
    """
    directory = Path(data_dir) / "tls"
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    created = not (directory / "ca.pem").exists()
    ca = CertificateAuthority.create(directory) if created else CertificateAuthority.load(directory)
    san = ["localhost", "127.0.0.1", *hosts]

    def files(stem: str, **kwargs) -> TlsFiles:
        existing = TlsFiles(directory / f"{stem}.pem", directory / f"{stem}-key.pem", ca.cafile)
        if existing.certfile.exists() and existing.keyfile.exists():
            return existing
        return ca.issue(stem, organizational_unit=UNIT, **kwargs)

    brokers = {i: files(f"broker-{i}", common_name=BROKER_USER, hosts=san, server=True) for i in broker_ids}
    admin = files(SUPER_USER, common_name=SUPER_USER)
    password_file = directory / f"{SUPER_USER}.password"
    admin_password, made = _secret(password_file)
    inter_broker_password, _ = _secret(directory / "inter-broker.password")
    return SecureCluster(directory, brokers, admin, admin_password, inter_broker_password, password_file,
                         created or made)
