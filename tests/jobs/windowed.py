"""The windowed_counts example as a `sampan run` job (`WindowJob`): its page views and
watermarks, and the check of every window it emitted against the example's checker."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from jobs.jobfiles import EXAMPLE, windowed_counts_text
from jobs.runs import LocalJob

from framework.drill.scenario import load_sibling
from framework.systems.base import ProducerRecord
from framework.windows.watermarks import marker_keys

MINUTE = 60_000
END_OF_TIME = 10**15
checker = load_sibling(str(EXAMPLE / "drill.py"), "checker")


def view(user: str, ts: int) -> ProducerRecord:
    return ProducerRecord("page-views", user.encode(),
                          json.dumps({"user": user, "ts": ts}).encode(), timestamp=ts)


def watermark_round(watermark: int, final_partitions: int) -> list[ProducerRecord]:
    """``{"watermark": T}`` under one marker key per partition of the final count."""
    return [ProducerRecord("page-views", key.encode(),
                           json.dumps({"watermark": watermark}).encode(), timestamp=watermark)
            for key in marker_keys("page-views", final_partitions)]


class WindowJob(LocalJob):
    """The windowed_counts example as a job: its files, workload and truth."""

    def __init__(self, folder: Path, *, workers: int, partitions: int) -> None:
        super().__init__(folder, windowed_counts_text(workers=workers, partitions=partitions),
                         {module.name: module.read_text() for module in EXAMPLE.glob("*.py")})
        self.partitions = partitions
        self.views: list[dict[str, Any]] = []

    async def create_page_streams(self) -> None:
        await self.create_streams({"page-views": self.partitions, "views-per-user": 4,
                                   "late-views": 1})

    async def produce(self, records: list[ProducerRecord]) -> None:
        self.views += [v for v in (json.loads(r.value or b"{}") for r in records) if "ts" in v]
        await self.send(records)

    async def expand(self, partitions: int) -> None:
        await self.expand_stream("page-views", partitions)

    async def emitted(self) -> list[dict[str, Any]]:
        return await self.values("views-per-user")

    async def late(self) -> int:
        return len(await self.values("late-views"))

    async def open_windows(self) -> list[str]:
        """Window state left in the store, per its changelog (empty once all closed)."""
        return [key for key in await self.store_keys("views") if key.startswith(("k|", "c|"))]

    async def caught_up(self) -> bool:
        """Every record of page-views processed and committed."""
        return await self.caught_up_on("page-views")

    def expected(self) -> dict[tuple[str, int], int]:
        size, advance = 5 * MINUTE, MINUTE
        return checker.expected(self.views, size, advance)  # type: ignore[no-any-return]

    async def problems(self) -> list[str]:
        """Each expected window emitted exactly once with its count; nothing else."""
        emitted = await self.emitted()
        copies = Counter((w["user"], w["start"]) for w in emitted)
        got = {(w["user"], w["start"]): w["views"] for w in emitted}
        found = [f"{key} emitted {n} times" for key, n in sorted(copies.items()) if n > 1]
        want = self.expected()
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                found.append(f"window {key}: emitted {got.get(key)}, expected {want.get(key)}")
        return found
