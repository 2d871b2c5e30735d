"""The host-failover drill (`sampan drill --system kafka --hosts N --kill-host`).

It runs a per-key sum job on N hosts (separate state folders and process groups), feeds it
records of known truth, SIGKILLs one host's whole process group while the survivors are
processing, and reports from the hosts' reports on the coordinator stream: kill → the
group's next model, kill → every task resumed, the records the moved tasks restored (with
``--standbys N`` only the standbys' gap, with 0 all of it) and the verification of every
key against the truth. It needs no CreatePartitions, so it runs on tansu too — unless
``--steps`` asks it to also expand the input while the killed host is down (CreatePartitions
at once after the kill, and the last records written under the new count, before the
failover model).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from framework.config import JobConfig, load_config
from framework.drill.folder import drill_folder
from framework.drill.hosts_job import HostProcesses, write_job
from framework.drill.topics import DrillTopics, delete_after_failure, drill_namespace, leave_topics
from framework.drill.verify import store_state
from framework.errors import ConfigError, SampanError
from framework.metadata import CoordinatorState, read_state
from framework.systems import open_system
from framework.systems.base import ProducerRecord, System
from framework.wording import counted

__all__ = ["HostDrillOptions", "HostDrillReport", "run_host_drill", "settled"]

T = TypeVar("T")


class HostDrillError(SampanError):
    """The host drill could not complete (hosts never settled, a host died…)."""


@dataclass(frozen=True)
class HostDrillOptions:
    bootstrap: str
    hosts: int = 3
    standbys: int = 1
    partitions: int = 6
    records: int = 20_000
    keys: int = 600
    session_timeout_ms: int = 6000
    output: Path | None = None
    steps: tuple[int, ...] = ()
    """Partition counts the input is expanded to, in order, right after the kill."""
    guarantee: str | None = None
    """``job.guarantee`` (None: the default on Kafka, at-least-once)."""
    timeout_s: float = 180.0
    """How long each phase (settling, failover, catch-up) may take."""
    keep: bool = False
    """Keep the drill's topics on the broker (default: deleted when it ends)."""
    client_options: dict[str, Any] = field(default_factory=dict)
    """The cluster's connection settings (TLS, SASL: `--client-options FILE`)."""

    def validate(self) -> None:
        if self.hosts < 2:
            raise ConfigError("--hosts must be ≥ 2 for --kill-host (one host is killed)")
        if not 0 <= self.standbys < self.hosts:
            raise ConfigError(f"--standbys {self.standbys}: must be 0 … hosts-1 "
                              f"({self.hosts - 1})")
        if self.records < 4 or self.keys < 1 or self.partitions < 1:
            raise ConfigError("--records must be ≥ 4, --keys and --partitions ≥ 1")
        counts = (self.partitions, *self.steps)
        if any(b <= a for a, b in itertools.pairwise(counts)):
            raise ConfigError(f"--steps must grow from --partitions {self.partitions}: "
                              f"{' → '.join(map(str, counts))}")


@dataclass
class HostDrillReport:
    options: HostDrillOptions
    output: Path
    killed: str = ""
    killed_after: int = 0
    """Records produced when the host was killed."""
    moved: list[str] = field(default_factory=list)
    expansions: list[str] = field(default_factory=list)
    """The input's changes made while the host was down (``kafka.<in> 2→4``)."""
    reason: str = ""
    """Why the leader built the failover model (its ``reason``)."""
    failover_epoch: int = 0
    expanded_epoch: int = 0
    """The epoch whose model applied the expansion: the failover model's, or an earlier
    one when the leader saw the new partitions before the killed host's session ended."""
    detected_s: float = 0.0
    """Kill → the model without the killed host published (the session timeout)."""
    resumed_s: float = 0.0
    """Kill → every survivor resumed the failover model (every task processing again)."""
    restored: int = 0
    full_restore: int = 0
    """What a restore from scratch of the moved tasks would have read."""
    modes: dict[str, str] = field(default_factory=dict)
    keys: int = 0
    missing: list[str] = field(default_factory=list)
    short: list[str] = field(default_factory=list)
    over: list[str] = field(default_factory=list)
    guarantee: str = "exactly-once"
    topics: DrillTopics | None = None
    """The drill's namespace and what became of its topics."""

    @property
    def ok(self) -> bool:
        if self.missing or self.short:
            return False
        return self.guarantee == "at-least-once" or not self.over

    def _applied(self) -> str:
        """Which model applied the expansion, as seen from the failover model."""
        if not self.expanded_epoch:
            return (f"no expansion record in the job's status; failover model (epoch "
                    f"{self.failover_epoch}): {self.reason}")
        if self.expanded_epoch == self.failover_epoch:
            return f"failover model (epoch {self.failover_epoch}): {self.reason}"
        return (f"applied by epoch {self.expanded_epoch}, before {self.killed}'s session "
                f"ended; failover model (epoch {self.failover_epoch}): {self.reason}")

    def text(self) -> str:
        o = self.options
        lines = [
            f"sampan drill — host failover on kafka ({o.bootstrap}): {o.hosts} hosts × 1 "
            f"worker, {counted(o.partitions, 'task')}, standby_replicas = {o.standbys}, "
            f"session timeout {o.session_timeout_ms} ms",
            f"  {o.records:,} records over {o.keys:,} keys; host {self.killed} SIGKILLed "
            f"(process group) after {self.killed_after:,}, its tasks {', '.join(self.moved)}",
            *([f"  input expanded while {self.killed} was down: "
               + ", ".join(self.expansions) + f"; {self._applied()}"]
              if o.steps else []),
            f"  kill → failover model: {self.detected_s:.2f} s; kill → every task resumed: "
            f"{self.resumed_s:.2f} s",
            f"  restored at failover: {self.restored:,} changelog records (a full restore of "
            f"the moved tasks: {self.full_restore:,}); modes: "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.modes.items())),
        ]
        if self.ok:
            rule = ("exact" if self.guarantee == "exactly-once" else
                    f"never short, none missing (at-least-once; {len(self.over)} over, "
                    f"{self.keys - len(self.over)} exact)")
            lines.append(f"  verdict: OK — all {self.keys:,} keys {rule} against the truth "
                         "(final state of store totals replayed from its changelog)")
        else:
            lines.append(f"  verdict: WRONG — {len(self.missing)} missing, {len(self.short)} "
                         f"short, {len(self.over)} over ({self.guarantee}); e.g. "
                         f"{(self.missing + self.short + self.over)[:5]}")
        if self.topics is not None:
            lines.append(self.topics.line())
        lines.append(f"  output folder: {self.output} (job, host logs, state folders)")
        return "\n".join(lines)


