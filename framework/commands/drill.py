"""`sampan drill`: the expansion drill — exact results while the input expands, or exit 1 —
and (``--hosts N --kill-host``) the host-failover drill of a job on several hosts."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_drill_command"]


class _DefaultsShown(argparse.HelpFormatter):
    """Help that ends each option with its default, where it has one worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


def _examples() -> str:
    from framework.drill.examples import installed_examples

    return ", ".join(installed_examples()) or "none installed"


def add_drill_command(commands: Any) -> None:
    parser = commands.add_parser(
        "drill", help="run an example job, expand its input live, verify exact results",
        formatter_class=_DefaultsShown,
        description="Runs an example job (default: word count) on the embedded local log (or "
        "Kafka) in a fresh folder with a producer of known ground truth, expands an input "
        "(word count: 2 → 4 → 8) while it runs, waits for the job to catch up and verifies "
        "the store contents, the outputs and per-key order exactly. Exit status 0 only on "
        "an exact result; with --naive, 1 and the number of wrong keys.",
        epilog="The drill writes its job file, data, worker logs and timeline.png to --output "
        "or, by default, to a new folder sampan-drill-XXXX under the system's temporary "
        "directory (the report's last line names it); remove the folder when done (rm -r "
        "FOLDER). On Kafka its topics live in a namespace of its own (drill-NAME-XXXX., on "
        "the report) and are deleted when it ends, unless --keep.")
    parser.add_argument("--example", default="wordcount",
                        help=f"installed example job, one of: {_examples()}")
    parser.add_argument("--example-dir", type=Path, metavar="DIR",
                        help="drill your own example instead: a folder with drill.py and the "
                        "job file (see docs/drill.md)")
    parser.add_argument("--job", default="job.toml", metavar="FILE",
                        help="job file of the example to run (e.g. enrichment's "
                        "job_broadcast.toml); --form pipeline runs job_pipeline.toml unless "
                        "this names another")
    parser.add_argument("--form", choices=["task", "pipeline", "both"], default="task",
                        help="which form of the example to run: its hand-written task "
                        "(job.toml), its pipeline (job_pipeline.toml), or both, one after the "
                        "other (exit 0 only if both are exact)")
    parser.add_argument("--records", type=int, default=30_000, help="records to produce")
    parser.add_argument("--keys", type=int, default=1_000, help="distinct keys")
    parser.add_argument("--rate", type=int, default=3_000, help="records produced per second")
    parser.add_argument("--partitions", type=int,
                        help="initial partitions of the expanded input (default: the "
                        "example's, wordcount 2; host drill: 6)")
    parser.add_argument("--steps", type=int, nargs="+", metavar="N",
                        help="partition counts to expand to, in order (default: the "
                        "example's, wordcount 4 8; host drill: none — with N, the input "
                        "grows right after the kill)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--output", type=Path, help="folder for job, data, logs, report, plot "
                        "(default: a fresh temporary folder, see below)")
    parser.add_argument("--naive", action="store_true",
                        help="use the plain GroupByPartition grouper, as other frameworks do, "
                        "and show the miscount")
    parser.add_argument("--system", choices=["local", "kafka"], default="local",
                        help="where the streams live")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="Kafka broker supporting CreatePartitions (with --system kafka)")
    parser.add_argument("--client-options", type=Path, metavar="FILE",
                        help="Kafka: a TOML file of the cluster's client_options (TLS, SASL: "
                        "see docs/security.md); its file names are relative to it")
    parser.add_argument("--keep", action="store_true",
                        help="Kafka: keep the drill's topics (its namespace, named on the "
                        "report) instead of deleting them when it ends")
    parser.add_argument("--guarantee", choices=["at-least-once", "exactly-once"],
                        help="job.guarantee (default: exactly-once on the local log, "
                        "at-least-once on Kafka; exactly-once on Kafka needs transactions)")
    parser.add_argument("--monitor-interval-ms", type=int, default=1_000,
                        help="how often the coordinator polls partition counts")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated workload")
    parser.add_argument("--verify", choices=["exact", "spark"], default="exact",
                        help="spark: also recompute the expected result in Spark from the "
                        "streams (needs pip install -e '.[spark]')")
    parser.add_argument("--hosts", type=int, metavar="N",
                        help="host-failover drill: run a per-key sum job on N hosts (with "
                        "--system kafka --bootstrap and --kill-host; see docs/drill.md)")
    parser.add_argument("--kill-host", action="store_true",
                        help="host-failover drill: SIGKILL one host's process group mid-run")
    parser.add_argument("--standbys", type=int, default=1,
                        help="host-failover drill: job.standby_replicas (0: full restore)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="host-failover drill: coordinator.session_timeout_ms")
    parser.add_argument("--input-retention-bytes", type=int, metavar="N",
                        help="retention of the expanded input, N payload bytes per partition "
                        "(local log, --verify exact): the drill runs while its oldest "
                        "offsets move")
    parser.add_argument("--no-plot", action="store_true", help="skip the timeline PNG")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the coordinator")
    parser.set_defaults(handler=_command)


def _host_command(args: argparse.Namespace) -> int:
    from framework.drill.hosts import HostDrillOptions, run_host_drill
    from framework.errors import ConfigError

    if args.system != "kafka" or not args.bootstrap or not args.kill_host:
        raise ConfigError("--hosts runs the host-failover drill: it needs --system kafka "
                          "--bootstrap HOST:PORT --kill-host (e.g. sampan drill --system kafka "
                          "--bootstrap 127.0.0.1:9092 --hosts 3 --kill-host)")
    report = asyncio.run(run_host_drill(HostDrillOptions(
        bootstrap=args.bootstrap, hosts=args.hosts, standbys=args.standbys,
        records=args.records, keys=args.keys, session_timeout_ms=args.session_timeout_ms,
        output=args.output, partitions=args.partitions or HostDrillOptions.partitions,
        steps=tuple(args.steps or ()), guarantee=args.guarantee, keep=args.keep,
        client_options=_client_options(args))))
    print(report.text())
    return 0 if report.ok else 1


def _client_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--client-options FILE``'s options ({} without it)."""
    if args.client_options is None:
        return {}
    from framework.systems.kafka.options import read_client_options

    return read_client_options(args.client_options)


def _command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    if args.hosts is not None or args.kill_host:
        return _host_command(args)
    forms = ["task", "pipeline"] if args.form == "both" else [args.form]
    exact = True
    for form in forms:
        output = args.output / form if args.output is not None and len(forms) > 1 else args.output
        exact = _drill_form(args, form, output) and exact
    return 0 if exact else 1


def _drill_form(args: argparse.Namespace, form: str, output: Path | None) -> bool:
    """One drill of the example's ``form``; whether it was exact (its report printed)."""
    from framework.drill.options import DrillOptions
    from framework.drill.run import run_drill

    options = DrillOptions(
        example=args.example, example_dir=args.example_dir, job_file=args.job, form=form,
        records=args.records, keys=args.keys, rate=args.rate,
        initial_partitions=args.partitions, workers=args.workers,
        steps=tuple(args.steps) if args.steps else None,
        output=output, naive=args.naive, system=args.system, bootstrap=args.bootstrap,
        monitor_interval_ms=args.monitor_interval_ms, seed=args.seed, plot=not args.no_plot,
        verify=args.verify, guarantee=args.guarantee,
        input_retention_bytes=args.input_retention_bytes, keep=args.keep,
        client_options=_client_options(args))
    report = asyncio.run(run_drill(options))
    print(report.text())
    return report.exact
