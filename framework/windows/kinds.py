"""Window kinds: which windows an event time falls in, and when each window closes.

Times are milliseconds since the epoch. Tumbling and hopping windows are aligned to the
epoch and cover ``[start, end)``; windows that would start before 0 are left out (event
times are never negative). A session window covers a key's records whose timestamps lie
at most ``gap_ms`` apart; its result names ``[first ts, last ts + 1)``.

A window *closes* once the task's watermark reaches ``closes_at + grace_ms``: after that no
on-time record can fall in it (see `framework.windows.aggregation`).
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.errors import SampanError

__all__ = ["Hopping", "Session", "Tumbling", "WindowError", "WindowKind"]

MAX_TIME = 10**16 - 1
"""The largest time the store's fixed-width time keys can hold (year 318857)."""


class WindowError(SampanError, ValueError):
    """A window definition or a record's event time is unusable; names the fix."""


def _positive(kind: str, **values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise WindowError(f"{kind}: {name} must be a positive number of milliseconds, "
                              f"got {value!r}")


def _grace(kind: str, grace_ms: int) -> None:
    if not isinstance(grace_ms, int) or isinstance(grace_ms, bool) or grace_ms < 0:
        raise WindowError(f"{kind}: grace_ms must be >= 0 milliseconds, got {grace_ms!r}")


@dataclass(frozen=True)
class Hopping:
    """Windows of ``size_ms`` starting every ``advance_ms``; a record falls in
    ``size_ms / advance_ms`` of them.

    >>> Hopping(size_ms=300, advance_ms=100).starts(250)
    [0, 100, 200]
    """

    size_ms: int
    advance_ms: int
    grace_ms: int = 0
    """How far behind the watermark a record may be and still count (0: not at all)."""

    def __post_init__(self) -> None:
        _positive(type(self).__name__, size_ms=self.size_ms, advance_ms=self.advance_ms)
        _grace(type(self).__name__, self.grace_ms)
        if self.advance_ms > self.size_ms:
            raise WindowError(f"Hopping: advance_ms ({self.advance_ms}) is larger than "
                              f"size_ms ({self.size_ms}), which would leave gaps; use "
                              f"advance_ms <= size_ms")

    def starts(self, ts: int) -> list[int]:
        """Starts of the windows holding ``ts``, oldest first."""
        last = ts - ts % self.advance_ms
        first = max(0, ts - self.size_ms + 1)
        first += -first % self.advance_ms
        return list(range(first, last + 1, self.advance_ms))

    def end(self, start: int) -> int:
        """The exclusive end of the window starting at ``start`` (also when it closes)."""
        return start + self.size_ms


@dataclass(frozen=True)
class Tumbling(Hopping):
    """Back-to-back windows of ``size_ms``: every record falls in exactly one.

    >>> Tumbling(size_ms=60_000).starts(125_000)
    [120000]
    """

    size_ms: int
    advance_ms: int = 0
    grace_ms: int = 0

    def __post_init__(self) -> None:
        if self.advance_ms not in (0, self.size_ms):
            raise WindowError(f"Tumbling: advance_ms is always size_ms; got {self.advance_ms} "
                              f"— use Hopping(size_ms, advance_ms) for overlapping windows")
        object.__setattr__(self, "advance_ms", self.size_ms)
        super().__post_init__()


@dataclass(frozen=True)
class Session:
    """A key's records at most ``gap_ms`` apart form one window; a record closer than that
    to two sessions merges them.

    >>> Session(gap_ms=30).closes_at(last=100)
    131
    """

    gap_ms: int
    grace_ms: int = 0
    """How far behind the watermark a record may be and still count (0: not at all)."""

    def __post_init__(self) -> None:
        _positive("Session", gap_ms=self.gap_ms)
        _grace("Session", self.grace_ms)

    def closes_at(self, last: int) -> int:
        """The first time no record can extend a session whose last record is at ``last``."""
        return last + self.gap_ms + 1


WindowKind = Hopping | Session
"""What `Windows` accepts (`Tumbling` is a `Hopping`)."""
