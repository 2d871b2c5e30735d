"""What each host tells the group when it joins, and what the leader answers it.

Both travel as JSON in the user_data of Kafka's consumer protocol: a `Member` in the
member metadata of JoinGroup, an `Answer` in the member assignment of SyncGroup.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Answer", "Member", "StorePosition"]

VERSION = 1

StorePosition = tuple[int, int]
"""A local store copy: (changelog partition it came from, changelog offset it holds)."""


@dataclass(frozen=True)
class Member:
    """A host as it joins: its name, capacity and the state it holds on disk."""

    host: str
    workers: int
    pid: int
    machine: str
    since_ms: int
    """When this host process started: of two members with one name, the older one stays."""
    positions: dict[str, dict[str, StorePosition]] = field(default_factory=dict)
    """Task → logged store → where its local copy stands."""
    incarnation: int = 0
    """How often this host process gave up its group member and joined as a new one: of
    two members of one process, the newer incarnation stays (the other is abandoned)."""

    def to_bytes(self) -> bytes:
        data = asdict(self)
        data["v"] = VERSION
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Member:
        data: dict[str, Any] = json.loads(raw)
        return cls(
            host=str(data["host"]), workers=int(data["workers"]), pid=int(data["pid"]),
            machine=str(data["machine"]), since_ms=int(data["since_ms"]),
            positions={t: {s: (int(p[0]), int(p[1])) for s, p in stores.items()}
                       for t, stores in data.get("positions", {}).items()},
            incarnation=int(data.get("incarnation", 0)))


@dataclass(frozen=True)
class Answer:
    """The leader's answer to one member: the round whose model to run, or why it was
    refused."""

    refused: str | None = None
    """This member may not join (another host of its name runs); the message says why."""
    other: Member | None = None
    """The member that holds the name, for a refused one."""
    error: str | None = None
    """The member's metadata or assignment was unreadable; it rejoins after a while."""
    round_id: str | None = None
    """The leader publishes this round's model after the round (off the group protocol's
    path): run the model that carries this id (`JobModel.round_id`) once it is published."""

    def to_bytes(self) -> bytes:
        return json.dumps({
            "v": VERSION, "refused": self.refused, "error": self.error,
            "round_id": self.round_id,
            "other": json.loads(self.other.to_bytes()) if self.other else None,
        }, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Answer:
        data = json.loads(raw)
        return cls(
            refused=data.get("refused"), error=data.get("error"),
            round_id=data.get("round_id"),
            other=Member.from_bytes(json.dumps(data["other"]).encode())
            if data.get("other") else None)
