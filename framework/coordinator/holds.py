"""Holding an input whose partition count the job's tasks cannot map.

A stream that grows to a count its tasks cannot map (a decrease, a count that is not a
multiple of its task count) is *held*: the job model keeps the stream's old count and a
`StreamHold` saying where its readers stop — where each partition ended when the stream
grew past the model's count (the local log records it), else where it was seen when the
change was detected (Kafka). A record written while the count was unmappable was placed
for a count no task owns, on every later count: so growing on to a multiple releases the
hold only when nothing was written under an unmappable count (checked per partition from
the local log's growth records; on Kafka, only when nothing was written past the hold).
Otherwise only the operator releases it, with the job stopped: `sampan rekey` (keeps those
records, read under the count they were written for) or `sampan streams discard-held`
(skips them).

A hold seen at detection (Kafka) is taken by running workers in place: one that had read
past it when it took the model stops where it was, so the job's reads of a held input
end at the hold or at its tasks' checkpoints, whichever is further (`read_positions`):
records past that are the ones past the hold.

`plan_holds` is pure: it asks the job's grouper which counts its tasks map
(`framework.coordinator.grouping.CountCheck`, no model is built). The model service
(`framework.coordinator.model_service`, behind the one-host coordinator and the group
leader of several) calls it through `framework.coordinator.decision.decide_partition_change`;
the remedies read the inputs (`input_now`) and call it directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from framework.config import JobConfig
from framework.coordinator.grouping import CountCheck
from framework.metadata.jobmodel import JobModel, StreamHold
from framework.systems.base import Checkpoint, GrowthRecorder, System
from framework.wording import counted

__all__ = ["Growth", "Held", "HoldPlan", "InputNow", "ReadPositions", "input_now",
           "plan_holds", "read_positions", "records_past", "stops_at"]

ReadPositions = Mapping[tuple[str, int], int]
"""(input ``system.stream``, partition) → the furthest position a checkpoint holds."""


def read_positions(checkpoints: Iterable[Checkpoint]) -> dict[tuple[str, int], int]:
    """Where the job's checkpoints say each input partition was read up to."""
    read: dict[tuple[str, int], int] = {}
    for checkpoint in checkpoints:
        for ssp, position in checkpoint.inputs.items():
            slot = (f"{ssp.system}.{ssp.stream}", ssp.partition)
            read[slot] = max(read.get(slot, 0), position)
    return read


def stops_at(stream: str, hold: StreamHold, read: ReadPositions) -> dict[int, int]:
    """Where the job's reads of held ``stream`` end, per partition: the hold, or further
    where a worker had read past it when it took the hold in place (Kafka)."""
    return {p: max(end, read.get((stream, p), 0)) for p, end in hold.ends.items()}


@dataclass(frozen=True)
class InputNow:
    """An input as its system shows it now: count and end offsets; ``grown`` maps each
    count it grew past to where each partition ended then (None: not recorded)."""

    count: int
    ends: Mapping[int, int]
    grown: Mapping[int, Mapping[int, int]] | None = None


async def input_now(system: System, stream: str) -> InputNow:
    """``stream`` as ``system`` shows it now; on the local log with every growth, in one
    snapshot."""
    if isinstance(system, GrowthRecorder):
        history = await system.growth_history(stream)
        return InputNow(history.count, history.ends, history.grown)
    count = (await system.partition_counts([stream]))[stream]
    return InputNow(count, {p: r.end for p, r in (await system.offsets(stream)).items()})


@dataclass(frozen=True)
class Growth:
    """One count a stream had after its model's count: the records written under it
    (None: not recorded) and why the job's tasks cannot map it (None: they can)."""

    count: int
    written: int | None
    error: str | None


