"""`sampan worker JOB.toml --worker N`: one worker process (normally started by `sampan run`).

SIGTERM or SIGINT: finish the batch, commit, close the tasks, exit 0. Exit 3 when a
newer job model has fenced this worker out, 2 on any other sampan error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from framework.errors import FencedError

__all__ = ["EXIT_FENCED", "add_worker_command", "run_worker"]

EXIT_FENCED = 3


def add_worker_command(commands: Any) -> None:
    """Register `sampan worker` on the CLI's subparsers."""
    parser = commands.add_parser(
        "worker",
        help="run one worker process of a job (normally started by `sampan run`)",
        description="Run the tasks the job's current job model places on this worker.",
    )
    parser.add_argument("job", help="the job file (TOML)")
    parser.add_argument("--worker", type=int, default=0, help="worker id (default %(default)s)")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from framework.config import load_config

    config = load_config(args.job)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s worker-{args.worker} %(levelname)s %(message)s")
    return asyncio.run(run_worker(config, args.worker))


async def run_worker(config: Any, worker_id: int) -> int:
    """Run a worker until a signal stops it; returns the process exit status."""
    from framework.worker.runner import Worker

    worker = Worker(config, worker_id)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop.set)
    try:
        result = await worker.run()
    except FencedError as error:
        logging.getLogger(__name__).warning("%s", error)
        return EXIT_FENCED
    logging.getLogger(__name__).info(
        "worker %d stopped (%s): epoch %d, %d processed, %d skipped, %d commits, "
        "%d changelog records restored", worker_id, result.reason, result.epoch,
        result.processed, result.skipped, result.commits, result.restored)
    return 0
