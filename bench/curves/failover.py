"""Failover time with and without standbys against state size (`bench.failover`'s case:
3 hosts on Apache Kafka, 6 tasks, host b SIGKILLed; kill → every task processing again)."""

from __future__ import annotations

from pathlib import Path

from bench.curves.plot import Curve

QUICK = (1_000, 10_000)
FULL = (1_000, 10_000, 100_000)


def measure(work: Path, bootstrap: str, sizes: tuple[int, ...]) -> list[Curve]:
    from bench.failover import run_case  # puts tests/hosts on sys.path

    took = Curve("kill one of 3 hosts → every task processing", "keys in the state (6 tasks)",
                 "seconds", log_x=True)
    restored = Curve("records the moved tasks restored", "keys in the state (6 tasks)",
                     "records", log_x=True)
    for per_task in sizes:
        for standbys in (1, 0):
            figures = run_case(bootstrap, work / f"k{per_task}s{standbys}", standbys, per_task,
                               settle_s=600)  # 3 hosts starting on a loaded machine
            label = f"standby_replicas = {standbys}"
            took.add(label, per_task * 6, figures["failover_s"])
            restored.add(label, per_task * 6, figures["restored"])
            print(f"  {per_task * 6:>9,} keys, {label}: failover {figures['failover_s']:.1f} s,"
                  f" restored {figures['restored']:,.0f}", flush=True)
    return [took, restored]
