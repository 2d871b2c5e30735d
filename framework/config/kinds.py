"""The kinds of job-file values a `Setting` declares: how each is read, checked and
described in ``docs/config.md``.

Each kind reads through a `framework.config.schema.Section`, so every problem has the
same wording whatever key it is on. Keys that need more than a type and bounds have a
named kind here (`Serde`, `Folder`, `StartAt`, `StreamNames`, `SystemName`,
`AlgorithmSpec`) instead of code of their own in the parser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from framework.config.declare import Reading, read_table
from framework.config.schema import Section
from framework.config.serdes import get_serde
from framework.errors import ConfigError
from framework.importing import SPEC_PATTERN, make_expansion_algorithm

__all__ = [
    "BOOTSTRAP",
    "JOB_NAME",
    "NAME_FORM",
    "STREAM_FORM",
    "STREAM_NAME",
    "SYSTEM_NAME",
    "Address",
    "AlgorithmSpec",
    "Flag",
    "Folder",
    "Integer",
    "Nested",
    "OneOf",
    "OptionalPath",
    "Options",
    "Port",
    "SecretReference",
    "Serde",
    "StartAt",
    "StreamNames",
    "SystemName",
    "Text",
    "resolve",
    "undeclared_system",
]

JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
SYSTEM_NAME = re.compile(r"[A-Za-z0-9_-]+")
STREAM_NAME = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9._-]+")
_HOST_PORT = r"(?:\[[0-9A-Fa-f:.]+\]|[^\s,:\[\]]+):\d{1,5}"
_SECRET_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
BOOTSTRAP = re.compile(rf"{_HOST_PORT}(?:\s*,\s*{_HOST_PORT})*")

NAME_FORM = 'a name of letters, digits, "_", "." and "-", starting with a letter or digit'
STREAM_FORM = 'a "system.stream" name'
_SERDE_FORM = 'a serde name ("string", "json", "bytes", "msgpack", "int64") or "module:Class"'


def resolve(root: Path, value: str) -> Path:
    """``value`` (a path in the job file) relative to the file's folder ``root``."""
    return Path(os.path.normpath(root / Path(value).expanduser()))


def undeclared_system(system: str, systems: Mapping[str, Any]) -> str:
    """The problem of a reference to a system the file does not declare."""
    declared = ", ".join(sorted(systems)) or "none"
    return (f'system "{system}" is not declared; add a [systems.{system}] table '
            f"(declared: {declared})")


def _problem(section: Section, key: str, message: str) -> None:
    section.problems.add((*section.path, key), message)


@dataclass(frozen=True)
class Integer:
    """An integer ≥ `minimum` (a boolean is not one); a None default makes it optional."""

    minimum: int

    @property
    def shown(self) -> str:
        return f"integer ≥ {self.minimum}"

    def read(self, reading: Reading, key: str, default: int | None) -> int | None:
        if default is None:
            return reading.section.optional_integer(key, minimum=self.minimum)
        return reading.section.integer(key, default, minimum=self.minimum)


@dataclass(frozen=True)
class Port:
    """A TCP port, 0 to 65535 (0: any free port)."""

    shown = "integer 0–65535"

    def read(self, reading: Reading, key: str, default: int) -> int:
        return reading.section.port(key, default)


@dataclass(frozen=True)
class Flag:
    """``true`` or ``false``."""

    shown = "boolean"

    def read(self, reading: Reading, key: str, default: bool) -> bool:
        return reading.section.boolean(key, default)


@dataclass(frozen=True)
class OneOf:
    """One of `choices`; a None default leaves the key unset when it is absent."""

    choices: tuple[str, ...]

    @property
    def shown(self) -> str:
        return ", ".join(f'`"{choice}"`' for choice in self.choices)

    def read(self, reading: Reading, key: str, default: str | None) -> str | None:
        return reading.section.choice(key, default, self.choices)


@dataclass(frozen=True)
class Text:
    """A string, matching `pattern` when there is one (`form` names it in messages);
    `suggest` may propose the fix of a string that does not match."""

    shown: str = "string"
    form: str = "a string"
    pattern: re.Pattern[str] | None = None
    suggest: Callable[[str], str | None] | None = None

    def read(self, reading: Reading, key: str, default: str | None) -> str | None:
        return reading.section.string(key, default, pattern=self.pattern, form=self.form,
                                      suggest=self.suggest)


@dataclass(frozen=True)
class Folder:
    """A path, relative to the job file's folder (made absolute)."""

    shown = "string (path)"

    def read(self, reading: Reading, key: str, default: str | Path) -> Path:
        value = reading.section.string(key, str(default)) or str(default)
        return resolve(reading.root, value)


@dataclass(frozen=True)
class OptionalPath:
    """A path relative to the job file's folder (made absolute); unset by default."""

    shown = "string (path)"

    def read(self, reading: Reading, key: str, default: Path | None) -> Path | None:
        value = reading.section.string(key, None)
        return default if value is None else resolve(reading.root, value)


