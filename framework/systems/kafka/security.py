"""How sampan proves who it is to a Kafka cluster: TLS, SASL and the secrets they need.

`KafkaSecurity` is read once from a kafka system's ``client_options`` (validated when the
job file's systems are opened: a wrong mechanism, a missing file, an unset environment
variable or a certificate that does not load are `ConfigError`\\ s naming the key) and gives
every aiokafka client the same connection arguments (`client_kwargs`): the TLS context,
the SASL mechanism and credentials, the OAUTHBEARER token provider.
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.abc import AbstractTokenProvider

from framework.errors import AuthenticationError, ConfigError
from framework.importing import ImportSpecError, import_spec
from framework.secrets import Secret, expand_references, read_secret_file

__all__ = ["SASL_MECHANISMS", "SECURITY_OPTIONS", "SECURITY_PROTOCOLS", "KafkaSecurity"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_REFUSED_MECHANISMS = {
    "GSSAPI": "GSSAPI (Kerberos) is not supported by sampan: its Kafka client, aiokafka, "
              "needs the optional gssapi package and a Kerberos set-up that sampan does not "
              "test; use SCRAM-SHA-512, SCRAM-SHA-256, PLAIN over TLS, OAUTHBEARER or "
              "client certificates",
}
_STRINGS = ("security_protocol", "sasl_mechanism", "sasl_plain_username",
            "sasl_plain_password", "sasl_plain_password_file", "sasl_oauth_token_provider",
            "sasl_oauth_token_file", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
            "ssl_key_password", "ssl_key_password_file")
SECURITY_OPTIONS = (*_STRINGS, "ssl_check_hostname")
"""The ``client_options`` keys read here (every other key is `KafkaOptions`')."""


class _TokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """aiokafka's OAUTHBEARER provider over what the job file names: a callable returning a
    token (or an awaitable of one), or a file re-read for every new connection (a token
    that a sidecar refreshes)."""

    def __init__(self, source: Callable[[], Any], where: str) -> None:
        self._source = source
        self._where = where

    async def token(self) -> str:
        value = self._source()
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, str) or not value:
            raise AuthenticationError(f"{self._where} gave {type(value).__name__} instead of "
                                      "a token (a non-empty str)")
        return value


