"""`sampan streams create|expand|list|produce|reset-offsets|discard-held|delete|tail`: a
job's streams (listing, producing, deleting and tailing have modules of their own)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from framework.commands.jobarg import add_job_argument
from framework.commands.stream_ref import (
    check_input,
    missing_stream,
    split_stream,
    started_system,
)
from framework.commands.streams_list import list_streams
from framework.commands.streams_produce import add_produce_arguments, produce
from framework.commands.streams_tail import tail
from framework.config import JobConfig, StartPosition, load_config
from framework.coordinator.builder import build_job_model
from framework.errors import ConfigError, SampanError
from framework.metadata import read_state
from framework.systems.base import System
from framework.wording import counted
from groupers import ExpansionError

__all__ = ["add_streams_command"]


def add_streams_command(commands: Any) -> None:
    parser = commands.add_parser("streams",
                                 help="create, expand, list, produce to, tail, delete streams",
                                 description="Manage the streams of a job's systems.")
    sub = parser.add_subparsers(dest="streams_command", required=True, metavar="ACTION")

    def job_arg(p: argparse.ArgumentParser) -> None:
        add_job_argument(p, "the job file naming the stream's system")

    for name, text in (("create", "create a stream"), ("expand", "grow a stream's partitions")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("stream", metavar="SYSTEM.STREAM")
        p.add_argument("--partitions", type=int, required=True, metavar="N")
        if name == "create":
            p.add_argument("--compacted", action="store_true", help="keep the latest per key")
        else:
            p.add_argument("--force", action="store_true",
                           help="expand even to a count the job's coordinator will refuse")
        job_arg(p)
        p.set_defaults(handler=_create if name == "create" else _expand)
    p = sub.add_parser(
        "list", help="list streams: partitions, oldest and newest offsets, bytes, retention",
        description="One tab-separated row per stream of every system of the job file: "
        "partition count; per partition (comma-separated) the oldest retained offset and the "
        "newest record's offset (- when empty); payload bytes on disk (local log); the "
        "retention the job file puts in force. sampan's own streams (coordinator streams, "
        "checkpoints, fences, changelogs) are listed only with --all.")
    job_arg(p)
    p.add_argument("--all", action="store_true",
                   help="also list sampan's own streams, with a last column INTERNAL saying "
                   "what each is (- for yours)")
    p.set_defaults(handler=list_streams)
    p = sub.add_parser(
        "produce", help='write JSON lines {"key": ..., "value": ...} from stdin, or raw bytes',
        description='Write one record per stdin line, {"key": K, "value": V} (optionally '
        '"partition": N and "timestamp": MS, the record timestamp in ms since the epoch, '
        "default now), encoded with the stream\'s declared serdes. \"value\": null writes a "
        "tombstone. Every line is checked first: a bad line writes nothing; on the local "
        "log the whole input is one transaction. --value-hex and --raw write bytes as they "
        "are instead.")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    add_produce_arguments(p)
    p.set_defaults(handler=produce)
    p = sub.add_parser(
        "reset-offsets", help="set where a stopped job's tasks continue reading an input",
        description="Move every task of a stopped job to the oldest record (earliest), the "
        "end (latest) or the first record at or after a time of one input stream, or to an "
        "offset of one partition; stores keep their state. The remedy when an input was "
        "deleted and created again, or to move past a record the job cannot decode "
        "(--partition P --to-offset OFFSET+1). For a job that has never run, it sets where "
        "its first run starts reading the stream (overriding the stream's start_position).")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to", type=_start_position, metavar="WHERE",
                       help="earliest: read everything the stream holds now; latest: only "
                       "what comes next; a time with its zone (2026-05-01T12:00:00Z) or ms "
                       "since the epoch: the first record stamped at or after it, per "
                       "partition")
    where.add_argument("--to-offset", type=int, metavar="OFFSET",
                       help="continue at this offset of the partition --partition names")
    p.add_argument("--partition", type=int, metavar="P",
                   help="move only the tasks' position on partition P")
    p.set_defaults(handler=_reset_offsets)
    p = sub.add_parser(
        "discard-held", help="release a held input of a stopped job by skipping the records "
        "its tasks cannot map",
        description="An input is held after records were written to it while its partition "
        "count was one the job's tasks cannot map (`sampan status` says so). With the job "
        "stopped and caught up to the hold, this moves every task of the job past those "
        "records (they stay in the stream: only this job skips them; on Kafka every record "
        "past the hold) and publishes the job model at the stream's count now, which the "
        "tasks must map. It prints the skipped offsets. `sampan rekey` keeps them instead.")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    p.set_defaults(handler=_discard_held)
    p = sub.add_parser(
        "delete", help="delete a stream and all its records",
        description="Delete a stream with all its records (local log: its records and "
        "metadata in the log file; Kafka: DeleteTopics). Refused while a running job uses "
        "it: the job file's job, and on the local log any job whose coordinator runs. Asks "
        "first on a terminal; --yes deletes without asking (required when stdin is not a "
        "terminal).")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    p.add_argument("--yes", action="store_true", help="delete without asking")
    p.set_defaults(handler=_delete)
    p = sub.add_parser(
        "tail", help="print records: partition, offset, key, value (tab-separated, or --json)",
        description="Print a stream's records, one per line: partition, offset, key and value, "
        "tab-separated (--json: one JSON object per line). Without --until-end it keeps "
        "waiting for new records, like tail -f.")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest record")
    p.add_argument("--until-end", action="store_true", help="exit at the current end")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per line: {"partition", "offset", "key", "value"}')
    p.add_argument("--raw", action="store_true",
                   help="show keys and values as stored bytes (base64 when not UTF-8), "
                   "without the stream's serdes")
    p.set_defaults(handler=tail)


def _create(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = split_stream(config, args.stream)
    if args.partitions < 1:
        raise ConfigError(f"--partitions {args.partitions}: a stream needs at least 1 "
                          f"partition; pass --partitions N with N >= 1")

    async def go() -> None:
        system = await started_system(config, system_name)
        try:
            existing = (await system.list_streams()).get(stream)
            if existing is not None:
                raise SampanError(
                    f"stream {args.stream} already exists with "
                    f"{counted(existing, 'partition')}; grow it with `sampan streams expand "
                    f"{args.stream} --partitions N --job {config.path}`")
            await system.create_stream(stream, args.partitions, compacted=args.compacted)
        finally:
            await system.close()

    asyncio.run(go())
    print(f"created {args.stream} with {counted(args.partitions, 'partition')}")
    return 0


async def _check_expansion(config: JobConfig, system: System, qualified: str,
                           count: int) -> None:
    """Refuse up front what the job's coordinator would refuse (non-multiple, decrease)."""
    if qualified not in config.inputs:
        return
    meta = system if system.name == config.metadata_system else await started_system(
        config, config.metadata_system)
    try:
        model = (await read_state(meta, config)).model
    finally:
        if meta is not system:
            await meta.close()
    if model is None or qualified not in model.partition_counts:
        return
    counts = {**model.partition_counts, qualified: count}
    try:
        build_job_model(config, counts, model)
    except ExpansionError as error:
        cause = error.__cause__ if isinstance(error.__cause__, ExpansionError) else error
        tasks = {t.name for t in model.tasks.values()
                 if any(f"{s.system}.{s.stream}" == qualified for s in t.ssps)}
        raise SampanError(
            f"refused: expanding {qualified} from {model.partition_counts[qualified]} to "
            f"{count} partitions would be refused by the job ({counted(len(tasks), 'task')} "
            f"consume it): {cause}; pass --force to expand anyway (the running job would "
            f"refuse it and keep its current job model)") from None


