"""docs/security.md shows what the code does: its ACL table is what `sampan acls` prints
for the job file of its first step, and that job file loads."""

from __future__ import annotations

import re
from pathlib import Path

from framework.commands.acls import _table, job_acls
from framework.config import load_config

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_acl_table_of_the_walkthrough_is_what_sampan_acls_prints(tmp_path: Path) -> None:
    text = (DOCS / "security.md").read_text()
    job = re.search(r"```toml\n( *\[job\].*?)```", text, re.S)
    assert job is not None
    path = tmp_path / "counter.toml"
    path.write_text("\n".join(line.strip() for line in job.group(1).splitlines()))
    printed = _table(job_acls(load_config(path))["kafka"])
    shown = re.search(r"```text\n( *RESOURCE.*?)```", text, re.S)
    assert shown is not None
    documented = "\n".join(line.strip() for line in shown.group(1).strip().splitlines())
    assert documented == "\n".join(line.rstrip() for line in printed.splitlines())
