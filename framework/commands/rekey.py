"""`sampan rekey JOB.toml --tasks M`: move a stopped stateful job's state to M tasks (Spark)."""

from __future__ import annotations

import argparse
from typing import Any

from framework.commands.jobarg import add_job_argument

__all__ = ["add_rekey_command"]


def add_rekey_command(commands: Any) -> None:
    parser = commands.add_parser(
        "rekey", help="change a stopped stateful job's task count, keeping its state exact",
        description="With the job stopped: reads each logged store's compacted changelog in "
        "Spark, sends every key to its task under M tasks, writes fresh changelog "
        "partitions, carries every input partition's checkpoint to its new task and "
        "publishes a job model for M tasks. `sampan run` then continues with M tasks. M must "
        "divide every input's partition count. Needs pip install -e '.[spark]'.")
    add_job_argument(parser)
    parser.add_argument("--tasks", type=int, required=True, metavar="M", help="new task count")
    parser.add_argument("--key-fn", metavar="MODULE:FUNCTION",
                        help="for stores keyed by something other than the input key: "
                        "maps a (decoded) store key to the input key that routes it")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from framework.spark.rekey import rekey_job

    print(rekey_job(args.job, args.tasks, key_fn=args.key_fn).text())
    return 0
