"""CPU per commit spent building the checkpoints, against tasks per worker: the cost
`bench.curves tasks` found growing with tasks² (`Committer._checkpoints`), measured alone
(no I/O, so the figure does not depend on the machine's load as the job's own does).

    python -m bench.curves.commit [--out FILE.json] [--before FILE.json]

``--before`` takes the ``--out`` of a checkout before the fix (commit b57223c) and draws
both into ``docs/img/curves-commit.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.curves import plot
from bench.curves.plot import Curve
from framework.worker.commit import Committer, PreparedCommit

ROOT = Path(__file__).resolve().parents[2]
SIZES = (4, 16, 64, 256, 1024, 4096)


def seconds_per_commit(tasks: int, rounds: int = 5) -> float:
    """The least CPU seconds over ``rounds`` of building one commit's checkpoints for
    ``tasks`` tasks with one logged store each."""
    committer: Any = Committer.__new__(Committer)
    committer._epoch = 1
    names = [f"Partition {n}" for n in range(tasks)]
    commit = PreparedCommit([SimpleNamespace(name=n) for n in names],  # type: ignore[misc]
                            inputs={n: {} for n in names})
    positions = {(n, "totals"): offset for offset, n in enumerate(names)}
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        committer._checkpoints(commit, positions)
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args()
    figures = {}
    for tasks in SIZES:
        figures[tasks] = seconds_per_commit(tasks, rounds=3 if tasks >= 1024 else 5)
        print(f"{tasks:5} tasks: {figures[tasks] * 1000:9.3f} ms CPU per commit", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(figures) + "\n")
    if args.before is not None:
        curve = Curve("building one commit's checkpoints", "tasks per worker",
                      "CPU ms per commit", log_x=True, log_y=True)
        for tasks, seconds in json.loads(args.before.read_text()).items():
            curve.add("before (b57223c)", int(tasks), seconds * 1000)
        for tasks, seconds in figures.items():
            curve.add("after", tasks, seconds * 1000)
        where = plot.machine()
        plot.save([curve], ROOT / "bench" / "curves" / "results" / "commit.json",
                  "python -m bench.curves.commit --before FILE", where)
        print(plot.draw([curve], ROOT / "docs" / "img" / "curves-commit.png",
                        "python -m bench.curves.commit --before FILE", where))


if __name__ == "__main__":
    main()