@dataclass(frozen=True)
class Held:
    """Why an input is held, for the coordinator's log, `sampan status` and the remedies."""

    stream: str
    hold: StreamHold
    tasks: int
    """How many tasks read the stream."""
    growths: tuple[Growth, ...]
    """The counts after the hold's, oldest first; the last one is the count now."""
    past_hold: int
    """Records written past the hold so far."""

    @property
    def change(self) -> str:
        """``"local.events 2→3→4"``: the model's count and every count after it."""
        counts = [self.hold.count, *(g.count for g in self.growths)]
        if len(self.growths) == 1 and self.hold.refused not in counts:  # seen at detection
            counts.insert(1, self.hold.refused)
        return f"{self.stream} " + "→".join(map(str, counts))

    @property
    def unmappable_written(self) -> dict[int, int]:
        """Unmappable count → records written under it (counts known to have some)."""
        return {g.count: g.written for g in self.growths if g.error and g.written}

    @property
    def recorded(self) -> bool:
        """Whether the records written under each count are known (the local log's growth
        records, with no shrink since the hold)."""
        return self.hold.exact and all(g.written is not None for g in self.growths)

    @property
    def released_by_growth(self) -> bool:
        """Whether growing on to a count the tasks map would still release the hold."""
        if not self.recorded:
            return self.past_hold == 0
        return not self.unmappable_written

    def rekey_counts(self) -> tuple[int, tuple[int, ...]] | None:
        """(the count a re-keyed model reads the stream at, the task counts that keep every
        record past the hold exact and in order per key); None when no re-key can.

        The re-keyed model starts at the first count with records past the hold and grows
        to the count now as an ordinary expansion, whose barrier keeps per-key order only
        when the count now is a multiple of it: so at most two such counts.
        """
        now = self.growths[-1].count
        if self.recorded:
            counts = [g.count for g in self.growths if g.written]
        elif now == self.hold.refused:  # counts only grow, so all were written at this one
            counts = [now]
        else:
            return None
        counts = sorted({*counts, now})
        if len(counts) > 2 or counts[-1] % counts[0]:
            return None
        return counts[0], tuple(m for m in range(1, counts[0] + 1) if counts[0] % m == 0)

    def explain(self, job: Path) -> str:
        """The status and log text: what is held, why, and the remedies that are exact."""
        stream, count, now = self.stream, self.hold.count, self.growths[-1]
        discard = f"`sampan streams discard-held {stream} --job {job}`"
        reads = (f"the job reads {stream} only up to where it had {count} partitions, on "
                 f"every later count (its other inputs go on)")
        if now.error:
            lead = f"{now.error}. {stream} is held: {reads}"
            if self.released_by_growth:
                return (f"{lead}. Growing it on to a count {self.tasks} tasks map releases it "
                        f"while nothing is written to it at {now.count} partitions; once "
                        f"records are, stop the job and run {self._rekey(job)} or {discard}")
            return (f"{lead}. Records were written to it while its tasks could not map its "
                    f"count, so only the operator releases it: stop the job and run "
                    f"{self._rekey(job)} or {discard} (after growing it to a count "
                    f"{self.tasks} tasks map)")
        if self.recorded:
            written = ", ".join(f"{counted(n, 'record')} {'was' if n == 1 else 'were'} "
                                f"written while it had {k} partitions"
                                for k, n in sorted(self.unmappable_written.items()))
            why = (f"{written}, which {self.tasks} tasks cannot map (placed for that count, "
                   f"no task owns their keys)")
        else:
            why = (f"records were written past where the job stopped reading it when its "
                   f"change to {self.hold.refused} partitions was detected, and the system "
                   f"does not record under which count")
        return (f"{stream} is held at {count} partitions: {why}; {reads}. Stop the job once "
                f"it read that far and run {discard} (skips those records) or "
                f"{self._rekey(job)}")

    def _rekey(self, job: Path) -> str:
        found = self.rekey_counts()
        if found is None:
            return ("`sampan rekey` (not here: the records past the hold were written under "
                    "counts a re-key cannot keep in order per key)")
        return (f"`sampan rekey {job} --tasks M` (keeps them; M one of "
                f"{', '.join(map(str, found[1]))})")


