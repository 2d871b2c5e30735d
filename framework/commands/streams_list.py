"""`sampan streams list [--all]`: every stream of the job's systems, one tab-separated row
each; sampan's own streams (`framework.commands.internal_streams`) only with ``--all``,
marked with what they are."""

from __future__ import annotations

import argparse
import asyncio
import sys

from framework.commands.internal_streams import internal_role
from framework.commands.stream_ref import started_system
from framework.config import JobConfig, load_config
from framework.coordinator.retention import retention_policy
from framework.systems.base import HidesStreams, System
from framework.systems.local.system import LocalSystem
from framework.wording import counted

__all__ = ["COLUMNS", "list_streams"]

COLUMNS = ("STREAM", "PARTITIONS", "OLDEST", "NEWEST", "BYTES", "RETENTION")


def list_streams(args: argparse.Namespace) -> int:
    config = load_config(args.job)

    async def go() -> tuple[list[tuple[str, ...]], int]:
        rows, hidden = [], 0
        for name in sorted(config.systems):
            system = await started_system(config, name)
            try:
                streams = await system.list_streams()
                if isinstance(system, HidesStreams):
                    streams.update(await system.hidden_streams())
                for stream, count in sorted(streams.items()):
                    role = internal_role(config, name, stream)
                    if role is not None and not args.all:
                        hidden += 1
                        continue
                    row = await _stream_row(config, system, name, stream, count)
                    rows.append((*row, role or "-") if args.all else row)
            finally:
                await system.close()
        return rows, hidden

    rows, hidden = asyncio.run(go())
    print("\t".join((*COLUMNS, "INTERNAL") if args.all else COLUMNS))
    for row in rows:
        print("\t".join(row))
    if hidden:
        print(f"({counted(hidden, 'internal stream')} of sampan not shown: coordinator "
              f"streams, checkpoints, fences, changelogs; --all lists them)", file=sys.stderr)
    return 0


async def _stream_row(config: JobConfig, system: System, name: str, stream: str,
                      count: int) -> tuple[str, ...]:
    """One row: per partition (comma-separated) the oldest retained offset and the
    newest record's offset ("-": empty), payload bytes on disk (local log), and the
    retention this job file puts in force."""
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
