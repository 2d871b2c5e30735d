"""`sampan drill`: the expansion drill — exact results while the input expands, or exit 1."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_drill_command"]


def add_drill_command(commands: Any) -> None:
    parser = commands.add_parser(
        "drill", help="run an example job, expand its input live, verify exact results",
        description="Runs an example job (default: word count) on the embedded local log (or "
        "Kafka) in a fresh folder with a producer of known ground truth, expands an input "
        "(word count: 2 → 4 → 8) while it runs, waits for the job to catch up and verifies "
        "the store contents, the outputs and per-key order exactly. Exit status 0 only on "
        "an exact result; with --naive, 1 and the number of wrong keys.")
    parser.add_argument("--example", default="wordcount", help="example job (default %(default)s)")
    parser.add_argument("--job", default="job.toml", metavar="FILE",
                        help="job file of the example to run (default %(default)s; e.g. "
                        "enrichment's job_broadcast.toml)")
    parser.add_argument("--records", type=int, default=30_000, help="records to produce")
    parser.add_argument("--keys", type=int, default=1_000, help="distinct keys")
    parser.add_argument("--rate", type=int, default=3_000, help="records per second")
    parser.add_argument("--partitions", type=int,
                        help="initial partitions of the expanded input (default: the "
                        "example's; wordcount 2)")
    parser.add_argument("--steps", type=int, nargs="+", metavar="N",
                        help="partition counts to expand to, in order (default: the "
                        "example's; wordcount 4 8)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--output", type=Path, help="folder for job, data, logs, report, plot "
                        "(default: a fresh temporary folder)")
    parser.add_argument("--naive", action="store_true",
                        help="use the plain GroupByPartition grouper, as other frameworks do, "
                        "and show the miscount")
    parser.add_argument("--system", choices=["local", "kafka"], default="local")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="Kafka broker supporting CreatePartitions (with --system kafka)")
    parser.add_argument("--monitor-interval-ms", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--verify", choices=["exact", "spark"], default="exact",
                        help="also recompute the expected result in Spark from the streams "
                        "(spark; needs pip install -e '.[spark]'), default %(default)s")
    parser.add_argument("--no-plot", action="store_true", help="skip the timeline PNG")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the coordinator")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from framework.drill.options import DrillOptions
    from framework.drill.run import run_drill

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    options = DrillOptions(
        example=args.example, job_file=args.job, records=args.records, keys=args.keys,
        rate=args.rate,
        initial_partitions=args.partitions, workers=args.workers,
        steps=tuple(args.steps) if args.steps else None,
        output=args.output, naive=args.naive, system=args.system, bootstrap=args.bootstrap,
        monitor_interval_ms=args.monitor_interval_ms, seed=args.seed, plot=not args.no_plot,
        verify=args.verify)
    report = asyncio.run(run_drill(options))
    print(report.text())
    return 0 if report.exact else 1
