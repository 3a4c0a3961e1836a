"""The files of ``cluster up --secure`` (lakelog.security.secure_setup): made once, reused after."""

from __future__ import annotations

from lakelog.config import read_properties
from lakelog.security.secure_setup import MAPPING_RULES, prepare_secure_cluster
from lakelog.security.tls_principal import SslPrincipalMapper, certificate_file_subject


def test_made_once_then_reused(tmp_path):
    first = prepare_secure_cluster(tmp_path, broker_ids=[0, 1], hosts=["broker.example"])
    assert first.created and len(first.admin_password) >= 20
    mapper = SslPrincipalMapper(MAPPING_RULES)  # the certificates map to the users of the passwords
    assert mapper.name(certificate_file_subject(first.brokers[1].certfile)) == "broker"
    assert mapper.name(certificate_file_subject(first.admin.certfile)) == "admin"
    again = prepare_secure_cluster(tmp_path, broker_ids=[0, 1], hosts=["broker.example"])
    assert not again.created and again.admin_password == first.admin_password
    assert again.inter_broker_password == first.inter_broker_password
    assert again.brokers[0].certfile.read_bytes() == first.brokers[0].certfile.read_bytes()
    props = read_properties(again.write_client_properties())  # a --command-config file: the super user's mtls
    assert props == {"ssl.cafile": str(again.cafile.resolve()), "ssl.certfile": str(again.admin.certfile.resolve()),
                     "ssl.keyfile": str(again.admin.keyfile.resolve())}
    assert (tmp_path / "tls").stat().st_mode & 0o777 == 0o700
    assert again.client_properties.stat().st_mode & 0o777 == 0o600
