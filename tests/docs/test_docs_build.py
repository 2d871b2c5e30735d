"""The documentation site builds with MkDocs in strict mode: broken links, missing pages
and API reference entries that no longer resolve fail the suite, so docs cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_build_without_warnings(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    page = (tmp_path / "api" / "tasks" / "index.html").read_text()
    assert "Called once before the first message, with stores already restored." in page
    assert (tmp_path / "tutorial" / "index.html").exists()
    assert (tmp_path / "operations" / "index.html").exists()


def test_every_docs_page_is_in_the_navigation() -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md"))
    assert [p for p in pages if p not in nav] == []