async def _opened(config: JobConfig, use: Callable[[System], Awaitable[T]]) -> T:
    system = open_system(config.system("kafka"))
    await system.start()
    try:
        return await use(system)
    finally:
        await system.close()


async def _state(config: JobConfig) -> CoordinatorState:
    return await _opened(config, lambda s: read_state(s, config))


async def _totals(config: JobConfig, *, settled: bool = True) -> dict[str, int]:
    """Key → its total from the changelog; ``settled=False`` for polls while the job runs
    (under exactly-once a transaction is nearly always open then: waiting for it to settle
    would only slow the poll, and the next poll sees it)."""
    async def read(system: System) -> dict[str, int]:
        try:
            parts = await store_state(system, config, "totals", settled=settled)
        except SampanError:  # the changelog does not exist yet
            return {}
        return {k: int(v) for contents in parts.values() for k, v in contents.items()}
    return await _opened(config, read)


async def _produce(config: JobConfig, truth: Counter[str], start: int, count: int,
                   keys: int) -> None:
    stream = config.inputs[0].split(".", 1)[1]
    batch = []
    for n in range(start, start + count):
        key = f"k{n % keys:05d}"
        truth[key] += n % 7 + 1
        batch.append(ProducerRecord(stream, key.encode(), str(n % 7 + 1).encode()))
    await _opened(config, lambda s: s.produce(batch))


async def _wait(what: str, check: Callable[[], Awaitable[T | None]], hosts: HostProcesses,
                timeout_s: float) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if hosts.dead():
            dead = hosts.dead()
            raise HostDrillError(f"{'host' if len(dead) == 1 else 'hosts'} "
                                 f"{', '.join(dead)} exited while waiting for {what}; "
                                 f"see {hosts.root}/host-*.log")
        if time.monotonic() > deadline:
            raise HostDrillError(f"timed out after {timeout_s:.0f} s waiting for {what}; "
                                 f"see {hosts.root}/host-*.log")
        await asyncio.sleep(0.3)


def settled(current: CoordinatorState, names: set[str], after: int = 0
            ) -> CoordinatorState | None:
    """``current`` if its model is newer than epoch ``after``, places tasks on exactly
    ``names`` (none parked), and every one of them reports it resumed that epoch; else
    None."""
    model = current.model
    if model is None or model.epoch <= after or set(model.hosts) != names or model.parked:
        return None  # a model parking tasks is the first step of a rebalance: not settled
    reports = [current.hosts.get(n) for n in names]
    if all(r is not None and r.epoch == model.epoch and r.resumed_ms for r in reports):
        return current
    return None


def _settled(config: JobConfig, names: set[str], after: int
             ) -> Callable[[], Awaitable[CoordinatorState | None]]:
    """`settled` on the job's state, read anew at every call."""
    async def check() -> CoordinatorState | None:
        return settled(await _state(config), names, after)
    return check


async def run_host_drill(options: HostDrillOptions) -> HostDrillReport:
    """Run the drill; the report says what happened (raises `HostDrillError` if stuck)."""
    options.validate()
    with drill_folder(options.output, "sampan-drill-hosts-") as output:
        return await _host_drill_in(options, output)


