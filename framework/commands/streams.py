"""`sampan streams create|expand|list|produce|reset-offsets|discard-held|tail`: a job's
streams."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from framework.commands.jobarg import add_job_argument
from framework.config import JobConfig, StartPosition, StreamRef, load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.retention import retention_policy
from framework.errors import ConfigError, SampanError, SerdeError, StreamNotFoundError
from framework.metadata import read_state
from framework.serdes import get_serde
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from framework.systems.local.system import LocalSystem
from framework.wording import counted
from groupers import ExpansionError, SystemStreamPartition

__all__ = ["add_streams_command"]

PRODUCE_BATCH = 1000


def add_streams_command(commands: Any) -> None:
    parser = commands.add_parser("streams", help="create, expand, list, produce to, tail streams",
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
        "retention the job file puts in force.")
    job_arg(p)
    p.set_defaults(handler=_list)
    p = sub.add_parser(
        "produce", help='write JSON lines {"key": ..., "value": ...} from stdin',
        description='Write one record per stdin line, {"key": K, "value": V} (optionally '
        '"partition": N and "timestamp": MS, the record timestamp in ms since the epoch, '
        "default now), encoded with the stream\'s declared serdes. \"value\": null writes a "
        "tombstone. Every line is checked first: a bad line writes nothing; on the local "
        "log the whole input is one transaction.")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    p.set_defaults(handler=_produce)
    p = sub.add_parser(
        "reset-offsets", help="set where a stopped job's tasks continue reading an input",
        description="Move every task of a stopped job to the oldest record (earliest), the "
        "end (latest) or the first record at or after a time of one input stream; stores "
        "keep their state. The remedy when an input was deleted and created again. For a "
        "job that has never run, it sets where its first run starts reading the stream "
        "(overriding the stream's start_position).")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    p.add_argument("--to", required=True, type=_start_position, metavar="WHERE",
                   help="earliest: read everything the stream holds now; latest: only what "
                   "comes next; a time with its zone (2026-05-01T12:00:00Z) or ms since the "
                   "epoch: the first record stamped at or after it, per partition")
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
    p.set_defaults(handler=_tail)


def _split(config: JobConfig, qualified: str) -> tuple[str, str]:
    system, stream = StreamRef.parse(qualified)
    if not stream:
        raise ConfigError(f"{qualified!r}: expected SYSTEM.STREAM, e.g. local.events")
    config.system(system)  # raises naming the declared systems
    return system, stream


async def _with_system(config: JobConfig, system_name: str) -> System:
    system = open_system(config.system(system_name))
    await system.start()
    return system


def _missing(config: JobConfig, qualified: str) -> StreamNotFoundError:
    return StreamNotFoundError(
        f"stream {qualified} does not exist; create it with `sampan streams create "
        f"{qualified} --partitions N --job {config.path}`")


def _create(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = _split(config, args.stream)
    if args.partitions < 1:
        raise ConfigError(f"--partitions {args.partitions}: a stream needs at least 1 "
                          f"partition; pass --partitions N with N >= 1")

    async def go() -> None:
        system = await _with_system(config, system_name)
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
    meta = system if system.name == config.metadata_system else await _with_system(
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
    system_name, stream = _split(config, args.stream)

    async def go() -> int:
        system = await _with_system(config, system_name)
        try:
            counts = await system.list_streams()
            if stream not in counts:
                raise _missing(config, args.stream)
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
        print(f"expanded {args.stream} from {before} to {args.partitions} partitions")
    return 0


def _list(args: argparse.Namespace) -> int:
    config = load_config(args.job)

    async def go() -> list[tuple[str, ...]]:
        rows = []
        for name in sorted(config.systems):
            system = await _with_system(config, name)
            try:
                for stream, count in sorted((await system.list_streams()).items()):
                    rows.append(await _stream_row(config, system, name, stream, count))
            finally:
                await system.close()
        return rows

    print("\t".join(_LIST_COLUMNS))
    for row in asyncio.run(go()):
        print("\t".join(row))
    return 0


_LIST_COLUMNS = ("STREAM", "PARTITIONS", "OLDEST", "NEWEST", "BYTES", "RETENTION")


async def _stream_row(config: JobConfig, system: System, name: str, stream: str,
                      count: int) -> tuple[str, ...]:
    """One `streams list` row: per partition (comma-separated) the oldest retained
    offset and the newest record's offset ("-": empty), payload bytes on disk (local
    log), and the retention this job file puts in force."""
    qualified = f"{name}.{stream}"
    spans = await system.offsets(stream)
    oldest = ",".join(str(spans[p].oldest) for p in sorted(spans))
    newest = ",".join(str(spans[p].end - 1) if spans[p].end > spans[p].oldest else "-"
                      for p in sorted(spans))
    size = (str(sum((await system.partition_bytes(stream)).values()))
            if isinstance(system, LocalSystem) else "-")
    declared = config.streams.get(qualified)
    if declared is not None and declared.compacted:
        retention = "compacted"
    elif declared is not None and isinstance(system, LocalSystem):
        retention = retention_policy(config, declared).describe()
    elif isinstance(system, LocalSystem):
        retention = "-"  # not in this job file: whatever the job files declaring it say
    else:
        retention = "broker"
    return qualified, str(count), oldest, newest, size, retention


def _produce(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = _split(config, args.stream)
    declared = config.stream(args.stream)
    key_serde = get_serde(declared.key_serde, search_path=config.root)
    value_serde = get_serde(declared.value_serde, search_path=config.root)
    example = '{"key": "k", "value": {...}}'

    def encode(line_no: int, line: str) -> ProducerRecord:
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ConfigError(f"stdin line {line_no}: not JSON ({error}); write one object "
                              f"per line like {example}") from None
        if not isinstance(item, dict):
            raise ConfigError(f"stdin line {line_no}: got a JSON {type(item).__name__}; write "
                              f"one object per line like {example}")
        unknown = sorted(set(item) - {"key", "value", "partition", "timestamp"})
        if "value" not in item:
            raise ConfigError(
                f"stdin line {line_no}: no \"value\" field (found {sorted(item)}); write "
                f'{example}, or "value": null for a tombstone (a delete)')
        if unknown:
            raise ConfigError(f"stdin line {line_no}: unknown field(s) {unknown}; a line has "
                              f'"key", "value" and optionally "partition" and "timestamp"')
        key, value, partition = item.get("key"), item["value"], item.get("partition")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise ConfigError(f"stdin line {line_no}: \"partition\" must be an integer ≥ 0, "
                              f"got {partition!r}")
        timestamp = item.get("timestamp")
        if timestamp is not None and (type(timestamp) is not int or timestamp < 0):
            raise ConfigError(f"stdin line {line_no}: \"timestamp\" must be the record's time "
                              f"in milliseconds since the epoch, an integer ≥ 0, got "
                              f"{timestamp!r}")
        try:
            return ProducerRecord(
                stream, None if key is None else key_serde.to_bytes(key),
                None if value is None else value_serde.to_bytes(value), partition=partition,
                timestamp=timestamp)
        except Exception as error:
            raise SerdeError(f"stdin line {line_no}: cannot encode for {args.stream} "
                             f"({declared.key_serde}/{declared.value_serde}): {error}") from None

    # Every line is checked before anything is written: a bad line writes nothing.
    records = [encode(line_no, line) for line_no, line in enumerate(sys.stdin, 1)
               if line.strip()]

    async def go() -> int:
        system = await _with_system(config, system_name)
        written = 0
        try:
            if stream not in await system.list_streams():
                if declared.partitions is None:
                    raise _missing(config, args.stream)
                await system.create_stream(stream, declared.partitions,
                                           compacted=declared.compacted, exist_ok=True)
                print(f"created {args.stream} with {counted(declared.partitions, 'partition')}, as "
                      f"{config.path.name} declares", file=sys.stderr)
            if system.atomic_commit:  # the local log: one transaction, all or nothing
                return len(await system.produce(records))
            for start in range(0, len(records), PRODUCE_BATCH):
                written += len(await system.produce(records[start:start + PRODUCE_BATCH]))
            return written
        except SampanError as error:
            if written:
                raise SampanError(
                    f"{error}; {written} of {len(records)} records (the first {written} "
                    f"lines with a record) were written before the failure, the rest were "
                    f"not") from None
            raise
        finally:
            await system.close()

    total = asyncio.run(go())
    print(f"produced {total} record{'' if total == 1 else 's'} to {args.stream}",
          file=sys.stderr)
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return value


def _raw_text(data: bytes | None) -> str | None:
    """Stored bytes for people: UTF-8 text when they are, else ``base64:…``."""
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _plain(value: Any) -> str:
    """A decoded key or value in a tab-separated line: text as is, the rest as JSON."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return _raw_text(bytes(value)) or ""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


