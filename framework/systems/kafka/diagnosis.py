"""Why a Kafka client could not connect, told as what happened: refused, no answer, a
certificate not trusted, credentials refused, a listener that speaks another protocol.

aiokafka folds every failed bootstrap into one ``KafkaConnectionError("Unable to
bootstrap")`` (after logging the cause), and a TLS or SASL mismatch often shows only as a
connection the broker closed. When a client cannot start, `diagnose` connects to each
bootstrap address once more with the same settings and, where the connection is closed,
probes what the listener speaks. Refused and silent brokers are `SystemUnavailableError`
(a restart may find them up); everything about TLS and SASL is `AuthenticationError`
(permanent: it needs a change of the job file, the credentials or the broker).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import Sequence
from datetime import UTC, datetime

from aiokafka.conn import create_conn
from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.protocol.admin import SaslHandShakeRequest
from aiokafka.protocol.metadata import MetadataRequest

from framework.errors import AuthenticationError, SampanError, SystemUnavailableError
from framework.systems.kafka.certificates import not_after
from framework.systems.kafka.options import KafkaOptions
from framework.systems.kafka.security import KafkaSecurity

__all__ = ["diagnose"]

_REFUSED_CERTIFICATE = ("BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "CERTIFICATE_EXPIRED",
                        "UNKNOWN_CA", "CERTIFICATE_REVOKED", "UNSUPPORTED_CERTIFICATE")
"""TLS alerts of a broker that refused the client certificate (Kafka's Java engine sends
certificate_unknown for most reasons, so the certificate itself is looked at)."""


async def diagnose(system: str, bootstrap: str, options: KafkaOptions) -> SampanError | None:
    """The first thing that stops a client of ``options`` connecting to ``bootstrap``, as a
    sampan error; None when a fresh connection works (the failure was passing)."""
    security = options.security
    found: list[SampanError] = []
    for host, port in _addresses(bootstrap):
        how = "" if security.protocol == "PLAINTEXT" else f", {security.describe()}"
        where = f"Kafka at {host}:{port} (system {system!r}{how})"
        problem = await _one(where, host, port, options)
        if problem is None:
            return None
        found.append(problem)
    # An authentication problem is what a user must fix, even when another address is down.
    return next((p for p in found if isinstance(p, AuthenticationError)), found[0] if found
                else None)


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    addresses = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        with contextlib.suppress(ValueError):
            addresses.append((host.strip("[]"), int(port)))
    return addresses


async def _one(where: str, host: str, port: int, options: KafkaOptions) -> SampanError | None:
    security = options.security
    timeout_s = options.timeout_s
    system = security.system
    fix_address = (f"check that the broker runs and that [systems.{system}] bootstrap names "
                   "its listener")
    try:
        conn = await asyncio.wait_for(create_conn(
            host, port, request_timeout_ms=int(timeout_s * 1000), client_id=options.client_id,
            **security.client_kwargs()), timeout_s)
    except ConnectionRefusedError:
        return SystemUnavailableError(f"{where}: connection refused (nothing listens at "
                                      f"{host}:{port}); {fix_address}")
    except TimeoutError:
        return SystemUnavailableError(f"{where}: no answer within {timeout_s:g} s; "
                                      f"{fix_address}, and that no firewall drops it")
    except SaslAuthenticationFailed as error:
        return AuthenticationError(
            f"{where}: authentication failed — the broker refused the credentials of "
            f"{security.principal()} ({error}); check sasl_plain_username and the password "
            f"(sasl_plain_password or sasl_plain_password_file) of [systems.{system}."
            "client_options]")
    except UnsupportedSaslMechanismError as error:
        return AuthenticationError(f"{where}: authentication failed — {error}; set "
                                   "sasl_mechanism to one the listener enables")
    except IllegalSaslStateError:
        return AuthenticationError(
            f"{where}: authentication failed — the listener does not take SASL; set "
            f"security_protocol = \"{'SSL' if security.tls else 'PLAINTEXT'}\" (with a "
            "client certificate if the listener requires one), or use the SASL listener")
    except ssl.SSLCertVerificationError as error:
        return AuthenticationError(
            f"{where}: TLS failed — the broker's certificate is not trusted "
            f"({error.verify_message}); set ssl_cafile to the CA that signed it"
            + (" (ssl_check_hostname = false only if the certificate cannot name the "
               "address you connect to)" if "mismatch" in str(error.verify_message) else ""))
    except ssl.SSLError as error:
        return _tls_error(where, error, security)
    except KafkaConnectionError:
        return await _closed(where, host, port, options)
    except OSError as error:
        return SystemUnavailableError(f"{where}: cannot connect ({error.strerror or error}); "
                                      f"{fix_address}")
    try:
        await asyncio.wait_for(conn.send(MetadataRequest([])), timeout_s)
    except KafkaConnectionError:
        return await _closed(where, host, port, options)
    except TimeoutError:
        return SystemUnavailableError(f"{where}: no answer to a metadata request within "
                                      f"{timeout_s:g} s; {fix_address}")
    finally:
        conn.close()
    return None


def _tls_error(where: str, error: ssl.SSLError, security: KafkaSecurity) -> SampanError:
    reason = str(error.reason or error)
    if "CERTIFICATE_REQUIRED" in reason or (
            security.cert_file is None and any(a in reason for a in _REFUSED_CERTIFICATE)):
        return AuthenticationError(f"{where}: TLS failed — the broker requires a client "
                                   "certificate: set ssl_certfile and ssl_keyfile (mutual TLS)")
    if any(alert in reason for alert in _REFUSED_CERTIFICATE):
        assert security.cert_file is not None
        ends = not_after(security.cert_file)
        if ends is not None and ends < datetime.now(UTC):
            why = (f"it expired on {ends:%Y-%m-%d %H:%M} UTC; renew ssl_certfile "
                   f"({security.cert_file})")
        else:
            why = (f"ssl_certfile ({security.cert_file}) is not signed by a CA the broker "
                   "trusts (its ssl.truststore), or was revoked; use a certificate from that CA")
        return AuthenticationError(f"{where}: TLS failed — the broker refused the client "
                                   f"certificate: {why}")
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER" in reason:
        return AuthenticationError(
            f"{where}: TLS failed — the listener does not speak TLS; set security_protocol "
            "= \"PLAINTEXT\" or \"SASL_PLAINTEXT\", or use the broker's TLS listener")
    return AuthenticationError(f"{where}: TLS failed ({reason})")


async def _closed(where: str, host: str, port: int, options: KafkaOptions) -> SampanError:
    """The broker closed the connection: find out what the listener expected."""
    security = options.security
    if not security.tls:
        if await _speaks_tls(host, port, options.timeout_s):
            return AuthenticationError(
                f"{where}: the broker closed the connection — the listener uses TLS; set "
                f"security_protocol = \"{'SASL_SSL' if security.sasl else 'SSL'}\" (and "
                "ssl_cafile to the CA of the broker's certificate)")
    else:
        assert security.ssl_context is not None
        refused = await _tls_alert(host, port, security.ssl_context, options.timeout_s)
        if refused is not None:
            return _tls_error(where, refused, security)
    if not security.sasl:
        mechanisms = await _sasl_mechanisms(host, port, options)
        if mechanisms:
            return AuthenticationError(
                f"{where}: the broker closed the connection — the listener expects SASL "
                f"(enabled: {', '.join(mechanisms)}); set security_protocol = "
                f"\"{'SASL_SSL' if security.tls else 'SASL_PLAINTEXT'}\", sasl_mechanism and "
                "the credentials")
    return SystemUnavailableError(
        f"{where}: the broker closed the connection at once; check that [systems."
        f"{security.system}] bootstrap names a listener of the security_protocol you set")


async def _speaks_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether a TLS handshake (no certificate checked) succeeds at ``host:port``."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context), timeout_s)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


def _api_versions_request() -> bytes:
    client = b"sampan-probe"
    body = struct.pack(">hhih", 18, 0, 1, len(client)) + client  # ApiVersions v0
    return struct.pack(">i", len(body)) + body


async def _tls_alert(host: str, port: int, context: ssl.SSLContext,
                     timeout_s: float) -> ssl.SSLError | None:
    """The TLS alert the broker sends after the handshake, if any: with TLS 1.3 a refused
    client certificate is told only when the client first reads."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context), timeout_s)
    except ssl.SSLError as error:
        return error
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(_api_versions_request())
        await asyncio.wait_for(reader.read(4), timeout_s)
    except ssl.SSLError as error:
        return error
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
    return None


async def _sasl_mechanisms(host: str, port: int, options: KafkaOptions) -> Sequence[str]:
    """The mechanisms a SASL listener offers to a client that has not authenticated."""
    security = options.security
    kwargs = {"security_protocol": "SSL", "ssl_context": security.ssl_context} if (
        security.tls) else {}
    try:
        conn = await asyncio.wait_for(create_conn(
            host, port, request_timeout_ms=int(options.timeout_s * 1000), **kwargs),
            options.timeout_s)
    except Exception:  # a probe: any failure means "not a SASL listener we can name"
        return ()
    try:
        answer = await asyncio.wait_for(conn.send(SaslHandShakeRequest("PLAIN")),
                                        options.timeout_s)
        return tuple(answer.enabled_mechanisms)
    except Exception:  # likewise
        return ()
    finally:
        conn.close()
