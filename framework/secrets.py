"""Secrets a job file refers to without holding them, and a value that never prints.

A string option may say ``"${NAME}"`` (the environment variable ``NAME``, read when the
option is used) and a secret option has a ``*_file`` twin naming a file that holds it.
`Secret` keeps the value out of every ``repr``/``str``, so a log line, an error, a status
document or a stored snapshot that shows an options object shows ``'***'``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framework.errors import ConfigError

__all__ = ["SECRET_OPTIONS", "Secret", "expand_references", "read_secret_file",
           "references_only", "without_secrets"]

SECRET_OPTIONS = frozenset({"sasl_plain_password", "ssl_key_password"})
"""``client_options`` keys whose values are secrets (each has a ``<key>_file`` twin)."""

_REFERENCE = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ONLY_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


class Secret:
    """A password or key that prints as ``'***'``; `reveal` gives it to the one client
    call that needs it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))


def expand_references(value: str, where: str,
                      environ: Mapping[str, str] | None = None) -> str:
    """``value`` with each ``${NAME}`` replaced by the environment variable ``NAME``
    (``$${`` stays a literal ``${``); `ConfigError` naming ``where`` and the variable when
    it is not set."""
    env = os.environ if environ is None else environ

    def one(match: re.Match[str]) -> str:
        escaped, name = match.groups()
        if escaped:
            return "${" + name + "}"
        if name not in env:
            raise ConfigError(f"{where} refers to the environment variable {name}, which is "
                              f"not set; export {name} in the environment of every sampan "
                              "process of the job (coordinator, hosts, Spark)")
        return env[name]

    return _REFERENCE.sub(one, value)


def read_secret_file(path: Path, where: str) -> str:
    """The secret held in ``path`` (one trailing newline dropped); `ConfigError` naming
    ``where`` and the path — never the content — when it cannot be read."""
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"{where} = {str(path)!r} cannot be read ({error.strerror or error}); "
                          "point it at a readable file that holds only the secret") from None
    text = text[:-1] if text.endswith("\n") else text
    if not text:
        raise ConfigError(f"{where} = {str(path)!r} is empty; the file must hold the secret")
    return text


def references_only(options: Mapping[str, Any], prefix: str) -> tuple[dict[str, Any],
                                                                      dict[str, str]]:
    """``options`` with every secret written into it replaced by an environment reference,
    and those variables (named ``<prefix>_<KEY>``) with the secrets' values: what a stored
    copy of a job file keeps instead of the secrets, and what its readers' environment
    must hold. A secret that already is one ``${NAME}`` reference stays as it is."""
    kept, environment = dict(options), {}
    for key in sorted(SECRET_OPTIONS & options.keys()):
        value = options[key]
        if isinstance(value, str) and not _ONLY_REFERENCE.fullmatch(value):
            name = f"{prefix}_{key}".upper().replace("-", "_")
            environment[name] = expand_references(value, key)
            kept[key] = "${" + name + "}"
    return kept, environment


def without_secrets(document: Mapping[str, Any]) -> dict[str, Any]:
    """A job-file document (``JobConfig.to_dict``) with every secret written into a
    system's ``client_options`` shown as ``"<secret>"``: what a digest is taken of, so a
    job's identity never depends on (nor hashes) a password, whether written or referred to."""
    systems = {
        name: {**table, "client_options": {
            key: "<secret>" if key in SECRET_OPTIONS else value
            for key, value in table.get("client_options", {}).items()}}
        for name, table in document.get("systems", {}).items()}
    return {**document, "systems": systems} if systems else dict(document)