async def _host_drill_in(options: HostDrillOptions, output: Path) -> HostDrillReport:
    name = f"drill-hosts-{os.getpid()}-{int(time.time())}"
    extra = f'guarantee = "{options.guarantee}"\n' if options.guarantee else ""
    job = write_job(output / "job", options.bootstrap, name, partitions=options.partitions,
                    standbys=options.standbys, session_timeout_ms=options.session_timeout_ms,
                    extra=extra, namespace=drill_namespace("hosts"),
                    client_options=options.client_options)
    config = load_config(job)
    try:
        report = await _host_drill(options, output, config)
    except BaseException:
        if not options.keep:
            await _opened(config, delete_after_failure)
        raise
    report.topics = await _opened(config, lambda s: leave_topics(s, job, options.keep))
    return report


async def _host_drill(options: HostDrillOptions, output: Path, config: JobConfig
                      ) -> HostDrillReport:
    """Start the hosts, feed them, kill one, wait for the failover and verify every key."""
    job = config.path
    report = HostDrillReport(options, output, guarantee=config.guarantee)
    hosts = HostProcesses(job, output)
    names = {f"h{i}" for i in range(1, options.hosts + 1)}
    limit = options.timeout_s
    try:
        for host in sorted(names):
            hosts.start(host)
        spread = min(options.hosts, options.partitions)

        async def running() -> CoordinatorState | None:
            """Settled with tasks on as many hosts as can have them: a new host takes
            tasks once its warmups caught up, so a host killed before that held none."""
            found = settled(await _state(config), names, 0)
            return found if found is not None and sum(
                1 for n in names if found.hosts[n].active) >= spread else None
        before = await _wait(f"{options.hosts} hosts running tasks", running, hosts, limit)
        assert before.model is not None
        truth: Counter[str] = Counter()
        half = options.records // 2
        await _produce(config, truth, 0, half, options.keys)

        async def caught_up() -> bool:  # totals only grow: every key reached its truth
            totals = await _totals(config, settled=False)
            return all(totals.get(k, 0) >= v for k, v in truth.items())
        await _wait("the first half processed", caught_up, hosts, limit)
        if options.standbys:
            async def current() -> bool:
                return all(not any(r.replica_gaps.values())
                           for r in (await _state(config)).hosts.values())
            await _wait("the standbys caught up", current, hosts, limit)
        state = await _state(config)
        report.killed = killed = _victim(state, sorted(names))
        report.moved = list(state.hosts[killed].active)
        # With --steps the last quarter is written after the expansion (new partitions).
        before_kill = options.records - (options.records // 4 if options.steps else 0)
        await _produce(config, truth, half, before_kill - half, options.keys)
        report.killed_after = before_kill
        killed_ms = time.time() * 1000
        hosts.kill(killed)
        stream = config.inputs[0].split(".", 1)[1]

        async def expand(system: System) -> None:
            for count in options.steps:
                await system.expand_stream(stream, count)
        await _opened(config, expand)
        if options.steps:
            await _produce(config, truth, before_kill, options.records - before_kill,
                           options.keys)
        final = options.steps[-1] if options.steps else options.partitions
        epoch = before.model.epoch

        async def failed_over() -> CoordinatorState | None:
            found = settled(await _state(config), names - {killed}, epoch)
            grown = found is not None and found.model is not None and (
                found.model.partition_counts.get(config.inputs[0]) == final)
            return found if grown else None
        after = await _wait(f"failover of {killed}'s tasks", failed_over, hosts, limit)
        assert after.model is not None
        counts = (options.partitions, *options.steps)
        report.expansions = [f"{config.inputs[0]} {a}→{b}"
                             for a, b in itertools.pairwise(counts)]
        report.reason = after.model.reason
        report.failover_epoch = after.model.epoch
        report.expanded_epoch = min(
            (e.epoch for e in after.status.expansions
             if e.epoch > epoch and e.change.startswith(f"{config.inputs[0]} ")),
            default=0)
        report.detected_s = (after.model.created_ms - killed_ms) / 1000
        survivors = [after.hosts[n] for n in sorted(names - {killed})]
        report.resumed_s = (max(r.resumed_ms or 0 for r in survivors) - killed_ms) / 1000
        for r in survivors:
            for task in report.moved:
                if task in r.active:
                    report.restored += r.restored.get(task, 0)
                    report.full_restore += r.restore_ends.get(task, 0)
                    report.modes[task] = r.restore_modes.get(f"{task}/totals", "?")
        await _wait("every record processed", caught_up, hosts, limit)
        totals = await _totals(config)
        report.keys = len(truth)
        report.missing = sorted(k for k in truth if k not in totals)
        report.short = sorted(k for k in truth if k in totals and totals[k] < truth[k])
        report.over = sorted(k for k in truth if k in totals and totals[k] > truth[k])
        return report
    finally:
        hosts.stop_all()


def _victim(state: CoordinatorState, names: list[str]) -> str:
    """The host to kill: ``h2`` when it runs active tasks, else the first one that does."""
    active = [n for n in names if n in state.hosts and state.hosts[n].active]
    return "h2" if "h2" in active else active[0]
