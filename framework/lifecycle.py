"""Explicit lifecycles: a long-lived component's state is one member of its own enum, moved
only along the transitions its table allows, checked here and nowhere else (Kafka
Streams' ``StreamThread.State`` is the model).

    >>> from enum import Enum
    >>> class Door(Enum):
    ...     OPEN = "open"
    ...     CLOSED = "closed"
    >>> door = Lifecycle("door", Door.OPEN, {Door.OPEN: {Door.CLOSED}, Door.CLOSED: set()})
    >>> door.to(Door.CLOSED)
    >>> door.state.name
    'CLOSED'
    >>> door.to(Door.OPEN)
    Traceback (most recent call last):
    ...
    framework.lifecycle.IllegalTransitionError: door: illegal transition CLOSED → OPEN ...
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from enum import Enum
from typing import Generic, TypeVar

from framework.errors import SampanError

__all__ = ["IllegalTransitionError", "Lifecycle"]

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Enum)


class IllegalTransitionError(SampanError):
    """A component was asked to move between two states its table does not link: a bug in
    sampan, never an operator's doing."""


class Lifecycle(Generic[S]):
    """The state of ``component`` (named in errors and logs), starting at ``initial``;
    ``transitions`` maps every state to the states it may move to (none: a final state).
    ``on_change(before, after)`` runs after each move."""

    def __init__(self, component: str, initial: S, transitions: Mapping[S, Collection[S]],
                 on_change: Callable[[S, S], None] | None = None) -> None:
        members = set(type(initial))
        if set(transitions) != members or any(
                not set(targets) <= members for targets in transitions.values()):
            raise ValueError(f"{component}: the transition table must list every state of "
                             f"{type(initial).__name__} once, with targets among them")
        self.component = component
        self._transitions = {state: frozenset(targets) for state, targets in
                             transitions.items()}
        self._state = initial
        self._since = time.monotonic()
        self._on_change = on_change

    @property
    def state(self) -> S:
        return self._state

    @property
    def seconds_in_state(self) -> float:
        return time.monotonic() - self._since

    def can(self, state: S) -> bool:
        """Whether a move to ``state`` is legal now."""
        return state in self._transitions[self._state]

    def to(self, state: S) -> None:
        """Move to ``state``; `IllegalTransitionError` naming both states (and what is
        legal) when the table does not allow it."""
        before = self._state
        if state not in self._transitions[before]:
            legal = ", ".join(sorted(s.name for s in self._transitions[before])) or "none"
            raise IllegalTransitionError(
                f"{self.component}: illegal transition {before.name} → {state.name} "
                f"(legal from {before.name}: {legal}); this is a bug in sampan: please "
                f"report it with the log above")
        self._state = state
        self._since = time.monotonic()
        log.debug("%s: %s → %s", self.component, before.name, state.name)
        if self._on_change is not None:
            self._on_change(before, state)

    def __repr__(self) -> str:
        return f"Lifecycle({self.component!r}, {self._state.name})"
