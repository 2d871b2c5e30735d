"""`sampan status --watch`: the status as rich tables refreshed in place until Ctrl-C; into
a pipe or a file, one text frame (as `sampan status` prints it) per refresh instead.

Ctrl-C ends it promptly whatever the reader of its output does: a write blocked on a
terminal or pipe nobody reads is interrupted, and the last output is given up after
`FINAL_OUTPUT_S` instead of blocking the exit."""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from framework.commands.status_document import JobStatus
from framework.commands.status_text import print_status
from framework.errors import SampanError
from framework.wording import counted

__all__ = ["FINAL_OUTPUT_S", "render", "watch"]

FINAL_OUTPUT_S = 2.0
"""How long a watch stopped by Ctrl-C waits for its reader to take its last output (the
live table's final frame and the cursor shown again, or the rest of a text frame)."""


def _clock(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def render(status: JobStatus) -> Group:
    """One frame: the job line, its health, tasks (rate, lag per stream), restores,
    expansions."""
    figures, report = status.figures, status.report
    if figures is None or report is None:  # never started, or metadata unreachable
        text = io.StringIO()
        print_status(status, text)
        return Group(Text(text.getvalue().rstrip(), style="bold"),
                     Text("Ctrl-C to stop", style="dim"))
    head = Text(f"job {status.job}: epoch {figures.epoch}, "
                f"{counted(figures.workers, 'worker')}, "
                f"coordinator {status.state}, total lag {figures.total_lag}",
                style="bold")
    verdict = status.health
    health = Text("\n".join([f"health: {verdict.health}",
                              *(f"  {p}" for p in verdict.problems)]),
                  style="bold" if verdict.health == "healthy" else "bold red")
    tasks = Table("task", "worker", "records/s", "lag per stream", "barrier", title="tasks",
                  title_justify="left")
    for task in figures.tasks:
        stages = task.barrier_stages - task.barrier_stages_passed
        tasks.add_row(task.task, str(task.worker),
                      "-" if task.rate is None else f"{task.rate:,.1f}",
                      ", ".join(f"{s} {n}" for s, n in sorted(task.lag_by_stream.items())),
                      f"{stages} pending" if stages else "")
    parts: list[Any] = [head, health, tasks]
    if figures.restoring:
        restores = Table("worker", "task", "store", "restored", "rate/s", "ETA",
                         title="restoring", title_justify="left")
        for row in figures.restoring:
            restore = row.progress
            eta = "-" if restore.eta_s is None else f"{restore.eta_s:,.0f} s"
            restores.add_row(str(row.worker), restore.task, restore.store,
                             f"{restore.restored:,}/{restore.to_restore:,}",
                             f"{restore.rate:,.0f}", eta)
        parts.append(restores)
    if figures.expansions:
        table = Table("change", "epoch", "detected", "pause", title="last expansions",
                      title_justify="left")
        for expansion in figures.expansions[-3:]:
            record = expansion.record
            table.add_row(record.change, str(record.epoch), _clock(record.detected_ms),
                          "-" if record.pause_ms is None else f"{record.pause_ms} ms")
        parts.append(table)
    if status.error:
        parts.append(Text(f"FAILED: {status.error}", style="bold red"))
    if report.refusal:
        parts.append(Text(f"REFUSED: {report.refusal.error}", style="bold red"))
    parts.append(Text("Ctrl-C to stop", style="dim"))
    return Group(*parts)


def watch(collect: Callable[[], JobStatus], interval: float) -> int:
    """Redraw ``collect()`` every ``interval`` seconds until Ctrl-C (exit 0). A failed
    read shows its error in the frame and is retried."""
    if not sys.stdout.isatty():
        return _stream(collect, interval)
    live = Live(Text("reading the job's status …"), auto_refresh=False, screen=False)
    try:
        live.start()
        while True:
            try:
                frame: Any = render(collect())
            except SampanError as error:
                frame = Text(f"cannot read the status: {error}", style="bold red")
            live.update(frame, refresh=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        _finish_output(live.stop)
        return 0
    finally:
        live.stop()  # after another error; a no-op once stopped


def _stream(collect: Callable[[], JobStatus], interval: float) -> int:
    """`watch` into a pipe or a file: a timestamped text frame per refresh, flushed at once
    (a live table would only be drawn when it stops)."""
    try:
        while True:
            print(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} ---", flush=True)
            try:
                print_status(collect(), sys.stdout)
            except SampanError as error:
                print(f"cannot read the status: {error}")
            sys.stdout.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        _finish_output(lambda: None)
        return 0


class _OutputStuck(Exception):
    """The reader did not take the watch's last output within `FINAL_OUTPUT_S`."""


def _finish_output(finish: Callable[[], object]) -> None:
    """Run ``finish`` (the watch's last writes) and flush stdout, for at most
    `FINAL_OUTPUT_S`: past that, or on a second Ctrl-C, the rest is dropped and stdout
    goes to /dev/null, so that the interpreter's flush at exit cannot block either."""
    armed = True

    def stuck(_signum: int, _frame: object) -> None:
        if armed:
            raise _OutputStuck

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.setitimer(signal.ITIMER_REAL, FINAL_OUTPUT_S)
    try:
        finish()
        sys.stdout.flush()
        armed = False
    except (_OutputStuck, KeyboardInterrupt, OSError):
        armed = False
        os.dup2(os.open(os.devnull, os.O_WRONLY), (sys.__stdout__ or sys.stdout).fileno())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
