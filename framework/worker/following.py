"""Following the job model: a running worker asks the fence aside every second; when a
newer model fenced it (at that check or at a commit) it reads that model aside while its
tasks go on, and the worker takes it in place (`framework.worker.in_place`) — or, for a
worker that runs only the model it was given, stops."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol

from framework.errors import FencedError
from framework.metadata.jobmodel import JobModel
from framework.worker.in_place import InPlaceChange, in_place_change
from groupers import SystemStreamPartition

__all__ = ["FENCE_CHECK_IDLE_S", "FENCE_CHECK_S", "MODEL_WAIT_S", "Following", "ModelSource",
           "reads_as_before"]

log = logging.getLogger(__name__)

FENCE_CHECK_S = 1.0
"""How often a worker asks whether its epoch is still the job's current one."""
MODEL_WAIT_S = 10.0
"""How long a fenced worker waits for the newer model to be on the coordinator stream (its
publisher moves the fence first, then writes it)."""
FENCE_CHECK_IDLE_S = 0.2
"""How often it asks while its fetches find nothing: where an input grew, reading stops
until the model of the new count arrives, and a model taken in place ends that wait."""


class ModelSource(Protocol):
    """Where newer job models are read (the coordinator stream's `CoordinatorReader`)."""

    async def latest_model(self) -> JobModel | None: ...


def reads_as_before(change: InPlaceChange, current: JobModel,
                    limits: Mapping[SystemStreamPartition, int], tasks: Iterable[str]) -> bool:
    """Whether a worker running ``tasks`` under ``current`` (reading held inputs up to
    ``limits``) reads its inputs under ``change.model`` exactly as now: the same tasks,
    partitions, barriers, limits and expected partition counts (a rebalance moving tasks of
    other workers only): no consumer is reassigned."""
    model = change.model
    return not (change.gained or change.added or change.dropped) and (
        model.partition_counts == current.partition_counts
        and model.read_limits() == limits and dict(model.holds) == dict(current.holds)
        and all(model.tasks[t].stages == current.tasks[t].stages for t in tasks))


class Following:
    """The job model one worker runs, its fence checks, and the newer model a fence
    announced, read aside."""

    def __init__(self, worker_id: int, digest: str, model: JobModel | None, *, in_place: bool,
                 check: Callable[[], Awaitable[None]], on_newer: Callable[[], None]) -> None:
        self.worker_id = worker_id
        self.model = model
        """The model the worker runs (given, or loaded at its start; then each one taken
        in place)."""
        self.digest = digest
        """The job file's `JobConfig.digest`: a model of another one is not taken in place."""
        self.in_place = in_place
        self.check = check
        """Asks the metadata system whether the worker's epoch is still current
        (`FencedError` when not)."""
        self.on_newer = on_newer
        """Called when a fence starts the reading of a newer model."""
        self.source: ModelSource | None = None
        """Where newer models are read (set once the systems are open)."""
        self.newer: asyncio.Future[InPlaceChange | str] | None = None
        """The newer model a fence announced, read aside while the tasks go on (no commit
        until it is taken: `take`)."""
        self.fenced: FencedError | None = None
        self.fence_check: tuple[int, asyncio.Future[None]] | None = None
        """The fence check in flight (`FENCE_CHECK_S`), answered aside, and the epoch it
        asks about (an answer for an epoch the worker has left since is dropped)."""
        self.next_check = time.monotonic() + FENCE_CHECK_S

    async def unless_newer(self, step: Awaitable[None]) -> bool:
        """Run ``step`` (a fence check or a commit at the model's epoch); when a newer job
        model fenced it, start reading that model aside (the worker takes it once read)
        or, for a worker that runs only the model it was given, raise. True when the step
        went through without a fence."""
        assert self.model is not None
        model = self.model
        try:
            await step
        except FencedError as fenced:
            if not self.in_place:
                log.warning("worker %d of epoch %d fenced: a newer job model exists; "
                            "stopping without committing (it runs the model it was given: "
                            "it restarts on the new one)", self.worker_id, model.epoch)
                raise
            self.fenced = fenced
            if self.newer is None:
                self.on_newer()
                self.newer = asyncio.ensure_future(self.newer_change())
            return False
        return True

    async def newer_change(self) -> InPlaceChange | str:
        """`in_place_change` from the model to the latest one; the fence moves before the
        model is written, so a model not there yet is waited for (up to `MODEL_WAIT_S`)."""
        assert self.source is not None and self.model is not None
        model = self.model
        deadline = time.monotonic() + MODEL_WAIT_S
        while True:
            latest = await self.source.latest_model()
            if (latest is not None and latest.epoch > model.epoch) or (
                    time.monotonic() > deadline):
                return in_place_change(model, latest, self.worker_id, self.digest)
            await asyncio.sleep(0.1)

    def due(self, waiting: bool) -> bool:
        """Whether to take the newer model now: it was read, or the worker waits for it
        (``waiting``: stopping, or a task wants a commit)."""
        return self.newer is not None and (self.newer.done() or waiting)

    def take(self) -> tuple[asyncio.Future[InPlaceChange | str], FencedError]:
        """The newer model being read and the fence that announced it, handed over."""
        assert self.newer is not None and self.fenced is not None
        taken = self.newer, self.fenced
        self.newer = self.fenced = None
        return taken

    def ask(self, now: float, read: bool) -> None:
        """Ask the fence aside (the tasks go on while the metadata system answers) every
        `FENCE_CHECK_S`, or after `FENCE_CHECK_IDLE_S` when nothing was ``read`` (a stale
        worker stops without having to commit); never while a newer model is read."""
        if self.newer is None and self.fence_check is None and (now >= self.next_check or (
                not read and now >= self.next_check - FENCE_CHECK_S + FENCE_CHECK_IDLE_S)):
            assert self.model is not None
            self.fence_check = (self.model.epoch, asyncio.ensure_future(self.check()))
            self.next_check = now + FENCE_CHECK_S

    def answer(self) -> asyncio.Future[None] | None:
        """The fence check's answer once it came, if it is about the model's epoch; an
        answer about an epoch the worker has left is dropped."""
        if self.fence_check is None or not self.fence_check[1].done():
            return None
        (asked_at, answered), self.fence_check = self.fence_check, None
        if self.model is None or asked_at == self.model.epoch:
            return answered
        if not answered.cancelled():
            answered.exception()  # retrieved: asyncio would log it as never read
        return None

    async def stop(self) -> None:
        """Cancel the model read and the fence check in flight, and wait for them."""
        for aside in (self.newer, self.fence_check and self.fence_check[1]):
            if aside is not None:
                aside.cancel()
                await asyncio.gather(aside, return_exceptions=True)
        self.fence_check = None
