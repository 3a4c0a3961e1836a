"""TLS of the SSL and SASL_SSL Kafka listeners: the gateway's certificate settings and principal mapping.

The listener presents ``ssl.certfile`` / ``ssl.keyfile`` (the broker's certificate, the one its HTTPS
gateway presents) and asks client certificates as ``ssl.client.auth`` says (``none``, ``requested``,
``required``, Kafka's names), verified against ``ssl.cafile``. On an SSL listener the principal is Kafka's
SSL principal (``DefaultKafkaPrincipalBuilder``): ``User:{name}`` of the client certificate's subject
mapped by ``ssl.principal.mapping.rules`` (:class:`~lakelog.security.tls_principal.SslPrincipalMapper`,
the mapping of the gateway's ``mtls``), ``User:ANONYMOUS`` without a client certificate. On a SASL_SSL
listener SASL decides the principal (:mod:`lakelog.kafka.sasl`).
"""

from __future__ import annotations

import ssl

from lakelog.config import BrokerSettings
from lakelog.errors import SecurityError
from lakelog.security.authentication import ANONYMOUS
from lakelog.security.tls_principal import SslPrincipalMapper, certificate_subject

__all__ = ["certificate_principal", "server_ssl_context"]

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_ssl_context(settings: BrokerSettings) -> ssl.SSLContext:
    """The TLS server context of the broker's TLS listeners (TLS 1.2+).

    Raises:
        ssl.SSLError, OSError: a certificate or key that cannot be read or do not match.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(settings.ssl_certfile), None if settings.ssl_keyfile is None else str(settings.ssl_keyfile))
    if settings.ssl_cafile is not None:
        context.load_verify_locations(cafile=str(settings.ssl_cafile))
    context.verify_mode = _CLIENT_AUTH[settings.ssl_client_auth]
    return context


def certificate_principal(ssl_object: ssl.SSLObject | None, mapper: SslPrincipalMapper) -> str:
    """``User:{mapped subject}`` of the connection's verified client certificate; ``User:ANONYMOUS`` without one.

    Raises:
        SecurityError: no ``ssl.principal.mapping.rules`` rule matches the subject (the connection closes).
    """
    der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    try:
        subject = certificate_subject(der)
    except ValueError as e:
        raise SecurityError(f"the client certificate cannot be read: {e}") from None
    return f"User:{mapper.name(subject)}"