async def _records(system: System, stream: str, from_beginning: bool, until_end: bool
                   ) -> AsyncIterator[tuple[int, int, bytes | None, bytes | None]]:
    ranges = await system.offsets(stream)
    start = {p: (r.oldest if from_beginning else r.end) for p, r in ranges.items()}
    ends = {p: r.end for p, r in ranges.items()}
    consumer = system.consumer()
    consumer.assign({SystemStreamPartition(system.name, stream, p): o for p, o in start.items()})
    position = dict(start)
    try:
        while True:
            if until_end and all(position[p] >= ends[p] for p in ends):
                return
            for ssp, records in (await consumer.fetch(1000, timeout_ms=200)).items():
                for record in records:
                    if until_end and record.offset >= ends[ssp.partition]:
                        continue
                    position[ssp.partition] = record.offset + 1
                    yield ssp.partition, record.offset, record.key, record.value
            if until_end:
                current = await system.offsets(stream)
                for p in ends:  # compaction may leave the last offsets empty
                    if position[p] < ends[p] and current[p].end <= position[p]:
                        position[p] = ends[p]
    finally:
        await consumer.close()


def _reset_offsets(args: argparse.Namespace) -> int:
    from framework.commands.offsets import describe, reset_offsets

    config = load_config(args.job)
    _split(config, args.stream)
    changes = asyncio.run(reset_offsets(config, args.stream, args.to))
    print(describe(changes))
    where = "earliest" if args.to.kind == "oldest" else args.to.describe()
    print(f"reset {len(changes)} partition{'' if len(changes) == 1 else 's'} of {args.stream} "
          f"to {where}; start the job with `sampan run {config.path}`")
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
    _split(config, args.stream)
    print(asyncio.run(discard_held(config, args.stream)).text(str(config.path)))
    return 0


