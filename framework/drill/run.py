"""Run a drill: job + producer + live expansions + catch-up + exact verification."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.cancel import cancel_and_wait
from framework.config import load_config
from framework.coordinator.process import Coordinator
from framework.drill.folder import drill_folder
from framework.drill.options import DrillOptions
from framework.drill.producer import PacedProducer
from framework.drill.scenario import Scenario, Verdict, load_scenario, render_job
from framework.drill.timeline import (
    Sample,
    Timeline,
    committed_and_end,
    plot,
    sample_forever,
    source_end,
)
from framework.drill.topics import DrillTopics, delete_after_failure, drill_namespace, leave_topics
from framework.errors import ConfigError, SampanError, UnsupportedOperation
from framework.metadata import WorkerReport, read_state
from framework.systems import open_system
from framework.systems.base import System
from framework.systems.kafka.system import KafkaSystem
from framework.wording import counted

log = logging.getLogger(__name__)


class DrillError(SampanError):
    """The drill could not complete (the job never caught up, the coordinator failed…)."""


@dataclass
class ExpansionFigures:
    change: str
    epoch: int
    requested_ms: int
    detected_ms: int
    resumed_ms: int
    restored: int
    in_place: bool = False
    """The workers took the model where they ran (none restarted)."""

    @property
    def detection_s(self) -> float:
        return (self.detected_ms - self.requested_ms) / 1000

    @property
    def pause_s(self) -> float:
        return (self.resumed_ms - self.detected_ms) / 1000

    @property
    def detection_to_resume_s(self) -> float:
        return (self.resumed_ms - self.requested_ms) / 1000


@dataclass
class DrillReport:
    options: DrillOptions
    scenario: Scenario
    output: Path
    verdict: Verdict
    expansions: list[ExpansionFigures] = field(default_factory=list)
    throughput: list[tuple[str, float | None]] = field(default_factory=list)
    initial_restored: int = 0
    plot: Path | None = None
    duration_s: float = 0.0
    spark: Any = None
    """The Spark verification report (`--verify spark`), or None."""
    timeline: Timeline | None = None
    """What the plot shows: samples of committed progress and lag, and the marks."""
    topics: DrillTopics | None = None
    """On Kafka: the drill's namespace and what became of its topics."""

    @property
    def exact(self) -> bool:
        return self.verdict.exact and (self.spark is None or self.spark.exact)

    def text(self) -> str:
        o, s = self.options, self.scenario
        mode = "naive GroupByPartition" if o.naive else "fixed-task grouper (SEP-5)"
        counts = (o.initial_partitions or s.initial_partitions, *(o.steps or s.steps))
        # A scenario may name its workload and what its verdict counts (ad_join: results).
        workload = getattr(s, "workload", None) or f"{o.records:,} records over {o.keys:,} keys"
        noun = getattr(s, "checked", "keys")
        form = " pipeline" if o.form == "pipeline" else ""
        lines = [
            f"sampan drill — {o.example}{form} on {o.system}, {counted(o.workers, 'worker')}, "
            f"{mode}",
            f"  {workload} at {o.rate:,}/s; {s.expand} expanded "
            f"{' → '.join(map(str, counts))} while running",
        ]
        for e in self.expansions:
            how = "took it in place (none restarted)" if e.in_place else "resumed"
            lines.append(
                f"  expansion {e.change}: detected after {e.detection_s:.2f} s, workers "
                f"{how} {e.pause_s:.2f} s later (detection→resume "
                f"{e.detection_to_resume_s:.2f} s), {e.restored:,} changelog records restored")
        for label, rate in self.throughput:
            shown = (f"{rate:,.0f} records/s" if rate is not None
                     else "n/a (phase too short to sample)")
            lines.append(f"  throughput {label}: {shown}")
        wrong = len(self.verdict.wrong_keys)
        if self.exact:
            lines.append(f"  verdict: EXACT — all {self.verdict.keys:,} {noun} match the ground "
                         f"truth in the stores and the outputs, in order")
        else:
            lines.append(f"  verdict: WRONG — {wrong:,} of {self.verdict.keys:,} {noun} are wrong")
            lines.extend(self.verdict.describe())
        if self.spark is not None:
            lines.append("  spark verification: " + self.spark.text().replace("\n", "\n  "))
        if self.topics is not None:
            lines.append(self.topics.line())
        lines.append(f"  output folder: {self.output} (job, data, logs"
                     f"{', timeline.png' if self.plot else ''})")
        return "\n".join(lines)


