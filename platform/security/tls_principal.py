"""The principal of a TLS client certificate (``authentication.methods=mtls``), as Kafka's SSL principal builder.

Kafka's ``DefaultKafkaPrincipalBuilder`` names an SSL client ``User:{name}`` where ``name`` is the
certificate subject's distinguished name in RFC 2253 form (``X500Principal.getName()``:
``CN=alice,OU=eng,O=corp``, the most specific attribute first) mapped by ``ssl.principal.mapping.rules``
(KIP-371, Kafka's ``SslPrincipalMapper``)::

    ssl.principal.mapping.rules = RULE:pattern/replacement/[LU], ..., DEFAULT

Rules are tried in order: a ``RULE`` whose Java regex ``pattern`` matches the whole name gives the
``replacement`` (``$1`` ... refer to its groups), lower- (``L``) or upper-cased (``U``) if asked;
``DEFAULT`` gives the name unchanged. No rule matching is an authentication failure. Example: with
``RULE:^CN=([^,]+),OU=brokers$/$1/,DEFAULT`` a broker certificate ``CN=broker,OU=brokers`` is
``User:broker``, the principal of ``inter.broker.username=broker``; any other certificate keeps its full DN.

The subject is read with ``cryptography`` (RFC 4514, which replaced RFC 2253 and prints the same).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

from lakelog.security.errors import SecurityError

__all__ = ["SslPrincipalMapper", "certificate_subject", "certificate_file_subject"]

# Kafka's SslPrincipalMapper.RULE_SPLITTER / RULE_PARSER (Java regexes, same syntax here)
_RULE_SPLITTER = re.compile(r"\s*(DEFAULT|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?))\s*([,\n]\s*|$)")
_RULE_PARSER = re.compile(r"DEFAULT|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        m = self.pattern.fullmatch(name)
        if m is None:
            return None
        out = m.expand(self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed; :meth:`name` maps a distinguished name.

    Args:
        rules: the rules as configured (comma- or newline-separated). Default: ``DEFAULT``.

    Raises:
        SecurityError: a rule that is neither ``DEFAULT`` nor ``RULE:pattern/replacement/[LU]``, or whose
            pattern is not a valid regex (the message names it).
    """

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(rules.strip() or "DEFAULT"):
            text = m.group(1)
            if not text:
                if m.end() >= len(rules.strip()):
                    break
                continue
            parsed = _RULE_PARSER.fullmatch(text)
            if parsed is None:
                raise SecurityError(f"ssl.principal.mapping.rules: invalid rule {text!r}: give "
                                    "RULE:pattern/replacement/[LU] or DEFAULT")
            if text == "DEFAULT":
                self.rules.append(_Rule(None))
                continue
            pattern, replacement, case = parsed.group(1), parsed.group(3), parsed.group(5)
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as e:
                raise SecurityError(f"ssl.principal.mapping.rules: invalid pattern {pattern!r} ({e})") from None
            # Java's $1 / ${name} group references in Python's expand() syntax
            python_replacement = re.sub(r"\$(\d+)|\$\{(\w+)\}", lambda g: f"\\g<{g.group(1) or g.group(2)}>",
                                        replacement.replace("\\/", "/"))
            self.rules.append(_Rule(compiled, python_replacement, case))

    def name(self, distinguished_name: str) -> str:
        """The principal name of ``distinguished_name`` (``CN=alice,OU=eng``) under the first matching rule.

        Raises:
            SecurityError: no rule matches (Kafka's NoMatchingRule).
        """
        for rule in self.rules:
            out = rule.apply(distinguished_name)
            if out is not None:
                return out
        raise SecurityError(f"no ssl.principal.mapping.rules rule matches the certificate subject {distinguished_name!r}")


def certificate_subject(certificate: bytes) -> str:
    """The RFC 2253 / 4514 subject (``CN=alice,OU=eng``) of a DER or PEM certificate.

    Raises:
        ValueError: not a certificate.
    """
    cert = (x509.load_pem_x509_certificate(certificate) if certificate.lstrip().startswith(b"-----")
            else x509.load_der_x509_certificate(certificate))
    return cert.subject.rfc4514_string()


def certificate_file_subject(path) -> str:
    """The subject of the first certificate in a PEM file (a broker's ``ssl.certfile``).

    Raises:
        OSError: the file cannot be read. ValueError: no PEM certificate in it.
    """
    with open(path, "rb") as f:
        return certificate_subject(f.read())
