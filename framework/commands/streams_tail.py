"""`sampan streams tail SYSTEM.STREAM`: a stream's records, one per line — partition,
offset, key and value (tab-separated, or JSON), decoded with the stream's serdes or shown
as stored bytes (``--raw``)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from framework.commands.stream_ref import missing_stream, split_stream, started_system
from framework.config import load_config
from framework.config.serdes import get_serde
from framework.systems.base import System
from groupers import SystemStreamPartition

__all__ = ["tail"]


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




def tail(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = split_stream(config, args.stream)
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
        system = await started_system(config, system_name)
        try:
            existing = await system.list_streams()
            if stream not in existing:
                raise missing_stream(config, args.stream, existing)
            async for partition, offset, key, value in _records(
                    system, stream, args.from_beginning, args.until_end):
                show(partition, offset, key, value)
        finally:
            await system.close()

    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        asyncio.run(go())
    return 0
