"""A windowing task for the tests: one `Windows` aggregation configured per test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framework import StreamTask
from framework.api import Envelope, MessageCollector, TaskContext, TaskCoordinator, WindowTimes
from framework.config.serdes import JsonSerde, StringSerde
from framework.stores.buffer import TaskStore
from framework.stores.memory import MemoryEngine
from framework.testing import TaskRunResult, run_task
from framework.windows import (
    EventTime,
    IntervalJoin,
    Reducer,
    WindowKind,
    WindowResult,
    Windows,
    count,
)
from groupers import SystemStreamPartition

OUT = "local.out"


class WindowTask(StreamTask):
    """Windows over ``value["ts"]`` sent to ``local.out``; remembers what `window` got."""

    def __init__(self, kind: WindowKind, reducer: Reducer | None = None,
                 source: str = "records", **options: Any) -> None:
        self.kind, self.reducer, self.source, self.options = kind, reducer, source, options
        self.times: list[WindowTimes] = []

    def init(self, context: TaskContext) -> None:
        clock = EventTime(context, "w", source=self.source,  # type: ignore[arg-type]
                          timestamp=lambda e: e.value["ts"])
        self.windows = Windows(context, "w", self.kind, self.reducer or count(),
                               event_time=clock, output=OUT, **self.options)

    def process(self, envelope: Any, collector: MessageCollector,
                coordinator: TaskCoordinator) -> None:
        self.windows.process(envelope, collector)

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator,
               times: WindowTimes) -> None:
        self.times.append(times)


def ev(key: str, ts: int, partition: int = 0, **value: Any) -> tuple[Any, ...]:
    return ("local.views", key, {"ts": ts, **value}, partition)


def mark(watermark: int, partition: int = 0) -> tuple[Any, ...]:
    return ("local.views", f"~wm-{partition}", {"watermark": watermark}, partition)


def run(kind: WindowKind, inputs: list[tuple[Any, ...]], *, stores: Any = None,
        windows: int = 0, **options: Any) -> tuple[TaskRunResult, WindowTask]:
    task = WindowTask(kind, **options)
    result = run_task(task, inputs, stores=stores or {"w": None},
                      windows=windows)
    return result, task


def table(result: TaskRunResult) -> list[tuple[Any, ...]]:
    """(key, start, end, value) per emitted result, with ``"update"`` for non-final ones."""
    return [(m.key, m.value["start"], m.value["end"], m.value["value"],
             *(() if m.value["final"] else ("update",))) for m in result.sent_to(OUT)]


class JoinTask(StreamTask):
    """`IntervalJoin` of ``local.left`` ⋈ ``local.right`` over ``value["ts"]``, results to
    ``local.out``."""

    def __init__(self, source: str = "records", **options: Any) -> None:
        self.source, self.options = source, options

    def init(self, context: TaskContext) -> None:
        clock = EventTime(context, "j", source=self.source,  # type: ignore[arg-type]
                          timestamp=lambda e: e.value["ts"])
        options = {"before_ms": 10, "after_ms": 10, **self.options}
        self.join = IntervalJoin(context, "j", left="local.left", right="local.right",
                                 event_time=clock, output=OUT, **options)

    def process(self, envelope: Any, collector: MessageCollector,
                coordinator: TaskCoordinator) -> None:
        self.join.process(envelope, collector)


def left(key: str, ts: int, partition: int = 0, **value: Any) -> tuple[Any, ...]:
    return ("local.left", key, {"ts": ts, **value}, partition)


def right(key: str, ts: int, partition: int = 0, **value: Any) -> tuple[Any, ...]:
    return ("local.right", key, {"ts": ts, **value}, partition)


def marks(watermark: int, partitions: int = 1) -> list[tuple[Any, ...]]:
    """A watermark record in every partition of both sides."""
    return [(f"local.{side}", f"~wm-{p}", {"watermark": watermark}, p)
            for side in ("left", "right") for p in range(partitions)]


def run_join(inputs: list[tuple[Any, ...]], *, stores: Any = None, windows: int = 0,
             **options: Any) -> TaskRunResult:
    return run_task(JoinTask(**options), inputs, stores=stores or {"j": None},
                    windows=windows)


def pairs(result: TaskRunResult) -> list[tuple[Any, ...]]:
    """(key, left ts, right ts) per joined pair (right ts None: left unjoined)."""
    return [(m.key, m.value["left_ts"], m.value["right_ts"]) for m in result.sent_to(OUT)]


class Context:
    """What `Windows` needs of a worker's task context, over one real `TaskStore`."""

    def __init__(self) -> None:
        self.task_name = "t"
        self.ssps = frozenset({SystemStreamPartition("local", "views", 0)})
        self.config = type("Config", (), {"inputs": ["local.views"], "stores": {}})()
        self.state = TaskStore("w", MemoryEngine(), StringSerde(), JsonSerde(), 1000)

    def store(self, name: str) -> TaskStore:
        return self.state


class Sent:
    """A collector keeping what is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def send(self, stream: str, key: Any = None, value: Any = None, **_: Any) -> None:
        self.sent.append((stream, key, value))


def envelope(key: str, ts: int, offset: int) -> Envelope:
    """A record of `Context`'s one input partition, its event time the timestamp."""
    return Envelope(SystemStreamPartition("local", "views", 0), offset, key, {}, ts)


def replay(times: list[int], every: int, grace: int, step: int, fold: Callable[[int], None],
           close: Callable[[int, int], None]) -> None:
    """Record n of a stream at ``times[n]`` folded in (``fold(n)``), a close
    (``close(closed, bound)``) after every ``every`` records as a watermark ``grace``
    behind the newest passes them, and at the end closes ``step`` ms apart until nothing
    can be open: every window boundary met."""
    closed, high = -1, 0
    for n, ts in enumerate(times):
        fold(n)
        high = max(high, ts)
        if n % every == every - 1:
            bound = max(closed, high - grace)
            close(closed, bound)
            closed = bound
    for bound in range(closed + 1, high + 400, step):
        close(closed, bound)
        closed = bound


def close_layouts(layouts: list[Any], states: list[dict[str, Any]], closed: int, bound: int,
                  view: Callable[[Any, Any], Any] = lambda layout, state: state,
                  cut_first: bool = False) -> list[tuple[Any, ...]]:
    """A close of every key each layout holds (its states then updated): per layout, its
    results, kept keys (their states as ``view`` shows them) and gone keys. With
    ``cut_first`` the first layout keeps its states uncut and cuts them in place after
    the close (`layouts.Cuts`, as `KeyedStates.finish_close` does), the others copy."""
    seen: list[tuple[Any, ...]] = []
    for n, (layout, held) in enumerate(zip(layouts, states, strict=True)):
        taken = sorted((0, text) for text in held)
        cuts: list[int] | None = [] if cut_first and n == 0 else None
        results, kept, gone = layout.close_all(taken, held.get, closed, bound, layout.finish,
                                               WindowResult, cuts)
        for text, remaining, _ in kept:
            if cuts:
                assert remaining is held[text]  # the key's own list: no copy
            held[text] = remaining
        if cuts:
            for (_, remaining, _), cut in zip(kept, cuts, strict=True):
                del remaining[:cut]
        for text in gone:
            del held[text]
        seen.append((results, [(text, view(layout, state), due) for text, state, due in kept],
                     gone))
    return seen