def _expand(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = split_stream(config, args.stream)

    async def go() -> int:
        system = await started_system(config, system_name)
        try:
            counts = await system.list_streams()
            if stream not in counts:
                raise missing_stream(config, args.stream, counts)
            before = counts[stream]
            if args.partitions < before:
                raise SampanError(
                    f"cannot shrink {args.stream} from {before} to {args.partitions} "
                    f"partitions: partition counts only grow; pass --partitions N with "
                    f"N > {before}")
            if args.partitions > before and not args.force:
                await _check_expansion(config, system, args.stream, args.partitions)
            await system.expand_stream(stream, args.partitions)
            return before
        finally:
            await system.close()

    before = asyncio.run(go())
    if before == args.partitions:
        print(f"{args.stream} already has {counted(before, 'partition')}; nothing to do")
    else:
        print(f"expanded {args.stream} from {before} to {counted(args.partitions, 'partition')}")
    return 0


def _reset_offsets(args: argparse.Namespace) -> int:
    from framework.commands.offsets import describe, reset_offsets

    config = load_config(args.job)
    split_stream(config, args.stream)
    to = args.to_offset if args.to_offset is not None else args.to
    changes = asyncio.run(reset_offsets(config, args.stream, to, args.partition))
    print(describe(changes))
    where = (f"offset {to}" if isinstance(to, int) else "earliest" if to.kind == "oldest"
             else to.describe())
    print(f"reset {counted(len(changes), 'partition')} of {args.stream} to {where}; start "
          f"the job with `sampan run {config.path}`")
    return 0


def _start_position(text: str) -> StartPosition:
    """``--to``: earliest (or oldest), latest, a time with its zone or ms since the
    epoch."""
    try:
        return StartPosition.parse({"earliest": "oldest"}.get(text) or (
            int(text) if text.isdigit() else text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _discard_held(args: argparse.Namespace) -> int:
    from framework.commands.held import discard_held

    config = load_config(args.job)
    split_stream(config, args.stream)
    check_input(config, args.stream)
    print(asyncio.run(discard_held(config, args.stream)).text(str(config.path)))
    return 0


def _delete(args: argparse.Namespace) -> int:
    from framework.commands.streams_delete import delete_stream

    config = load_config(args.job)

    def confirm(what: str) -> bool:
        if args.yes:
            return True
        if not sys.stdin.isatty():
            raise ConfigError(f"deleting {what} cannot be undone: pass --yes to delete it "
                              f"(stdin is not a terminal to ask on)")
        return input(f"delete {what}? This cannot be undone [y/N] ").strip().lower() in (
            "y", "yes")

    print(asyncio.run(delete_stream(config, args.stream, confirm)))
    return 0
