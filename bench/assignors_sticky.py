"""Sticky assignor (KIP-54) benchmark: Kafka's large-group case and a general-path case.

Equal subscriptions: 500 topics × 2,000 partitions (1,000,000 partitions), 2,000 members.
Times a fresh assignment, then the sticky reassignment after one member leaves (the first
result fed back as ``owned`` with generation 1). General path, the same two steps with
each member subscribed to a seeded random subset of the topics: 50 topics × 100
partitions with 200 members, then the scale case above. Only ``assign`` is timed;
building the `Subscription` objects (which copy every owned partition) is reported
separately.

Run: ``.venv/bin/python -m bench.assignors_sticky`` (or ``python bench/assignors_sticky.py``).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import groupers as G

T = TypeVar("T")
Assignment = dict[str, list[G.TopicPartition]]


def timed(label: str, work: Callable[[], T]) -> T:
    """Run ``work`` once and print how long it took."""
    start = time.perf_counter()
    result = work()
    print(f"{label:<58} {time.perf_counter() - start:7.2f} s", flush=True)
    return result


def moved(before: Mapping[str, list[G.TopicPartition]], after: Assignment) -> int:
    """Partitions whose member changed among those that were assigned before."""
    owner = {tp: m for m, tps in before.items() for tp in tps}
    return sum(1 for m, tps in after.items() for tp in tps if owner.get(tp, m) != m)


def leave_one(
    subscriptions: Mapping[str, G.Subscription], first: Assignment, leaver: str
) -> dict[str, G.Subscription]:
    """The group after ``leaver`` left, every member owning what ``first`` gave it."""
    return {
        m: G.Subscription(s.topics, first[m], generation=1)
        for m, s in subscriptions.items()
        if m != leaver
    }


def run_case(
    name: str, partitions: dict[str, int], subscriptions: dict[str, G.Subscription]
) -> None:
    """Time a fresh assignment and the reassignment after the first member leaves."""
    assignor = G.StickyAssignor()
    total = sum(partitions.values())
    print(f"{name}: {len(partitions)} topics, {total:,} partitions, "
          f"{len(subscriptions):,} members")
    first = timed("  fresh assignment", lambda: assignor.assign(partitions, subscriptions))
    leaver = min(subscriptions)
    again = timed("  building subscriptions with owned partitions (caller)",
                  lambda: leave_one(subscriptions, first, leaver))
    second = timed("  sticky reassignment after one member left",
                   lambda: assignor.assign(partitions, again))
    sizes = sorted(len(tps) for tps in second.values())
    print(f"  after: sizes {sizes[0]}..{sizes[-1]}, partitions moved between surviving "
          f"members: {moved({m: first[m] for m in again}, second)}, "
          f"taken over from the leaver: {len(first[leaver])}")


def run() -> None:
    """Print the figures quoted in docs/groupers/sticky.md."""
    big_topics = {f"topic-{t:03d}": 2_000 for t in range(500)}
    run_case("equal subscriptions (Kafka's scale case)", big_topics,
             {f"member-{m:04d}": G.Subscription(big_topics) for m in range(2_000)})

    rng = random.Random(54)
    for topic_count, partitions, members in ((50, 100, 200), (500, 2_000, 2_000)):
        topics = {f"topic-{t:03d}": partitions for t in range(topic_count)}
        names = sorted(topics)
        run_case("general path (each member: a random subset of the topics)", topics,
                 {f"member-{m:04d}": G.Subscription(
                     rng.sample(names, rng.randint(1, topic_count))) for m in range(members)})


if __name__ == "__main__":
    run()
