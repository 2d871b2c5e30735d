"""The high-availability assignor's view of its input, and the balanced quotas it fills.

`Group.of` validates the caller's mappings once and turns them into sorted tuples and
plain dicts, so every later step iterates in one reproducible order whatever order the
caller's dicts and sets came in.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from groupers.errors import AssignmentError
from groupers.model import ClientState
from groupers.ssp import task_sort_key

__all__ = ["Group", "MostRoom", "balanced_quotas", "natural", "sticky_quotas"]


def natural(tasks: Iterable[str]) -> tuple[str, ...]:
    """Tasks in natural order (``Partition 2`` before ``Partition 10``), ties by the raw name."""
    return tuple(sorted(tasks, key=lambda task: (task_sort_key(task), task)))


@dataclass(frozen=True)
class Group:
    """Validated, sorted input: who the clients are and what each knows about each task."""

    clients: tuple[str, ...]
    """Client names, sorted."""
    capacity: Mapping[str, int]
    stateful: tuple[str, ...]
    """Stateful tasks in natural order."""
    stateless: tuple[str, ...]
    lags: Mapping[str, Mapping[str, int]]
    """Stateful task → client → restore gap; a previous active owner counts as 0."""
    owner: Mapping[str, str]
    """Task → the one client that ran it as active last time (stateful and stateless)."""

    @classmethod
    def of(cls, tasks: Mapping[str, bool], clients: Mapping[str, ClientState]) -> Group:
        """Check the input and build the sorted view; raise `AssignmentError` on bad input."""
        if tasks and not clients:
            raise AssignmentError(
                f"{len(tasks)} task(s) to assign but no clients: "
                "start at least one worker before assigning tasks")
        names = tuple(sorted(clients))
        for name in names:
            _check_client(name, clients[name], tasks)
        stateful = natural(task for task, is_stateful in tasks.items() if is_stateful)
        stateless = natural(task for task, is_stateful in tasks.items() if not is_stateful)
        stateful_set = frozenset(stateful)

        lags: dict[str, dict[str, int]] = {task: {} for task in stateful}
        claims: dict[str, list[tuple[int, str]]] = {}
        for name in names:
            state = clients[name]
            for task, lag in sorted(state.task_lags.items()):
                if task in stateful_set:
                    lags[task][name] = lag
            for task in state.previous_active:
                if task in tasks:
                    claims.setdefault(task, []).append((state.task_lags.get(task, 0), name))
        owner: dict[str, str] = {}
        for task, claimants in claims.items():
            # Two claimants mean a zombie: trust the one reporting the smaller gap.
            owner[task] = min(claimants)[1]
            if task in stateful_set:
                for _, name in claimants:
                    lags[task][name] = 0
        return cls(
            clients=names,
            capacity={name: clients[name].capacity for name in names},
            stateful=stateful,
            stateless=stateless,
            lags=lags,
            owner=owner,
        )

    def owned(self, tasks: Iterable[str]) -> dict[str, list[str]]:
        """Client → the given tasks (in the given order) it previously owned as active."""
        owned: dict[str, list[str]] = {name: [] for name in self.clients}
        for task in tasks:
            if task in self.owner:
                owned[self.owner[task]].append(task)
        return owned


def _check_client(name: str, state: ClientState, tasks: Mapping[str, bool]) -> None:
    if state.capacity < 1:
        raise AssignmentError(
            f"client {name!r} has capacity {state.capacity}: capacity is its number of "
            "threads and must be 1 or more")
    for task, lag in sorted(state.task_lags.items()):
        if task in tasks and lag < 0:
            raise AssignmentError(
                f"client {name!r} reports restore gap {lag} for task {task!r}: a gap must "
                "be 0 or more (leave the task out of task_lags if the client has no state)")


def balanced_quotas(
    count: int, group: Group, first: Callable[[str, int], Any]
) -> dict[str, int]:
    """How many of ``count`` items each client gets, in proportion to its capacity.

    Every client gets the floor or the ceiling of its exact share. The ceilings go to the
    clients with the smallest ``first(client, floor)``, then the largest fractional
    share, then by name.
    """
    total_capacity = sum(group.capacity.values())
    quotas: dict[str, int] = {}
    fractions: dict[str, int] = {}
    for name in group.clients:
        quotas[name], fractions[name] = divmod(count * group.capacity[name], total_capacity)
    remainder = count - sum(quotas.values())
    eligible = sorted(
        (name for name in group.clients if fractions[name] > 0),
        key=lambda name: (first(name, quotas[name]), -fractions[name], name))
    for name in eligible[:remainder]:
        quotas[name] += 1
    return quotas


def sticky_quotas(count: int, group: Group, keeps: Mapping[str, list[str]]) -> dict[str, int]:
    """`balanced_quotas` whose ceilings go first to clients that would keep more than the floor.

    ``keeps`` is client → the tasks it would keep (its previous or best-state tasks), so
    a sticky client keeps its extra task and the choice is stable from one rebalance to
    the next (a settled client keeps exactly its quota).
    """
    return balanced_quotas(count, group, lambda name, floor: len(keeps[name]) <= floor)


class MostRoom:
    """Clients with room left under their quota, the roomiest (then first by name) first."""

    def __init__(self, room: Mapping[str, int]) -> None:
        self.room = dict(room)
        self._heap = [(-left, name) for name, left in self.room.items() if left > 0]
        heapq.heapify(self._heap)

    def has_room(self, name: str) -> bool:
        """Whether ``name`` can take one more."""
        return self.room[name] > 0

    def roomiest(self) -> str:
        """The client with the most room; the caller must `use` it."""
        while True:
            left, name = self._heap[0]
            if -left == self.room[name]:
                return name
            heapq.heappop(self._heap)  # stale: the client has been used since

    def use(self, name: str) -> None:
        """Give ``name`` one more item."""
        self.room[name] -= 1
        if self.room[name] > 0:
            heapq.heappush(self._heap, (-self.room[name], name))