async def _wait(predicate: Callable[[], Awaitable[bool]], timeout: float, what: str,
                coordinator: asyncio.Task[None]) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if coordinator.done():
            coordinator.result()  # re-raise the coordinator's failure
            raise DrillError(f"the coordinator stopped while waiting for {what}")
        if time.monotonic() > deadline:
            raise DrillError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.1)


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Progress:
    """One live status line on a TTY, a line every few seconds otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def show(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()
        elif force or now - self.last >= 3:
            print(text, file=sys.stderr, flush=True)
            self.last = now

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


async def run_drill(options: DrillOptions) -> DrillReport:
    """Run the drill described by ``options`` and return its report."""
    options.validate()
    with drill_folder(options.output, "sampan-drill-") as output:
        return await _drill_in(options, output)


async def _drill_in(options: DrillOptions, output: Path) -> DrillReport:
    scenario = load_scenario(options.example, options)
    initial = options.initial_partitions or scenario.initial_partitions
    steps = options.steps or scenario.steps
    if any(b <= a for a, b in itertools.pairwise((initial, *steps))):
        raise ConfigError(f"--steps must grow from {counted(initial, 'partition')}: "
                          f"{' → '.join(map(str, (initial, *steps)))}")
    namespace = drill_namespace(options.example) if options.system == "kafka" else ""
    config = load_config(render_job(options.example, options, output / "job",
                                    initial_partitions=initial, expand=scenario.expand,
                                    namespace=namespace))
    system = open_system(config.system(config.metadata_system))
    await system.start()
    try:
        try:
            report = await _drill(options, scenario, initial, steps, output, config, system)
        except BaseException:
            if not options.keep:
                await delete_after_failure(system)
            raise
        report.topics = await leave_topics(system, config.path, options.keep)
    finally:
        await system.close()
    (output / "report.txt").write_text(report.text() + "\n")
    return report


async def _drill(options: DrillOptions, scenario: Scenario, initial: int,
                 steps: tuple[int, ...], output: Path, config: Any,
                 system: System) -> DrillReport:
    """The drill's phases: create the streams, start the job, produce while expanding
    at each step, wait for the catch-up, stop, verify and report."""
    started = time.monotonic()
    await _create_streams(system, scenario, initial, steps, output)
    run = _DrillRun(options, scenario, output, config, system)
    try:
        await run.start(initial)
        for index, count in enumerate(steps):
            await run.produce_until(options.records * (index + 1) / (len(steps) + 1))
            await run.expand(count)
        await run.produce_until(None)
        await run.catch_up(steps[-1] if steps else initial)
    finally:
        await run.stop()
    report = run.report
    report.timeline = run.timeline
    report.verdict = await scenario.verify(config, system)
    if options.verify == "spark":
        from framework.spark.verify import verify_job  # Spark only when asked for

        run.progress.show("verifying in Spark…", force=True)
        report.spark = await asyncio.to_thread(verify_job, config.path, options.spark)
    if options.plot:
        report.plot = plot(run.timeline, output / "timeline.png",
                           f"sampan drill: {options.example}, "
                           f"{'naive' if options.naive else 'fixed tasks'}")
    report.duration_s = time.monotonic() - started
    return report


async def _create_streams(system: System, scenario: Scenario, initial: int,
                          steps: tuple[int, ...], output: Path) -> None:
    """The scenario's streams, in an empty output; refuses early if expansion is impossible."""
    streams = dict(scenario.streams(initial))
    if steps:
        await _probe_expansion(system, output.name)
    existing = await system.list_streams()
    if clash := sorted(set(streams) & set(existing)):
        where = (f"namespace {system.options.namespace!r} of Kafka at {system.bootstrap}"
                 if isinstance(system, KafkaSystem) else str(output))
        raise DrillError(f"{where} already holds a drill's streams ({', '.join(clash)}); "
                         "pick an empty --output")
    for stream, partitions in streams.items():
        await system.create_stream(stream, partitions)