@dataclass(frozen=True)
class KafkaSecurity:
    """The security part of ``[systems.<name>.client_options]`` (see docs/security.md)."""

    protocol: str = "PLAINTEXT"
    """``security_protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    mechanism: str = "PLAIN"
    """``sasl_mechanism`` (SASL_* only): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER."""
    username: str | None = None
    password: Secret | None = None
    token_provider: _TokenProvider | None = field(default=None, compare=False)
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: Secret | None = None
    check_hostname: bool = True
    system: str = ""
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False, repr=False)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_options(cls, system: str, options: Mapping[str, Any],
                     root: Path | None = None) -> KafkaSecurity:
        """Read and check the security keys of ``options``; relative paths and the token
        provider's module resolve from ``root`` (the job file's folder)."""
        where = f"[systems.{system}.client_options]"
        values: dict[str, Any] = {}
        for key in _STRINGS:
            if key in options and options[key] is not None:
                value = options[key]
                if not isinstance(value, str):
                    raise ConfigError(f"{where} {key} must be a string, got "
                                      f"{type(value).__name__}")
                values[key] = expand_references(value, f"{where} {key}")
        check = options.get("ssl_check_hostname", True)
        if not isinstance(check, bool):
            raise ConfigError(f"{where} ssl_check_hostname must be true or false, got {check!r}")
        protocol = values.get("security_protocol", "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"{where} security_protocol = {values['security_protocol']!r}: "
                              f"use one of {', '.join(SECURITY_PROTOCOLS)}")
        security = cls(protocol=protocol, check_hostname=check, system=system)
        reader = _Reader(where, values, root)
        return _with_tls(_with_sasl(security, reader), reader)

    def client_kwargs(self) -> dict[str, Any]:
        """aiokafka's connection arguments (every client: admin, producer, consumer)."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            kwargs["ssl_context"] = self.ssl_context
        if self.sasl:
            kwargs["sasl_mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                kwargs["sasl_oauth_token_provider"] = self.token_provider
            else:
                assert self.password is not None
                kwargs["sasl_plain_username"] = self.username
                kwargs["sasl_plain_password"] = self.password.reveal()
        return kwargs

    def principal(self) -> str:
        """Who the cluster sees, as far as sampan knows it (for error messages)."""
        if self.sasl and self.mechanism != "OAUTHBEARER":
            return f"User:{self.username}"
        if self.sasl:
            return "the principal of the OAUTHBEARER token"
        if self.cert_file is not None:
            return f"the principal of the client certificate {self.cert_file}"
        return "User:ANONYMOUS"

    def describe(self) -> str:
        """``SASL_SSL, SCRAM-SHA-512 as alice`` — how sampan connects, without secrets."""
        parts = [self.protocol]
        if self.sasl:
            who = f" as {self.username}" if self.username else ""
            parts.append(f"{self.mechanism}{who}")
        if self.cert_file is not None:
            parts.append(f"client certificate {self.cert_file}")
        return ", ".join(parts)


def _with_sasl(security: KafkaSecurity, reader: _Reader) -> KafkaSecurity:
    """``security`` with the SASL keys read and checked."""
    if not security.sasl:
        reader.refuse_unused("sasl_", security.protocol, "SASL",
                             '"SASL_SSL" (or "SASL_PLAINTEXT")')
        return security
    mechanism = reader.values.get("sasl_mechanism", "PLAIN").upper()
    if mechanism in _REFUSED_MECHANISMS:
        raise ConfigError(f"{reader.where} sasl_mechanism = {mechanism!r}: "
                          f"{_REFUSED_MECHANISMS[mechanism]}")
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"{reader.where} sasl_mechanism = "
                          f"{reader.values['sasl_mechanism']!r}: use one of "
                          f"{', '.join(SASL_MECHANISMS)}")
    if mechanism == "OAUTHBEARER":
        return _replace(security, mechanism=mechanism,
                        token_provider=reader.token_provider())
    for key in ("sasl_oauth_token_provider", "sasl_oauth_token_file"):
        if key in reader.values:
            raise ConfigError(f"{reader.where} {key} is set but sasl_mechanism = "
                              f"{mechanism!r}; set sasl_mechanism = \"OAUTHBEARER\" or "
                              f"remove {key}")
    username = reader.values.get("sasl_plain_username")
    if not username:
        raise ConfigError(f"{reader.where} sasl_mechanism = {mechanism!r} needs "
                          "sasl_plain_username (the SASL user name)")
    password = reader.secret("sasl_plain_password")
    if password is None:
        raise ConfigError(
            f"{reader.where} sasl_mechanism = {mechanism!r} needs the password of user "
            f"{username!r}: set sasl_plain_password_file = \"path\" or "
            "sasl_plain_password = \"${ENV_VAR}\" (keep secrets out of the job file)")
    return _replace(security, mechanism=mechanism, username=username, password=password)


def _with_tls(security: KafkaSecurity, reader: _Reader) -> KafkaSecurity:
    """``security`` with the TLS keys read, checked and made into a context."""
    if not security.tls:
        reader.refuse_unused("ssl_", security.protocol, "TLS", '"SSL" or "SASL_SSL"')
        return security
    ca_file, cert_file, key_file = (reader.path("ssl_cafile"), reader.path("ssl_certfile"),
                                    reader.path("ssl_keyfile"))
    if key_file is not None and cert_file is None:
        raise ConfigError(f"{reader.where} ssl_keyfile is set without ssl_certfile; a "
                          "client certificate needs both (or one file holding both)")
    key_password = reader.secret("ssl_key_password")
    if key_password is not None and cert_file is None:
        raise ConfigError(f"{reader.where} ssl_key_password is set without ssl_certfile")
    context = _tls_context(reader.where, ca_file, cert_file, key_file, key_password,
                           security.check_hostname)
    return _replace(security, ca_file=ca_file, cert_file=cert_file, key_file=key_file,
                    key_password=key_password, ssl_context=context)


def _replace(security: KafkaSecurity, **changes: Any) -> KafkaSecurity:
    from dataclasses import replace

    return replace(security, **changes)


