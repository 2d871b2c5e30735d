"""The Quix Streams side of bench/peers: the per-key sum job as a Quix Streams app.

Runs in the bench's own virtualenv with ``quixstreams`` (`bench.peers.peers` makes it;
never a sampan dependency) and imports nothing of sampan. Reads ``--input`` from the
start, keeps each key's running total of ``value["amount"]`` in Quix's RocksDB state
(with its changelog topic), sends the total (JSON) to ``--output`` per record, stops
cleanly after ``--count`` records (0: on SIGTERM, which Quix handles itself) and prints
the ``PEER-REPORT`` line of `bench.peers.process` (this file cannot import it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from quixstreams import Application, State  # type: ignore[import-not-found]


def describe(error: BaseException) -> str:
    """The error and its causes, outermost first."""
    parts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(parts) < 5:
        parts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return " <- caused by ".join(parts)


def run(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Build the app (its changelog topic is checked here) and run it until stopped."""
    app = Application(
        broker_address=args.bootstrap, consumer_group=args.name,
        auto_offset_reset="earliest", state_dir=args.state_dir, loglevel="WARNING",
        processing_guarantee=args.guarantee, commit_interval=args.commit_ms / 1000,
        consumer_extra_config={
            "topic.metadata.refresh.interval.ms": args.metadata_refresh_ms})
    source = app.topic(args.input, key_deserializer="str", value_deserializer="json")
    sink = app.topic(args.output, key_serializer="str", value_serializer="json")

    def add(value: dict[str, Any], state: State) -> int:
        total: int = state.get("total", 0) + value["amount"]
        state.set("total", total)
        report["records"] += 1
        if report["records"] == 1:
            report["first_s"], report["cpu_first_s"] = time.time(), time.process_time()
        if report["records"] == args.count // 2:
            report["mid_s"], report["cpu_mid_s"] = time.time(), time.process_time()
        if report["records"] == args.count:
            app.stop()
        return total

    app.dataframe(source).apply(add, stateful=True).to_topic(sink)
    app.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--name", required=True, help="consumer group")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--guarantee", default="at-least-once")
    parser.add_argument("--commit-ms", type=int, default=1000)
    parser.add_argument("--metadata-refresh-ms", type=int, default=5000)
    args = parser.parse_args()
    report: dict[str, Any] = {"records": 0, "first_s": 0.0, "cpu_first_s": 0.0,
                              "error": None}
    try:
        run(args, report)
    except Exception as error:
        report["error"] = describe(error)
    report["done_s"], report["cpu_done_s"] = time.time(), time.process_time()
    print("PEER-REPORT " + json.dumps(report), flush=True)
    sys.exit(1 if report["error"] else 0)


if __name__ == "__main__":
    main()
