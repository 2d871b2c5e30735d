"""Several hosts over Kafka: failover time and records restored, with and without standbys,
and the rebalance time when a host joins.

    python -m bench.failover [--keys-per-task 100000] [--rounds 1] [--bootstrap HOST:PORT
                             | --tansu]

Per case: 3 hosts (1 worker each) run the per-key sum job on 6 partitions (6 tasks), the
input (produced once every task is in its place: no warmup left) holds ``keys-per-task``
keys per task, every key's sum reached; host b is SIGKILLed
(its whole process group) and the figures come from the hosts' reports on the coordinator
stream: kill → every task processing again (the survivors' ``resumed_ms`` at the failover
epoch) and the records the moved tasks restored. Then an empty host d joins: start → every
host resumed at the epoch that includes d; then host c is stopped (SIGTERM: it leaves the
group). For the failover, the join and the leave it prints the longest unavailability of a
task that moved between hosts (`HostReport.unavailable_ms`: from the task's stop until its
worker resumed; for the killed host's tasks from the survivors' stop, so the session
timeout comes on top); tasks that stay never stop, and `bench.rebalance_gaps` measures
their progress. Rounds interleave the two cases (standbys 1, then
0). Without ``--bootstrap`` an Apache Kafka broker (`tests/kafka_broker.py`) is started on
127.0.0.1, or tansu with ``--tansu``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.kafka_args import add_client_options, client_options
from framework.metadata import CoordinatorState

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "hosts"), str(ROOT / "tests")]
from hostjobs import Hosts, final_state, job_file, produce, state, wait_for  # noqa: E402
from kafka_broker import start_kafka, start_tansu  # noqa: E402


def _settled(hosts: Hosts, names: set[str], after: int, placed: bool = False
             ) -> CoordinatorState | None:
    """The job's state once its model is newer than ``after``, places tasks on exactly
    ``names`` (``placed``: and warms no copy up, so no task is still to move), and every
    host reports it resumed that model."""
    current = state(hosts.config)
    model = current.model
    if model is None or model.epoch <= after or set(model.hosts) != names or (
            placed and model.warmups):
        return None
    reports = [current.hosts.get(n) for n in names]
    ok = all(r is not None and r.epoch == model.epoch and r.resumed_ms for r in reports)
    return current if ok else None


def run_case(bootstrap: str, folder: Path, standbys: int, keys_per_task: int,
             options: dict[str, Any] | None = None, settle_s: float = 120
             ) -> dict[str, float]:
    name = f"bench-fo{standbys}-{os.getpid()}-{int(time.time())}"
    path = job_file(folder / "job", bootstrap, name, standbys=standbys,
                    extra="store_restore_batch = 10000\n", client_options=options)
    path.write_text(path.read_text().replace("acceptable_recovery_lag = 0",
                                             "acceptable_recovery_lag = 10000"))
    hosts = Hosts(path, folder)
    try:
        for host in "abc":
            hosts.start(host)
        config = hosts.config
        # Every task in its place before the input: a task moved after its records were
        # processed would leave an up-to-date copy behind, and the failover would restore
        # less than the killed host's tasks hold (or nothing), by chance.
        first = wait_for(lambda: _settled(hosts, {"a", "b", "c"}, 0, placed=True), settle_s,
                         "3 hosts, every task in its place", hosts)
        truth: Counter[str] = Counter()
        keys = keys_per_task * 6
        for start in range(0, keys, 50_000):
            produce(config, truth, min(50_000, keys - start), keys, start=start)
        wait_for(lambda: len(final_state(config)) == len(truth), 1800, "every key", hosts)
        if standbys:
            wait_for(lambda: all(not any(r.replica_gaps.values())
                                 for r in state(config).hosts.values()), 600, "standbys", hosts)
        moved = list(state(config).hosts["b"].active)
        killed_ms = time.time() * 1000
        hosts.kill("b")
        after = wait_for(lambda: _settled(hosts, {"a", "c"}, first.model.epoch), 600,
                         "failover", hosts)
        resumed = max(after.hosts[h].resumed_ms or 0 for h in "ac")
        restored = sum(r.restored.get(t, 0) for r in after.hosts.values() for t in moved
                       if r.host in "ac")
        joined_ms = time.time() * 1000
        hosts.start("d")
        grown = wait_for(lambda: _settled(hosts, {"a", "c", "d"}, after.model.epoch), 600,
                         "d joining", hosts)
        rebalanced = max(grown.hosts[h].resumed_ms or 0 for h in "acd")
        assert hosts.terminate("c") == 0
        left = wait_for(lambda: _settled(hosts, {"a", "d"}, grown.model.epoch), 600,
                        "c leaving", hosts)
        return {"failover_s": (resumed - killed_ms) / 1000, "restored": restored,
                "join_rebalance_s": (rebalanced - joined_ms) / 1000,
                **_unavailable("failover", after, "ac", _moved(first, after)),
                **_unavailable("join", grown, "acd", _moved(after, grown)),
                **_unavailable("leave", left, "ad", _moved(grown, left))}
    finally:
        hosts.stop_all()


def _moved(before: CoordinatorState, after: CoordinatorState) -> list[str]:
    """The tasks whose host differs between the two states' models (a task a rebalance
    moves between hosts that stay counts as moved too)."""
    assert before.model is not None and after.model is not None
    return sorted(t for t in after.model.tasks
                  if before.model.host_of(t) != after.model.host_of(t))


def _unavailable(case: str, settled: CoordinatorState, names: str, moved: list[str]
                 ) -> dict[str, float]:
    """The longest unavailability (s) of a task the case moved between hosts, from the
    hosts' reports (`HostReport.unavailable_ms`, measured at the rebalance that moved it).
    Tasks that stay never stop (incremental rebalancing); a report lists one only for an
    earlier move, so how they fare is `bench.rebalance_gaps`' (their progress itself)."""
    spans = {t: ms for h in names for t, ms in settled.hosts[h].unavailable_ms.items()}
    return {f"{case}_moved_s": max((ms for t, ms in spans.items() if t in moved),
                                   default=0) / 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys-per-task", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--bootstrap",
                        help="HOST:PORT of a broker (default: start Apache Kafka)")
    parser.add_argument("--tansu", action="store_true", help="start tansu, not Apache Kafka")
    add_client_options(parser)
    args = parser.parse_args()
    options = client_options(args)
    with tempfile.TemporaryDirectory(prefix="sampan-bench-failover-") as tmp:
        broker = None if args.bootstrap else (
            start_tansu(Path(tmp)) if args.tansu else start_kafka(Path(tmp) / "kafka"))
        bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
        try:
            for number, standbys in ((n, s) for n in range(args.rounds) for s in (1, 0)):
                figures = run_case(bootstrap, Path(tmp) / f"r{number}s{standbys}", standbys,
                                   args.keys_per_task, options)
                print(f"round {number + 1}, standby_replicas={standbys}: kill → every task "
                      "processing again "
                      f"{figures['failover_s']:.1f} s, records restored "
                      f"{figures['restored']:,.0f}; host join → rebalanced "
                      f"{figures['join_rebalance_s']:.1f} s", flush=True)
                print("  longest unavailability of a task that moved: " + ", ".join(
                    f"{case} {figures[case + '_moved_s']:.1f} s"
                    for case in ("failover", "join", "leave")), flush=True)
        finally:
            if broker is not None:
                broker.stop()


if __name__ == "__main__":
    main()
