"""Standby placement for the high-availability assignor (KIP-441 part II, KAFKA-4696).

Each stateful task gets ``min(num_standbys, #clients - 1)`` standbys on distinct clients
that hold neither its active nor its warmup. A client within its balanced standby quota
that already has state for the task (smallest gap first) is preferred, since it needs no
restore; otherwise the client with the fewest standbys per thread takes it.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Set

from groupers.assignors.ha_active import StatefulPlan
from groupers.assignors.ha_group import Group, balanced_quotas

__all__ = ["place_standbys"]

_SPREAD_TRIES = 32
"""Equally loaded clients `_LeastLoaded.pick` looks at to spread a client's standbys."""


def place_standbys(group: Group, plan: StatefulPlan, num_standbys: int) -> dict[str, list[str]]:
    """Stateful task → the clients holding its standbys."""
    needed = min(num_standbys, len(group.clients) - 1)
    if needed <= 0:
        return {}
    actives = Counter(plan.active.values())
    # Extra standbys go to the clients with the fewest actives per thread: this evens
    # out the total load and, unlike anything based on lags, is stable once actives settle.
    quotas = balanced_quotas(needed * len(group.stateful), group,
                             lambda name, _: actives[name] / group.capacity[name])
    least = _LeastLoaded(group, actives, quotas)

    # Client → clients holding standbys of its actives: spreading these spreads a failed
    # client's tasks over many caught-up clients instead of overloading one.
    partners: dict[str, set[str]] = {name: set() for name in group.clients}
    standbys: dict[str, list[str]] = {}
    for task in group.stateful:
        chosen = [plan.standby_target[task]] if task in plan.standby_target else []
        for name in chosen:
            least.add(name)
        excluded = {plan.active[task], *chosen}
        if task in plan.warmup:
            excluded.add(plan.warmup[task])
        while len(chosen) < needed:
            with_state = sorted(
                (lag, least.load(name), name) for name, lag in group.lags[task].items()
                if name not in excluded and least.count[name] < quotas[name])
            name = with_state[0][2] if with_state else least.pick(
                excluded, avoid=partners[plan.active[task]])
            chosen.append(name)
            excluded.add(name)
            least.add(name)
        partners[plan.active[task]].update(chosen)
        standbys[task] = chosen
    return standbys


class _LeastLoaded:
    """Standby counts per client; picks a client under quota, fewest standbys per thread."""

    def __init__(
        self, group: Group, actives: Mapping[str, int], quotas: Mapping[str, int]
    ) -> None:
        self.capacity = group.capacity
        self.actives = actives
        self.quotas = quotas
        self.count = {name: 0 for name in group.clients}
        self._heap = [self._entry(name) for name in group.clients]
        heapq.heapify(self._heap)

    def load(self, name: str) -> float:
        """Standbys per thread."""
        return self.count[name] / self.capacity[name]

    def _entry(self, name: str) -> tuple[bool, float, float, str, int]:
        # Clients under quota first, so the quotas come out exact whenever the
        # distinct-client rule allows; ties go to the client with fewer tasks in all.
        total = (self.count[name] + self.actives[name]) / self.capacity[name]
        full = self.count[name] >= self.quotas[name]
        return (full, self.load(name), total, name, self.count[name])

    def add(self, name: str) -> None:
        """Give ``name`` one more standby."""
        self.count[name] += 1
        heapq.heappush(self._heap, self._entry(name))

    def pick(self, excluded: Set[str], avoid: Set[str]) -> str:
        """The least loaded client not in ``excluded``; the caller then `add`s it.

        Among equally loaded clients, the first of the next few that is not in ``avoid``.
        """
        popped: list[tuple[bool, float, float, str, int]] = []
        first: tuple[bool, float, float, str, int] | None = None
        try:
            while self._heap and len(popped) < _SPREAD_TRIES + len(excluded):
                entry = heapq.heappop(self._heap)
                name = entry[3]
                if entry[4] != self.count[name]:
                    continue  # stale: the client has had a standby added since
                popped.append(entry)
                if name in excluded:
                    continue
                if first is None:
                    first = entry
                elif entry[:2] != first[:2]:
                    break
                if name not in avoid:
                    return name
            assert first is not None, "the caller leaves at least one client eligible"
            return first[3]
        finally:
            for entry in popped:
                heapq.heappush(self._heap, entry)
