"""`sampan verify JOB.toml`: recompute the job's expected results in Spark and diff them."""

from __future__ import annotations

import argparse
from typing import Any

from framework.commands.jobarg import add_job_argument

__all__ = ["add_verify_command"]


def add_verify_command(commands: Any) -> None:
    parser = commands.add_parser(
        "verify", help="check a job's outputs and store contents against its inputs (Spark)",
        description="Reads the job's input streams in Spark, recomputes the expected result "
        "(word counts, …), and diffs it against the job's output stream and the compacted "
        "changelogs of its stores. Prints matched / missing / extra / wrong keys with "
        "examples; exit status 0 only when the result is exact. Needs the spark extra: "
        "pip install -e '.[spark]'.")
    add_job_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from framework.spark.verify import report_json, verify_job

    report = verify_job(args.job)
    print(report_json(report) if args.json else report.text())
    return 0 if report.exact else 1
