"""A drill's output folder: the one `--output` names, or a new temporary one."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["drill_folder"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def drill_folder(chosen: Path | None, prefix: str) -> Iterator[Path]:
    """``chosen``, or a new temporary folder named ``prefix…``. When the drill fails, a
    folder it made itself is removed if nothing ran in it (no log written yet), and named
    in the log otherwise; a chosen folder is left as it is."""
    output = chosen or Path(tempfile.mkdtemp(prefix=prefix))
    output.mkdir(parents=True, exist_ok=True)
    try:
        yield output
    except BaseException:
        if chosen is None:
            if any(output.rglob("*.log")):
                log.warning("the failed drill's job, data and logs stay in %s", output)
            else:
                shutil.rmtree(output, ignore_errors=True)
        raise
