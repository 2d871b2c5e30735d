"""The `sampan` command: one subcommand per job, each with --help."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from framework.errors import SampanError

__all__ = ["COMMANDS", "main"]


COMMANDS = {
    "run": ("framework.commands.run", "add_run_command"),
    "status": ("framework.commands.status", "add_status_command"),
    "streams": ("framework.commands.streams", "add_streams_command"),
    "drill": ("framework.commands.drill", "add_drill_command"),
    "worker": ("framework.worker.main", "add_worker_command"),
    "verify": ("framework.commands.verify", "add_verify_command"),
    "rekey": ("framework.commands.rekey", "add_rekey_command"),
    "acls": ("framework.commands.acls", "add_acls_command"),
    "describe": ("framework.commands.describe", "add_describe_command"),
    "query": ("framework.commands.query", "add_query_command"),
}
"""Each subcommand: the module that registers it and its function. A command line that
names one imports that module alone (a worker does not load what `describe` or `status`
need); `--help` and unknown commands register them all."""


def _build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sampan",
        description="Stateful stream tasks that keep exact results when input streams expand.",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show sampan's version and exit")
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

    for name, (module, function) in COMMANDS.items():
        if only is None or name == only:
            __import__(module)  # not importlib.import_module: -X importtime sees this one
            getattr(sys.modules[module], function)(commands)
    return parser


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata
    is slow to import, and every worker process parses a command line)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"sampan {_version()}")
        parser.exit()


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
    words = list(sys.argv[1:] if argv is None else argv)
    named = next((w for w in words if not w.startswith("-")), None)
    parser = _build_parser(named if named in COMMANDS else None)
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
