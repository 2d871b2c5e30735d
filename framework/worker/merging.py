"""After an expansion barrier: a task's new partitions wait, in record time, for the old
partitions their keys came from.

The barrier (`framework.metadata.jobmodel.BarrierStage`) covers the records produced
before the job detected the growth. A producer that learns of the new count later still
writes a key to its old partition for a while, then to its new one; read side by side,
the key's records in the new partition would overtake its last ones in the old. So for
``expansion_merge_ms`` of record time after a task passes its barrier, a record of a new
partition is processed only once each old partition of its stream in that task was read
past the record's timestamp — or was seen read to its end after that time. Records that
must wait are kept in memory in offset order (the consumer goes on past them; positions
and checkpoints stay before them); past ``cap`` of them the new partition stops being
fetched until they drain. Kafka Streams orders a task's partitions by timestamp the
same way; here it applies only where an expansion made it necessary.
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
    """One new partition's merge: its task, the old partitions it waits for, and the record
    time (ms) from which on those are past every stale producer."""

    task: str
    sources: frozenset[SystemStreamPartition]
    until_ms: int


class Merging:
    """The new partitions of tasks that passed a barrier less than ``window_ms`` of record
    time ago, and the records of theirs waiting for the old partitions."""

    def __init__(self, window_ms: int, cap: int) -> None:
        self.window_ms = window_ms
        self.cap = cap
        self.merges: dict[SystemStreamPartition, _Merge] = {}
        self.pending: dict[SystemStreamPartition, FetchedColumns] = {}
        """New partition → its fetched records not processed yet, in offset order."""
        self.paused: set[SystemStreamPartition] = set()
        """New partitions not fetched meanwhile: ``cap`` records of theirs wait."""
        self.read_ts: dict[SystemStreamPartition, int] = {}
        """Old partition → the timestamp of the last record processed from it."""
        self.empty_at: dict[SystemStreamPartition, int] = {}
        """Old partition → the latest wall time (ms) at which a fetch found nothing in it."""
        self.sources: frozenset[SystemStreamPartition] = frozenset()
        self.reroute = False
        """Whether a partition was paused or resumed: the consumers need assigning again."""

    def start(self, task: str, stage: BarrierStage, now_ms: int) -> None:
        """``task`` passed ``stage``: merge its new partitions with the old ones of their
        stream, from now on for ``window_ms`` of record time."""
        if self.window_ms <= 0:
            return
        until = now_ms + self.window_ms
        for ssp in sorted(stage.held):
            sources = frozenset(s for s in stage.barrier
                                if (s.system, s.stream) == (ssp.system, ssp.stream))
            if sources:
                self.merges[ssp] = _Merge(task, sources, until)
        self._sources_changed()
        log.info("task %s reads its %s in record-time order with the older ones for the "
                 "next %d s of record time (expansion_merge_ms)", task,
                 counted(len(stage.held), "new partition"), self.window_ms // 1000)

    def forget(self, ssps: frozenset[SystemStreamPartition] | set[SystemStreamPartition]
               ) -> None:
        """Partitions no longer read here (their task left): drop their merges and records."""
        for ssp in ssps:
            self.merges.pop(ssp, None)
            self.pending.pop(ssp, None)
            self.paused.discard(ssp)
            self.read_ts.pop(ssp, None)
            self.empty_at.pop(ssp, None)
        self._sources_changed()

    def fetch_from(self, ssp: SystemStreamPartition, position: int) -> int:
        """Where the consumer reads ``ssp`` from: past the records of it already waiting."""
        waiting = self.pending.get(ssp)
        return waiting.offsets[-1] + 1 if waiting else position

    def observed(self, assigned: Sequence[SystemStreamPartition],
                 batch: Mapping[SystemStreamPartition, Sequence[FetchedRecord]],
                 full: bool, issued_ms: int) -> None:
        """A fetch issued at ``issued_ms`` (wall time) brought ``batch``: an assigned old
        partition it did not fill (and that nothing waits in) had no record produced
        before then left unread. A full fetch (``max_records``) tells nothing of that."""
        if full:
            return
        for ssp in assigned:
            if ssp in self.sources and ssp not in batch and not self.pending.get(ssp) and (
                    issued_ms > self.empty_at.get(ssp, NEVER)):
                self.empty_at[ssp] = issued_ms

    def processed(self, ssp: SystemStreamPartition, records: Sequence[FetchedRecord]) -> None:
        """``records`` of the old partition ``ssp`` were processed."""
        if records:
            last = (records.timestamps[-1] if type(records) is FetchedColumns
                    else records[-1].timestamp)
            self.read_ts[ssp] = last

    def hold(self, ssp: SystemStreamPartition, records: Sequence[FetchedRecord],
             position: int) -> None:
        """Keep the fetched ``records`` of the new partition ``ssp`` (those not yet kept
        nor processed: a consumer assigned again reads some twice) until `ready`."""
        if ssp in self.paused:
            return  # fetched before the pause took effect: read again once resumed
        waiting = self.pending.get(ssp)
        after = waiting.offsets[-1] + 1 if waiting else position
        columns = _columns(records, after)
        if not columns:
            return
        if waiting is None:
            self.pending[ssp] = columns
        else:
            waiting.extend(columns.offsets, columns.keys, columns.values,
                           columns.timestamps, columns.headers)
        if len(self.pending[ssp]) >= self.cap:
            self.paused.add(ssp)
            self.reroute = True

    def bound(self, ssp: SystemStreamPartition) -> int:
        """The record time up to which ``ssp`` (an old partition) is known to be read."""
        read = self.read_ts.get(ssp, NEVER)
        if self.pending.get(ssp) or ssp in self.paused:
            return read  # a new partition itself, with records still waiting
        return max(read, self.empty_at.get(ssp, NEVER))

    def ready(self) -> Iterator[tuple[SystemStreamPartition, FetchedColumns]]:
        """The waiting records each old partition was read far enough for, taken out (the
        caller processes each before asking for more: an old partition may itself be a new
        one of an earlier expansion); merges past their window end once drained."""
        progressed = True
        while progressed:
            progressed = False
            for ssp in list(self.pending):
                merge = self.merges.get(ssp)
                waiting = self.pending[ssp]
                bound = (min(self.bound(s) for s in merge.sources) if merge is not None
                         else None)
                cut = len(waiting) if bound is None else _first_after(waiting.timestamps,
                                                                      bound)
                if not cut:
                    continue
                progressed = True
                yield ssp, _take(waiting, cut)
                if not waiting:
                    del self.pending[ssp]
                    if ssp in self.paused:
                        self.paused.discard(ssp)
                        self.reroute = True
        self._end_merges()

    def _end_merges(self) -> None:
        """Drop the merges whose old partitions were read past their window's end."""
        ended = [ssp for ssp, merge in self.merges.items()
                 if not self.pending.get(ssp) and ssp not in self.paused
                 and min(self.bound(s) for s in merge.sources) >= merge.until_ms]
        if not ended:
            return
        for task in sorted({self.merges[s].task for s in ended}):
            log.info("task %s reads its new partitions as they come again (the older ones "
                     "were read past expansion_merge_ms)", task)
        for ssp in ended:
            del self.merges[ssp]
        self._sources_changed()

    def _sources_changed(self) -> None:
        self.sources = frozenset(s for m in self.merges.values() for s in m.sources)
        for ssp in [s for s in self.read_ts if s not in self.sources]:
            del self.read_ts[ssp]
        for ssp in [s for s in self.empty_at if s not in self.sources]:
            del self.empty_at[ssp]


def _first_after(timestamps: list[int], bound: int) -> int:
    """The index of the first timestamp past ``bound`` (their count when none is)."""
    for index, timestamp in enumerate(timestamps):
        if timestamp > bound:
            return index
    return len(timestamps)


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
