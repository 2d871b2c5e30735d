"""Typed reading of TOML tables that collects every problem instead of stopping at one.

A `Section` wraps one table: each getter checks a key's type and range, records a
problem (and returns the default) when it is wrong, and remembers the key so `finish`
can report the keys nobody read as unknown — with a "did you mean" when one is close.

>>> problems = Problems()
>>> job = Section({"workers": "two", "workerz": 1}, ("job",), problems)
>>> job.integer("workers", 1, minimum=1)
1
>>> job.finish()
>>> for path, message in problems:
...     print(format_path(path), message, sep=": ")
job.workers: expected an integer ≥ 1, got "two"
job.workerz: unknown key; did you mean "workers"?
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from difflib import get_close_matches
from typing import Any

from framework.config.source import KeyPath, format_path

__all__ = ["Problems", "Section", "closest", "did_you_mean", "show"]

class Problems:
    """The problems found so far, each a key path and what is wrong with it."""

    def __init__(self) -> None:
        self._items: list[tuple[KeyPath, str]] = []

    def add(self, path: KeyPath, message: str) -> None:
        """Record that ``path`` is wrong, saying how and what is expected."""
        self._items.append((path, message))

    def __iter__(self) -> Iterator[tuple[KeyPath, str]]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def show(value: Any) -> str:
    """``value`` as TOML spells it, for "got …" in messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        text = "[" + ", ".join(show(v) for v in value) + "]"
        return text if len(text) <= 60 else text[:56] + " …]"
    return str(value)


