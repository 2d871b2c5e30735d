"""`sampan worker JOB.toml --worker N`: one worker process (normally started by `sampan run`).

SIGTERM or SIGINT: finish the batch, commit, close the tasks, exit 0. SIGUSR1: log where
every asyncio task of the worker waits (for a worker that looks stuck). Exit 3 when a
newer job model has fenced this worker out, 5 on an error a restart cannot fix (a
`PermanentError`: the job file, a task that does not load, an undeclared store asked for
in ``init``, refused credentials: `sampan run` stops the job on it), 2 on any other sampan
error, 1 on a crash; a system that does not answer is waited for, not an exit
(`framework.worker.outage`).
With ``--log-file`` the log (errors and tracebacks included) also goes to that file, so
`sampan run` and `sampan status` can point at the file that holds a worker's error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from framework.errors import (
    EXIT_FENCED,
    EXIT_PERMANENT,
    FencedError,
    PermanentError,
    SampanError,
    SystemUnavailableError,
)
from framework.logformat import FORMATS, configure_logging, default_format
from framework.wording import counted

__all__ = ["EXIT_FENCED", "add_worker_command", "error_line", "run_worker"]

log = logging.getLogger(__name__)


def add_worker_command(commands: Any) -> None:
    """Register `sampan worker` on the CLI's subparsers."""
    parser = commands.add_parser(
        "worker",
        help="run one worker process of a job (normally started by `sampan run`)",
        description="Run the tasks the job's current job model places on this worker.",
    )
    parser.add_argument("job", help="the job file (TOML)")
    parser.add_argument("--worker", type=int, default=0, help="worker id (default %(default)s)")
    parser.add_argument("--log-file", metavar="PATH",
                        help="also append the log (errors and tracebacks included) to PATH")
    parser.add_argument("--log-format", choices=FORMATS, default=default_format(),
                        help="text or json (one object per line with job, worker, epoch and "
                        "task fields); default $SAMPAN_LOG_FORMAT or text")
    parser.add_argument("--wait-for-go", action="store_true",
                        help="prepared by `sampan run`: connect, then wait for a line on stdin "
                        "(go: run the job's latest model; end of input: exit unused)")
    parser.add_argument("--config-snapshot", metavar="PATH",
                        help="run this configuration (written by `sampan run` when it started) "
                        "instead of the job file's current contents")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from framework.config import load_config

    file_handler = configure_logging(
        args.log_format, process=f"worker-{args.worker}", job=None,
        worker=args.worker, log_file=Path(args.log_file) if args.log_file else None)
    try:
        if args.config_snapshot:
            from framework.config.snapshot import load_snapshot

            config = load_snapshot(Path(args.config_snapshot), args.job)
        else:
            config = load_config(args.job)
        status = asyncio.run(run_worker(config, args.worker,
                                        go=_stdin_says_go if args.wait_for_go else None))
    except PermanentError as error:
        _log_file_line(file_handler, error)
        print(error_line(error), file=sys.stderr)
        return EXIT_PERMANENT
    except SampanError as error:
        _log_file_line(file_handler, error)  # the CLI says it on stderr
        raise
    except Exception:
        if file_handler is None:
            raise
        log.critical("worker %d crashed", args.worker, exc_info=True)
        return 1
    _exit_at_once(status)


def error_line(error: SampanError) -> str:
    """The line a worker stopped by ``error`` ends its output with: `sampan run` and
    `sampan status` quote it (`framework.coordinator.supervisor.last_error_line`)."""
    return f"sampan worker: error: {error}"


def _log_file_line(handler: logging.FileHandler | None, error: SampanError) -> None:
    """Write ``error``'s line into the ``--log-file`` too (the CLI writes it to stderr)."""
    if handler is not None and handler.stream is not None:
        handler.stream.write(f"{error_line(error)}\n")
        handler.flush()


def _exit_at_once(status: int) -> NoReturn:
    """End the process without the interpreter's teardown.

    Everything is committed, closed and reported by now; freeing a worker's heap object by
    object took 0.8 s of a 1 s stop on a loaded machine — time an expansion or a restart
    waits for the old worker to exit."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def log_tasks() -> None:
    """Log the stack of every asyncio task: where a worker that looks stuck waits."""
    tasks = asyncio.all_tasks()
    lines = [f"SIGUSR1: {len(tasks)} asyncio tasks"]
    for task in sorted(tasks, key=lambda t: t.get_name()):
        stream = io.StringIO()
        task.print_stack(limit=12, file=stream)
        lines.append(stream.getvalue().rstrip())
    log.warning("%s", "\n".join(lines))


async def _stdin_says_go() -> bool:
    """A prepared worker's signal from `sampan run`: a ``go`` line (end of input: not needed).

    Read on a daemon thread: a worker stopped while it waits must not wait for the line.
    """
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def deliver(text: str) -> None:
        if not line.done():
            line.set_result(text)

    def read() -> None:
        text = sys.stdin.readline()
        with contextlib.suppress(RuntimeError):  # the worker ended meanwhile: its loop closed
            loop.call_soon_threadsafe(deliver, text)

    threading.Thread(target=read, name="wait-for-go", daemon=True).start()
    return (await line).strip() == "go"


async def run_worker(config: Any, worker_id: int, model: Any = None,
                     go: Callable[[], Awaitable[bool]] | None = None,
                     in_place: bool | None = None) -> int:
    """Run a worker until a signal stops it; returns the process exit status. ``model``:
    the job model to run (a host's assignment), else the coordinator stream's latest;
    ``go``: see `Worker.go` (awaited once: a worker resuming after an outage has gone);
    ``in_place``: see `Worker.in_place` (a host's worker: True, it is given its model).

    A system that stops answering does not end the process: the worker waits for it and
    runs again from its last commit (`framework.worker.outage`)."""
    from framework.worker.outage import quiet_client_futures, wait_for_systems
    from framework.worker.runner import Worker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    quiet_client_futures(loop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, log_tasks)
    while True:
        worker = Worker(config, worker_id, model=model, stop=stop, go=go, in_place=in_place)
        try:
            result = await worker.run()
        except FencedError as error:
            log.warning("%s", error)
            return EXIT_FENCED
        except SystemUnavailableError as error:
            if stop.is_set():
                log.warning("worker %d stopped without its last commit (%s); the next start "
                            "processes those records again", worker_id, error)
                return 0
            if await wait_for_systems(config, worker_id, error, stop):
                go = None
                continue
            return 0
        break
    if result.reason == "not needed":
        log.debug("worker %d was prepared but not needed; exiting", worker_id)
        return 0
    log.info(
        "worker %d stopped (%s): epoch %d, %s processed, %s skipped, %s, %s restored",
        worker_id, result.reason, result.epoch, f"{result.processed:,}", f"{result.skipped:,}",
        counted(result.commits, "commit"), counted(result.restored, "changelog record"))
    return 0
