"""A throwaway CA and server certificate for the rig's TLS listeners (PEM, 127.0.0.1)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    """Paths of the generated PEM files."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    server_keystore_pem: Path  # key + chain in one file, as Kafka's PEM keystore wants


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def make_tls_files(folder: Path, hostname: str = "localhost") -> TlsFiles:
    """Create a CA and a server certificate valid for 127.0.0.1 and localhost."""
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    # Valid far on both sides of now: under `--clock-shift` Python's clock runs ahead while OpenSSL checks the
    # certificate against the real one, and the certificate must hold for both.
    validity = dt.timedelta(days=1000)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fleetview test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - validity)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = _key()
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - validity)
        .not_valid_after(now + validity)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(hostname), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    files = TlsFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "server-keystore.pem")
    files.ca_cert.write_bytes(ca_cert.public_bytes(pem))
    files.server_cert.write_bytes(server_cert.public_bytes(pem))
    files.server_key.write_bytes(key_pem)
    files.server_keystore_pem.write_bytes(key_pem + server_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    for path in (files.server_key, files.server_keystore_pem):
        path.chmod(0o600)
    return files
