"""The per-key sum job written for Quix Streams: the other side of `bench.quix_compare`.

Runs in its own virtualenv with ``quixstreams`` installed (never a sampan dependency);
imports nothing of sampan. Reads ``--input`` from the start, keeps each key's running
total of ``value["amount"]`` in Quix's RocksDB state (with its changelog topic), sends
the total to ``--output`` per record, stops cleanly after ``--count`` records, and prints
one JSON line: seconds from start to stop and from the first record to the last.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

from quixstreams import Application, State


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", default="events")
    parser.add_argument("--output", default="quix-sums")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--group", default="quix-bench-sums")
    args = parser.parse_args()
    started = time.perf_counter()
    app = Application(broker_address=args.bootstrap, consumer_group=args.group,
                      auto_offset_reset="earliest", state_dir=tempfile.mkdtemp(),
                      loglevel="WARNING")
    source = app.topic(args.input, key_deserializer="str", value_deserializer="json")
    sink = app.topic(args.output, key_serializer="str", value_serializer="json")
    # tansu's DescribeConfigs leaves out retention.ms, which Quix needs to derive its
    # changelog topic's config: say "infinite", as the topic is.
    source.broker_config.extra_config.setdefault("retention.ms", "-1")
    seen = {"count": 0, "first": 0.0, "last": 0.0}

    def add(value: dict[str, Any], state: State) -> int:
        total: int = state.get("total", 0) + value["amount"]
        state.set("total", total)
        seen["count"] += 1
        if seen["count"] == 1:
            seen["first"] = time.perf_counter()
        if seen["count"] == args.count:
            seen["last"] = time.perf_counter()
            app.stop()
        return total

    app.dataframe(source).apply(add, stateful=True).to_topic(sink)
    app.run()
    print(json.dumps({"records": seen["count"], "total_s": time.perf_counter() - started,
                      "processing_s": seen["last"] - seen["first"]}))


if __name__ == "__main__":
    main()
