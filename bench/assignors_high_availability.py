"""High-availability assignor benchmark (KIP-441): 10,000 stateful tasks, 500 clients, 1 standby.

Times a fresh assignment (no client has state), then a rebalance of the settled group
after one client leaves and one new, empty client joins; prints the movement figures and
how many assignments it takes until no probing rebalance is needed. For comparison, the
same departure without a replacement.

Run: ``.venv/bin/python -m bench.assignors_high_availability``
(or ``python bench/assignors_high_availability.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import groupers as G

TASKS = 10_000
CLIENTS = 500
STANDBYS = 1
WARMUPS = 2


@dataclass(frozen=True)
class Figures:
    """Seconds per assignment and what the rebalance did."""

    fresh_seconds: float
    rebalance_seconds: float
    moved_actives: int
    warmups: int
    probing: bool
    rounds_to_settle: int
    """Assignments from the rebalance on until one needs no probing rebalance."""
    leave_only_seconds: float
    leave_only_warmups: int


def _settled(result: G.TaskAssignment) -> dict[str, G.ClientState]:
    """The next round's input: actives are previous actives, every replica caught up."""
    return {name: G.ClientState(
                previous_active=held.active,
                task_lags={task: 0 for task in held.active | held.standby | held.warmup})
            for name, held in result.clients.items()}


def _owners(result: G.TaskAssignment) -> dict[str, str]:
    return {task: name for name, held in result.clients.items() for task in held.active}


def _timed(
    assignor: G.HighAvailabilityTaskAssignor, tasks: Mapping[str, bool],
    clients: Mapping[str, G.ClientState],
) -> tuple[G.TaskAssignment, float]:
    start = time.perf_counter()
    result = assignor.assign(tasks, clients)
    return result, time.perf_counter() - start


def run() -> Figures:
    """Run both assignments, print the figures and return them."""
    assignor = G.HighAvailabilityTaskAssignor(num_standbys=STANDBYS, max_warmups=WARMUPS)
    tasks = {f"Partition {p}": True for p in range(TASKS)}
    names = [f"worker-{c}" for c in range(CLIENTS)]
    fresh, fresh_seconds = _timed(assignor, tasks, {name: G.ClientState() for name in names})

    clients = _settled(fresh)
    del clients[names[0]]
    clients["worker-new"] = G.ClientState()
    rebalance, rebalance_seconds = _timed(assignor, tasks, clients)

    leave_only, leave_only_seconds = _timed(
        assignor, tasks, {name: state for name, state in clients.items() if name != "worker-new"})

    rounds, latest = 1, rebalance
    while latest.probing_rebalance_needed:
        latest = assignor.assign(tasks, _settled(latest))
        rounds += 1

    before, after = _owners(fresh), _owners(rebalance)
    figures = Figures(
        fresh_seconds=fresh_seconds,
        rebalance_seconds=rebalance_seconds,
        moved_actives=sum(1 for task in tasks if before[task] != after[task]),
        warmups=sum(len(held.warmup) for held in rebalance.clients.values()),
        probing=rebalance.probing_rebalance_needed,
        rounds_to_settle=rounds,
        leave_only_seconds=leave_only_seconds,
        leave_only_warmups=sum(len(held.warmup) for held in leave_only.clients.values()),
    )
    print(f"high-availability assignor: {TASKS:,} stateful tasks x {CLIENTS} clients "
          f"x {STANDBYS} standby, max_warmups={WARMUPS}")
    print(f"  fresh assignment             {figures.fresh_seconds * 1000:8.0f} ms")
    print(f"  one leaves + one empty joins {figures.rebalance_seconds * 1000:8.0f} ms"
          f"  ({figures.moved_actives} actives moved, {figures.warmups} warmups, "
          f"probing={figures.probing})")
    print(f"  assignments until settled    {figures.rounds_to_settle:8d}")
    print(f"  one leaves, nobody joins     {figures.leave_only_seconds * 1000:8.0f} ms"
          f"  ({figures.leave_only_warmups} warmups, "
          f"probing={leave_only.probing_rebalance_needed})")
    return figures


if __name__ == "__main__":
    run()
