"""Restore progress per (task, store): what the metrics and the restore reports show."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from framework.metadata import RestoreProgress
from framework.progress import Progress, ProgressFactory, Reporter

__all__ = ["RestoreFigures", "RestoreTracker"]


@dataclass
class RestoreFigures:
    """One store's restore: records applied of the total, since when, done or not."""

    total: int
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    finished: bool = False

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0


class _TeeReporter:
    """Passes progress to the log/bar reporter and keeps the figures."""

    def __init__(self, inner: Reporter, figures: RestoreFigures) -> None:
        self._inner = inner
        self._figures = figures

    def advance(self, amount: int) -> None:
        self._figures.done += amount
        self._inner.advance(amount)

    def close(self) -> None:
        self._figures.finished = True
        self._inner.close()


class RestoreTracker:
    """The restores of one worker process, keyed by (task, store)."""

    def __init__(self) -> None:
        self._figures: dict[tuple[str, str], RestoreFigures] = {}

    def factory(self, task: str, store: str) -> ProgressFactory:
        """A `ProgressFactory` for ``store`` of ``task`` that records its figures here."""

        def make(description: str, total: int | None) -> Reporter:
            figures = RestoreFigures(total or 0)
            self._figures[(task, store)] = figures
            return _TeeReporter(Progress(description, total), figures)

        return make

    def all(self) -> dict[tuple[str, str], RestoreFigures]:
        return dict(self._figures)

    def progress(self) -> list[RestoreProgress]:
        """The restores still running, as the worker reports them."""
        return [RestoreProgress(task=task, store=store, restored=f.done, to_restore=f.total,
                                rate=round(f.rate(), 1), started_ms=f.started_ms)
                for (task, store), f in sorted(self.all().items()) if not f.finished]
