"""Restore-gap-aware task assignment with standbys and warmups (Kafka KIP-441, part II).

Source document: KIP-441 part II (``shared/seeds/001_9efbba46ce3b40e6.txt``): clients
report a restore gap per task (0 for the tasks they ran as active); stateful and
stateless tasks are balanced separately; a stateful task is not moved to a client that
would need a long restore. Where the export stops, the project's requirements and the
ideas of Kafka's own HighAvailabilityTaskAssignor fill in; see
``docs/groupers/high_availability.md``.

Deviations from the document, and why:

- The document's "owner over capacity → next candidate" walk is replaced by a balanced
  *target* plus **warmups** (as Kafka shipped it): the active stays on a caught-up client
  and the target restores a warmup copy; ``probing_rebalance_needed`` asks for a
  follow-up rebalance that moves the task once the warmup is caught up.
- Caught up means a gap ≤ ``acceptable_recovery_lag``, not "the smallest gap".
- When every other client must hold a standby for the task, the target restores as one
  of those standbys instead of a warmup (so the task keeps ``num_standbys`` standbys);
  such a pending move also requests a probing rebalance.
- Standbys are not in the document's algorithm: they follow the task's smallest gap
  within a balanced standby quota, else the client with the fewest standbys, spreading
  one client's standbys over many clients so that its failure piles onto no one.

    >>> import groupers as G
    >>> caught_up = {"P0": 0, "P1": 0}
    >>> result = G.HighAvailabilityTaskAssignor(max_warmups=1).assign(
    ...     {"P0": True, "P1": True},
    ...     {"a": G.ClientState(previous_active={"P0", "P1"}, task_lags=caught_up),
    ...      "b": G.ClientState()})
    >>> sorted(result.clients["a"].active), sorted(result.clients["b"].warmup)
    (['P0', 'P1'], ['P1'])
    >>> result.probing_rebalance_needed
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from groupers.assignors.ha_active import place_stateful, place_stateless
from groupers.assignors.ha_group import Group
from groupers.assignors.ha_standby import place_standbys
from groupers.errors import AssignmentError
from groupers.model import ClientAssignment, ClientState, TaskAssignment

__all__ = ["HighAvailabilityTaskAssignor"]


@dataclass(frozen=True)
class HighAvailabilityTaskAssignor:
    """Places active, standby and warmup tasks on clients, avoiding long restores."""

    num_standbys: int = 0
    """Standby replicas per stateful task, each on a different client (0 = none)."""
    max_warmups: int = 2
    """Warmups in the whole assignment; bounds the restore traffic a rebalance starts."""
    acceptable_recovery_lag: int = 10_000
    """A client whose restore gap for a task is at most this is caught up for it."""

    def __post_init__(self) -> None:
        for setting, meaning in (
            ("num_standbys", "standby replicas per stateful task"),
            ("max_warmups", "warmup replicas in one assignment"),
            ("acceptable_recovery_lag", "the restore gap a caught-up client may have"),
        ):
            value = getattr(self, setting)
            if not isinstance(value, int) or value < 0:
                raise AssignmentError(
                    f"{setting} is {value!r}: it is {meaning} and must be an int, 0 or more")

    def assign(
        self, tasks: Mapping[str, bool], clients: Mapping[str, ClientState]
    ) -> TaskAssignment:
        """Assign ``tasks`` (task → is stateful) to ``clients``; every client is in the result.

        Raises `AssignmentError` for a capacity below 1, a negative restore gap, or tasks
        with no clients. Tasks named by a client but absent from ``tasks`` are ignored.
        """
        group = Group.of(tasks, clients)
        plan = place_stateful(group, self.acceptable_recovery_lag, self.max_warmups,
                              self.num_standbys)
        standbys = place_standbys(group, plan, self.num_standbys)
        stateless = place_stateless(group)

        active: dict[str, set[str]] = {name: set() for name in group.clients}
        standby: dict[str, set[str]] = {name: set() for name in group.clients}
        warmup: dict[str, set[str]] = {name: set() for name in group.clients}
        for task, name in (*plan.active.items(), *stateless.items()):
            active[name].add(task)
        for task, holders in standbys.items():
            for name in holders:
                standby[name].add(task)
        for task, name in plan.warmup.items():
            warmup[name].add(task)
        return TaskAssignment(
            clients={name: ClientAssignment(active=frozenset(active[name]),
                                            standby=frozenset(standby[name]),
                                            warmup=frozenset(warmup[name]))
                     for name in group.clients},
            probing_rebalance_needed=bool(plan.warmup or plan.standby_target),
        )
