"""``python -m bench.peers``: the peer tables of docs/performance.md.

    .venv/bin/python -m bench.peers                       # both tables
    .venv/bin/python -m bench.peers throughput --records 1000000 --rounds 3
    .venv/bin/python -m bench.peers expansion

Starts one Apache Kafka broker (`tests/kafka_broker.py`, the pinned release) on a free
127.0.0.1 port and stops it at the end; builds the Kafka Streams peer with Maven and makes
the Quix Streams virtualenv on first use (`bench.peers.peers`). Prints each run as it
ends, then the tables (markdown) and the machine it ran on.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import tempfile
from pathlib import Path

from bench.peers import expansion, machine, throughput
from bench.peers.broker import KAFKA_VERSION, running_kafka
from bench.peers.peers import EXPANSION_PEERS, PEERS, Peer, peer_named
from bench.peers.workload import make_workload

RECORDS = 1_000_000
KEYS = 10_000
ROUNDS = 3


def _throughput(bootstrap: str, peers: list[Peer], args: argparse.Namespace,
                scratch: Path) -> str:
    guarantees = tuple(args.guarantee or throughput.GUARANTEES)
    workload = make_workload(args.records, args.keys)
    print(f"§1 per-key sum: {args.records:,} records, {args.keys:,} keys, "
          f"{throughput.PARTITIONS} partitions; {args.rounds} interleaved round(s)",
          flush=True)
    runs = throughput.run_rounds(peers, bootstrap, workload, args.rounds, guarantees,
                                 scratch)
    names = [peer.name for peer in peers]
    text = [throughput.table(runs, names, guarantees)]
    for guarantee in guarantees:
        for figure, what in (("rate", "records/s"), ("rate_late", "records/s, 2nd half"),
                             ("cpu_us", "CPU µs/record"),
                             ("cpu_us_late", "CPU µs/record, 2nd half")):
            ratios = throughput.paired(runs, ("sampan", guarantee),
                                       ("Kafka Streams", guarantee), figure)
            if ratios:
                text.append(f"sampan / Kafka Streams, {guarantee}, {what}, per round: "
                            f"{', '.join(f'{r:.2f}' for r in ratios)} (median "
                            f"{statistics.median(ratios):.2f})")
    if len(guarantees) == 2:
        for name in names:
            for figure, what in (("rate", "records/s"), ("rate_late", "records/s, 2nd half")):
                ratios = throughput.paired(runs, (name, "exactly-once"),
                                           (name, "at-least-once"), figure)
                if ratios:
                    text.append(f"{name} exactly-once / at-least-once, {what}, per round: "
                                f"{', '.join(f'{r:.0%}' for r in ratios)} (median "
                                f"{statistics.median(ratios):.0%})")
    return "\n".join(text)


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)  # the broker and scratch are cleaned up
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=("all", "throughput", "expansion"),
                        default="all")
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--peer", action="append",
                        help="only this peer (repeatable): sampan, kafka-streams, "
                             "quix-streams, samza (expansion only)")
    parser.add_argument("--guarantee", action="append",
                        choices=("at-least-once", "exactly-once"),
                        help="only this guarantee (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    chosen = [peer_named(name) for name in args.peer] if args.peer else None
    throughput_peers = [p for p in chosen or PEERS if p in PEERS]
    expansion_peers = chosen or list(EXPANSION_PEERS)
    peers = expansion_peers if args.part != "throughput" else throughput_peers
    for peer in peers:
        peer.prepare()
    scratch = Path(tempfile.mkdtemp(prefix="sampan-peers-"))
    before = machine.load()
    versions = ", ".join(f"{peer.name} {peer.version()}" for peer in peers)
    sections = []
    try:
        with running_kafka() as cluster:
            if args.part in ("all", "throughput"):
                sections.append(_throughput(cluster.bootstrap, throughput_peers, args,
                                            scratch))
            if args.part in ("all", "expansion"):
                sections.append(expansion.run(cluster.bootstrap, expansion_peers, args,
                                              scratch))
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print("\n\n".join(sections))
    print()
    print(f"Apache Kafka {KAFKA_VERSION} (one KRaft node on 127.0.0.1); peers: {versions}")
    print(f"machine: {machine.describe()}")
    print(f"{before} before, {machine.load()} after")
    if args.keep:
        print(f"scratch folder kept: {scratch}")


if __name__ == "__main__":
    main()
