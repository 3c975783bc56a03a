"""TLS for listeners: ``ssl.SSLContext`` from PEM files, and principals from client certs.

Invariants: server contexts never accept below TLS 1.2; ``client_auth="required"``
rejects a handshake without a certificate signed by ``cafile``; a client certificate's
principal is ``User:`` plus its subject in RFC 2253 order (most specific first, as
Kafka's default ``ssl.principal.mapping.rules`` prints it); no certificate means
``User:ANONYMOUS``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kraft_jbod.errors import ConfigError

ClientAuth = Literal["none", "requested", "required"]


@dataclass(frozen=True, slots=True)
class TlsSettings:
    certfile: Path
    keyfile: Path | None = None
    cafile: Path | None = None
    client_auth: ClientAuth = "none"
    password: str | None = None

    @classmethod
    def from_json(cls, d: object, where: str = "tls") -> TlsSettings:
        """Raises: ConfigError: missing certfile or a bad client_auth."""
        if not isinstance(d, dict) or not isinstance(d.get("certfile"), str):
            raise ConfigError(f"{where}: needs at least a certfile path")
        auth = d.get("client_auth", "none")
        if auth not in ("none", "requested", "required"):
            raise ConfigError(f"{where}: client_auth must be none, requested or required")
        key, ca, pw = d.get("keyfile"), d.get("cafile"), d.get("password")
        for name, v in (("keyfile", key), ("cafile", ca), ("password", pw)):
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"{where}: {name} must be a string")
        return cls(Path(d["certfile"]), None if key is None else Path(key), None if ca is None else Path(ca), auth, pw)


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A server context for one listener.

    Raises:
        ConfigError: a file is missing or not a matching PEM certificate/key.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(
            str(settings.certfile),
            None if settings.keyfile is None else str(settings.keyfile),
            password=settings.password,
        )
        if settings.cafile is not None:
            ctx.load_verify_locations(cafile=str(settings.cafile))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS files for the listener cannot be used: {exc}") from None
    if settings.client_auth == "required":
        ctx.verify_mode = ssl.CERT_REQUIRED
    elif settings.client_auth == "requested":
        ctx.verify_mode = ssl.CERT_OPTIONAL
    if settings.client_auth != "none" and settings.cafile is None:
        raise ConfigError("client_auth needs a cafile to verify client certificates")
    return ctx


def client_context(cafile: Path, *, certfile: Path | None = None, keyfile: Path | None = None) -> ssl.SSLContext:
    """A client context trusting ``cafile`` (for tests and the fake broker).

    Raises:
        ConfigError: a file cannot be used.
    """
    ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        if certfile is not None:
            ctx.load_cert_chain(str(certfile), None if keyfile is None else str(keyfile))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS client files cannot be used: {exc}") from None
    return ctx


def principal_from_peercert(cert: Any) -> str:
    """``User:CN=x,OU=y,...`` from ``SSLObject.getpeercert()``; ``User:ANONYMOUS`` without one."""
    if not cert or not isinstance(cert, dict):
        return "User:ANONYMOUS"
    rdns = cert.get("subject") or ()
    short = {
        "commonName": "CN",
        "organizationName": "O",
        "organizationalUnitName": "OU",
        "countryName": "C",
        "localityName": "L",
        "stateOrProvinceName": "ST",
        "domainComponent": "DC",
    }
    parts = [f"{short.get(k, k)}={v}" for rdn in reversed(tuple(rdns)) for k, v in rdn]
    return "User:" + ",".join(parts) if parts else "User:ANONYMOUS"