@dataclass(frozen=True)
class HoldPlan:
    """The counts and holds of the next model, and why each held input is held."""

    counts: dict[str, int]
    holds: dict[str, StreamHold]
    held: dict[str, Held]

    def explain(self, job: Path) -> str:
        return " ".join(self.held[s].explain(job) for s in sorted(self.held))

    @property
    def change(self) -> str:
        return ", ".join(self.held[s].change for s in sorted(self.held))


def records_past(ends: Mapping[int, int], hold: Mapping[int, int], count: int) -> int:
    """Records of partitions ``0..count-1`` past ``hold`` (partitions it lacks: from 0)."""
    return sum(max(0, ends.get(p, 0) - hold.get(p, 0)) for p in range(count))


def _history(count: int, now: InputNow) -> list[tuple[int, int]] | None:
    """The counts the stream had after ``count`` (the last is its count now), each with the
    records written under it; None when the system did not record every growth."""
    grown = now.grown
    if grown is None or count not in grown:
        return None
    later = sorted(k for k in grown if k > count)
    if now.count <= (later[-1] if later else count):
        return None  # it shrank since: its records no longer tell their count
    counts = [*later, now.count]
    starts = [grown[count], *(grown[k] for k in later)]
    ends = [*(grown[k] for k in later), now.ends]
    return [(k, records_past(end, start, k)) for k, start, end in zip(counts, starts, ends,
                                                                       strict=True)]


def _tasks_of(model: JobModel, stream: str) -> int:
    return len({t.name for t in model.tasks.values()
                for s in t.ssps if f"{s.system}.{s.stream}" == stream})


def plan_holds(config: JobConfig, model: JobModel, counts: Mapping[str, int],
               inputs: Mapping[str, InputNow], *, now_ms: int = 0,
               read: ReadPositions | None = None) -> HoldPlan:
    """The next model's counts and holds, from ``model`` and the inputs now.

    ``counts`` are every input's counts now; ``inputs`` what the systems show of the inputs
    whose count differs from ``model``'s or that ``model`` holds (others stay as they are).
    A held input keeps ``model``'s count; an input that changed to a count its tasks map,
    with nothing written under an unmappable count since, takes its new count. ``read``
    (`read_positions`): records a hold seen at detection counts past it start where the
    job stopped reading (`stops_at`).
    """
    error = CountCheck(config, model).refusal
    next_counts = dict(counts)
    holds: dict[str, StreamHold] = {}
    held: dict[str, Held] = {}
    for stream in sorted(set(model.partition_counts) & set(config.inputs)):
        count, hold, now = model.partition_counts[stream], model.holds.get(stream), inputs.get(
            stream)
        if now is None or (now.count == count and hold is None):
            if hold is not None:  # the caller did not read it: it stays as it is
                holds[stream] = hold
                next_counts[stream] = count
            continue
        history = _history(count, now)
        if history is None:
            growths: tuple[Growth, ...] = (Growth(now.count, None, error(stream, now.count)),)
        else:
            growths = tuple(Growth(k, n, error(stream, k)) for k, n in history)
        if hold is None:
            if not growths[-1].error and not any(g.error and g.written for g in growths[:-1]):
                next_counts[stream] = now.count  # an expansion its tasks map
                continue
            refused = next(g.count for g in growths if g.error)
            exact = now.grown is not None and count in now.grown
            ends = now.grown[count] if exact and now.grown is not None else now.ends
            hold = StreamHold(count=count, ends={p: ends.get(p, 0) for p in range(count)},
                              exact=exact, refused=refused, since_ms=now_ms)
        stop = hold.ends if hold.exact else stops_at(stream, hold, read or {})
        found = Held(stream, hold, _tasks_of(model, stream), growths,
                     records_past(now.ends, stop, now.count))
        if not growths[-1].error and found.released_by_growth:
            next_counts[stream] = now.count
            continue
        next_counts[stream] = count
        holds[stream] = hold
        held[stream] = found
    return HoldPlan(next_counts, holds, held)
