"""`PipelineTask`: the one task class every pipeline job runs.

Its ``init`` compiles the job's pipeline (once per process, `compiled_for`), opens the
stores, windows, joins and custom steps of the operators whose streams the task reads,
and makes the plan's stage functions (`framework.pipelines.codegen`) for them; its
``process`` hands each record to the function of the stream it came from. Everything else
— commits, changelogs, restores, expansions, barriers, holds, fencing — is the worker's,
exactly as for a hand-written task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from framework.api import (
    Envelope,
    KeyValueStore,
    MessageCollector,
    StreamTask,
    TaskContext,
    TaskCoordinator,
    WatermarkSource,
)
from framework.config import JobConfig
from framework.config.pipeline import JobFacts, load_pipeline
from framework.errors import TaskLoadError
from framework.pipelines.builder import Emit, Pipeline, Step
from framework.pipelines.codegen import GeneratedCode, generate
from framework.pipelines.graph import Node
from framework.pipelines.plan import Plan, upstream_roots
from framework.windows import EventTime, IntervalJoin, Windows
from groupers import SystemStreamPartition

__all__ = ["Compiled", "PipelineTask", "compiled_for"]


@dataclass(frozen=True)
class Compiled:
    """A plan and its generated code: what every task of the job instantiates."""

    plan: Plan
    code: GeneratedCode

    @classmethod
    def of(cls, pipeline: Pipeline, config: JobConfig, label: str) -> Compiled:
        """``pipeline`` compiled for ``config``; ``label`` names its generated source."""
        plan = pipeline.compile(JobFacts.of_config(config))
        return cls(plan, generate(plan, label))


_CACHE: dict[tuple[str, str, str], Compiled] = {}


def compiled_for(config: JobConfig) -> Compiled:
    """The compiled pipeline of ``config`` (a job with ``pipeline``), built once per
    process and configuration."""
    spec = config.pipeline
    if spec is None:
        raise TaskLoadError(f"{config.path}: job.task is {config.task} but the job names no "
                            "pipeline; set pipeline = \"module:build\" (and no task)")
    key = (spec, str(config.root), config.digest)
    found = _CACHE.get(key)
    if found is None:
        try:
            pipeline = load_pipeline(spec, config.root)
        except Exception as error:
            raise TaskLoadError(f'job.pipeline = "{spec}" in {config.path}: {error}') from None
        if not isinstance(pipeline, Pipeline):
            raise TaskLoadError(f'job.pipeline = "{spec}" in {config.path} gives '
                                f"{type(pipeline).__name__}, not a framework.pipelines.Pipeline")
        found = _CACHE[key] = Compiled.of(pipeline, config, spec)
    return found


class _Stages(dict[SystemStreamPartition, Callable[[Envelope, MessageCollector], None]]):
    """Input partition → the stage function of its stream, filled on first use."""

    def __init__(self, by_stream: dict[str, Callable[[Envelope, MessageCollector], None]]):
        super().__init__()
        self.by_stream = by_stream

    def __missing__(self, ssp: SystemStreamPartition
                    ) -> Callable[[Envelope, MessageCollector], None]:
        found = self[ssp] = self.by_stream[f"{ssp.system}.{ssp.stream}"]
        return found


class PipelineTask(StreamTask):
    """Runs the job's compiled pipeline: each record goes to the stage of its stream."""

    compiled: ClassVar[Compiled | None] = None
    """Set on a subclass bound to one compiled pipeline (`bound`); None: the job's."""

    @classmethod
    def bound(cls, compiled: Compiled) -> type[PipelineTask]:
        """A subclass running ``compiled`` whatever the job file names
        (`framework.testing.run_pipeline` runs a `Pipeline` object this way)."""
        return type("BoundPipelineTask", (cls,), {"compiled": compiled})

    def init(self, context: TaskContext) -> None:
        compiled = type(self).compiled or compiled_for(context.config)
        objects, self._steps = _instantiate(compiled.plan, context)
        roots, ticks = compiled.code.factory(objects)
        self._stages = _Stages(roots)
        for node_id, tick in ticks:
            if _ticks(compiled.plan.nodes[node_id], objects.get(node_id)):
                context.on_window(tick)

    def process(self, envelope: Envelope, collector: MessageCollector,
                coordinator: TaskCoordinator) -> None:
        self._stages[envelope.ssp](envelope, collector)

    def close(self) -> None:
        for step in self._steps:
            step.close()