@dataclass(frozen=True)
class SecretReference:
    """A secret given only as ``"${NAME}"`` (read from the environment when used); any
    other value is refused without being shown, since it may be the secret itself."""

    shown = 'string "${NAME}"'

    def read(self, reading: Reading, key: str, default: str | None) -> str | None:
        section = reading.section
        value = section._take(key)  # noqa: SLF001 - read without echoing it in a problem
        result = default
        if isinstance(value, str) and _SECRET_REFERENCE.fullmatch(value):
            result = value
        elif value is not None:
            _problem(section, key, 'expected an environment reference "${NAME}" (the value '
                     "is not shown: it may be the secret); keep the secret out of the job "
                     f'file: export it as NAME and write {key} = "${{NAME}}", or name a '
                     f"file holding it with {key}_file")
        section.values[key] = result
        return result


@dataclass(frozen=True)
class Address:
    """An IPv4 or IPv6 address (host names are not resolved)."""

    shown = "IP address"

    def read(self, reading: Reading, key: str, default: str) -> str:
        return reading.section.ip_address(key, default)


@dataclass(frozen=True)
class Options:
    """A table passed through as it is, checked by whoever uses it (a system's
    ``client_options``)."""

    shown = "table"

    def read(self, reading: Reading, key: str, default: object) -> dict[str, Any]:
        return reading.section.table_of(key)


@dataclass(frozen=True)
class Nested:
    """A sub-table read into the config dataclass `of` by its own declarations."""

    of: type[Any]
    shown = "table"

    def read(self, reading: Reading, key: str, default: object) -> Any:
        inner = reading.nested(key, reading.section.table_of(key))
        values = read_table(self.of, inner)
        inner.section.finish()
        return self.of(**values)


@dataclass(frozen=True)
class Serde:
    """A serde name or ``"module:Class"``, imported (from the job file's folder) at load,
    so a typo fails with its line rather than in a worker later."""

    shown = "serde name"

    def read(self, reading: Reading, key: str, default: str) -> str:
        section = reading.section
        spec = section.string(key, default, form=_SERDE_FORM) or default
        if section.present(key) and isinstance(section.table[key], str):
            try:
                get_serde(spec, search_path=reading.root)
            except ConfigError as error:
                _problem(section, key, str(error))
        return spec


@dataclass(frozen=True)
class StartAt:
    """Where a job starts reading, as the job file spells it (a TOML date-time as its
    ISO-8601 string), checked by `parse` (`StartPosition.parse`: a `ValueError` says what
    is accepted)."""

    parse: Callable[[object], object]
    shown = ('`"oldest"`, `"latest"`, a time with its zone (`"2026-05-01T12:00:00Z"`, '
             '`"2026-05-01T14:00:00+02:00"` or a TOML date-time), or ms since the epoch '
             "(integer ≥ 0)")

    def read(self, reading: Reading, key: str, default: None) -> str | int | None:
        value = reading.section.raw(key)
        if value is None:
            return default
        try:
            self.parse(value)
        except ValueError as error:
            _problem(reading.section, key, str(error))
            return default
        spelled: str | int = value.isoformat() if isinstance(value, datetime) else value
        return spelled


@dataclass(frozen=True)
class StreamNames:
    """A list of ``"system.stream"`` names, each declared under ``[streams]``;
    `nonempty` refuses ``[]``."""

    nonempty: bool = False

    @property
    def shown(self) -> str:
        return 'list of `"system.stream"`' + (", non-empty" if self.nonempty else "")

    def read(self, reading: Reading, key: str, default: object) -> tuple[str, ...]:
        section = reading.section
        names = section.string_list(key, pattern=STREAM_NAME, item=STREAM_FORM,
                                    items='"system.stream" names', nonempty=self.nonempty)
        raw = section.table.get(key)
        for name in names:
            if name in reading.streams:
                continue
            path = (*section.path, key, raw.index(name)) if isinstance(raw, list) else (
                *section.path, key)
            system = name.partition(".")[0]
            also = "" if system in reading.systems else f" and a [systems.{system}] table"
            section.problems.add(
                path, f'stream "{name}" is not declared; add a [streams."{name}"] table{also}')
        return tuple(names)


@dataclass(frozen=True)
class SystemName:
    """The name of a system declared under ``[systems]``."""

    shown = "system name"

    def read(self, reading: Reading, key: str, default: str) -> str:
        section = reading.section
        name = section.string(key, default, form="a system name") or default
        if section.present(key) and isinstance(section.table[key], str) and (
                name not in reading.systems):
            _problem(section, key, undeclared_system(name, reading.systems))
        return name


@dataclass(frozen=True)
class AlgorithmSpec:
    """``"default"`` or the ``"module:Class"`` of a partition expansion algorithm,
    imported and checked at load."""

    shown = '`"default"` or `"module:Class"`'

    def read(self, reading: Reading, key: str, default: str) -> str:
        section = reading.section
        spec = section.string(key, default, form='"default" or "module:Class"',
                              pattern=re.compile(f"default|{SPEC_PATTERN.pattern}")
                              ) or default
        if spec != "default":
            try:
                make_expansion_algorithm(spec, reading.root)
            except ConfigError as error:
                _problem(section, key, str(error))
        return spec
