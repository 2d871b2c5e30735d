"""RSS of one process holding many RocksDB stores, with and without `job.store_memory_mb`.

Opens ``--tasks`` × ``--stores`` stores the way a worker does
(`framework.worker.task_stores.rocksdb_options` with `process_memory`) and writes ``--keys``
distinct keys of ``--value-bytes`` into each in commit-sized batches, then prints the
process's anonymous RSS and what the shared cache and write-buffer manager report. Each
variant runs in a fresh child process, so the figures are its own.

Run: ``.venv/bin/python -m bench.store_memory`` (defaults: 64 tasks × 2 stores, 20,000
keys of 200 bytes each, bound 256 MiB against none).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.config import parse_config
from framework.stores.rocksdb import RocksDBEngine
from framework.worker.task_stores import process_memory, rocksdb_options


def anon_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(folder: Path, args: argparse.Namespace) -> None:
    stores: dict[str, dict[str, object]] = {f"s{n}": {} for n in range(args.stores)}
    config = parse_config({
        "job": {"name": "m", "task": "m:T", "inputs": ["local.a"],
                "store_memory_mb": args.memory_mb[0]},
        "systems": {"local": {"type": "local"}}, "streams": {"local.a": {}},
        "stores": stores}, folder / "m.toml")
    memory = process_memory(config)
    start = anon_mib()
    engines = [RocksDBEngine.open(folder, store, f"Partition {t}", options=rocksdb_options(
                   config.store(store), memory))
               for t in range(args.tasks) for store in stores]
    value = b"v" * args.value_bytes
    peak = 0.0
    for first in range(0, args.keys, 5000):
        for engine in engines:
            engine.write_batch({b"key-%08d" % k: value
                                for k in range(first, min(first + 5000, args.keys))}, None)
        peak = max(peak, anon_mib())
    usage = memory.usage() if memory is not None else (0, 0)
    written = len(engines) * args.keys * (args.value_bytes + 12) / (1 << 20)
    print(f"store_memory_mb = {args.memory_mb[0]:>4}: {len(engines)} stores, "
          f"{args.keys:,} keys × {args.value_bytes} B each ({written:,.0f} MiB written): "
          f"anon RSS {start:.0f} MiB before, peak {peak:.0f} MiB, end {anon_mib():.0f} MiB; "
          f"shared cache {usage[0] / (1 << 20):.0f} MiB, write buffers charged "
          f"{usage[1] / (1 << 20):.0f} MiB", flush=True)
    for engine in engines:
        engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--stores", type=int, default=2)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--memory-mb", type=int, nargs="+", default=[256, 0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory(prefix="sampan-store-memory-") as tmp:
            child(Path(tmp), args)
        return 0
    for size in args.memory_mb:
        subprocess.run([sys.executable, "-m", "bench.store_memory", "--child",
                        "--tasks", str(args.tasks), "--stores", str(args.stores),
                        "--keys", str(args.keys), "--value-bytes", str(args.value_bytes),
                        "--memory-mb", str(size)], check=True,
                       cwd=Path(__file__).resolve().parent.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
