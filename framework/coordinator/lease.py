"""One coordinator per job: a lease in the metadata system, renewed while it runs.

`sampan run` takes the job's lease before it publishes anything; a second `sampan run` of
the job finds it held and exits naming the holder. The holder renews it every third of
``coordinator.lease_timeout_ms``; a coordinator that died stops renewing, so its lease
expires and the next `sampan run` takes over without any cleanup (at once when the holder
ran on this host and its process is gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from framework.errors import SampanError

__all__ = ["CoordinatorLease", "CoordinatorRunningError", "LeaseLostError", "LeaseStore",
           "pid_alive"]

log = logging.getLogger(__name__)


class CoordinatorRunningError(SampanError):
    """Another coordinator holds the job's lease; names it and how to stop it."""


class LeaseLostError(SampanError):
    """This coordinator's lease was taken over (it could not renew it in time)."""


@runtime_checkable
class LeaseStore(Protocol):
    """A system that can hold coordinator leases atomically (the local log)."""

    async def acquire_lease(self, job: str, token: str, holder: str, ttl_ms: int,
                            now_ms: int, replacing: str | None = None
                            ) -> tuple[str, str, int] | None: ...

    async def release_lease(self, job: str, token: str) -> None: ...

    async def read_lease(self, job: str) -> tuple[str, int] | None: ...


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: enough for an operator to find and stop it."""

    pid: int
    host: str
    since_ms: int
    member: str = ""
    """Its member id in the Kafka lease group (KIP-848 protocol); "" elsewhere."""

    def to_json(self) -> str:
        data: dict[str, object] = {"pid": self.pid, "host": self.host,
                                   "since_ms": self.since_ms}
        if self.member:
            data["member"] = self.member
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> Holder:
        data = json.loads(text)
        return cls(int(data["pid"]), str(data["host"]), int(data["since_ms"]),
                   str(data.get("member", "")))

    def running(self, job: str, expiry: str) -> str:
        """The refusal of a second coordinator: who runs ``job``, how to stop it, and
        ``expiry`` (when a dead holder would be replaced)."""
        return (
            f"job {job!r} is already running: its coordinator is pid {self.pid} on host "
            f"{self.host}, running since {_clock(self.since_ms)}. Stop it first (Ctrl-C in "
            f"its terminal, or `kill {self.pid}` on {self.host}: its workers commit and "
            f"stop), then run again. A coordinator that died is replaced automatically: "
            f"{expiry}")

    def gone(self) -> bool:
        """True when this holder ran on this host and its process no longer runs."""
        return self.host == socket.gethostname() and not pid_alive(self.pid)


def pid_alive(pid: object) -> bool:
    """Whether process ``pid`` runs on this host (a zombie, killed but not yet reaped by
    its parent, does not)."""
    if not isinstance(pid, int | str) or not str(pid).isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _now_ms() -> int:
    return int(time.time() * 1000)


def _clock(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


class CoordinatorLease:
    """The lease of one job, held by this process while `keep` runs."""

    def __init__(self, store: LeaseStore, job: str, ttl_ms: int) -> None:
        self.store = store
        self.job = job
        self.ttl_ms = ttl_ms
        self.token = uuid.uuid4().hex
        self.holder = Holder(os.getpid(), socket.gethostname(), _now_ms())
        self.held = False

    async def acquire(self) -> None:
        """Take the lease or raise `CoordinatorRunningError` naming its holder."""
        found = await self.store.acquire_lease(self.job, self.token, self.holder.to_json(),
                                               self.ttl_ms, _now_ms())
        if found is not None:
            token, text, expires_ms = found
            other = Holder.from_json(text)
            if other.gone():
                found = await self.store.acquire_lease(
                    self.job, self.token, self.holder.to_json(), self.ttl_ms, _now_ms(),
                    replacing=token)
                if found is None:
                    log.warning("took over the lease of job %r from coordinator pid %d, which "
                                "is no longer running", self.job, other.pid)
            if found is not None:
                raise CoordinatorRunningError(self._running(other, expires_ms))
        self.held = True

    def _running(self, other: Holder, expires_ms: int) -> str:
        return other.running(self.job, (
            f"its lease expires within {self.ttl_ms / 1000:g} s of its last renewal (this one "
            f"in {max(0, expires_ms - _now_ms()) / 1000:.1f} s)"))

    async def keep(self, lost: asyncio.Event) -> None:
        """Renew every third of the timeout until cancelled; set ``lost`` if taken over."""
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            try:
                found = await self.store.acquire_lease(
                    self.job, self.token, self.holder.to_json(), self.ttl_ms, _now_ms())
            except SampanError as error:  # a busy database: try again at the next turn
                log.warning("could not renew the lease of job %r: %s", self.job, error)
                continue
            if found is not None:
                self.held = False
                other = Holder.from_json(found[1])
                log.error("lost the lease of job %r to coordinator pid %d on %s", self.job,
                          other.pid, other.host)
                lost.set()
                return

    async def release(self) -> None:
        """Give the lease up (a clean stop), so the next `sampan run` starts at once."""
        if self.held:
            self.held = False
            with contextlib.suppress(SampanError):
                await self.store.release_lease(self.job, self.token)
