"""After an expansion barrier: a task's new partitions wait for the old partitions their
keys came from.

The barrier (`framework.metadata.jobmodel.BarrierStage`) covers the records produced
before the job detected the growth. A producer that learns of the new count later still
writes a key to its old partition for a while, then to its new one; read side by side,
the key's records in the new partition would overtake its last ones in the old. So for
``expansion_merge_ms`` after a task passes its barrier (and until its old partitions were
read to their end after that), a record of a new partition is processed only once each
old partition of its stream in that task was either read past the record's timestamp
(it has a backlog: follow it in record time) or found read to its end by a fetch issued
after the one that brought the record (whatever an in-order producer wrote there before
it is read). Records that must wait are kept in memory in offset order (the consumer goes
on past them; positions and checkpoints stay before them); past ``cap`` of them the new
partition stops being fetched until they drain.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from framework.metadata.jobmodel import BarrierStage
from framework.systems.base import FetchedRecord, Headers
from framework.systems.fetched import FetchedColumns
from framework.wording import counted
from groupers import SystemStreamPartition

__all__ = ["Merging"]

log = logging.getLogger(__name__)

NEVER = -(1 << 62)
"""A bound below every timestamp: nothing of the source is known to be read yet."""


@dataclass(frozen=True, slots=True)
class _Merge:
    """One new partition's merge: its task, the old partitions it waits for, and the wall
    time (ms) after which no producer is expected to write to those any more."""

    task: str
    sources: frozenset[SystemStreamPartition]
    until_ms: int


class Merging:
    """The new partitions of tasks that passed a barrier less than ``window_ms`` ago, and the
    records of theirs waiting for the old partitions."""

    def __init__(self, window_ms: int, cap: int) -> None:
        self.window_ms = window_ms
        self.cap = cap
        self.merges: dict[SystemStreamPartition, _Merge] = {}
        self.pending: dict[SystemStreamPartition, FetchedColumns] = {}
        """New partition → its fetched records not processed yet, in offset order."""
        self.fetched_by: dict[SystemStreamPartition, list[int]] = {}
        """New partition → the fetch (`ticket`) that brought each record in ``pending``."""
        self.paused: set[SystemStreamPartition] = set()
        """New partitions not fetched meanwhile: ``cap`` records of theirs wait."""
        self.read_ts: dict[SystemStreamPartition, int] = {}
        """Old partition → the timestamp of the last record processed from it."""
        self.empty: dict[SystemStreamPartition, tuple[int, int]] = {}
        """Old partition → (fetch number, wall ms when issued) of the latest fetch that found
        it read to its end."""
        self.fetches = 0
        self.sources: frozenset[SystemStreamPartition] = frozenset()
        self.reroute = False
        """Whether a partition was paused or resumed: the consumers need assigning again."""

    def ticket(self, now_ms: int) -> tuple[int, int]:
        """A fetch about to be issued: its number (issue order) and wall time."""
        self.fetches += 1
        return self.fetches, now_ms

    def start(self, task: str, stage: BarrierStage, now_ms: int, *,
              resumed: bool = False) -> None:
        """``task`` passed ``stage``: merge its new partitions with the old ones of their
        stream, from now on for ``window_ms``; ``resumed``: the stage was passed before
        this worker started the task (`TaskModel.merging`), the window counts from when
        the stage was added (whatever is left of it; the merge ends once the old
        partitions are found read to their end after it)."""
        if self.window_ms <= 0:
            return
        until = (stage.at_ms if resumed else now_ms) + self.window_ms
        for ssp in sorted(stage.held):
            sources = frozenset(s for s in stage.barrier
                                if (s.system, s.stream) == (ssp.system, ssp.stream))
            if sources:
                self.merges[ssp] = _Merge(task, sources, until)
        self._sources_changed()
        log.info("task %s reads its %s in record-time order with the older ones for the "
                 "next %d s (expansion_merge_ms%s)", task,
                 counted(len(stage.held), "new partition"), max(0, until - now_ms) // 1000,
                 "; its barrier was passed before this worker started it" if resumed else "")

    def forget(self, ssps: frozenset[SystemStreamPartition] | set[SystemStreamPartition]
               ) -> None:
        """Partitions no longer read here (their task left): drop their merges and records."""
        for ssp in ssps:
            self.merges.pop(ssp, None)
            self.pending.pop(ssp, None)
            self.fetched_by.pop(ssp, None)
            self.paused.discard(ssp)
        self._sources_changed()

    def waiting_by_task(self) -> dict[str, int]:
        """Task → its records waiting (metrics: read on the scrape thread, so copied)."""
        waiting: dict[str, int] = {}
        for ssp, merge in list(self.merges.items()):
            records = self.pending.get(ssp)
            waiting[merge.task] = waiting.get(merge.task, 0) + (len(records) if records else 0)
        return waiting

    def fetch_from(self, ssp: SystemStreamPartition, position: int) -> int:
        """Where the consumer reads ``ssp`` from: past the records of it already waiting."""
        waiting = self.pending.get(ssp)
        return waiting.offsets[-1] + 1 if waiting else position

    def observed(self, assigned: Sequence[SystemStreamPartition],
                 batch: Mapping[SystemStreamPartition, Sequence[FetchedRecord]],
                 full: bool, ticket: tuple[int, int]) -> None:
        """The fetch of ``ticket`` brought ``batch``: an assigned old partition it did not
        fill (and that nothing waits in) was read to its end when it was issued. A full
        fetch (``max_records``) tells nothing of that; nor does any fetch of a consumer
        that fetches ahead (Kafka: the caller asks `EndsReader.read_to_end` instead)."""
        if not full:
            self.read_to_end({s for s in assigned if s not in batch}, ticket)

    def read_to_end(self, ssps: set[SystemStreamPartition], ticket: tuple[int, int]) -> None:
        """The old partitions ``ssps`` were found read to their end when ``ticket`` was
        issued (`framework.systems.base.EndsReader`: where a fetch cannot say it)."""
        for ssp in ssps:
            if ssp in self.sources and not self.pending.get(ssp) and (
                    ticket > self.empty.get(ssp, (0, 0))):
                self.empty[ssp] = ticket

    def processed(self, ssp: SystemStreamPartition, records: Sequence[FetchedRecord]) -> None:
        """``records`` of the old partition ``ssp`` were processed."""
        if records:
            last = (records.timestamps[-1] if type(records) is FetchedColumns
                    else records[-1].timestamp)
            self.read_ts[ssp] = last

    def hold(self, ssp: SystemStreamPartition, records: Sequence[FetchedRecord],
             position: int, fetch: int) -> None:
        """Keep the ``records`` of the new partition ``ssp`` that the fetch numbered
        ``fetch`` brought (those not yet kept nor processed: a consumer assigned again
        reads some twice) until `ready`."""
        if ssp in self.paused:
            return  # fetched before the pause took effect: read again once resumed
        waiting = self.pending.get(ssp)
        after = waiting.offsets[-1] + 1 if waiting else position
        columns = _columns(records, after)
        if not columns:
            return
        if waiting is None:
            waiting = self.pending[ssp] = columns
            self.fetched_by[ssp] = [fetch] * len(columns)
        else:
            waiting.extend(columns.offsets, columns.keys, columns.values,
                           columns.timestamps, columns.headers)
            self.fetched_by[ssp] += [fetch] * len(columns)
        if len(waiting) >= self.cap:
            self.paused.add(ssp)
            self.reroute = True

    def ready(self) -> Iterator[tuple[SystemStreamPartition, FetchedColumns]]:
        """The waiting records their old partitions were read far enough for, taken out
        (the caller processes each before asking for more: an old partition may itself be
        a new one of an earlier expansion); merges past their window end once drained."""
        progressed = True
        while progressed:
            progressed = False
            for ssp in list(self.pending):
                waiting = self.pending[ssp]
                cut = self._releasable(ssp, waiting)
                if not cut:
                    continue
                progressed = True
                del self.fetched_by[ssp][:cut]
                yield ssp, _take(waiting, cut)
                if not waiting:
                    del self.pending[ssp], self.fetched_by[ssp]
                    if ssp in self.paused:
                        self.paused.discard(ssp)
                        self.reroute = True
        self._end_merges()

    def _releasable(self, ssp: SystemStreamPartition, waiting: FetchedColumns) -> int:
        """How many of the first records of ``waiting`` every old partition allows: one
        read past the record's time, or found read to its end by a later fetch."""
        merge = self.merges.get(ssp)
        if merge is None:
            return len(waiting)
        limits = [(self.empty.get(s, (0, 0))[0], self.read_ts.get(s, NEVER))
                  for s in merge.sources]
        count = 0
        for fetch, timestamp in zip(self.fetched_by[ssp], waiting.timestamps, strict=True):
            for emptied_by, read_to in limits:
                if fetch >= emptied_by and timestamp >= read_to:
                    return count  # equal: a record of that millisecond may be unread
            count += 1
        return count

    def _end_merges(self) -> None:
        """Drop the merges whose old partitions were found read to their end after their
        window's end (nothing of theirs waits)."""
        ended = [ssp for ssp, merge in self.merges.items()
                 if not self.pending.get(ssp) and ssp not in self.paused
                 and all(self.empty.get(s, (0, 0))[1] >= merge.until_ms
                         for s in merge.sources)]
        if not ended:
            return
        for task in sorted({self.merges[s].task for s in ended}):
            log.info("task %s reads its new partitions as they come again (the older ones "
                     "were read to their end after expansion_merge_ms)", task)
        for ssp in ended:
            del self.merges[ssp]
        self._sources_changed()

    def _sources_changed(self) -> None:
        self.sources = frozenset(s for m in self.merges.values() for s in m.sources)
        for ssp in [s for s in self.read_ts if s not in self.sources]:
            del self.read_ts[ssp]
        for ssp in [s for s in self.empty if s not in self.sources]:
            del self.empty[ssp]


def _take(columns: FetchedColumns, count: int) -> FetchedColumns:
    """The first ``count`` records of ``columns``, cut off it."""
    taken = FetchedColumns()
    taken.extend(columns.offsets[:count], columns.keys[:count], columns.values[:count],
                 columns.timestamps[:count], columns.headers[:count])
    for column in (columns.offsets, columns.keys, columns.values, columns.timestamps,
                   columns.headers):
        del cast(list[Any], column)[:count]
    return taken


def _columns(records: Sequence[FetchedRecord], after: int) -> FetchedColumns:
    """The records of ``records`` from offset ``after`` on, as columns."""
    columns = FetchedColumns()
    if type(records) is FetchedColumns:
        start = next((i for i, o in enumerate(records.offsets) if o >= after), len(records))
        columns.extend(records.offsets[start:], records.keys[start:], records.values[start:],
                       records.timestamps[start:], records.headers[start:])
        return columns
    kept = [r for r in records if r.offset >= after]
    columns.extend([r.offset for r in kept], [r.key for r in kept], [r.value for r in kept],
                   [r.timestamp for r in kept],
                   [cast(Headers, tuple(r.headers)) for r in kept])
    return columns
