"""Window queries while the windowed-counts example runs on the local log: real `sampan
run`, real workers, the drill's page views (out of order, with watermarks), and a querier
asking random users' open windows throughout.

Every answer is checked exactly: it carries its task and the changelog position its
committed state reflects, so its windows must be those of the user's last changelog
state before that position (panes summed per window, independently of the reader) that
the close bound of the same commit leaves open; and against the job's outputs: each
window answered was emitted once closed, with at least the count answered, and per
window the answers never go back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from jobs.runs import CountJob
from queryjobs import changelog_records

from framework.config import load_config
from framework.drill.scenario import load_sibling
from framework.drill.verify import read_stream
from framework.queries.client import Client, WindowsAnswer
from framework.windows.state import load_state

pytestmark = pytest.mark.slow  # real `sampan run` and workers (tests/conftest.py's SLOW)

log = logging.getLogger(__name__)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "windowed_counts"
sys.path.insert(0, str(EXAMPLE))
drill = load_sibling(str(EXAMPLE / "drill.py"), "drill")
SIZE, ADVANCE = drill.WINDOW.size_ms, drill.WINDOW.advance_ms


@pytest.fixture
def job(tmp_path: Path) -> Any:
    """The example as it is, its changelog never compacted (every state stays readable)."""
    made = CountJob(tmp_path / "windowed", "windowed-counts", {"page-views": 2})
    for name in ("windowed_counts_task.py", "job.toml"):
        shutil.copy(EXAMPLE / name, made.folder / name)
    made.path.write_text(made.path.read_text().replace(
        "[coordinator]\n", "[coordinator]\ncompaction_interval_ms = 0\n"))
    made.config = load_config(made.path)
    try:
        yield made
    finally:
        made.kill()


def open_windows(state_text: str | None, closed: int | None) -> dict[int, int]:
    """Window start → count of a committed pane state (``[pane start, count, …]``)
    that the close bound ``closed`` leaves open."""
    if state_text is None:
        return {}
    state = load_state(state_text)
    counts: dict[int, int] = {}
    for pane, count in zip(state[::2], state[1::2], strict=True):
        for start in range(max(0, pane - SIZE + ADVANCE), pane + 1, ADVANCE):
            if start + SIZE > (closed if closed is not None else -1):
                counts[start] = counts.get(start, 0) + count
    return counts


def wrong_windows(answers: list[tuple[str, WindowsAnswer]], partition_of: dict[str, int],
                  records: dict[int, list[tuple[int, str, Any]]],
                  emitted: dict[tuple[str, int], list[int]]) -> list[str]:
    wrong: list[str] = []
    last: dict[tuple[str, int], int] = {}
    for user, answer in answers:
        if answer.position is None:
            wrong.append(f"{user}: no position in {answer}")
            continue
        before = [(k, v) for offset, k, v in records[partition_of[answer.task]]
                  if offset < answer.position]
        states = [v for k, v in before if k == f"k|s{user}"]
        closes = [v for k, v in before if k == "a~closed"]
        closed = closes[-1] if closes else None
        want = open_windows(states[-1] if states else None, closed)
        got = {w.start: w.value for w in answer.windows}
        if got != want or answer.closed != closed:
            wrong.append(f"{user} at {answer.task} position {answer.position}: answered "
                         f"{got} closed {answer.closed}, committed {want} closed {closed}")
        for start, count in got.items():
            final = emitted.get((user, start), [])
            if len(final) != 1 or count > final[0]:
                wrong.append(f"{user} window {start}: answered {count}, emitted {final}")
            if count < last.get((user, start), 0):
                wrong.append(f"{user} window {start}: went back to {count}")
            last[(user, start)] = count
    return wrong


async def test_window_queries_answer_each_users_committed_open_windows(job: CountJob) -> None:
    scenario = drill.WindowedCountsScenario(1500, 12, 49, 2)
    for stream, partitions in scenario.streams(2).items():
        await job.create(stream, partitions)
    job.start()
    await job.wait_epoch(1)
    answers: list[tuple[str, WindowsAnswer]] = []
    stop = asyncio.Event()

    async def query(client: Client) -> None:
        rng = random.Random(49)
        while not stop.is_set():
            user = rng.choice(scenario.users)
            answers.append((user, await client.windows("views", user)))
            await asyncio.sleep(0.01)

    async with Client(job.config) as client:
        querying = asyncio.create_task(query(client))
        try:
            for _ in range(15):
                batch = scenario.records(100)
                await job.call(lambda system, batch=batch: system.produce(batch))
                seen = len(answers)
                await job.wait(lambda seen=seen: _true(len(answers) >= seen + 5),
                               "5 more window answers", timeout=120)
            want = len(scenario.expected())

            async def all_emitted() -> bool:
                return sum(len(rows) for rows in (await job.call(
                    lambda s: read_stream(s, "views-per-user"))).values()) >= want
            await job.wait(all_emitted, f"{want} windows emitted", timeout=180)
        finally:
            stop.set()
            await querying
    assert await job.stop() == 0
    state = await job.state()
    assert state.model is not None
    records = await job.call(lambda system: changelog_records(system, job.config, "views"))
    emitted: dict[tuple[str, int], list[int]] = {}
    for rows in (await job.call(lambda s: read_stream(s, "views-per-user"))).values():
        for _, value in rows:
            window = json.loads(value)
            emitted.setdefault((window["user"], window["start"]), []).append(window["views"])
    partition_of = {t.name: t.changelog_partition for t in state.model.tasks.values()}
    opened = sum(1 for _, answer in answers if answer.windows)
    log.warning("%d window answers, %d with open windows", len(answers), opened)
    assert wrong_windows(answers, partition_of, records, emitted) == []
    assert len(answers) >= 75 and opened >= 25


async def _true(value: bool) -> bool:
    return value
