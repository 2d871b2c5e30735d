"""The key tables of docs/config.md are the ones the declarations of the keys give: a
new key, default, bound or meaning changes the code and the page together."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import pytest

from framework.config.reference import COMMAND, rewrite
from framework.errors import SampanError

REPO = Path(__file__).resolve().parents[2]
CONFIG_MD = REPO / "docs" / "config.md"


def test_the_key_tables_of_config_md_are_the_ones_the_declarations_give() -> None:
    text = CONFIG_MD.read_text()
    expected = rewrite(text)
    drift = "".join(difflib.unified_diff(text.splitlines(True), expected.splitlines(True),
                                         "docs/config.md", "declared", n=0))
    assert text == expected, (
        f"docs/config.md's key tables differ from the declarations in framework/config; "
        f"run `{COMMAND}` to rewrite them:\n{drift[:3000]}")


def test_the_reference_command_rewrites_a_stale_table_in_place(tmp_path: Path) -> None:
    current = CONFIG_MD.read_text()
    row = "| `workers` | integer ≥ 1 | `1` |"
    assert row in current
    stale = tmp_path / "config.md"
    stale.write_text(current.replace(row, "| `workers` | integer ≥ 0 | `4` |"))
    module = [sys.executable, "-m", "framework.config.reference"]
    check = subprocess.run([*module, "--check", str(stale)], capture_output=True, text=True,
                           cwd=REPO, timeout=120)
    assert (check.returncode, check.stderr) == (
        1, f"{stale}: the key tables differ from the declarations; run `{COMMAND}`\n")
    done = subprocess.run([*module, str(stale)], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert (done.returncode, done.stdout) == (0, f"{stale}: key tables rewritten\n")
    assert stale.read_text() == current


def test_a_declared_table_missing_from_the_page_is_named_with_the_markers_to_add() -> None:
    text = CONFIG_MD.read_text()
    start = text.index("<!-- generated from the declarations of [metrics]")
    end = text.index("<!-- end of generated table -->", start)
    with pytest.raises(SampanError) as caught:
        rewrite(text[:start] + text[end + len("<!-- end of generated table -->"):])
    assert str(caught.value) == (
        "docs/config.md has no generated table of [metrics]; add '<!-- generated from the "
        f"declarations of [metrics]: {COMMAND} -->' and '<!-- end of generated table -->' "
        f"lines where it belongs, then run `{COMMAND}`")
