"""One offsets read per stream for a worker's start, shared by all its tasks.

Each task opening at a start asks for the offsets of its changelog (the restore end) and
of its inputs (where reading starts, and whether a checkpoint lies past the end). On
Kafka one such read is several round trips (ListOffsets twice, a fetch of the last batch
for the committed end, metadata for the reassignments), so a worker of n tasks paid n
times for what one read answers: nothing this worker writes lands in those partitions
before its tasks run, and an input's end only grows.
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.systems.base import OffsetRange, System

__all__ = ["StartOffsets"]


class StartOffsets:
    """`System.offsets` of each (system, stream), read once while a worker starts."""

    def __init__(self, systems: Mapping[str, System]) -> None:
        self._systems = systems
        self._read: dict[tuple[str, str], Mapping[int, OffsetRange]] = {}

    async def offsets(self, system: str, stream: str) -> Mapping[int, OffsetRange]:
        """``stream``'s offset ranges per partition on ``system``: the first answer for
        the pair (a read that failed is asked again)."""
        found = self._read.get((system, stream))
        if found is None:
            found = self._read[system, stream] = await self._systems[system].offsets(stream)
        return found
