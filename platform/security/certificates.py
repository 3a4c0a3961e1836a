"""A small certificate authority for local secure clusters (``lakelog cluster up --secure``) and tests:
a CA, broker certificates (server and client use, SAN ``localhost``, ``127.0.0.1`` and the advertised
host) and client certificates, as PEM files (keys ``0600``), made with ``cryptography``.

Keys are ECDSA P-256 (quick to make, accepted by OpenSSL, Java and browsers). Certificates are X.509 v3
with the extensions a verifying TLS client checks: BasicConstraints (CA or not), KeyUsage,
ExtendedKeyUsage (serverAuth and/or clientAuth), SubjectAlternativeName (host names and IP addresses;
clients check the host against it, not against the CN), Subject/AuthorityKeyIdentifier.

A certificate's subject is ``CN={name}`` plus an optional ``OU``: the principal of
``authentication.methods=mtls`` is ``User:{subject}`` (RFC 2253: ``CN=alice,OU=eng``) after
``ssl.principal.mapping.rules`` (:mod:`lakelog.security.tls_principal`).

Usage::

    ca = CertificateAuthority.create(Path("data/tls"))           # data/tls/ca.pem, ca-key.pem
    files = ca.issue("broker-0", common_name="broker", hosts=["localhost", "127.0.0.1"], server=True)
    files.certfile, files.keyfile, files.cafile                    # PEM paths
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "TlsFiles", "write_private"]

#: Default validity of the certificates made here: 825 days (the longest Apple's clients accept for a
#: server certificate); the CA's: ten years.
CERT_VALID_DAYS = 825
CA_VALID_DAYS = 3650


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one party: its certificate, its key and the CA that signed it (and the peers')."""

    certfile: Path
    keyfile: Path
    cafile: Path

    def as_properties(self) -> dict[str, str]:
        """``{"ssl.cafile": ..., "ssl.certfile": ..., "ssl.keyfile": ...}`` (Kafka's names, absolute paths)."""
        return {"ssl.cafile": str(self.cafile.resolve()), "ssl.certfile": str(self.certfile.resolve()),
                "ssl.keyfile": str(self.keyfile.resolve())}


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (``0600``, set before any byte is written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str, organizational_unit: str | None = None) -> x509.Name:
    # RFC 2253 prints the last RDN first: build OU then CN so the subject reads CN=...,OU=...
    rdns = [] if organizational_unit is None else [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME,
                                                                      organizational_unit)]
    return x509.Name(rdns + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


class CertificateAuthority:
    """A CA key and self-signed certificate in ``directory`` (``ca.pem``, ``ca-key.pem``) that issues
    certificates into the same directory. Make with :meth:`create` or :meth:`load`."""

    def __init__(self, directory: Path, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate) -> None:
        self.directory = Path(directory)
        self.key = key
        self.certificate = certificate

    @property
    def cafile(self) -> Path:
        """``{directory}/ca.pem``: the CA certificate every party verifies the others against (``ssl.cafile``)."""
        return self.directory / "ca.pem"

    @classmethod
    def create(cls, directory: Path, *, common_name: str = "lakelog CA",
               valid_days: int = CA_VALID_DAYS) -> "CertificateAuthority":
        """A new CA written to ``directory`` (created; an existing CA there is replaced).

        Args:
            directory: where ``ca.pem`` and ``ca-key.pem`` (``0600``) go.
            common_name: the CA's CN. Default: ``lakelog CA``.
            valid_days: validity in days. Default: 3650.
        """
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(common_name)
        now = datetime.datetime.now(datetime.timezone.utc)
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=valid_days))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                             crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
                .add_extension(ski, critical=False)
                .sign(key, hashes.SHA256()))
        ca = cls(directory, key, cert)
        write_private(directory / "ca-key.pem", _key_pem(key))
        ca.cafile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return ca

    @classmethod
    def load(cls, directory: Path) -> "CertificateAuthority":
        """The CA :meth:`create` wrote to ``directory``.

        Raises:
            FileNotFoundError: no ``ca.pem`` / ``ca-key.pem`` there.
        """
        directory = Path(directory)
        key = serialization.load_pem_private_key((directory / "ca-key.pem").read_bytes(), password=None)
        cert = x509.load_pem_x509_certificate((directory / "ca.pem").read_bytes())
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cls(directory, key, cert)

    def issue(self, file_stem: str, *, common_name: str, organizational_unit: str | None = None,
              hosts: Sequence[str] = (), server: bool = False, client: bool = True,
              valid_days: int = CERT_VALID_DAYS) -> TlsFiles:
        """A certificate signed by this CA: ``{directory}/{file_stem}.pem`` and ``{file_stem}-key.pem`` (``0600``).

        Args:
            file_stem: the files' name without ``.pem``.
            common_name: the subject's CN (with mtls the principal's name, through
                ``ssl.principal.mapping.rules``).
            organizational_unit: an OU in the subject (``CN=name,OU=unit``). Default: none.
            hosts: DNS names and IP addresses of the SubjectAlternativeName (a server's). Default: none.
            server: for TLS servers (ExtendedKeyUsage serverAuth; give ``hosts``). Default: False.
            client: for TLS clients (clientAuth). Default: True.
            valid_days: validity in days. Default: 825.

        Raises:
            ValueError: ``server`` without ``hosts``, or neither ``server`` nor ``client``.
        """
        if server and not hosts:
            raise ValueError("a server certificate needs hosts (its SubjectAlternativeName)")
        if not (server or client):
            raise ValueError("a certificate for neither servers nor clients")
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        builder = (x509.CertificateBuilder().subject_name(_name(common_name, organizational_unit))
                   .issuer_name(self.certificate.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=valid_days))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False, key_agreement=True,
                                                key_cert_sign=False, crl_sign=False, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                                  critical=False))
        if hosts:
            builder = builder.add_extension(_san(hosts), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        certfile, keyfile = self.directory / f"{file_stem}.pem", self.directory / f"{file_stem}-key.pem"
        write_private(keyfile, _key_pem(key))
        certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return TlsFiles(certfile=certfile, keyfile=keyfile, cafile=self.cafile)
