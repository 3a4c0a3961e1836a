"""ssl.principal.mapping.rules (Kafka's SslPrincipalMapper, KIP-371) and certificate subjects."""

from __future__ import annotations

import pytest

from lakelog.security.certificates import CertificateAuthority
from lakelog.security.errors import SecurityError
from lakelog.security.tls_principal import SslPrincipalMapper, certificate_file_subject


def test_kafka_rules():
    assert SslPrincipalMapper().name("CN=alice,OU=eng") == "CN=alice,OU=eng"  # DEFAULT: the whole DN
    # the examples of Kafka's security documentation
    rules = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\nRULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),"
                               "ST=(.*?),C=(.*?)$/$1@$2/L,\nRULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,\nDEFAULT")
    assert rules.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert rules.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"
    assert rules.name("OU=x,CN=bob") == "BOB"
    with pytest.raises(SecurityError, match="no ssl.principal.mapping.rules rule matches"):
        SslPrincipalMapper("RULE:^CN=a$/b/").name("CN=c")
    with pytest.raises(SecurityError, match="invalid rule 'bogus'"):
        SslPrincipalMapper("bogus")


def test_the_subject_of_an_issued_certificate_reads_most_specific_first(tmp_path):
    ca = CertificateAuthority.create(tmp_path)
    files = ca.issue("alice", common_name="alice", organizational_unit="eng")
    assert certificate_file_subject(files.certfile) == "CN=alice,OU=eng"
    assert oct(files.keyfile.stat().st_mode & 0o777) == "0o600"
    assert CertificateAuthority.load(tmp_path).certificate == ca.certificate
