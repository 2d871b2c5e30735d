"""What a host joining and a host leaving cost the running tasks: incremental against eager
rebalancing, measured in each task's own progress.

    python -m bench.rebalance_gaps [--rounds 1] [--rate 1000] [--tasks 24] [--workers 2]
                                   [--bootstrap HOST:PORT] [--modes incremental,eager]
                                   [--keep DIR]

Apache Kafka on 127.0.0.1 (`tests/kafka_broker.py`) unless ``--bootstrap``. Per round and
mode (``coordinator.rebalances = "incremental"``, then ``"eager"``, on a fresh job): 3
hosts × ``--workers`` workers run tests/jobs' per-key running sum over ``--tasks``
partitions, every output stamped with the time its record was processed; a producer
writes ``--rate`` records/s throughout. Host d joins (warmups, probing rebalances, then
tasks move to it); once settled, host c is stopped with SIGTERM; once settled, host b is
SIGKILLed with its workers (a failover: its tasks move once its session times out, 10 s).
Printed per mode:

- the longest gap in the progress of a task that stayed on its host (in every model the
  case published: a task parked, or moved and moved back, did not) and of one that moved,
  during the join (d's start → settled with d running tasks, + 1 s), the leave
  (SIGTERM → settled, + 1 s) and the failover (SIGKILL → settled, + 1 s) — a task's
  unavailability plus the producer's spacing;
- the longest wait of a record (from its write to its first processing) of a task that
  stayed and of one that moved, over records first processed in the same span: a task's
  unavailability plus the normal latency, blind to pauses of the producer (which the gaps
  count); where the worst stayed wait happened (partition, host, seconds into the span);
- worker processes of a, b restarted by the join and the leave, and of a by the failover
  (pids that changed).

Every run is checked record by record (one output per record, running sums in order,
at-least-once replays only) before it counts.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "hosts"), str(ROOT / "tests")]
from hostjobs import Hosts, SteadyInput, outputs_job, read_on, state, wait_for  # noqa: E402
from jobs.outputs import Workload, replay_problems  # noqa: E402
from kafka_broker import start_kafka  # noqa: E402

from bench.kafka_args import add_client_options, client_options  # noqa: E402
from framework.drill.hosts import settled  # noqa: E402
from framework.drill.verify import read_stream  # noqa: E402
from framework.metadata import CoordinatorState  # noqa: E402
from framework.metadata.jobmodel import JobModel  # noqa: E402
from framework.metadata.stream import MODEL_KEY  # noqa: E402
from framework.systems.base import System  # noqa: E402

MODES = ("incremental", "eager")


def _outputs(hosts: Hosts) -> list[dict[str, Any]]:
    config = hosts.config

    async def read(system: System) -> list[dict[str, Any]]:
        rows = await read_stream(system, f"{config.inputs[0].split('.', 1)[1]}-sums")
        return [{"key": k.decode(), **json.loads(v)} for part in rows.values()
                for k, v in part]
    return read_on(config, read)


def _gaps(found: list[dict[str, Any]], since: float, until: float) -> dict[int, float]:
    """Task (its input partition) → the longest gap between two records it processed in
    [``since``, ``until``]."""
    stamps: dict[int, list[float]] = defaultdict(list)
    for output in found:
        if since <= output["t"] <= until:
            stamps[output["p"]].append(output["t"])
    return {p: max((b - a for a, b in zip(sorted(ts), sorted(ts)[1:], strict=False)),
                   default=until - since) for p, ts in stamps.items()}


def _gap_starts(found: list[dict[str, Any]], since: float, until: float
                ) -> dict[int, float]:
    """Task → when its longest gap in [``since``, ``until``] began."""
    stamps: dict[int, list[float]] = defaultdict(list)
    for output in found:
        if since <= output["t"] <= until:
            stamps[output["p"]].append(output["t"])
    starts = {}
    for p, ts in stamps.items():
        ts.sort()
        pairs = list(itertools.pairwise(ts)) or [(since, until)]
        starts[p] = max(pairs, key=lambda pair: pair[1] - pair[0])[0]
    return starts


def _waits(found: list[dict[str, Any]], since: float, until: float
           ) -> dict[int, tuple[float, float]]:
    """Task (its input partition) → the longest wait from a record's write to its first
    processing, over records first processed in [``since``, ``until``], and when that
    record was processed (replays after a move are not counted again)."""
    first: dict[tuple[str, int], dict[str, Any]] = {}
    for output in found:
        seen = first.get((output["key"], output["n"]))
        if seen is None or output["t"] < seen["t"]:
            first[(output["key"], output["n"])] = output
    waits: dict[int, tuple[float, float]] = {}
    for output in first.values():
        if since <= output["t"] <= until:
            wait = output["t"] - output["w"] / 1000
            if wait > waits.get(output["p"], (-1.0, 0.0))[0]:
                waits[output["p"]] = (wait, output["t"])
    return waits


def _pids(current: CoordinatorState, names: str) -> dict[int, int]:
    return {w: current.workers[w].pid for h in names for w in current.hosts[h].workers}


def _owners(model: JobModel) -> dict[int, str]:
    """Input partition → host running its task in ``model`` ("" while parked)."""
    return {ssp.partition: model.host_of(t.name) or "" for t in model.tasks.values()
            for ssp in t.ssps}


def _models(hosts: Hosts) -> list[JobModel]:
    """Every job model published so far, in order (the coordinator stream is not compacted
    within a run)."""
    config = hosts.config

    async def read(system: System) -> list[JobModel]:
        rows = await read_stream(system, config.coordinator_ref[1])
        return [JobModel.from_bytes(v) for part in rows.values() for k, v in part
                if k == MODEL_KEY and v is not None]
    return read_on(config, read)


def _stayed(models: list[JobModel], since: int, until: int) -> set[int]:
    """Input partitions whose task ran on the same host in every model of epochs
    ``since``..``until`` (a task parked or moved and moved back in between did not)."""
    span = [_owners(m) for m in models if since <= m.epoch <= until]
    return {p for p, host in span[0].items() if host and all(o.get(p) == host for o in span)}


def _round(bootstrap: str, folder: Path, mode: str, rate: int, tasks: int, workers: int,
           options: dict[str, Any] | None = None) -> dict[str, float]:
    name = f"bench-rg-{mode}-{os.getpid()}-{int(time.time())}"
    hosts = Hosts(outputs_job(folder / "job", bootstrap, name, tasks=tasks, workers=workers,
                              task="sum_task:StampedSumTask", rebalances=mode,
                              client_options=options), folder)
    config = hosts.config
    work = Workload(keys=400, stream=f"{name}-in")
    try:
        for host in "abc":
            hosts.start(host)
        three = wait_for(lambda: settled(state(config), set("abc")), 180, "3 hosts", hosts)
        before = _pids(three, "abc")

        def until(names: str, after: int, check: Callable[[CoordinatorState], bool]
                  ) -> CoordinatorState:
            return wait_for(lambda: (s := settled(state(config), set(names), after)) and
                            check(s) and s, 600, f"hosts {names}", hosts)
        with SteadyInput(config, work, batch=max(1, rate // 20)):
            time.sleep(3)
            join_at = time.time()
            hosts.start("d")
            joined = until("abcd", 0, lambda s: bool(s.hosts["d"].active))
            time.sleep(1)
            join_end = time.time()
            leave_at = time.time()
            assert hosts.terminate("c") == 0
            left = until("abd", joined.model.epoch if joined.model else 0, lambda s: True)
            time.sleep(1)
            leave_end = time.time()
            fail_at = time.time()
            hosts.kill("b")  # its whole process group: host b and its workers at once
            failed = until("ad", left.model.epoch if left.model else 0, lambda s: True)
            time.sleep(1)
            fail_end = time.time()
        wait_for(lambda: len(_outputs(hosts)) >= work.count, 600, "every output", hosts)
        found = _outputs(hosts)
        models = _models(hosts)
        by_key: dict[str, list[dict[str, int]]] = defaultdict(list)
        for output in found:
            by_key[output["key"]].append(output)
        problems = replay_problems(by_key, work)
        assert not problems, problems[:5]
    finally:
        hosts.stop_all()
    figures: dict[str, float] = {}
    for case, since, end, old, new in (("join", join_at, join_end, three, joined),
                                       ("leave", leave_at, leave_end, joined, left),
                                       ("failover", fail_at, fail_end, left, failed)):
        gaps = _gaps(found, since, end)
        starts = _gap_starts(found, since, end)
        assert old.model is not None and new.model is not None
        kept = _stayed(models, old.model.epoch, new.model.epoch)
        stayed = [g for p, g in gaps.items() if p in kept]
        moved = [g for p, g in gaps.items() if p not in kept]
        figures[f"{case} stayed gap ms"] = max(stayed, default=0) * 1000
        figures[f"{case} moved gap ms"] = max(moved, default=0) * 1000
        waits = _waits(found, since, end)
        stayed_waits = {p: w for p, w in waits.items() if p in kept}
        figures[f"{case} stayed wait ms"] = max(
            (w for w, _ in stayed_waits.values()), default=0) * 1000
        figures[f"{case} moved wait ms"] = max(
            (w for p, (w, _) in waits.items() if p not in stayed_waits), default=0) * 1000
        if stayed_waits:
            p = max(stayed_waits, key=lambda q: stayed_waits[q][0])
            print(f"  {case}: worst stayed wait: partition {p} on host "
                  f"{_owners(new.model).get(p)}, "
                  f"processed at +{stayed_waits[p][1] - since:.1f} s", flush=True)
        worst = max(gaps, key=lambda p: gaps[p]) if gaps else None
        if worst is not None:
            figures[f"{case} worst gap at +ms"] = (starts[worst] - since) * 1000
    figures["a,b workers restarted"] = sum(
        1 for w, pid in _pids(left, "ab").items() if before.get(w) != pid)
    figures["a workers restarted at the failover"] = sum(
        1 for w, pid in _pids(failed, "a").items() if before.get(w) != pid)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bootstrap", help="HOST:PORT of a broker (default: start Kafka)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="which of incremental,eager to run (default both)")
    parser.add_argument("--keep", help="keep the hosts' folders and logs under this folder")
    add_client_options(parser)
    args = parser.parse_args()
    options = client_options(args)
    with contextlib.ExitStack() as stack:
        tmp = args.keep or stack.enter_context(tempfile.TemporaryDirectory(
            prefix="sampan-bench-rebalance-"))
        broker = None if args.bootstrap else start_kafka(Path(tmp) / "kafka")
        bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
        try:
            for number in range(args.rounds):
                for mode in args.modes.split(","):
                    figures = _round(bootstrap, Path(tmp) / f"{mode}-{number}", mode,
                                     args.rate, args.tasks, args.workers, options)
                    print(f"round {number + 1} {mode}: " + ", ".join(
                        f"{k} {v:,.0f}" for k, v in figures.items()), flush=True)
        finally:
            if broker is not None:
                broker.stop()


if __name__ == "__main__":
    main()
