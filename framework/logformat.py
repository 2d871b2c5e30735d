"""Log output of `sampan run` and `sampan worker`: plain text, or one JSON object per line.

``--log-format json`` (or ``SAMPAN_LOG_FORMAT=json``, which `sampan run` passes on to its
workers) writes ``{"time", "level", "logger", "message", "job", "process", "worker",
"epoch", "task"}`` per record, for log shippers. ``epoch`` and ``task`` come from the
process's context provider (the job model it runs, the task call in progress) or from
``extra={"task": ...}``; fields without a value are left out.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from framework.client_logs import LibraryThrottle, install_client_log_gate

__all__ = ["FORMATS", "NOTICES_GIVEN_ENV", "JsonFormatter", "LibraryThrottle",
           "configure_logging", "default_format", "notice_level", "set_context_provider"]

FORMATS = ("text", "json")
ENV = "SAMPAN_LOG_FORMAT"
NOTICES_GIVEN_ENV = "SAMPAN_NOTICES_GIVEN"
"""Set by `sampan run` for its workers: the run's one-time notices (a broker refusing the
idempotent producer) were logged by the coordinator, so a worker logs them at DEBUG."""

_provider: Callable[[], dict[str, Any]] | None = None


def set_context_provider(provider: Callable[[], dict[str, Any]] | None) -> None:
    """Where JSON lines take their live fields (``epoch``, ``task``) from."""
    global _provider
    _provider = provider


def notice_level() -> int:
    """The level of a once-per-run notice: WARNING, or DEBUG in a worker of a run whose
    coordinator gave it (`NOTICES_GIVEN_ENV`)."""
    return logging.DEBUG if os.environ.get(NOTICES_GIVEN_ENV) else logging.WARNING


def default_format() -> str:
    """``$SAMPAN_LOG_FORMAT`` when it names a format, else ``text``."""
    value = os.environ.get(ENV, "text")
    return value if value in FORMATS else "text"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the process's fixed fields (job, process, worker)."""

    def __init__(self, **fields: Any) -> None:
        super().__init__()
        self.fields = {k: v for k, v in fields.items() if v is not None}

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
            **self.fields,
        }
        if _provider is not None:
            with contextlib.suppress(Exception):  # a log line never fails for its context
                data.update({k: v for k, v in _provider().items() if v is not None})
        task = getattr(record, "task", None)
        if task is not None:
            data["task"] = task
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str)


def configure_logging(log_format: str, *, process: str, job: str | None,
                      worker: int | None = None, log_file: Path | None = None
                      ) -> logging.FileHandler | None:
    """Log INFO and up to stderr (and ``log_file``) as ``log_format``, the Kafka client's
    lines through `framework.client_logs`; the file handler."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    file_handler = None
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_file, encoding="utf-8")
        handlers.append(file_handler)
    if log_format == "json":
        formatter: logging.Formatter = JsonFormatter(job=job, process=process, worker=worker)
    else:
        formatter = logging.Formatter(f"%(asctime)s {process} %(levelname)s %(message)s")
    for handler in handlers:
        handler.setFormatter(formatter)
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True)
    # aiokafka logs every manual assignment ("Updating subscribed topics to: ...") at INFO:
    # twice a second per process, forever; its warnings and errors go through the gate.
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    install_client_log_gate()
    return file_handler
