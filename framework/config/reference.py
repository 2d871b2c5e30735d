"""The key tables of ``docs/config.md``, generated from the declarations of the keys.

Each table stands between two markers, ``<!-- generated from the declarations of [job]:
python -m framework.config.reference -->`` and ``<!-- end of generated table -->``;
the prose around them is written by hand. ``python -m framework.config.reference``
rewrites the tables in place; ``--check`` only says whether they are current (exit 1
when not), as the docs test does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import Field
from pathlib import Path
from typing import Any

from framework.config.declare import Setting, declared
from framework.config.model import JobConfig
from framework.config.sections import (
    CoordinatorConfig,
    ErrorsConfig,
    MetricsConfig,
    QueriesConfig,
    RocksDBConfig,
    StoreConfig,
    StreamConfig,
    SystemConfig,
)
from framework.errors import SampanError

__all__ = ["COMMAND", "SECTIONS", "main", "rewrite", "table"]

SECTIONS: dict[str, type[Any]] = {
    "job": JobConfig,
    "systems.<name>": SystemConfig,
    'streams."<system>.<stream>"': StreamConfig,
    "stores.<name>": StoreConfig,
    "stores.<name>.rocksdb": RocksDBConfig,
    "errors": ErrorsConfig,
    "coordinator": CoordinatorConfig,
    "metrics": MetricsConfig,
    "queries": QueriesConfig,
}
"""Each documented table of the job file, by its header, and the dataclass declaring it."""

COMMAND = "python -m framework.config.reference"
"""The command that rewrites the tables."""

DOCS = Path(__file__).resolve().parents[2] / "docs" / "config.md"
"""``docs/config.md`` of the checkout this module is in."""

_BLOCK = re.compile(
    r"(?P<open><!-- generated from the declarations of \[(?P<name>.+?)\]: [^\n]*-->\n)"
    r"(?P<table>.*?)"
    r"(?P<close><!-- end of generated table -->)", re.S)


def table(cls: type[Any]) -> str:
    """The Markdown table of the keys ``cls`` declares: key, type, default, meaning."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for spec, setting, key in declared(cls):
        cells = (f"`{key}`", _type(setting), _default(spec, setting), setting.doc)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


def rewrite(text: str) -> str:
    """``text`` (``docs/config.md``) with every generated table made current; a
    `SampanError` when a declared table has no place in it, or an unknown one has."""
    seen: list[str] = []

    def fill(block: re.Match[str]) -> str:
        name = block["name"]
        if name not in SECTIONS:
            raise SampanError(f"docs/config.md has a generated table of [{name}], which no "
                              f"config dataclass declares; use one of: "
                              f"{', '.join(f'[{known}]' for known in SECTIONS)}")
        seen.append(name)
        return block["open"] + table(SECTIONS[name]) + block["close"]

    result = _BLOCK.sub(fill, text)
    missing = [name for name in SECTIONS if name not in seen]
    if missing:
        raise SampanError(
            f"docs/config.md has no generated table of {', '.join(f'[{m}]' for m in missing)}"
            f"; add '<!-- generated from the declarations of [{missing[0]}]: {COMMAND} -->' "
            "and '<!-- end of generated table -->' lines where it belongs, then run "
            f"`{COMMAND}`")
    return result


def _type(setting: Setting) -> str:
    parts = [setting.kind.shown]
    if setting.when is not None:
        parts.append(f"{setting.when} only")
    if setting.required is not None:
        parts.append("required")
    return ", ".join(parts)


def _default(spec: Field[Any], setting: Setting) -> str:
    if setting.default_doc is not None:
        return setting.default_doc
    if setting.required is not None:
        return "—"
    value = setting.default_of(spec)
    return "unset" if value is None else f"`{_toml(value)}`"


def _toml(value: object) -> str:
    """``value`` as a job file writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or with ``--check``, compare) the tables of a ``docs/config.md``."""
    parser = argparse.ArgumentParser(
        prog=COMMAND, description="Write the key tables of docs/config.md from the "
                                  "declarations in framework/config.")
    parser.add_argument("docs", nargs="?", type=Path, default=DOCS,
                        help="the page to rewrite (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if the tables are not current")
    options = parser.parse_args(argv)
    text = options.docs.read_text()
    try:
        current = rewrite(text)
    except SampanError as error:
        print(f"{COMMAND}: error: {error}", file=sys.stderr)
        return 2
    if current == text:
        return 0
    if options.check:
        print(f"{options.docs}: the key tables differ from the declarations; run `{COMMAND}`",
              file=sys.stderr)
        return 1
    options.docs.write_text(current)
    print(f"{options.docs}: key tables rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
