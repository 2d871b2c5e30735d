"""The suite collects the same way from any checkout: pytest imports test modules by
basename (rootdir-relative without packages), so two files of one name, or an import of
`conftest` that may resolve to a folder's own conftest, break collection at random."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_module_has_a_unique_basename() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


def test_no_test_imports_from_conftest() -> None:
    pattern = re.compile(r"^\s*(from conftest import|import conftest)", re.MULTILINE)
    offenders = [str(path.relative_to(TESTS)) for path in TESTS.rglob("*.py")
                 if pattern.search(path.read_text(encoding="utf-8"))]
    assert offenders == []
