"""The job file as text: reading TOML, and the line each key is on for error messages.

tomllib reports no positions for keys, so `KeyLines` scans the text itself: table
headers, ``key = value`` lines and dotted keys, skipping multi-line strings and arrays.
It runs only on files tomllib has already accepted.

>>> lines = KeyLines.scan('[job]\\nname = "x"\\n\\n[streams."local.a"]\\npartitions = 2\\n')
>>> lines.line_of(("job", "name")), lines.line_of(("streams", "local.a", "partitions"))
(2, 5)
>>> lines.line_of(("job", "task"))  # absent: the line of its table
1
>>> format_path(("streams", "local.a", "key_serde")), format_path(("job", "inputs", 1))
('streams."local.a".key_serde', 'job.inputs[1]')
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from framework.errors import ConfigError

__all__ = ["KeyLines", "KeyPath", "format_path", "read_toml"]

KeyPath = tuple[str | int, ...]
"""A key's place in the document: table and key names, list indices as ints."""

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_DECODE_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def format_path(path: KeyPath) -> str:
    """``path`` as a job file spells it: ``job.inputs[0]``, ``streams."local.a".partitions``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        name = part if _BARE.fullmatch(part) else json.dumps(part, ensure_ascii=False)
        text += f".{name}" if text else name
    return text


def read_toml(path: Path, shown: str) -> tuple[dict[str, Any], str]:
    """The parsed document and its text; `ConfigError` (named ``shown``) when unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{shown}: job file not found; pass the path of the job's "
                          ".toml file") from None
    except OSError as error:
        raise ConfigError(f"{shown}: cannot read the job file: {error.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ConfigError(f"{shown}:{line}: not UTF-8 text ({error.reason}); save the job "
                          "file as UTF-8") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        found = _DECODE_POSITION.search(message)
        if found is None:
            raise ConfigError(f"{shown}: invalid TOML: {message}") from None
        reason = message[: found.start()]
        raise ConfigError(
            f"{shown}:{found[1]}: invalid TOML: {reason} (column {found[2]})"
        ) from None


class KeyLines:
    """1-based line numbers of the tables and keys of a TOML text."""

    def __init__(self, lines: dict[tuple[str, ...], int]) -> None:
        self._lines = lines

    @classmethod
    def scan(cls, text: str) -> KeyLines:
        """Index every table header and key of ``text``."""
        found: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        state = _ValueState()
        for number, line in enumerate(text.splitlines(), start=1):
            if state.open:
                state.feed(line, 0)
                continue
            start = len(line) - len(line.lstrip())
            if start == len(line) or line[start] == "#":
                continue
            if line[start] == "[":
                array = line.startswith("[[", start)
                key, _ = _parse_key(line, start + (2 if array else 1))
                if key:
                    table = key
                    _record(found, table, number, exact=not array)
                continue
            key, end = _parse_key(line, start)
            if key and line[end:].lstrip().startswith("="):
                _record(found, table + key, number, exact=True)
                state.feed(line, line.index("=", end) + 1)
        return cls(found)

    def line_of(self, path: KeyPath) -> int | None:
        """The line of ``path``, else of its nearest enclosing table or key that is there."""
        names = tuple(p for p in path if isinstance(p, str))
        while names:
            line = self._lines.get(names)
            if line is not None:
                return line
            names = names[:-1]
        return None


def _record(found: dict[tuple[str, ...], int], key: tuple[str, ...], line: int,
            *, exact: bool) -> None:
    """A header or key defines its path here; its parents at the first line seen."""
    for depth in range(1, len(key)):
        found.setdefault(key[:depth], line)
    if exact:
        found[key] = line
    else:
        found.setdefault(key, line)


def _parse_key(line: str, start: int) -> tuple[tuple[str, ...], int]:
    """A dotted key at ``start``: its parts and the index after it (``()`` if none)."""
    parts: list[str] = []
    i = start
    while True:
        while i < len(line) and line[i] in " \t":
            i += 1
        if i < len(line) and line[i] in "\"'":
            quote = line[i]
            j = i + 1
            while j < len(line) and line[j] != quote:
                j += 2 if quote == '"' and line[j] == "\\" else 1
            if j >= len(line):
                return (), start
            raw = line[i + 1: j]
            parts.append(_unescape(raw) if quote == '"' else raw)
            i = j + 1
        else:
            bare = _BARE.match(line, i)
            if bare is None:
                return (), start
            parts.append(bare[0])
            i = bare.end()
        while i < len(line) and line[i] in " \t":
            i += 1
        if i < len(line) and line[i] == ".":
            i += 1
            continue
        return tuple(parts), i


def _unescape(raw: str) -> str:
    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:
        return raw  # a TOML-only escape (\U0001F600, \e): good enough for locating a line


class _ValueState:
    """Tracks whether a value continues on the next line (open array or string)."""

    def __init__(self) -> None:
        self.depth = 0
        self.string: str | None = None

    @property
    def open(self) -> bool:
        return self.depth > 0 or self.string is not None

    def feed(self, line: str, i: int) -> None:
        """Consume ``line`` from ``i``, inside a value."""
        n = len(line)
        while i < n:
            if self.string is not None:
                close = line.find(self.string, i)
                while close > 0 and self.string == '"""' and _escaped(line, close):
                    close = line.find(self.string, close + 1)
                if close < 0:
                    return
                i = close + 3
                self.string = None
                continue
            c = line[i]
            if line.startswith(('"""', "'''"), i):
                self.string = line[i: i + 3]
                i += 3
            elif c in "\"'":
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if c == '"' and line[j] == "\\" else 1
                i = j + 1
            elif c == "#":
                return
            else:
                if c == "[":
                    self.depth += 1
                elif c == "]":
                    self.depth -= 1
                i += 1


def _escaped(line: str, index: int) -> bool:
    """Whether ``line[index]`` follows an odd number of backslashes."""
    count = 0
    while index > 0 and line[index - 1] == "\\":
        count += 1
        index -= 1
    return count % 2 == 1
