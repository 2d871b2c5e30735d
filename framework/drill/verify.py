"""Reading a drill's streams back for checking: every record of every partition, in order."""

from __future__ import annotations

from framework.systems.base import System
from framework.systems.reading import read_range
from groupers import SystemStreamPartition

__all__ = ["read_stream"]


async def read_stream(system: System, stream: str) -> dict[int, list[tuple[bytes, bytes]]]:
    """Every (key, value) of every partition of ``stream`` in offset order (no tombstones)."""
    records: dict[int, list[tuple[bytes, bytes]]] = {}
    for partition, offsets in sorted((await system.offsets(stream)).items()):
        rows: list[tuple[bytes, bytes]] = []
        ssp = SystemStreamPartition(system.name, stream, partition)
        async for batch in read_range(system, ssp, offsets.oldest, offsets.end):
            rows.extend((r.key or b"", r.value) for r in batch if r.value is not None)
        records[partition] = rows
    return records
