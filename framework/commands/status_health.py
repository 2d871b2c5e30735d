"""What `sampan status` concludes: the job's health, the problems behind it, and the exit
status a health check acts on (systemd ``ExecCondition``, a Kubernetes probe, cron).

- 0 ``healthy``: the coordinator runs (its process and its lease are alive), nothing below;
- 1 ``degraded``: it runs, but a worker is down or crash-looping, a partition change is
  refused, or a system of the job is unreachable;
- 2: the status could not be read (a bad job file; the metadata system unreachable and no
  coordinator of the job on this machine);
- 3 ``not running``: never started, stopped, or its coordinator is gone (killed: its
  process or its lease is dead);
- 4 ``failed``: the coordinator gave up (a crash loop, a recreated input, a lost lease).

`--json` and the text output exit alike.
"""

from __future__ import annotations

import time

from framework.commands.status_document import EXIT_STATUS, Health, JobStatus
from framework.metadata import CoordinatorStatus

__all__ = ["CRASH_LOOP", "EXIT_STATUS", "SETTLED_MS", "Health", "assess", "crash_lines"]

CRASH_LOOP = 2
"""Crashes of one worker within the crash window that make it crash-looping…"""
SETTLED_MS = 30_000
"""… until it has run this long since its last restart (after an outage of a broker, say)."""


def _clock(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def _span(ms: int | None) -> str:
    if ms is None:
        return "the crash window"
    return f"{ms / 60000:g} min" if ms >= 60000 else f"{ms / 1000:g} s"


def crash_lines(report: CoordinatorStatus | None, now_ms: int) -> list[tuple[bool, str]]:
    """(is a problem, line) per worker that crashed within the crash window of the
    coordinator's ``report``: down now (waiting for its restart) or crash-looping
    (`CRASH_LOOP` crashes, not yet running `SETTLED_MS` since the last) are problems;
    other crashes are reported only."""
    if report is None:
        return []
    window = report.crash_window_ms
    oldest = now_ms - window if window else None
    limit = report.max_restarts
    lines = []
    for crash in report.crashes:
        exits = [t for t in crash.exits_ms if oldest is None or t >= oldest]
        down = crash.restart_ms is not None
        if not exits and not down:
            continue
        error = f": {crash.last_error}" if crash.last_error else ""
        count = f"{len(exits)} crash{'es' if len(exits) != 1 else ''} in the last {_span(window)}"
        gives_up = f", the job stops after {limit}" if limit is not None else ""
        last = f"last {crash.last_exit} at {_clock(exits[-1] if exits else None)}"
        if down:
            lines.append((True, f"worker {crash.worker} is down ({last}), restarting at "
                                f"{_clock(crash.restart_ms)}; {count}{gives_up}{error}"))
        elif len(exits) >= CRASH_LOOP and now_ms - (crash.restarted_ms or 0) < SETTLED_MS:
            lines.append((True, f"worker {crash.worker} is crash-looping: {count}"
                                f"{gives_up} ({last}){error}"))
        else:
            lines.append((False, f"worker {crash.worker} runs again after {count} "
                                 f"({last}){error}"))
    return lines


def assess(status: JobStatus, now_ms: int | None = None) -> Health:
    """The health of the job ``status`` (`collect_status`'s) describes."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    state = status.state
    if state == "failed":
        return Health("failed", [status.error or "the coordinator failed"])
    if state != "running":
        return Health("not running", [status.not_running or f"the job is {state}"])
    report = status.report
    problems = [line for problem, line in crash_lines(report, now) if problem]
    if report is not None and report.refusal:
        problems.append(f"partition change {report.refusal.change} refused: records written "
                        f"since wait until it is resolved")
    for outage in status.unreachable:
        problems.append(f"system {outage.system!r} unreachable since "
                        f"{_clock(outage.since_ms)}: {outage.error}")
    hosts = status.figures.hosts if status.figures is not None else None
    for name, host in (hosts or {}).items():
        if host.in_model and host.report.state != "running":
            problems.append(f"host {name} is {host.report.state}")
    return Health("degraded" if problems else "healthy", problems)
