"""`python -m bench.curves`: measure the cost curves and draw them (see the package doc).

Default sizes are short (a few minutes on a loaded 2-core machine); ``--full`` takes the
issue's sizes (state: 10k, 1M, 10M keys, capped by ``--max-keys``); ``--redraw`` draws
the PNGs again from the saved tables without running anything.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.curves import plot

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
IMAGES = ROOT / "docs" / "img"
NAMES = ("workers", "tasks", "state", "failover")


@contextlib.contextmanager
def _broker(folder: Path) -> Iterator[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from kafka_broker import start_kafka

    broker = start_kafka(folder / "kafka")
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def _measure(name: str, args: argparse.Namespace, work: Path, bootstrap: str | None
             ) -> list[plot.Curve]:
    if name == "tasks":
        from bench.curves import tasks
        return tasks.measure(work, tasks.QUICK, args.records, args.keys)
    if name == "workers":
        from bench.curves import workers
        systems: dict[str, str | None] = {"local log": None}
        if bootstrap is not None:
            systems["Apache Kafka"] = bootstrap
        return workers.measure(work, systems, workers.COUNTS, args.records, args.keys)
    if name == "state":
        from bench.curves import state
        sizes = tuple(k for k in (state.FULL if args.full else state.QUICK)
                      if k <= args.max_keys)
        return state.measure(work, sizes)
    from bench.curves import failover
    assert bootstrap is not None
    return failover.measure(work, bootstrap,
                            failover.FULL if args.full else failover.QUICK)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.curves",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="*", default=list(NAMES),
                        metavar="CURVE", help=f"any of {', '.join(NAMES)} (default: all)")
    parser.add_argument("--full", action="store_true", help="the issue's sizes")
    parser.add_argument("--quick", action="store_true", help="short sizes (the default)")
    parser.add_argument("--max-keys", type=int, default=1_000_000,
                        help="the largest state size of the state curve (with --full)")
    parser.add_argument("--records", type=int, default=None,
                        help="input records of the workers and tasks curves "
                             "(default 40,000; --full 400,000)")
    parser.add_argument("--keys", type=int, default=2_000,
                        help="distinct keys of those records (default 2,000)")
    parser.add_argument("--no-kafka", action="store_true",
                        help="local log only (no broker: no Kafka series, no failover)")
    parser.add_argument("--redraw", action="store_true",
                        help="draw the PNGs again from bench/curves/results/*.json")
    args = parser.parse_args()
    unknown = set(args.curves) - set(NAMES)
    if unknown:
        parser.error(f"unknown curve {', '.join(sorted(unknown))}: choose from {', '.join(NAMES)}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up workers, broker
    args.records = args.records or (400_000 if args.full else 40_000)
    command = " ".join(["python -m bench.curves", shlex.join(sys.argv[1:])]).strip()
    names = [n for n in NAMES if n in args.curves]
    if args.redraw:
        for name in names:
            curves, measured_by, where = plot.load(RESULTS / f"{name}.json")
            print(plot.draw(curves, IMAGES / f"curves-{name}.png", measured_by, where))
        return
    if args.no_kafka:
        names = [n for n in names if n != "failover"]
    kafka = not args.no_kafka and any(n in ("workers", "failover") for n in names)
    with tempfile.TemporaryDirectory(prefix="sampan-bench-curves-") as tmp, \
            (_broker(Path(tmp)) if kafka else contextlib.nullcontext()) as bootstrap:
        for name in names:
            print(f"{name}: {plot.machine()}", flush=True)
            curves = _measure(name, args, Path(tmp) / name, bootstrap)
            where = plot.machine()
            plot.save(curves, RESULTS / f"{name}.json", command, where)
            print(plot.draw(curves, IMAGES / f"curves-{name}.png", command, where), flush=True)


if __name__ == "__main__":
    main()
