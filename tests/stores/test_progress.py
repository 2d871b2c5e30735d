"""Progress: log lines at 25/50/75% and every interval when not on a terminal; the end of
a completed operation is its caller's to log (one rate per operation)."""

from __future__ import annotations

import io
import logging

import pytest

from framework.progress import Progress


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "framework.progress"]


def test_lines_at_each_quarter_with_counts_and_rate(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "framework.progress")
    with Progress("restore counts", 1_000, tty=False, clock=clock) as progress:
        for _ in range(10):
            clock.now += 0.5
            progress.advance(100)
    assert lines(caplog) == [
        "restore counts: 300/1,000 records (30%) at 200 records/s",
        "restore counts: 500/1,000 records (50%) at 200 records/s",
        "restore counts: 800/1,000 records (80%) at 200 records/s",
    ]


def test_a_slow_operation_logs_every_interval(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "framework.progress")
    progress = Progress("restore counts", 1_000_000, tty=False, interval=10.0, clock=clock)
    for step in range(1, 8):
        clock.now += 4.0
        progress.advance(1_000 * step)
    assert lines(caplog) == [
        "restore counts: 6,000/1,000,000 records (0%) at 500 records/s",  # 12s
        "restore counts: 21,000/1,000,000 records (2%) at 875 records/s",  # 24s
    ]


def test_closing_early_reports_where_it_stopped(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "framework.progress")
    progress = Progress("restore counts", 200, tty=False, unit="offsets", clock=clock)
    clock.now += 2.0
    progress.advance(20)
    progress.close()
    progress.close()
    assert lines(caplog) == ["restore counts: 20/200 offsets (10%) stopped at 10 offsets/s"]


def test_an_unknown_total_reports_the_count_when_done(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "framework.progress")
    with Progress("drill", None, tty=False, clock=clock) as progress:
        clock.now += 1.0
        progress.advance(42)
    assert lines(caplog) == ["drill: 42 records done at 42 records/s"]


def test_a_terminal_gets_a_bar_instead_of_log_lines(
    clock: Clock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, "framework.progress")
    screen = io.StringIO()
    monkeypatch.setattr("sys.stderr", screen)
    with Progress("restore counts", 10, tty=True, clock=clock) as progress:
        clock.now += 1.0
        progress.advance(10)
    assert lines(caplog) == []
    assert "restore counts" in screen.getvalue()
    assert "10/10" in screen.getvalue()
