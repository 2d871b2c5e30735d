"""`sampan run JOB.toml`: the coordinator and its workers, in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path
from typing import Any

__all__ = ["add_run_command"]


def add_run_command(commands: Any) -> None:
    from framework.commands.jobarg import add_job_argument

    parser = commands.add_parser(
        "run", help="run a job: coordinator + workers in the foreground (Ctrl-C stops)",
        description="Publish the job model, start the workers, and keep watching the "
        "input streams: an expansion is applied without operator action. Runs in the "
        "foreground until Ctrl-C or SIGTERM (workers commit and stop); run other sampan "
        "commands in a second terminal.")
    add_job_argument(parser)
    parser.add_argument("--worker-logs", metavar="DIR",
                        help="write worker output to DIR/worker-N.log only (default: worker "
                        "output on stderr and also in <job.data_dir>/<job.name>/logs/worker-N.log)")
    parser.add_argument("--host", metavar="NAME",
                        help="run one host of a job spread over several machines (Kafka "
                        "metadata system only): every host of the job runs the same job file "
                        "with its own NAME; see docs/hosts.md")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="with --host: keep this host's state in DIR instead of "
                        "job.data_dir (several hosts on one machine)")
    parser.add_argument("--log-format", choices=("text", "json"), default=None,
                        help="text (default) or json: one JSON object per line with job, "
                        "process, worker, epoch and task fields, for the coordinator and "
                        "its workers")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from framework.api import load_task_class
    from framework.config import load_config

    config = load_config(args.job)
    load_task_class(config)  # a wrong job.task fails here, not as a worker crash loop
    from framework.logformat import ENV, configure_logging, default_format

    if args.log_format:
        os.environ[ENV] = args.log_format  # the workers inherit it
    if args.host is not None or args.data_dir is not None:
        from framework.hosts.cli import run_host

        return run_host(config, args.host, args.data_dir, args.worker_logs,
                        args.log_format or default_format())
    configure_logging(args.log_format or default_format(), process="coordinator",
                      job=config.name)
    log_dir = Path(args.worker_logs) if args.worker_logs else None
    return asyncio.run(_run(config, log_dir))


async def _run(config: Any, log_dir: Path | None) -> int:
    from framework.coordinator.early import prepare_workers, workers_first
    from framework.hosts.lock import HostLock

    lock = HostLock(config.state_dir, config.name)  # one run per state folder, as hosts
    lock.acquire()  # a second run on this machine stops here, before the lease or a store
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    workers = None
    try:
        # The workers first (SAMPAN_WORKERS_FIRST=1): their start overlaps the coordinator's
        # imports and connections; they wait for go, given once a model is published.
        if workers_first():
            workers = await prepare_workers(config, log_dir, stop)
        from framework.coordinator.process import Coordinator

        await Coordinator(config, log_dir=log_dir, stop=stop, supervisor=workers).run()
    finally:
        if workers is not None:  # the coordinator did not start: they end unused
            await workers.discard_prepared()
        lock.release()
    return 0
