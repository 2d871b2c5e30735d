"""Active placement for the high-availability assignor (KIP-441 part II).

Stateful tasks: first a balanced *target* (sticky to the best state holder, then to the
other holders by restore gap, then to whoever has room), then the actual actives: a task
whose target is not caught up while some client is stays on its best caught-up client,
and the target warms up. Stateless tasks: sticky within a balanced quota, else most room.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from groupers.assignors.ha_group import Group, MostRoom, sticky_quotas

__all__ = ["StatefulPlan", "place_stateful", "place_stateless"]


@dataclass(frozen=True)
class StatefulPlan:
    """Where each stateful task runs, and which moves are being prepared."""

    active: Mapping[str, str]
    """Task → client running it."""
    target: Mapping[str, str]
    """Task → client balance wants it on (differs from ``active`` while a move is pending)."""
    warmup: Mapping[str, str]
    """Task → client restoring it as a warmup, ahead of a move."""
    standby_target: Mapping[str, str]
    """Task → pending target that must hold one of its standbys (no other client is left)."""


def place_stateful(
    group: Group, acceptable_lag: int, max_warmups: int, num_standbys: int
) -> StatefulPlan:
    """Balanced, restore-gap-aware actives for the stateful tasks, plus their warmups."""
    ranked = {task: _ranked(group, task) for task in group.stateful}
    caught = {task: [name for name in ranked[task]
                     if group.lags[task][name] <= acceptable_lag] for task in group.stateful}
    target = _balanced_target(group, ranked, caught)

    active: dict[str, str] = {}
    pending: list[str] = []
    for task in group.stateful:
        if caught[task] and target[task] not in caught[task]:
            active[task] = caught[task][0]
            pending.append(task)
        else:
            active[task] = target[task]

    # With every other client already a standby, the target restores as a standby.
    needed_standbys = min(num_standbys, len(group.clients) - 1)
    target_is_standby = needed_standbys >= 1 and needed_standbys == len(group.clients) - 1
    warmup: dict[str, str] = {}
    standby_target: dict[str, str] = {}
    for task in pending:
        if target_is_standby:
            standby_target[task] = target[task]
        elif len(warmup) < max_warmups:
            warmup[task] = target[task]
    return StatefulPlan(active=active, target=target, warmup=warmup,
                        standby_target=standby_target)


def _ranked(group: Group, task: str) -> list[str]:
    """Clients with state for ``task``: smallest gap first, then its owner, then by name."""
    owner = group.owner.get(task)
    return [name for _, _, name in
            sorted((lag, name != owner, name) for name, lag in group.lags[task].items())]


def _balanced_target(
    group: Group, ranked: Mapping[str, list[str]], caught: Mapping[str, list[str]]
) -> dict[str, str]:
    """Task → client so that every client meets its capacity-weighted quota exactly.

    A task first stays with the client holding its best state (its owner, if any) while
    that client is within quota; the rest go, most constrained first, to the best state
    holder with room, else to the client with the most room.
    """
    wants: dict[str, list[str]] = {name: [] for name in group.clients}
    for task in group.stateful:
        if ranked[task]:
            wants[ranked[task][0]].append(task)
    quotas = sticky_quotas(len(group.stateful), group, wants)
    rooms = MostRoom({name: quotas[name] - min(quotas[name], len(wants[name]))
                      for name in group.clients})

    target: dict[str, str] = {}
    for name in group.clients:
        tasks = wants[name]
        if len(tasks) > quotas[name]:
            # Shed first what another caught-up client has room for (it moves for free),
            # then what the client did not run before (keep running what it runs).
            tasks = sorted(tasks, key=lambda task: (
                any(other != name and rooms.has_room(other) for other in caught[task]),
                group.owner.get(task) != name))
        for task in tasks[:quotas[name]]:
            target[task] = name

    rest = sorted((task for task in group.stateful if task not in target),
                  key=lambda task: (not caught[task], len(caught[task])))
    for task in rest:
        choice = next((name for name in ranked[task] if rooms.has_room(name)), None)
        target[task] = choice if choice is not None else rooms.roomiest()
        rooms.use(target[task])
    return target


def place_stateless(group: Group) -> dict[str, str]:
    """Stateless task → client: previous owner while under its quota, else most room."""
    owned = group.owned(group.stateless)
    quotas = sticky_quotas(len(group.stateless), group, owned)
    active: dict[str, str] = {}
    for name in group.clients:
        for task in owned[name][:quotas[name]]:
            active[task] = name
    rooms = MostRoom({name: quotas[name] - min(quotas[name], len(owned[name]))
                      for name in group.clients})
    for task in group.stateless:
        if task not in active:
            active[task] = rooms.roomiest()
            rooms.use(active[task])
    return active
