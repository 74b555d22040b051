"""A self-signed serving certificate for the HTTPS listener.

kubectl (client-go's clientcmd) only reads a kubeconfig's credentials when the server URL is
https, so the emulator serves the same API on a second, TLS listener and writes that URL into the
kubeconfigs it generates. The certificate is generated once per process (EC P-256, SAN 127.0.0.1 and
localhost) with ``cryptography`` when it is importable, else with the ``openssl`` command.

Client certificates (``client-certificate-data``/``client-key-data`` in a kubeconfig): the listener
asks for one, optionally, and trusts those signed by a client CA of its own (generated once per
process, with ``cryptography``); ``issue_client_certificate`` makes one whose common name is the user,
as the API server's ``--client-ca-file`` authenticator reads it.
"""

from __future__ import annotations

import ssl
import subprocess
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_cache: dict[str, tuple[Path, Path]] = {}
_cache_ca: dict[str, tuple[Path, Any, Any]] = {}  # the client CA: ca.pem, certificate, key


def _with_cryptography(cert: Path, key: Path) -> None:
    import ipaddress

    from cryptography import x509  # type: ignore[import-not-found,unused-ignore]
    from cryptography.hazmat.primitives import hashes, serialization  # type: ignore[import-not-found,unused-ignore]
    from cryptography.hazmat.primitives.asymmetric import ec  # type: ignore[import-not-found,unused-ignore]
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # type: ignore[import-not-found,unused-ignore]

    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-emulator")])
    now = datetime.now(UTC)
    crt = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(pkey.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(pkey, hashes.SHA256())
    )
    cert.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        pkey.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _with_openssl(cert: Path, key: Path) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "3650",
            "-subj",
            "/CN=kube-emulator",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,digitalSignature,keyCertSign",
            "-addext",
            "extendedKeyUsage=serverAuth",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )


def serving_cert() -> tuple[Path, Path]:
    """(cert.pem, key.pem), generated on first use."""
    with _lock:
        if "pair" not in _cache:
            folder = Path(tempfile.mkdtemp(prefix="kube-emulator-tls-"))
            cert, key = folder / "cert.pem", folder / "key.pem"
            try:
                _with_cryptography(cert, key)
            except ImportError:
                _with_openssl(cert, key)
            _cache["pair"] = (cert, key)
        return _cache["pair"]


def _client_ca() -> tuple[Path, Any, Any] | None:
    """(ca.pem, CA certificate, CA key) of the client CA, generated on first use; None without cryptography."""
    with _lock:
        if "client-ca" not in _cache_ca:
            try:
                from cryptography import x509  # type: ignore[import-not-found,unused-ignore]
                from cryptography.hazmat.primitives import hashes, serialization  # type: ignore[import-not-found,unused-ignore]
                from cryptography.hazmat.primitives.asymmetric import ec  # type: ignore[import-not-found,unused-ignore]
                from cryptography.x509.oid import NameOID  # type: ignore[import-not-found,unused-ignore]
            except ImportError:
                return None
            pkey = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-emulator-client-ca")])
            now = datetime.now(UTC)
            crt = (
                x509.CertificateBuilder()
                .subject_name(name)
                .issuer_name(name)
                .public_key(pkey.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - timedelta(days=1))
                .not_valid_after(now + timedelta(days=3650))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .sign(pkey, hashes.SHA256())
            )
            path = Path(tempfile.mkdtemp(prefix="kube-emulator-client-ca-")) / "ca.pem"
            path.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
            _cache_ca["client-ca"] = (path, crt, pkey)
        return _cache_ca["client-ca"]


def issue_client_certificate(user: str, groups: tuple[str, ...] = ()) -> tuple[str, str]:
    """(certificate PEM, private key PEM) for ``user`` (CN) and ``groups`` (O), signed by the client CA."""
    ca = _client_ca()
    if ca is None:
        raise RuntimeError("client certificates need the cryptography package")
    from cryptography import x509  # type: ignore[import-not-found,unused-ignore]
    from cryptography.hazmat.primitives import hashes, serialization  # type: ignore[import-not-found,unused-ignore]
    from cryptography.hazmat.primitives.asymmetric import ec  # type: ignore[import-not-found,unused-ignore]
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # type: ignore[import-not-found,unused-ignore]

    _, ca_cert, ca_key = ca
    pkey = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    now = datetime.now(UTC)
    crt = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca_cert.subject)
        .public_key(pkey.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = pkey.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return crt.public_bytes(serialization.Encoding.PEM).decode(), key.decode()


def server_context() -> ssl.SSLContext:
    cert, key = serving_cert()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    ca = _client_ca()
    if ca is not None:  # a client certificate is asked for, not required (tokens work without one)
        ctx.load_verify_locations(cafile=str(ca[0]))
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx
