"""Store benchmark: plain rocksdict batched puts vs. `restore_store` into a RocksDBEngine.

Both write the same 1M records (16-byte keys, 8-byte values) in batches of 10,000; the
restore reads them as `Record` batches from memory, so the difference is our overhead
(records → write batches, changelog position per batch, async iteration, progress).

Run: ``.venv/bin/python -m bench.stores`` (or ``python bench/stores.py``).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.stores.restore import restore_store
from framework.stores.rocksdb import RocksDBEngine
from framework.systems.base import Record

RECORDS = 1_000_000
BATCH = 10_000
KEY_BYTES = 16
VALUE_BYTES = 8


@dataclass(frozen=True)
class Figures:
    """Rates in records per second."""

    raw_put_rate: float
    restore_rate: float

    @property
    def ratio(self) -> float:
        return self.restore_rate / self.raw_put_rate


def _data(count: int) -> tuple[list[bytes], list[bytes]]:
    rng = random.Random(7)  # random key order, as a changelog of hashed keys would have
    return (
        [rng.randbytes(KEY_BYTES) for _ in range(count)],
        [i.to_bytes(VALUE_BYTES, "big") for i in range(count)],
    )


def raw_put_rate(path: Path, keys: list[bytes], values: list[bytes], batch: int) -> float:
    """Records/s of plain rocksdict (raw mode, default options) writing WriteBatches."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(path), options)
    started = time.perf_counter()
    for first in range(0, len(keys), batch):
        write = WriteBatch(raw_mode=True)
        put = write.put
        for key, value in zip(keys[first:first + batch], values[first:first + batch],
                              strict=True):
            put(key, value)
        db.write(write)
    elapsed = time.perf_counter() - started
    db.close()
    return len(keys) / elapsed


def restore_rate(path: Path, keys: list[bytes], values: list[bytes], batch: int) -> float:
    """Records/s of `restore_store` (full restore) from in-memory `Record` batches."""
    records = [Record(0, offset, key, value, 0)
               for offset, (key, value) in enumerate(zip(keys, values, strict=True))]
    batches = [records[first:first + batch] for first in range(0, len(records), batch)]

    async def fetch(start: int) -> AsyncIterator[Sequence[Record]]:
        for chunk in batches:
            yield chunk

    engine = RocksDBEngine(path, store="bench", task="Partition 0")
    started = time.perf_counter()
    result = asyncio.run(restore_store(
        engine, changelog=("bench-changelog", 0), fetch=fetch, end=len(records), oldest=0,
        batch_size=batch, progress=None))
    elapsed = time.perf_counter() - started
    engine.close()
    assert result.records == len(records), result
    return len(records) / elapsed


def run(records: int = RECORDS, batch: int = BATCH) -> Figures:
    """Measure both rates in a temporary directory and print them."""
    keys, values = _data(records)
    work = Path(tempfile.mkdtemp(prefix="sampan-bench-stores-"))
    try:
        raw = raw_put_rate(work / "raw", keys, values, batch)
        restore = restore_rate(work / "restore", keys, values, batch)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = Figures(raw, restore)
    print(f"plain rocksdict batched put: {raw:>12,.0f} records/s "
          f"({records:,} x {KEY_BYTES}B keys / {VALUE_BYTES}B values, batches of {batch:,})")
    print(f"restore_store (RocksDB):     {restore:>12,.0f} records/s "
          f"({figures.ratio:.0%} of plain puts)")
    return figures


if __name__ == "__main__":
    run()
