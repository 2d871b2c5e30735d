"""Stream-join sticky assignor benchmark: 100,000 partition numbers, 1,000 members, 2 topics.

Times a fresh assignment, then the rebalance after one member leaves (every other member
brings what it owned, so the assignor keeps it and spreads the leaver's numbers), and
counts how many numbers moved between members that stayed.

Run: ``.venv/bin/python -m bench.assignors_stream_join``
(or ``python bench/assignors_stream_join.py``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from groupers import JoinSubscription, StreamJoinStickyAssignor

PARTITIONS = 100_000
MEMBERS = 1_000
TOPICS = ("clicks", "impressions")


@dataclass(frozen=True)
class Figures:
    """Seconds per assignment and numbers moved between members that stayed."""

    fresh_seconds: float
    sticky_seconds: float
    moved_between_stayers: int
    leaver_numbers: int


def measure() -> Figures:
    """Run the fresh and the one-member-left assignments once each."""
    counts = {topic: PARTITIONS for topic in TOPICS}
    members = [f"worker-{i:04d}" for i in range(MEMBERS)]
    assignor = StreamJoinStickyAssignor()

    started = time.perf_counter()
    first = assignor.assign(counts, {m: JoinSubscription(TOPICS) for m in members})
    fresh = time.perf_counter() - started

    leaver = members[MEMBERS // 2]
    stayers = {m: JoinSubscription(TOPICS, first[m].partition_numbers, first[m].epoch)
               for m in members if m != leaver}
    started = time.perf_counter()
    second = assignor.assign(counts, stayers)
    sticky = time.perf_counter() - started

    moved = sum(len(set(first[m].partition_numbers) - set(second[m].partition_numbers))
                for m in stayers)
    return Figures(fresh, sticky, moved, len(first[leaver].partition_numbers))


def run() -> Figures:
    """Measure and print the figures."""
    figures = measure()
    print(f"stream-join sticky: {PARTITIONS:,} partition numbers x {MEMBERS:,} members "
          f"x {len(TOPICS)} topics")
    print(f"  fresh assignment          {figures.fresh_seconds:8.3f} s")
    print(f"  one member left (sticky)  {figures.sticky_seconds:8.3f} s")
    print(f"  numbers moved between stayers: {figures.moved_between_stayers} "
          f"(leaver's {figures.leaver_numbers} numbers redistributed)")
    return figures


if __name__ == "__main__":
    run()
