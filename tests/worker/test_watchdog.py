"""The task watchdog, alone: it stops a process only when one call makes no progress."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from framework.errors import EXIT_STUCK
from framework.worker.watchdog import Busy, Stall, TaskWatchdog
from groupers import SystemStreamPartition

SSP = SystemStreamPartition("local", "words", 3)


@dataclass
class FakeTask:
    name: str
    positions: dict[SystemStreamPartition, int] = field(default_factory=dict)
    processed: int = 0
    skipped: int = 0


def watch(busy: Busy | None, seconds: float, timeout: float = 0.4,
          advance: FakeTask | None = None) -> list[int]:
    """Run a watchdog for ``seconds``; ``advance`` makes progress all the while."""
    exits: list[int] = []
    exited = threading.Event()

    def record(code: int) -> None:
        exits.append(code)
        exited.set()

    dog = TaskWatchdog(lambda: busy, timeout, exit=record)
    dog.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not exited.is_set():
        if advance is not None:
            advance.processed += 1
        time.sleep(0.01)
    dog.stop()
    return exits


def test_a_call_without_progress_stops_the_process_naming_task_ssp_and_offset(
        caplog: object) -> None:
    task = FakeTask("Partition 3", {SSP: 42})
    exits: list[int] = []
    exited = threading.Event()
    busy = Busy("process", (task,), SSP)  # one object per call, as the worker makes them
    dog = TaskWatchdog(lambda: busy, 0.3,
                       exit=lambda code: (exits.append(code), exited.set()))
    dog.start()
    assert exited.wait(30), "the watchdog never fired"
    dog.stop()
    assert exits == [EXIT_STUCK]
    assert ("task 'Partition 3' stuck in process() on local.words[3] offset 42 for "
            in caplog.text)  # type: ignore[attr-defined]
    assert "(job.task_timeout_ms = 300); stopping this worker" in caplog.text  # type: ignore


def test_progress_or_idleness_never_stops_the_process() -> None:
    task = FakeTask("Partition 3", {SSP: 1})
    assert watch(Busy("process", (task,), SSP), 1.5, advance=task) == []
    assert watch(None, 1.5) == []


def test_a_stuck_window_call_is_named_too() -> None:
    assert Busy("window", (FakeTask("Partition 0"),)).describe() == (
        "task 'Partition 0' stuck in window()")


def test_a_zero_timeout_disables_the_watchdog() -> None:
    task = FakeTask("Partition 3", {SSP: 1})
    assert watch(Busy("process", (task,), SSP), 1.0, timeout=0) == []


def test_time_the_process_was_suspended_does_not_count_as_stuck() -> None:
    """A worker paused by SIGSTOP (or a frozen VM) for longer than the timeout and resumed
    is judged by its own running time; a call stuck while running still fires."""
    busy = Busy("process", (FakeTask("Partition 3", {SSP: 1}),), SSP)
    stall = Stall(timeout_s=2.0)
    assert not any(stall.observe(busy, now / 2, 0.5) for now in range(3))  # 0 … 1 s
    assert not stall.observe(busy, 101.0, 0.5)  # 99.5 s late: suspended, not stuck
    assert stall.seconds == 1.5  # running time: 1 s before the pause, one interval after
    assert stall.observe(busy, 101.5, 0.5)  # 2 s of running time without progress
    # A look only a little late (a busy machine) still counts in full.
    slow = Stall(timeout_s=2.0)
    assert not slow.observe(busy, 0.0, 0.5)
    assert slow.observe(busy, 4.0, 0.5)
