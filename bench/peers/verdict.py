"""Verdicts: a peer's outputs against the ground truth, and what a run did.

Pure functions, no I/O: `check_outputs` compares every output record with the ground
truth key by key; `classify` turns a run (its error, whether it ever processed a record,
its output check) into one of `EXACT`, `MISCOUNTED`, `REORDERED`, `SHORT`, `MISSING`,
`DUPLICATED`, `CRASHED` or `REFUSED` with a one-line detail for the tables.

A key is

- exact: its outputs are exactly its running totals, in order;
- short: its outputs are the first of its running totals, in order, and the rest were
  never sent (the job stopped, or lost its last records);
- miscounted: its last output is not its true total (or it has no output), and its
  outputs are not a beginning of its running totals: some total was wrong;
- reordered: the last total is right, but some output is a total that no per-key-ordered
  sum of its records ever reaches (records of the key were applied out of order);
- missing outputs: the last total is right, every output is a true total, but some true
  totals were never sent;
- duplicated: every true total was sent in order, some more than once (a replay after a
  restart or rebalance: what at-least-once allows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["CRASHED", "DUPLICATED", "EXACT", "MISCOUNTED", "MISSING", "REFUSED", "REORDERED",
           "SHORT", "Outcome", "OutputCheck", "check_outputs", "classify"]

EXACT = "exact"
MISCOUNTED = "miscounted"
REORDERED = "reordered"
SHORT = "short"
MISSING = "missing outputs"
DUPLICATED = "duplicated outputs"
CRASHED = "crashed"
REFUSED = "refused to start"


@dataclass(frozen=True)
class OutputCheck:
    """Every output compared with the ground truth; each dict maps key → what differs."""

    keys: int
    expected: int
    received: int
    miscounted: dict[str, str] = field(default_factory=dict)
    reordered: dict[str, str] = field(default_factory=dict)
    short: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    duplicated: dict[str, str] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return not any(keys for _, keys in self.kinds())

    @property
    def wrong(self) -> int:
        """Keys with an output that is not a true total at its place (miscounted or
        reordered): what a job that stopped short must not have."""
        return len(self.miscounted) + len(self.reordered)

    def kinds(self) -> list[tuple[str, dict[str, str]]]:
        """Each kind of difference with its keys, the most serious first."""
        return [(MISCOUNTED, self.miscounted), (REORDERED, self.reordered),
                (SHORT, self.short), (MISSING, self.missing), (DUPLICATED, self.duplicated)]

    def worst(self) -> tuple[str, dict[str, str]]:
        """The most serious kind of difference found (`EXACT` and {} when none)."""
        for kind, keys in self.kinds():
            if keys:
                return kind, keys
        return EXACT, {}

    def summary(self) -> str:
        """One line: how many keys of each kind, with the first miscounted key's numbers."""
        if self.exact:
            return f"{self.keys:,} keys, {self.received:,} outputs, all exact"
        parts = [f"{len(keys):,} of {self.keys:,} keys {kind}"
                 for kind, keys in self.kinds() if keys]
        _, keys = self.worst()
        first = min(keys)
        return (f"{'; '.join(parts)} ({self.received:,} outputs for {self.expected:,} "
                f"records; e.g. {first}: {keys[first]})")


def _describe(got: Sequence[int], want: Sequence[int]) -> str:
    last = got[-1] if got else "none"
    return f"last total {last}, true total {want[-1]}; {len(got)} outputs for {len(want)} records"


def check_outputs(truth: Mapping[str, Sequence[int]],
                  outputs: Mapping[str, Sequence[int]]) -> OutputCheck:
    """Compare each key's outputs (in the order read from its partition) with its truth."""
    miscounted: dict[str, str] = {}
    reordered: dict[str, str] = {}
    short: dict[str, str] = {}
    missing: dict[str, str] = {}
    duplicated: dict[str, str] = {}
    for key, want in truth.items():
        got = outputs.get(key, ())
        if list(got) == list(want):
            continue
        why = _describe(got, want)
        if not got or got[-1] != want[-1]:
            if list(got) == list(want[:len(got)]):
                short[key] = f"{why}; the first {len(got)} right"
            else:
                miscounted[key] = why
        elif not set(got) <= set(want):
            foreign = sorted(set(got) - set(want))
            reordered[key] = f"{why}; totals never reached in order: {foreign[:5]}"
        elif set(got) != set(want):
            missing[key] = f"{why}; {len(set(want) - set(got))} true totals never sent"
        else:
            duplicated[key] = f"{why}; {len(got) - len(want)} sent again"
    for key in outputs.keys() - truth.keys():
        miscounted[key] = f"{len(outputs[key])} outputs for a key with no input"
    return OutputCheck(
        keys=len(truth), expected=sum(len(want) for want in truth.values()),
        received=sum(len(got) for got in outputs.values()), miscounted=miscounted,
        reordered=reordered, short=short, missing=missing, duplicated=duplicated)


@dataclass(frozen=True)
class Outcome:
    """What one run did: a verdict word and a one-line detail."""

    verdict: str
    detail: str

    def text(self) -> str:
        return f"{self.verdict}: {self.detail}" if self.detail else self.verdict


def classify(*, error: str | None, processed: bool, check: OutputCheck | None) -> Outcome:
    """The run's verdict: an error before any record was processed is a refusal to start,
    after that a crash; a run that finished is judged by its outputs."""
    if error is not None:
        if not processed:
            return Outcome(REFUSED, error)
        after = ""
        if check is not None:
            right = ("all of them right" if not check.wrong
                     else f"{check.wrong:,} keys with a wrong total among them")
            after = f" ({check.received:,} of {check.expected:,} outputs sent by then, {right})"
        return Outcome(CRASHED, error + after)
    if check is None:
        raise ValueError("a run that did not fail needs its outputs checked")
    kind, _ = check.worst()
    return Outcome(kind, check.summary())
