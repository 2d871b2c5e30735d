"""Taking a newer job model in place (`framework.worker.in_place`): a commit the fence
refused is written again at the new epoch, tasks let go are closed and committed, tasks
that gain partitions are committed and initialised again seeing them (stores stay open),
tasks added start restoring aside; the rest never stop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from framework.api import StreamTask
from framework.config import JobConfig
from framework.errors import FencedError, PermanentError, ProcessingError
from framework.inputs_check import start_positions
from framework.metadata.jobmodel import JobModel
from framework.systems.base import System
from framework.wording import counted
from framework.worker.commit import Committer
from framework.worker.dispatch import Batch
from framework.worker.following import Following, reads_as_before
from framework.worker.in_place import InPlaceChange
from framework.worker.policies import describe
from framework.worker.routing import Routing
from framework.worker.scheduling import CommitSchedule
from framework.worker.tasks import Tasks

__all__ = ["ModelChanges", "Taken"]

log = logging.getLogger(__name__)

Released = Callable[[list[str], Committer], Awaitable[None]]
"""What the worker does once tasks let go were committed and closed (it reports)."""


@dataclass(frozen=True)
class Taken:
    """A newer model taken in place: what changed here and how long it held the loop."""

    change: InPlaceChange
    previous: JobModel
    took_ms: int
    steps: str
    """How long reading the model and committing held the loop, for the log."""
    summary: str
    """What changed for this worker, for the log (``nothing changes here`` when nothing)."""


class ModelChanges:
    """Takes the newer model `Following` read into one worker's tasks, routes and
    commits; ``released`` is called when tasks let go were closed on the way."""

    def __init__(self, config: JobConfig, systems: Mapping[str, System], tasks: Tasks,
                 routing: Routing, schedule: CommitSchedule, following: Following,
                 released: Released) -> None:
        self.config = config
        self.systems = systems
        self.tasks = tasks
        self.routing = routing
        self.schedule = schedule
        self.following = following
        self.released = released
        self.taken = 0
        """Newer models taken in place so far."""

    async def take(self, model: JobModel, committer: Committer, task_class: type[StreamTask],
                   prefetched: dict[str, asyncio.Future[Batch]]) -> Taken:
        """Go on from ``model`` under the newer model a fence announced when it can be
        taken in place (`in_place_change`); otherwise the fence's error is raised: the
        worker stops without committing and its supervisor starts it on the new model."""
        newer, fenced = self.following.take()
        began = time.monotonic()
        closed: set[str] = set()
        reading = committing = 0.0  # seconds: how long each step held the loop (the log)
        instances = self.tasks.instances
        for attempt in range(3):  # the model may move on again while this one is taken
            step = time.monotonic()
            change = await (newer if attempt == 0 else self.following.newer_change())
            reading += time.monotonic() - step
            if isinstance(change, str):
                log.warning("worker %d of epoch %d fenced: a newer job model exists; "
                            "stopping without committing (%s)", self.following.worker_id,
                            model.epoch, change)
                raise fenced
            for instance in instances:  # a task let go closes first: its last
                if instance.name in change.dropped and instance.name not in closed:
                    closed.add(instance.name)  # writes and outputs are committed
                    await instance.close()
            step = time.monotonic()
            renews = bool(change.gained)
            try:  # what is renewed is committed now; tasks let go at the next commit
                await committer.retry_at(change.model.epoch, wait=renews)
                if renews:
                    taking = self.schedule.to_commit(instances)
                    before = committer.prepared
                    await committer.start(taking)
                    self.schedule.carried(taking, instances, committer, before)
                    await committer.settle()
            except FencedError as again:
                fenced = again
                continue
            finally:
                committing += time.monotonic() - step
            break
        else:
            raise fenced
        for instance in instances:  # closed for a model that moved on again
            if instance.name in closed - set(change.dropped):
                await instance.renew(task_class(), {})
        as_before = reads_as_before(change, model, self.routing.limits,
                                    [i.name for i in instances])
        if not as_before:
            for future in prefetched.values():  # read at the old assignment: read again
                future.cancel()
            await asyncio.gather(*prefetched.values(), return_exceptions=True)
            prefetched.clear()
        await self._apply(change, committer, task_class, as_before)
        took_ms = int((time.monotonic() - began) * 1000)
        steps = f"model read {reading * 1000:.0f} ms, commits {committing * 1000:.0f} ms"
        return Taken(change, model, took_ms, steps, _summary(change, model))

    async def _apply(self, change: InPlaceChange, committer: Committer,
                     task_class: type[StreamTask], as_before: bool) -> None:
        """Run ``change.model`` from now on: tasks let go, new partitions, barriers and
        limits; tasks added start restoring aside (the worker's loop runs them)."""
        model = change.model
        for name in change.dropped:
            if change.gained:  # committed with the tasks renewed
                await self.tasks.drop(name, committer)
                self.routing.forget(name)
            else:
                await self.release(name)
        if self.schedule.releasing.keys() & set(change.added):  # given back before it was
            await self.released(  # let go: committed and closed now
                await self.schedule.commit_releases(committer, self.tasks.instances),
                committer)
        for instance in self.tasks.instances:
            gained = change.gained.get(instance.name)
            if gained:
                task_model = model.tasks[instance.name]
                start = await start_positions(self.config, self.systems, replace(
                    task_model, ssps=gained, broadcast=frozenset()), None)
                try:
                    await instance.renew(task_class(), start)
                except PermanentError:
                    raise
                except Exception as error:
                    raise ProcessingError(
                        f"task {instance.name!r}: init() raised {describe(error)} when it "
                        f"gained partitions in epoch {model.epoch}; fix the task's init and "
                        "restart") from error
            self.routing.set_stages(instance.name, model.tasks[instance.name].stages)
        for name in change.added:
            self.tasks.start_adding(model.tasks[name])
        self.routing.set_limits(model.read_limits())
        if not as_before:
            self.routing.release_barriers(self.tasks.instances, model)
            self.routing.route(self.tasks.instances, model)

    async def release(self, name: str) -> None:
        """Stop running task ``name`` (closed by the caller) but keep its stores open
        until the next commit, which carries its last writes, lands."""
        instance = await self.tasks.remove(name)
        self.routing.forget(name)
        if instance is not None:
            self.schedule.let_go(instance)


def _summary(change: InPlaceChange, previous: JobModel) -> str:
    """What ``change`` does to one worker, for the log line."""
    model = change.model
    done = [f"task {t} +{counted(len(s), 'partition')}"
            for t, s in sorted(change.gained.items())]
    done += [f"task {t} let go" for t in change.dropped]
    done += [f"task {t} added" for t in change.added]
    done += [f"{'hold' if s in model.holds else 'release'} {s}"
             for s in sorted(set(model.holds) ^ set(previous.holds))]
    return ", ".join(done) or "nothing changes here"