class _DrillRun:
    """A running drill: the coordinator, the paced producer, the timeline and the figures."""

    def __init__(self, options: DrillOptions, scenario: Scenario, output: Path, config: Any,
                 system: System) -> None:
        self.options, self.scenario, self.config, self.system = options, scenario, config, system
        self.expanded = f"{system.name}.{scenario.expand}"
        self.coordinator = Coordinator(config, log_dir=output / "logs")
        self.coordinator_task = asyncio.create_task(self.coordinator.run())
        self.timeline = Timeline()
        self.producer = PacedProducer(system, scenario, records=options.records,
                                      rate=options.rate)
        self.producer.allowed = 0  # `produce_until` says how far
        self.sampler = asyncio.create_task(
            sample_forever(system, config, self.timeline, lambda: self.producer.produced))
        self.progress = _Progress()
        self.report = DrillReport(options, scenario, output, Verdict(keys=0))
        self.production: asyncio.Task[None] | None = None
        self.phase_start = 0.0

    async def _wait(self, condition: Callable[[], Awaitable[bool]], timeout_s: float,
                    what: str) -> None:
        await _wait(condition, timeout_s, what, self.coordinator_task)

    async def _epoch_started(self, epoch: int) -> list[WorkerReport] | None:
        """Every worker's report of ``epoch``, once all of them resumed on it."""
        state = await read_state(self.system, self.config)
        reports = [r for r in state.workers.values() if r.epoch == epoch]
        return reports if len(reports) >= self.options.workers else None

    async def _model_is(self, count: int) -> bool:
        model = self.coordinator.model
        return model is not None and model.partition_counts.get(self.expanded) == count

    async def _show(self) -> None:
        await _show(self.progress, self.producer, self.coordinator, self.system, self.config)

    async def start(self, initial: int) -> None:
        """Wait for the first model and its workers, then start producing."""
        await self._wait(lambda: self._model_is(initial), 60, "the first job model")
        assert self.coordinator.model is not None
        first_epoch = self.coordinator.model.epoch
        await self._wait(lambda: _truthy(self._epoch_started(first_epoch)), 60,
                         "the workers to start")
        self.production = asyncio.create_task(self.producer.run())
        self.phase_start = time.monotonic() - self.timeline.start

    async def produce_until(self, threshold: float | None) -> None:
        """Show progress until ``threshold`` records are produced (None: all of them); the
        producer stops there, so the next expansion comes exactly after them."""
        assert self.production is not None
        self.producer.allowed = (self.producer.records if threshold is None
                                 else math.ceil(threshold))
        while not self.production.done() and (
                threshold is None or self.producer.produced < threshold):
            await self._show()
            await asyncio.sleep(0.2)
        if threshold is None:
            self.production.result()
            self.timeline.mark("producer done")

    async def expand(self, count: int) -> None:
        """Expand the input to ``count`` partitions and time detection and resume."""
        model = self.coordinator.model
        before = model.partition_counts[self.expanded] if model else 0
        t_expand = time.monotonic() - self.timeline.start
        self.report.throughput.append((f"at {counted(before, 'partition')}",
                                       self.timeline.throughput(self.phase_start, t_expand)))
        requested = _now_ms()
        await self.system.expand_stream(self.scenario.expand, count)
        self.timeline.mark(f"expand to {count}")
        await self._wait(lambda: self._model_is(count), 60,
                         f"the expansion to {count} partitions")
        assert self.coordinator.model is not None
        epoch = self.coordinator.model.epoch
        reports: list[WorkerReport] = []

        async def resumed() -> bool:
            found = await self._epoch_started(epoch)
            reports[:] = found or []
            return found is not None

        await self._wait(resumed, 60, f"workers of epoch {epoch}")
        expansion = self.coordinator.status.expansions[-1]
        figures = ExpansionFigures(
            change=expansion.change, epoch=epoch, requested_ms=requested,
            detected_ms=expansion.detected_ms,
            resumed_ms=max(r.resumed_ms or 0 for r in reports),
            restored=sum(r.restored for r in reports), in_place=expansion.in_place)
        self.report.expansions.append(figures)
        self.timeline.marks.append((t_expand + figures.detection_to_resume_s,
                                    f"resumed {count}"))
        self.phase_start = self.timeline.marks[-1][0]
        self.progress.show(f"expanded to {count} partitions: detection→resume "
                           f"{figures.detection_to_resume_s:.2f} s", force=True)

    async def catch_up(self, final_count: int) -> None:
        """Wait until every produced record is processed and committed; the timeline ends
        with that moment (lag 0), marked."""
        async def caught_up() -> bool:
            committed, end = await committed_and_end(self.system, self.config)
            await self._show()
            # A pipeline's intermediate streams are inputs too: every record the producer
            # wrote is in, and every input record (intermediate ones too) is committed.
            return (committed == end
                    and await source_end(self.system, self.config) == self.producer.produced)

        await self._wait(caught_up, self.options.catch_up_timeout_s, "the job to catch up")
        await cancel_and_wait(self.sampler, "the drill's sampler")
        committed, end = await committed_and_end(self.system, self.config)
        t_done = time.monotonic() - self.timeline.start
        self.timeline.samples.append(Sample(t_done, self.producer.produced, committed,
                                            end - committed))
        self.timeline.marks.append((t_done, "caught up"))
        self.report.throughput.append((f"at {counted(final_count, 'partition')}",
                                       self.timeline.throughput(self.phase_start, t_done)))
        self.progress.done()

    async def stop(self) -> None:
        """Stop the coordinator (and its workers) and the sampler."""
        self.coordinator.stop.set()
        await asyncio.gather(self.coordinator_task, return_exceptions=True)
        await cancel_and_wait(self.sampler, "the drill's sampler")
        if self.production is not None:
            await cancel_and_wait(self.production, "the drill's producer")


async def _probe_expansion(system: System, tag: str) -> None:
    """Fail before starting when the system cannot add partitions (e.g. no CreatePartitions)."""
    probe = f"__sampan-drill-probe-{tag}"
    await system.create_stream(probe, 1, exist_ok=True)
    try:
        await system.expand_stream(probe, 2)
    except UnsupportedOperation as error:
        raise UnsupportedOperation(
            f"the drill expands its input, but {error}; run the drill on the embedded local log "
            f"(--system local) or on a broker that supports CreatePartitions") from error


async def _truthy(value: Awaitable[Any]) -> bool:
    return bool(await value)


async def _show(progress: _Progress, producer: PacedProducer, coordinator: Coordinator,
                system: System, config: Any) -> None:
    committed, end = await committed_and_end(system, config)
    epoch = coordinator.model.epoch if coordinator.model else "-"
    counts = coordinator.model.partition_counts if coordinator.model else {}
    partitions = ", ".join(f"{stream} {count}" for stream, count in sorted(counts.items()))
    progress.show(f"produced {producer.produced:,}/{producer.records:,}  committed "
                  f"{committed:,}  lag {end - committed:,}  epoch {epoch}  partitions: "
                  f"{partitions or '-'}")
