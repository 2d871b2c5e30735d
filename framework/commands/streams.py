"""`sampan streams create|expand|list|produce|tail`: manage and inspect a job's streams."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from framework.config import JobConfig, load_config
from framework.errors import ConfigError, SerdeError
from framework.serdes import get_serde
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from groupers import SystemStreamPartition

__all__ = ["add_streams_command"]

PRODUCE_BATCH = 1000


def add_streams_command(commands: Any) -> None:
    parser = commands.add_parser("streams", help="create, expand, list, produce to, tail streams",
                                 description="Manage the streams of a job's systems.")
    sub = parser.add_subparsers(dest="streams_command", required=True, metavar="ACTION")

    def job_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--job", required=True, help="the job file naming the stream's system")

    for name, text in (("create", "create a stream"), ("expand", "grow a stream's partitions")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("stream", metavar="SYSTEM.STREAM")
        p.add_argument("--partitions", type=int, required=True, metavar="N")
        if name == "create":
            p.add_argument("--compacted", action="store_true", help="keep the latest per key")
        job_arg(p)
        p.set_defaults(handler=_create if name == "create" else _expand)
    p = sub.add_parser("list", help="list streams and partition counts")
    job_arg(p)
    p.set_defaults(handler=_list)
    p = sub.add_parser("produce", help='write JSON lines {"key": ..., "value": ...} from stdin')
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    p.set_defaults(handler=_produce)
    p = sub.add_parser("tail", help="print records as JSON lines")
    p.add_argument("stream", metavar="SYSTEM.STREAM")
    job_arg(p)
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest record")
    p.add_argument("--until-end", action="store_true", help="exit at the current end")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per line: {"partition", "offset", "key", "value"}')
    p.set_defaults(handler=_tail)


def _split(config: JobConfig, qualified: str) -> tuple[str, str]:
    system, dot, stream = qualified.partition(".")
    if not dot or not stream:
        raise ConfigError(f"{qualified!r}: expected SYSTEM.STREAM, e.g. local.events")
    config.system(system)  # raises naming the declared systems
    return system, stream


async def _with_system(config: JobConfig, system_name: str) -> System:
    system = open_system(config.system(system_name))
    await system.start()
    return system


def _create(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = _split(config, args.stream)

    async def go() -> None:
        system = await _with_system(config, system_name)
        try:
            await system.create_stream(stream, args.partitions, compacted=args.compacted)
        finally:
            await system.close()

    asyncio.run(go())
    print(f"created {args.stream} with {args.partitions} partitions")
    return 0


def _expand(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = _split(config, args.stream)

    async def go() -> int:
        system = await _with_system(config, system_name)
        try:
            before = (await system.partition_counts([stream]))[stream]
            await system.expand_stream(stream, args.partitions)
            return before
        finally:
            await system.close()

    before = asyncio.run(go())
    print(f"expanded {args.stream} from {before} to {args.partitions} partitions")
    return 0


def _list(args: argparse.Namespace) -> int:
    config = load_config(args.job)

    async def go() -> list[tuple[str, int]]:
        rows = []
        for name in sorted(config.systems):
            system = await _with_system(config, name)
            try:
                rows += [(f"{name}.{s}", n) for s, n in sorted((await system.list_streams())
                                                                .items())]
            finally:
                await system.close()
        return rows

    for qualified, count in asyncio.run(go()):
        print(f"{qualified}\t{count}")
    return 0


def _produce(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = _split(config, args.stream)
    declared = config.stream(args.stream)
    key_serde, value_serde = get_serde(declared.key_serde), get_serde(declared.value_serde)

    def encode(line_no: int, line: str) -> ProducerRecord:
        try:
            item = json.loads(line)
            key, value = item.get("key"), item.get("value")
        except (json.JSONDecodeError, AttributeError) as error:
            raise ConfigError(f"stdin line {line_no}: expected a JSON object like "
                              f'{{"key": "k", "value": {{...}}}}: {error}') from None
        try:
            return ProducerRecord(
                stream, None if key is None else key_serde.to_bytes(key),
                None if value is None else value_serde.to_bytes(value))
        except Exception as error:
            raise SerdeError(f"stdin line {line_no}: cannot encode for {args.stream} "
                             f"({declared.key_serde}/{declared.value_serde}): {error}") from None

    async def go() -> int:
        system = await _with_system(config, system_name)
        total = 0
        try:
            batch: list[ProducerRecord] = []
            for line_no, line in enumerate(sys.stdin, 1):
                if line.strip():
                    batch.append(encode(line_no, line))
                if len(batch) >= PRODUCE_BATCH:
                    total += len(await system.produce(batch))
                    batch = []
            if batch:
                total += len(await system.produce(batch))
        finally:
            await system.close()
        return total

    total = asyncio.run(go())
    print(f"produced {total} records to {args.stream}", file=sys.stderr)
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return value


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


def _tail(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = _split(config, args.stream)
    declared = config.stream(args.stream)
    key_serde, value_serde = get_serde(declared.key_serde), get_serde(declared.value_serde)

    async def go() -> None:
        system = await _with_system(config, system_name)
        try:
            async for partition, offset, key, value in _records(
                    system, stream, args.from_beginning, args.until_end):
                k = None if key is None else key_serde.from_bytes(key)
                v = None if value is None else value_serde.from_bytes(value)
                if args.json:
                    print(json.dumps({"partition": partition, "offset": offset,
                                      "key": _jsonable(k), "value": _jsonable(v)}), flush=True)
                else:
                    print(f"{partition}\t{offset}\t{k!r}\t{v!r}", flush=True)
        finally:
            await system.close()

    try:
        asyncio.run(go())
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    return 0
