"""The values some keys of the job file parse into: `StreamRef`, the one parse of a
``"system.stream"`` name, and `StartPosition`, where a job starts reading an input."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, NamedTuple

__all__ = ["StartPosition", "StreamRef"]


class StreamRef(NamedTuple):
    """A stream named by its system and its name inside it, the one parse of
    ``"system.stream"`` (the system is the part before the first dot).

    >>> ref = StreamRef.parse("local.page.views")
    >>> ref.system, ref.stream, str(ref)
    ('local', 'page.views', 'local.page.views')
    """

    system: str
    stream: str

    @classmethod
    def parse(cls, qualified: str) -> StreamRef:
        system, _, stream = qualified.partition(".")
        return cls(system, stream)

    @property
    def qualified(self) -> str:
        """``"system.stream"``, as job files and `MessageCollector.send` name it."""
        return f"{self.system}.{self.stream}"

    def __str__(self) -> str:
        return self.qualified



StartKind = Literal["oldest", "latest", "time"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class StartPosition:
    """Where a job starts reading a partition it has no checkpoint on: its ``oldest``
    retained record, its end (``latest``: only what comes next), or the first record
    stamped at or after a ``time`` (the end when none is).

    >>> StartPosition.parse("latest")
    StartPosition(kind='latest', timestamp_ms=None)
    >>> StartPosition.parse("2026-05-01T14:00:00+02:00")
    StartPosition(kind='time', timestamp_ms=1777636800000)
    >>> StartPosition.parse(1777636800000).describe()
    '2026-05-01T12:00:00.000Z'
    """

    kind: StartKind = "oldest"
    timestamp_ms: int | None = None
    """The time of a ``time`` start, in ms since the epoch; None otherwise."""

    FORMS = ('"oldest", "latest", a time with its zone ("2026-05-01T12:00:00Z") or ms '
             "since the epoch (an integer ≥ 0)")
    """What `parse` accepts, for messages."""

    @classmethod
    def parse(cls, value: object) -> StartPosition:
        """``"oldest"``, ``"latest"``, an ISO-8601 time with its zone (a string, or a
        TOML date-time) or ms since the epoch; `ValueError` saying what is accepted."""
        if value in ("oldest", "latest"):
            return cls(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return cls("time", value)
        moment = value
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                hint = ' (sampan calls it "oldest")' if value == "earliest" else ""
                raise ValueError(f"expected {cls.FORMS}, got {_spelled(value)}{hint}"
                                 ) from None
        if isinstance(moment, datetime):
            if moment.tzinfo is None:
                raise ValueError(f"the time {value!s} has no zone, so it names a different "
                                 f"moment on every machine; add one: "
                                 f"\"{moment.isoformat()}Z\" (UTC) or \"…+02:00\"")
            return cls("time", (moment - _EPOCH) // timedelta(milliseconds=1))
        raise ValueError(f"expected {cls.FORMS}, got {_spelled(value)}")

    def describe(self) -> str:
        """``"oldest"``, ``"latest"`` or the time in UTC, for messages and logs."""
        if self.timestamp_ms is None:
            return self.kind
        moment = datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _spelled(value: object) -> str:
    """``value`` as a job file spells it, for messages."""
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, str) else str(value)