@dataclass(frozen=True)
class _Reader:
    """The expanded string options of one system, with its error prefix and root."""

    where: str
    values: Mapping[str, str]
    root: Path | None

    def present(self, prefix: str) -> list[str]:
        return [key for key in _STRINGS if key.startswith(prefix) and key in self.values]

    def refuse_unused(self, prefix: str, protocol: str, what: str, protocols: str) -> None:
        """`ConfigError` when ``prefix`` keys are set for a protocol without ``what``."""
        keys = self.present(prefix)
        if keys:
            raise ConfigError(
                f"{self.where} {keys[0]} is set but security_protocol = {protocol!r} does not "
                f"use {what}; set security_protocol = {protocols}, or remove {', '.join(keys)}")

    def path(self, key: str) -> Path | None:
        if key not in self.values:
            return None
        path = Path(self.values[key]).expanduser()
        if not path.is_absolute() and self.root is not None:
            path = self.root / path
        if not path.is_file():
            raise ConfigError(f"{self.where} {key} = {self.values[key]!r}: no such file "
                              f"({path}); paths are relative to the job file's folder")
        return path

    def secret(self, key: str) -> Secret | None:
        """``key`` itself or the file ``key_file`` names; both set is an error."""
        file_key = f"{key}_file"
        if key in self.values and file_key in self.values:
            raise ConfigError(f"{self.where} sets both {key} and {file_key}; keep one")
        if key in self.values:
            return Secret(self.values[key])
        path = self.path(file_key)
        return None if path is None else Secret(read_secret_file(path, f"{self.where} "
                                                                       f"{file_key}"))

    def token_provider(self) -> _TokenProvider:
        spec = self.values.get("sasl_oauth_token_provider")
        token_file = self.path("sasl_oauth_token_file")
        if (spec is None) == (token_file is None):
            raise ConfigError(
                f"{self.where} sasl_mechanism = \"OAUTHBEARER\" needs exactly one of "
                "sasl_oauth_token_provider = \"module:function\" (returns a token) and "
                "sasl_oauth_token_file = \"path\" (a file holding the current token)")
        if token_file is not None:
            where = f"{self.where} sasl_oauth_token_file"
            return _TokenProvider(lambda: read_secret_file(token_file, where).strip(), where)
        assert spec is not None
        where = f"{self.where} sasl_oauth_token_provider = {spec!r}"
        try:
            named = import_spec(spec, self.root)
        except ImportSpecError as error:
            raise ConfigError(f"{where}: {error}") from None
        if isinstance(named, type) and issubclass(named, AbstractTokenProvider):
            named = named()
        if isinstance(named, AbstractTokenProvider):
            return _TokenProvider(named.token, where)
        if not callable(named):
            raise ConfigError(f"{where} names a {type(named).__name__}; name a function that "
                              "returns a token (or an aiokafka AbstractTokenProvider)")
        return _TokenProvider(named, where)


def _tls_context(where: str, ca_file: Path | None, cert_file: Path | None,
                 key_file: Path | None, key_password: Secret | None,
                 check_hostname: bool) -> ssl.SSLContext:
    """A client TLS context: the system's CAs or ``ca_file``, the client certificate if
    any, the broker's name checked unless ``check_hostname`` is false."""
    try:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=str(ca_file) if ca_file else None)
    except ssl.SSLError as error:
        raise ConfigError(f"{where} ssl_cafile = {str(ca_file)!r} holds no usable CA "
                          f"certificate ({error.reason or error}); give the PEM file of the "
                          "CA that signed the brokers' certificates") from None
    context.check_hostname = check_hostname
    if cert_file is not None:
        try:
            context.load_cert_chain(str(cert_file), str(key_file) if key_file else None,
                                    key_password.reveal() if key_password else None)
        except ssl.SSLError as error:
            raise ConfigError(
                f"{where} ssl_certfile = {str(cert_file)!r}"
                f"{f', ssl_keyfile = {str(key_file)!r}' if key_file else ''}: the client "
                f"certificate and its key do not load ({error.reason or error}); check "
                "that they are PEM, belong together, and that ssl_key_password is the "
                "key's password") from None
    return context
