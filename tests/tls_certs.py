"""A test CA and the certificates it signs, as PEM files: the secured broker's, clients'.

Made with `cryptography` for each test run (nothing secret is committed): a CA, a broker
certificate for 127.0.0.1, client certificates for mutual TLS (one expired on purpose), and
a second CA that nothing trusts. Kafka reads PEM directly (``ssl.keystore.type=PEM``).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "Issued"]

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """One certificate and its key, as PEM files."""

    cert: Path
    """The certificate followed by the CA's (a chain a peer can check)."""
    key: Path
    """The private key (PKCS#8; encrypted when issued with a password)."""
    both: Path
    """Key then chain in one file: what Kafka's PEM keystore reads."""


class CertificateAuthority:
    """A self-signed CA that writes what it issues into ``folder``."""

    def __init__(self, folder: Path, name: str = "sampan test CA") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY).not_valid_after(now + 30 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        slug = name.replace(" ", "-")
        self.cert = folder / f"{slug}.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str, *, server: bool = False, expired: bool = False,
              password: str | None = None) -> Issued:
        """A certificate for ``common_name`` (a server's names 127.0.0.1 and localhost),
        valid for 30 days, or one that expired yesterday."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (now - 3 * _DAY, now - _DAY) if expired else (now - _DAY, now + 30 * _DAY)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8, encryption)
        chain = (cert.public_bytes(serialization.Encoding.PEM)
                 + self._cert.public_bytes(serialization.Encoding.PEM))
        slug = common_name.replace(" ", "-") + ("-expired" if expired else "")
        issued = Issued(self.folder / f"{slug}.crt", self.folder / f"{slug}.key",
                        self.folder / f"{slug}.keystore.pem")
        issued.cert.write_bytes(chain)
        issued.key.write_bytes(key_pem)
        issued.both.write_bytes(key_pem + chain)
        for path in (issued.key, issued.both):
            path.chmod(0o600)
        return issued
