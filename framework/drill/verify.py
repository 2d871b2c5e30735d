"""Reading a drill's streams back for checking: every record of every partition, in order."""

from __future__ import annotations

import json
from typing import Any

from framework.config import JobConfig
from framework.systems.base import System
from framework.systems.reading import final_offsets, read_range
from groupers import SystemStreamPartition

__all__ = ["read_stream", "store_state"]


async def read_stream(system: System, stream: str) -> dict[int, list[tuple[bytes, bytes]]]:
    """Every (key, value) of every partition of ``stream`` in offset order (no tombstones)."""
    records: dict[int, list[tuple[bytes, bytes]]] = {}
    for partition, offsets in sorted((await final_offsets(system, stream)).items()):
        rows: list[tuple[bytes, bytes]] = []
        ssp = SystemStreamPartition(system.name, stream, partition)
        async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
            rows.extend((r.key or b"", r.value) for r in batch if r.value is not None)
        records[partition] = rows
    return records


async def store_state(system: System, config: JobConfig, store: str, *, settled: bool = True
                      ) -> dict[int, dict[str, Any]]:
    """Each changelog partition's (each task's) final contents of ``store`` (JSON values),
    replayed from its changelog."""
    changelog = config.changelog_ref(store).stream
    state: dict[int, dict[str, Any]] = {}
    ends = await (final_offsets(system, changelog) if settled else system.offsets(changelog))
    for partition, offsets in sorted(ends.items()):
        contents = state.setdefault(partition, {})
        ssp = SystemStreamPartition(system.name, changelog, partition)
        async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
            for record in batch:
                key = (record.key or b"").decode()
                if record.value is None:
                    contents.pop(key, None)
                else:
                    contents[key] = json.loads(record.value)
    return state
