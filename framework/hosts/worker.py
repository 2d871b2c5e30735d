"""A worker process of one host: `python -m framework.hosts.worker JOB --worker N
--data-dir DIR --model FILE` (started by the host's supervisor, not by users).

It runs the ordinary `framework.worker.runner.Worker` on the job model the host received
in its assignment (the file), with the host's state folder; it exits as `sampan worker`
does (5 on an error a restart cannot fix: the host then stops).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from framework.errors import EXIT_PERMANENT, PermanentError, SampanError

__all__ = ["main"]

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m framework.hosts.worker")
    parser.add_argument("job")
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--log-file")
    return parser


async def _run(args: argparse.Namespace) -> int:
    from framework.config import load_config
    from framework.hosts.config import host_config
    from framework.metadata.jobmodel import JobModel
    from framework.worker.main import run_worker

    config = host_config(load_config(args.job), Path(args.data_dir))
    model = JobModel.from_bytes(Path(args.model).read_bytes())
    return await run_worker(config, args.worker, model,
                            in_place=config.coordinator.model_changes == "in-place")


def main(argv: Sequence[str] | None = None) -> int:
    from framework.logformat import configure_logging, default_format

    args = _parser().parse_args(argv)
    # text or json as the host was told (`sampan run --log-format` sets $SAMPAN_LOG_FORMAT)
    configure_logging(default_format(), process=f"worker-{args.worker}", job=None,
                      worker=args.worker,
                      log_file=Path(args.log_file) if args.log_file else None)
    try:
        return asyncio.run(_run(args))
    except SampanError as error:
        from framework.worker.main import error_line

        log.error("%s", error)
        print(error_line(error), file=sys.stderr)
        return EXIT_PERMANENT if isinstance(error, PermanentError) else 2
    except Exception:
        log.critical("worker %d crashed", args.worker, exc_info=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
