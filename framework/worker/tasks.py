"""The tasks one worker runs: each task's instance over its restored stores, what was
restored for which task (the worker's report), and tasks added or let go in place (an
added task's stores are opened and restored aside while the others go on)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace

from framework.api import StreamTask
from framework.config import JobConfig
from framework.errors import PermanentError, ProcessingError
from framework.inputs_check import start_positions
from framework.metadata import WorkerReport
from framework.metadata.jobmodel import TaskModel
from framework.stores.buffer import TaskStore
from framework.systems.base import Checkpoint, System
from framework.worker.commit import Committer
from framework.worker.instance import TaskInstance
from framework.worker.policies import describe
from framework.worker.scheduling import close_stores, forget_positions
from framework.worker.task_stores import OpenedStores, open_task_stores
from groupers import SystemStreamPartition

__all__ = ["Adding", "Journal", "Tasks"]

log = logging.getLogger(__name__)

Adding = tuple[Checkpoint | None, OpenedStores, dict[SystemStreamPartition, int]]
"""A task added in place, made ready aside: its checkpoint, restored stores and where its
inputs start (`Tasks.open_added`)."""
Journal = list[tuple[TaskStore, bytes, object, object]]
"""``errors.process_policy`` skip/dead-letter: the writes that undo a failed call's."""


class Tasks:
    """The instances running here (in start order) and their restore figures."""

    def __init__(self, config: JobConfig, systems: Mapping[str, System],
                 stopping: Callable[[], bool]) -> None:
        self.config = config
        self.systems = systems
        self.stopping = stopping
        """Whether the worker was asked to stop (a restore in progress ends early)."""
        self.instances: list[TaskInstance] = []
        self.journals: dict[str, Journal] = {}
        """Per task, with a skip or dead-letter ``process_policy``."""
        self.adding: dict[str, asyncio.Future[Adding]] = {}
        """Tasks added in place whose stores are being opened and restored."""
        self.restored = 0
        """Changelog records restored at this start and for tasks added since."""
        self.restore_modes: dict[str, str] = {}  # "task/store" -> none | delta | full
        self._restored: dict[str, tuple[int, int, int]] = {}
        """Task → (records restored, epoch it was started at, changelog offsets restored to):
        `WorkerReport.restored_tasks`, ``task_epochs`` and ``restored_ends``."""

    async def run_task(self, task_model: TaskModel, epoch: int, checkpoint: Checkpoint | None,
                       opened: OpenedStores, task_class: type[StreamTask],
                       start: dict[SystemStreamPartition, int] | None = None) -> TaskInstance:
        """Add ``task_model``'s instance over its opened stores, initialised (the caller
        routes its input); ``start``: its inputs' start positions when already read."""
        self.restored += opened.restored
        self._restored[task_model.name] = (opened.restored, epoch, sum(opened.positions.values()))
        self.restore_modes.update({f"{task_model.name}/{s}": m
                                   for s, m in opened.modes.items()})
        instance = TaskInstance(
            task_model.name, task_class(), task_model.ssps | task_model.broadcast,
            opened.stores, self.config,
            start if start is not None else await start_positions(
                self.config, self.systems, task_model, checkpoint))
        self.instances.append(instance)  # closed with the worker even if init fails
        try:
            await instance.init()
        except PermanentError:
            raise  # e.g. an undeclared store: every restart would fail alike; the job stops
        except Exception as error:
            raise ProcessingError(
                f"task {task_model.name!r}: init() raised {describe(error)}; fix the "
                f"task's init and restart") from error
        if self.config.errors.process_policy != "fail":
            journal: Journal = []
            for store in instance.stores.values():
                if isinstance(store, TaskStore):
                    store.journal = journal
            self.journals[instance.name] = journal
        return instance

    def reported(self, report: WorkerReport) -> WorkerReport:
        """``report`` with `WorkerReport.restored_tasks`, `task_epochs` and `restored_ends`
        of the tasks running here."""
        running = [i.name for i in self.instances]
        figures = {t: self._restored[t] for t in running if t in self._restored}
        return replace(report, tasks=running,
                       restored_tasks={t: f[0] for t, f in figures.items()},
                       task_epochs={t: f[1] for t, f in figures.items()},
                       restored_ends={t: f[2] for t, f in figures.items()})

    def start_adding(self, task_model: TaskModel) -> None:
        """Open and restore the stores of ``task_model`` aside (`admit` runs it)."""
        if task_model.name not in self.adding:
            self.adding[task_model.name] = asyncio.ensure_future(self.open_added(task_model))

    async def open_added(self, task_model: TaskModel) -> Adding:
        """Open and restore the stores of a task added in place, and read where its inputs
        start, beside the running tasks (whose loop then only initialises and routes it)."""
        meta = self.systems[self.config.metadata_system]
        checkpoint = (await meta.read_checkpoints(self.config.name)).get(task_model.name)
        opened = await open_task_stores(self.config, task_model, checkpoint, meta,
                                        stop=self.stopping)
        try:
            start = await start_positions(self.config, self.systems, task_model, checkpoint)
        except BaseException:
            for store in opened.stores.values():
                store.close()
            raise
        return checkpoint, opened, start

    async def completed_start(self, task_model: TaskModel, checkpoint: Checkpoint | None,
                              start: dict[SystemStreamPartition, int]
                              ) -> dict[SystemStreamPartition, int]:
        """``start`` (read when the task was added) with the inputs ``task_model`` gained
        since — a newer model taken in place while its stores were restoring — read as any
        task's: from the checkpoint, else from their oldest record."""
        missing = (task_model.ssps | task_model.broadcast) - start.keys()
        if not missing:
            return start
        gained = replace(task_model, ssps=task_model.ssps & missing,
                         broadcast=task_model.broadcast & missing)
        return {**start, **await start_positions(self.config, self.systems, gained,
                                                 checkpoint)}

    def ready(self) -> list[tuple[str, Adding]]:
        """The added tasks whose stores are restored, no longer being added (the caller
        runs them)."""
        done = [(name, opening) for name, opening in self.adding.items() if opening.done()]
        for name, _ in done:
            del self.adding[name]
        return [(name, opening.result()) for name, opening in done]

    async def cancel_adding(self, name: str) -> None:
        """Stop adding task ``name`` if it is being added; close what it opened."""
        adding = self.adding.pop(name, None)
        if adding is not None:  # still restoring: its stores close as it is cancelled
            adding.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                opened = await adding  # it had finished: close what it opened
                for store in opened[1].stores.values():
                    store.close()

    async def remove(self, name: str) -> TaskInstance | None:
        """Stop running task ``name`` here (an addition in progress is cancelled): its
        instance, no longer routed or committed, if it ran."""
        await self.cancel_adding(name)
        instance = next((i for i in self.instances if i.name == name), None)
        if instance is not None:
            self.instances.remove(instance)
            self.journals.pop(name, None)
        return instance

    async def drop(self, name: str, committer: Committer) -> TaskInstance | None:
        """Let task ``name`` go (closed and committed by the caller): close its stores."""
        instance = await self.remove(name)
        if instance is not None:
            forget_positions(committer, name)
            close_stores(instance)
        return instance