def _tail(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = _split(config, args.stream)
    declared = config.stream(args.stream)
    key_serde = get_serde(declared.key_serde, search_path=config.root)
    value_serde = get_serde(declared.value_serde, search_path=config.root)

    def show(partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        if args.raw:
            k: Any = _raw_text(key)
            v: Any = _raw_text(value)
        else:
            try:
                k = None if key is None else key_serde.from_bytes(key)
                v = None if value is None else value_serde.from_bytes(value)
            except Exception as error:
                print(f"{args.stream} partition {partition} offset {offset}: cannot decode "
                      f"with {declared.key_serde}/{declared.value_serde} ({error}); shown as "
                      f"stored bytes (see it with --raw)", file=sys.stderr, flush=True)
                k, v = _raw_text(key), _raw_text(value)
        if args.json:
            print(json.dumps({"partition": partition, "offset": offset, "key": _jsonable(k),
                              "value": _jsonable(v)}, ensure_ascii=False), flush=True)
        else:
            print(f"{partition}\t{offset}\t{_plain(k)}\t{_plain(v)}", flush=True)

    async def go() -> None:
        system = await _with_system(config, system_name)
        try:
            if stream not in await system.list_streams():
                raise _missing(config, args.stream)
            async for partition, offset, key, value in _records(
                    system, stream, args.from_beginning, args.until_end):
                show(partition, offset, key, value)
        finally:
            await system.close()

    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        asyncio.run(go())
    return 0
