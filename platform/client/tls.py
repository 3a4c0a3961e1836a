"""TLS of the HTTP clients (the CLI, :class:`~lakelog.client.LakelogClient`, the Spark source and sink, the
broker-to-broker client): one verifying ``ssl.SSLContext`` per set of PEM files, and clear messages for
TLS failures.

The client settings keep Kafka's client names (``ssl.cafile``, ``ssl.certfile``, ``ssl.keyfile`` in a
client properties file; ``ssl_cafile=`` ... as keyword arguments):

- ``ssl.cafile``: the CA certificate(s), PEM, the server's certificate must be signed by. Default: the
  system's trusted CAs.
- ``ssl.certfile`` / ``ssl.keyfile``: a client certificate (chain) and its key, PEM, presented when the
  broker asks for one (``ssl.client.auth``; the principal of ``authentication.methods=mtls``). Default: none.

Contexts are cached per set of files: every client of a process shares one context (TLS session
resumption, and the CA file is parsed once); a file changed on disk is read again by new processes only.
"""

from __future__ import annotations

import functools
import ssl
from pathlib import Path

__all__ = ["client_ssl_context", "describe_tls_failure", "disconnect_hint", "uses_tls"]


def uses_tls(*, ssl_cafile: str | Path | None = None, ssl_certfile: str | Path | None = None,
             ssl_keyfile: str | Path | None = None) -> bool:
    """Whether any TLS file is given (then a bootstrap ``host:port`` without a scheme means ``https://``)."""
    return any(v for v in (ssl_cafile, ssl_certfile, ssl_keyfile))


def client_ssl_context(*, ssl_cafile: str | Path | None = None, ssl_certfile: str | Path | None = None,
                       ssl_keyfile: str | Path | None = None) -> ssl.SSLContext:
    """A client context that verifies the server (certificate chain and host name) against ``ssl_cafile``
    (the system's CAs when None) and presents ``ssl_certfile``/``ssl_keyfile`` when given. Cached per files.

    Raises:
        ValueError: a file that cannot be read or is not PEM of the expected kind (names the file and the
            setting to fix).
    """
    return _context(*(None if v is None else str(Path(v).expanduser()) for v in (ssl_cafile, ssl_certfile, ssl_keyfile)))


@functools.lru_cache(maxsize=32)
def _context(cafile: str | None, certfile: str | None, keyfile: str | None) -> ssl.SSLContext:
    if keyfile and not certfile:
        raise ValueError("ssl.keyfile without ssl.certfile: give the client certificate too")
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"ssl.cafile {cafile}: not a readable PEM CA certificate ({e})") from None
    if certfile:
        try:
            ctx.load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"ssl.certfile {certfile} / ssl.keyfile {keyfile}: not a readable PEM certificate "
                             f"and matching key ({e})") from None
    return ctx


def describe_tls_failure(error: BaseException, *, url: str) -> str | None:
    """A message saying what to fix when ``error`` (an httpx transport error) is a TLS failure, else None:

    - the server's certificate was not verified: give the CA that signed it (``ssl.cafile``);
    - the server refused the handshake (``ssl.client.auth=required`` and no or a wrong client certificate):
      give ``ssl.certfile``/``ssl.keyfile``.
    """
    chain = _chain(error)
    if any(isinstance(x, ssl.SSLCertVerificationError) for x in chain) or \
            "CERTIFICATE_VERIFY_FAILED" in " ".join(str(x) for x in chain):
        return (f"the TLS certificate of {url} was not verified ({_reason(chain)}): give the CA certificate that "
                "signed the brokers' certificates (ssl.cafile, LAKELOG_SSL_CAFILE, lakelog.ssl.cafile)")
    if any(isinstance(x, ssl.SSLError) for x in chain):
        return (f"the TLS handshake with {url} failed ({_reason(chain)}): if the broker requires a client "
                "certificate (ssl.client.auth=required), give one signed by its CA (ssl.certfile and ssl.keyfile)")
    return None


def disconnect_hint(error: BaseException, *, url: str) -> str:
    """What a server closing the connection without an answer may mean, as ``" (...)"``, else ``""``:
    plain HTTP to a TLS port (``http://`` URL: use ``https://``), or a TLS 1.3 server refusing the client's
    certificate after the handshake (``https://``: ``ssl.client.auth=required`` wants ``ssl.certfile``)."""
    if not any(type(x).__name__ in ("RemoteProtocolError", "ReadError") for x in _chain(error)):
        return ""
    if url.startswith("http://"):
        return " (it closed the connection without an answer: if it is a TLS port, use https:// or give ssl.cafile)"
    return (" (it closed the connection without an answer: if the broker requires a client certificate "
            "(ssl.client.auth=required), give one signed by its CA: ssl.certfile and ssl.keyfile)")


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    e: BaseException | None = error
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


def _reason(chain: list[BaseException]) -> str:
    for x in chain:
        if isinstance(x, ssl.SSLError):
            return getattr(x, "verify_message", None) or x.reason or str(x)
    return str(chain[0]) or type(chain[0]).__name__
