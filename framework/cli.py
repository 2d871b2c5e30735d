"""The `sampan` command: one subcommand per job, each with --help."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from framework.errors import SampanError

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sampan",
        description="Stateful stream tasks that keep exact results when input streams expand.",
    )
    parser.add_argument("--version", action="version", version=f"sampan {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plan = commands.add_parser(
        "expansion-plan",
        help="show which task consumes which partition as a stream expands (SEP-5)",
        description="Group a stream's partitions with the fixed-task grouper through a "
        "sequence of partition counts and show that every key keeps its task.",
    )
    plan.add_argument("--stream", default="local.events",
                      help="SYSTEM.STREAM (default %(default)s)")
    plan.add_argument(
        "--partitions", type=int, nargs="+", default=[2, 4, 8], metavar="N",
        help="partition counts in order, e.g. 2 4 8 (default: %(default)s)",
    )
    plan.add_argument(
        "--naive", action="store_true",
        help="use the plain GroupByPartition grouper to show keys changing task",
    )
    plan.set_defaults(handler=_expansion_plan)

    from framework.commands.acls import add_acls_command
    from framework.commands.describe import add_describe_command
    from framework.commands.drill import add_drill_command
    from framework.commands.query import add_query_command
    from framework.commands.rekey import add_rekey_command
    from framework.commands.run import add_run_command
    from framework.commands.status import add_status_command
    from framework.commands.streams import add_streams_command
    from framework.commands.verify import add_verify_command
    from framework.worker.main import add_worker_command

    add_run_command(commands)
    add_status_command(commands)
    add_streams_command(commands)
    add_drill_command(commands)
    add_worker_command(commands)
    add_verify_command(commands)
    add_rekey_command(commands)
    add_acls_command(commands)
    add_describe_command(commands)
    add_query_command(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sampan")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _expansion_plan(args: argparse.Namespace) -> int:
    from framework.commands.expansion_plan import print_expansion_plan

    return print_expansion_plan(args.stream, args.partitions, naive=args.naive)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `sampan` console script; returns the exit status."""
    from framework.client_logs import install_client_log_gate
    from framework.commands.jobarg import resolve_job

    install_client_log_gate()  # every command's Kafka client, whatever its logging
    parser = _build_parser()
    args, extra = parser.parse_known_args(argv)
    extra = resolve_job(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        status: int = args.handler(args)
    except SampanError as error:
        print(f"sampan {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `sampan status JOB | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return status


if __name__ == "__main__":
    sys.exit(main())
