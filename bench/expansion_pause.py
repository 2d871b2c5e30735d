"""The pause of a live input expansion on real Apache Kafka, one host and several.

    python -m bench.expansion_pause [--rounds 3] [--records 20000]

One Apache Kafka broker (`tests/kafka_broker.py`) for the whole run; rounds interleave the
two cases, each on a fresh job (own topics):

- one host: `sampan run` of the per-key sum job (2 workers, RocksDB, at-least-once) on a
  2-partition input holding ``--records`` records, caught up; `sampan streams expand` to 4
  then to 8. Per expansion, from the job's status: the pause (detection → every worker
  resumed on the new epoch, `ExpansionRecord.pause_ms`) and its steps (→ model published,
  → resumed; with `model_changes = "restart"` also → workers stopped and → started), and
  `sampan streams expand` launched → resumed (adds the command's own start-up and the
  detection delay, at most ``coordinator.monitor_interval_ms`` = 300 here).
- several hosts: 3 hosts (`sampan run --host`, 1 worker each) of the host drill's sum job
  on 6 partitions holding ``--records`` records, settled; the input grows 6 → 12. The
  figure is CreatePartitions → every host resumed on the leader's next epoch (the hosts
  record no expansion timeline; detection is the leader's partition-count poll; the leader
  applies it in place, without a rebalance).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "hosts")]
from hostjobs import Hosts, job_file, produce, state, wait_for  # noqa: E402
from jobs.outputs import Workload  # noqa: E402
from jobs.runs import KafkaSumJob  # noqa: E402
from kafka_broker import running_kafka  # noqa: E402

from framework.metadata import CoordinatorState  # noqa: E402
from framework.systems import open_system  # noqa: E402

STEPS = ("→ stopped", "→ published", "→ started", "→ resumed")


async def _one_host(folder: Path, bootstrap: str, tag: str, records: int
                    ) -> list[dict[str, float]]:
    job = KafkaSumJob(folder, bootstrap, f"pause-{tag}")
    work = Workload(keys=500, stream=job.events)
    job.start()
    try:
        await job.wait_epoch(1)
        await job.send(work.records(records))
        await job.wait_caught_up(work.count)
        figures = []
        for epoch, count in ((2, 4), (3, 8)):
            expanded = time.time() * 1000
            job.expand(count)

            async def resumed(epoch: int = epoch) -> CoordinatorState | None:
                current = await job.state()
                done = [e for e in current.status.expansions if e.epoch == epoch]
                return current if done and done[0].resumed_ms else None
            current = await job.wait(resumed, f"epoch {epoch} resumed", timeout=300)
            e = next(e for e in current.status.expansions if e.epoch == epoch)
            assert e.model_published_ms and e.resumed_ms and e.pause_ms is not None
            one = {"pause": e.pause_ms / 1000,
                   "expand command → resumed": (e.resumed_ms - expanded) / 1000}
            previous = e.detected_ms
            for step, mark in zip(STEPS, (e.workers_stopped_ms, e.model_published_ms,
                                          e.workers_started_ms, e.resumed_ms), strict=True):
                if mark is not None:  # taken in place: no stop, no start
                    one[step] = (mark - previous) / 1000
                    previous = mark
            figures.append(one)
        return figures
    finally:
        job.kill()


def _settled(hosts: Hosts, names: set[str], after: int) -> CoordinatorState | None:
    current = state(hosts.config)
    model = current.model
    if model is None or model.epoch <= after or set(model.hosts) != names:
        return None
    reports = [current.hosts.get(n) for n in names]
    ok = all(r is not None and r.epoch == model.epoch and r.resumed_ms for r in reports)
    return current if ok else None


def _hosts(folder: Path, bootstrap: str, tag: str, records: int) -> float:
    name = f"pause-hosts-{tag}"
    hosts = Hosts(job_file(folder / "job", bootstrap, name), folder)
    try:
        for host in "abc":
            hosts.start(host)
        config = hosts.config
        first = wait_for(lambda: _settled(hosts, {"a", "b", "c"}, 0), 180, "3 hosts", hosts)
        assert first is not None and first.model is not None
        produce(config, Counter(), records, 500)

        async def expand() -> None:
            system = open_system(config.system("kafka"))
            await system.start()
            try:
                await system.expand_stream(f"{name}-in", 12)
            finally:
                await system.close()

        expanded = time.time() * 1000
        asyncio.run(expand())
        after = wait_for(lambda: (s := _settled(hosts, {"a", "b", "c"}, first.model.epoch))
                         and s.model.partition_counts[f"kafka.{name}-in"] == 12 and s,
                         300, "the expanded model resumed on every host", hosts)
        resumed = max(after.hosts[h].resumed_ms or 0 for h in "abc")
        return (resumed - expanded) / 1000
    finally:
        hosts.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    one: list[dict[str, float]] = []
    several: list[float] = []
    print(f"expansion pause on Apache Kafka, {args.records:,} records before each expansion")
    with running_kafka() as broker, \
            tempfile.TemporaryDirectory(prefix="sampan-bench-pause-") as tmp:
        for number in range(args.rounds):
            tag = f"{os.getpid()}-{number}"
            figures = asyncio.run(_one_host(Path(tmp) / f"one-{number}", broker.bootstrap,
                                            tag, args.records))
            for change, f in zip(("2→4", "4→8"), figures, strict=True):
                print(f"round {number + 1}, one host {change}: " + ", ".join(
                    f"{k} {v:.2f} s" for k, v in f.items()), flush=True)
            one += figures
            took = _hosts(Path(tmp) / f"hosts-{number}", broker.bootstrap, tag, args.records)
            several.append(took)
            print(f"round {number + 1}, 3 hosts 6→12: CreatePartitions → every host resumed "
                  f"{took:.2f} s", flush=True)
    print(f"medians of {len(one)} one-host expansions and {len(several)} on 3 hosts:")
    for key in one[0]:
        values = [f[key] for f in one]
        print(f"  one host, {key:28} {statistics.median(values):6.2f} s "
              f"(min {min(values):.2f}, max {max(values):.2f})")
    print(f"  3 hosts, CreatePartitions → resumed  {statistics.median(several):6.2f} s "
          f"(min {min(several):.2f}, max {max(several):.2f})")


if __name__ == "__main__":
    main()
