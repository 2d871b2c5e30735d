"""The job file argument, taken both ways by every command that reads a job: positionally
(`sampan status job.toml`, `sampan streams list job.toml`) and as ``--job job.toml``
(`sampan status --job job.toml`, `sampan streams list --job job.toml`)."""

from __future__ import annotations

import argparse

__all__ = ["add_job_argument", "resolve_job"]


def add_job_argument(parser: argparse.ArgumentParser, what: str = "the job file (TOML)"
                     ) -> None:
    """Give ``parser`` a positional ``JOB`` (optional, after its other positionals) and
    ``--job JOB``; `resolve_job` merges them into ``args.job``."""
    parser.add_argument("job_file", nargs="?", metavar="JOB", help=f"{what}; or --job JOB")
    parser.add_argument("--job", dest="job_option", metavar="JOB",
                        help=f"{what}, the same as JOB")
    parser.set_defaults(job_parser=parser)


def resolve_job(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """Set ``args.job`` from either form (a leftover positional after an option counts as
    ``JOB``, as in ``streams tail S --until-end job.toml``); usage error when none or two
    different files are given. Returns the arguments still unrecognized."""
    parser = getattr(args, "job_parser", None)
    if not isinstance(parser, argparse.ArgumentParser):
        return extra
    given = args.job_file
    if given is None and extra and not extra[0].startswith("-"):
        given, extra = extra[0], extra[1:]
    option = args.job_option
    if given is not None and option is not None and given != option:
        parser.error(f"two job files: {given} and --job {option}; pass one")
    args.job = given if given is not None else option
    if args.job is None:
        parser.error("the job file is required: pass it as JOB or --job JOB")
    return extra