class _Emitter(Emit[Any, Any]):
    """A custom step's ``emit``: calls the generated function of what follows the step."""

    __slots__ = ("after", "c", "clock", "env")

    def __init__(self, clock: Windows | IntervalJoin | None = None) -> None:
        self.after: Callable[..., None] = _nowhere
        self.c: MessageCollector | None = None
        self.env: Envelope | None = None
        self.clock = clock
        self.timestamp = None

    @property
    def envelope(self) -> Envelope | None:
        return self.env

    @property
    def watermark(self) -> int | None:
        return None if self.clock is None else self.clock.watermark

    def __call__(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        self.after(key, value, self.timestamp if timestamp is None else timestamp, None,
                   self.c)


def _nowhere(*_: Any) -> None:
    return None


class _WithoutTicks:
    """The task's context minus `on_window`: the windows and joins of a pipeline do not
    register their own ticks (whose results would be lost) — the generated tick functions
    close them and pass what closed on."""

    def __init__(self, context: TaskContext) -> None:
        self._context = context

    @property
    def task_name(self) -> str:
        return self._context.task_name

    @property
    def ssps(self) -> frozenset[SystemStreamPartition]:
        return self._context.ssps

    @property
    def config(self) -> JobConfig:
        return self._context.config

    def store(self, name: str) -> KeyValueStore:
        return self._context.store(name)

    def track_watermark(self, source: WatermarkSource) -> None:
        track = getattr(self._context, "track_watermark", None)
        if track is not None:
            track(source)

    def input_idle_ms(self, ssp: SystemStreamPartition) -> int | None:
        idle = getattr(self._context, "input_idle_ms", None)
        return None if idle is None else cast("int | None", idle(ssp))


def _instantiate(plan: Plan, context: TaskContext) -> tuple[dict[int, Any], list[Step[
        Any, Any, Any, Any]]]:
    """Each operator's per-task object (store, windows, join, step) by node id; the
    event-time operators only where the task reads their streams."""
    objects: dict[int, Any] = {}
    steps: list[Step[Any, Any, Any, Any]] = []
    read = {f"{ssp.system}.{ssp.stream}" for ssp in context.ssps}
    quiet = cast(TaskContext, _WithoutTicks(context))  # deliberately no on_window
    for node in plan.nodes:
        args = node.args
        if node.kind in ("aggregate", "count", "reduce", "table"):
            objects[node.id] = context.store(args["store"])
        elif node.kind in ("window", "join"):
            streams = _streams_of(plan, node)
            if not read & set(streams):
                objects[node.id] = (None, None)
                continue
            clock = EventTime(quiet, args["store"], source=args["event_time"],
                              streams=streams)
            if node.kind == "window":
                operator: Any = Windows(quiet, args["store"], args["kind"], args["reducer"],
                                        event_time=clock, emit=args["emit"],
                                        late=args["late"],
                                        late_stream=plan.late_streams.get(node.id))
            else:
                operator = IntervalJoin(quiet, args["store"], left=streams[0],
                                        right=streams[1], before_ms=args["before_ms"],
                                        after_ms=args["after_ms"], grace_ms=args["grace_ms"],
                                        how=args["how"], event_time=clock)
            objects[node.id] = (operator, clock)
        elif node.kind == "process":
            step = args["factory"]()
            if not isinstance(step, Step):
                raise TaskLoadError(f"{node.shown}: the step factory returned "
                                    f"{type(step).__name__}, not a framework.pipelines.Step")
            step.init(context)
            steps.append(step)
            upstream = _event_time_before(node)
            objects[node.id] = (step, _Emitter(
                None if upstream is None else objects[upstream.id][0]))
    return objects, steps


def _event_time_before(node: Node) -> Node | None:
    """The nearest window or join upstream of ``node`` in its stage (first parents
    first), whose watermark a custom step sees."""
    work, seen = list(node.parents), set()
    while work:
        current = work.pop(0)
        if current.id in seen:
            continue
        seen.add(current.id)
        if current.kind in ("window", "join"):
            return current
        work.extend(current.parents)
    return None


def _streams_of(plan: Plan, node: Node) -> list[str]:
    """The streams an event-time operator reads (a join: its left side's, then its
    right's)."""
    if node.kind == "join":
        return [plan.streams[upstream_roots(parent)[0].id] for parent in node.parents]
    return [plan.streams[root.id] for root in upstream_roots(node)]


def _ticks(node: Node, made: Any) -> bool:
    """Whether ``node``'s tick function should run on this task's window ticks."""
    if node.kind == "process":
        step = made[0]
        return type(step).window is not Step.window
    return made is not None and made[0] is not None