def closest(name: str, known: Iterable[str]) -> str | None:
    """The entry of ``known`` most like ``name`` (case-insensitive), if any is close."""
    lowered = {k.lower(): k for k in known}
    close = get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``'; did you mean "x"?'`` for the closest of ``known``, else ``""``."""
    match = closest(name, known)
    return f"; did you mean {json.dumps(match, ensure_ascii=False)}?" if match else ""


def did_you_mean_stream(qualified: str, known: Iterable[str]) -> str:
    """`did_you_mean` for a ``system.stream`` name: the streams of the same system are
    compared by their names alone (a shared ``local.`` would make any two look alike)."""
    system, _, stream = qualified.partition(".")
    known = list(known)
    same = {k.partition(".")[2]: k for k in known if k.partition(".")[0] == system}
    match = closest(stream, same) if same else None
    if match is not None:
        return f"; did you mean {json.dumps(same[match], ensure_ascii=False)}?"
    return "" if same else did_you_mean(qualified, known)


class Section:
    """One table of the job file being read."""

    def __init__(self, table: Mapping[str, Any], path: KeyPath, problems: Problems) -> None:
        self.table = table
        self.path = path
        self.problems = problems
        self.values: dict[str, Any] = {}
        """Every key read, with its value or default: the table after validation."""

    def _take(self, key: str) -> Any:
        self.values.setdefault(key, None)
        return self.table.get(key)

    def _wrong(self, key: str, expected: str, value: Any) -> None:
        self.problems.add((*self.path, key), f"expected {expected}, got {show(value)}")

    def missing(self, key: str, example: str) -> None:
        """Record that the required ``key`` is absent; ``example`` is a sample value."""
        self.problems.add(
            (*self.path, key),
            f"missing required key; add {key} = {example} to [{format_path(self.path)}]",
        )

    def raw(self, key: str) -> Any:
        """``key``'s value as TOML gave it (None when absent), for a key of several
        accepted types that its caller checks (and then records in `values`)."""
        value = self._take(key)
        self.values[key] = value
        return value

    def present(self, key: str) -> bool:
        """Whether the table sets ``key``."""
        return key in self.table

    def integer(self, key: str, default: int, *, minimum: int) -> int:
        """An int ≥ ``minimum`` (booleans are not ints)."""
        value = self._take(key)
        result = default
        if value is not None:
            if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
                result = value
            else:
                self._wrong(key, f"an integer ≥ {minimum}", value)
        self.values[key] = result
        return result

    def optional_integer(self, key: str, *, minimum: int) -> int | None:
        """Like `integer`, but None when absent."""
        if key not in self.table:
            self._take(key)
            return None
        return self.integer(key, minimum, minimum=minimum)

    def boolean(self, key: str, default: bool) -> bool:
        """``true`` or ``false``."""
        value = self._take(key)
        result = default
        if value is not None:
            if isinstance(value, bool):
                result = value
            else:
                self._wrong(key, "true or false", value)
        self.values[key] = result
        return result

    def string(
        self,
        key: str,
        default: str | None = None,
        *,
        pattern: re.Pattern[str] | None = None,
        form: str = "a string",
        suggest: Callable[[str], str | None] | None = None,
    ) -> str | None:
        """A string, optionally matching ``pattern`` (``form`` describes it); ``suggest``
        may propose a correction of a string that does not match."""
        value = self._take(key)
        result = default
        if isinstance(value, str) and (pattern is None or pattern.fullmatch(value)):
            result = value
        elif value is not None:
            fix = suggest(value) if suggest is not None and isinstance(value, str) else None
            hint = f"; did you mean {show(fix)}?" if fix else ""
            self.problems.add((*self.path, key), f"expected {form}, got {show(value)}{hint}")
        self.values[key] = result
        return result

    def choice(self, key: str, default: str | None, choices: Sequence[str]) -> str | None:
        """One of ``choices``."""
        value = self._take(key)
        result = default
        if value is not None:
            chosen = [choice for choice in choices if choice == value]
            if chosen:
                result = chosen[0]
            else:
                options = ", ".join(json.dumps(c) for c in choices)
                hint = did_you_mean(value, choices) if isinstance(value, str) else ""
                self.problems.add((*self.path, key),
                                  f"expected one of {options}, got {show(value)}{hint}")
        self.values[key] = result
        return result

    def string_list(
        self,
        key: str,
        *,
        pattern: re.Pattern[str],
        item: str,
        items: str,
        nonempty: bool = False,
    ) -> list[str]:
        """A list of strings matching ``pattern`` (``item`` describes one, ``items``
        several), ``[]`` when absent; ``nonempty`` refuses an empty one. Problems name
        each bad element by its index."""
        value = self._take(key)
        result: list[str] = []
        if value == [] and nonempty:
            self._wrong(key, f"a non-empty list of {items}", value)
        elif value is not None and not isinstance(value, list):
            self._wrong(key, f"a list of {items}", value)
        elif value is not None:
            for index, element in enumerate(value):
                if isinstance(element, str) and pattern.fullmatch(element):
                    if element in result:
                        self.problems.add((*self.path, key, index),
                                          f"{show(element)} is listed twice; remove one")
                    else:
                        result.append(element)
                else:
                    self.problems.add((*self.path, key, index),
                                      f"expected {item}, got {show(element)}")
        self.values[key] = result
        return result

    def table_of(self, key: str) -> dict[str, Any]:
        """A sub-table, passed through as is (``{}`` when absent)."""
        value = self._take(key)
        result: dict[str, Any] = {}
        if value is not None:
            if isinstance(value, dict):
                result = value
            else:
                self._wrong(key, "a table", value)
        self.values[key] = result
        return result

    def port(self, key: str, default: int) -> int:
        """A TCP port, 0..65535 (0: any free port)."""
        value = self.integer(key, default, minimum=0)
        if value > 65535:
            self._wrong(key, "a port from 0 to 65535 (0: any free port)", value)
            value = self.values[key] = default
        return value

    def ip_address(self, key: str, default: str) -> str:
        """An IPv4 or IPv6 address such as ``"127.0.0.1"`` (host names are not resolved)."""
        import ipaddress

        value = self.string(key, default, form='an IP address such as "127.0.0.1"')
        try:
            ipaddress.ip_address(value or "")
        except ValueError:
            self._wrong(key, 'an IP address such as "127.0.0.1" or "0.0.0.0"', value)
            value = self.values[key] = default
        return value or default

    def finish(self, where: str = "") -> None:
        """Report the keys no getter read; ``where`` narrows the message ("for a kafka
        system"). Keys read but left unset are dropped from `values`."""
        known = sorted(self.values)
        for key in self.table:
            if key in self.values:
                continue
            hint = did_you_mean(key, known) or (
                f"; expected one of: {', '.join(known)}" if known else "")
            self.problems.add((*self.path, key), f"unknown key{where}{hint}")
        self.values = {k: v for k, v in self.values.items() if v is not None}
