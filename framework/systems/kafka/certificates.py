"""When a PEM certificate stops being valid, read from the file itself.

A broker that refuses a client certificate says only that (Kafka's TLS engine sends one
alert for an expired certificate and for one of an unknown CA); the certificate's own
``notAfter`` tells the two apart. Python's ``ssl`` has no public reader of certificate
files, so this walks the few DER elements in front of the validity.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["not_after"]

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)


def not_after(path: Path) -> datetime | None:
    """The end of validity of the first certificate in ``path`` (PEM), or None when the
    file holds none that can be read."""
    try:
        found = _PEM.search(path.read_bytes())
        if found is None:
            return None
        der = base64.b64decode(b"".join(found.group(1).split()))
        certificate = _children(der, 0)
        tbs = _children(der, certificate[0])
        fields = tbs[1:] if der[tbs[0]] == 0xA0 else tbs  # [0] version is optional
        validity = _children(der, fields[3])  # serial, signature, issuer, validity
        return _time(der, validity[1])
    except (OSError, ValueError, IndexError):
        return None


def _header(der: bytes, at: int) -> tuple[int, int]:
    """(start of the content, its length) of the element at ``at``."""
    length = der[at + 1]
    if length < 0x80:
        return at + 2, length
    count = length & 0x7F
    return at + 2 + count, int.from_bytes(der[at + 2:at + 2 + count], "big")


def _value(der: bytes, at: int) -> tuple[int, int]:
    start, length = _header(der, at)
    return start, start + length


def _children(der: bytes, at: int) -> list[int]:
    """Offsets of the elements inside the constructed element at ``at``."""
    offset, end = _value(der, at)
    found = []
    while offset < end:
        found.append(offset)
        offset = sum(_header(der, offset))
    return found


def _time(der: bytes, at: int) -> datetime:
    start, end = _value(der, at)
    text = der[start:end].decode("ascii")
    form = "%y%m%d%H%M%SZ" if der[at] == 0x17 else "%Y%m%d%H%M%SZ"  # UTCTime, Generalized
    return datetime.strptime(text, form).replace(tzinfo=UTC)
