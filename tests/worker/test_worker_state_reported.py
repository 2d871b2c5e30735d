"""A running worker's lifecycle state is in its report — so in `sampan status`'s text and
its ``--json`` ``worker_reports`` — and in its metrics (``sampan_worker_state``); a run goes through
STARTING → RESTORING → RUNNING → STOPPING → STOPPED, on the local log."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import outputs as out

from framework.commands.status import collect_status
from framework.commands.status_text import print_status
from framework.worker.runner import Worker
from framework.worker.states import WorkerState

pytestmark = pytest.mark.slow


def recorded(worker: Worker) -> list[str]:
    """Every state ``worker`` moves to from now on, by name."""
    seen: list[str] = []
    move = worker.lifecycle.to

    def recording(state: WorkerState) -> None:
        move(state)
        seen.append(state.name)

    worker.lifecycle.to = recording  # type: ignore[method-assign]
    return seen


def state_metric(worker: Worker, state: str) -> float | None:
    return worker.metrics.registry.get_sample_value(
        "sampan_worker_state", {"job": worker.config.name, "worker": "0", "state": state})


async def test_status_and_metrics_show_a_running_workers_state(tmp_path: Path) -> None:
    config, meta, work = await h.stamped_job(tmp_path / "job", "state", "local", None)
    try:
        await h.prepare(config, meta)
        worker = Worker(config, 0)
        seen = recorded(worker)
        assert worker.state is WorkerState.STARTING
        async with h.FedWorker(worker, meta, work) as fed:
            await h.wait_until(h.processed(worker, 200), 60, "the worker's first records")
            status = await collect_status(config)
            assert status.to_json()["worker_reports"]["0"]["state"] == "RUNNING"
            text = io.StringIO()
            print_status(status, text)
            assert "  worker states: worker 0 RUNNING\n" in text.getvalue()
            assert state_metric(worker, "RUNNING") == 1.0
            assert {s.name: state_metric(worker, s.name) for s in WorkerState
                    if s is not WorkerState.RUNNING} == {
                s.name: 0.0 for s in WorkerState if s is not WorkerState.RUNNING}
            await fed.drain()
        result = await fed.result()
        assert result.reason == "stopped" and worker.state is WorkerState.STOPPED
        assert seen == ["RESTORING", "RUNNING", "STOPPING", "STOPPED"]
        document = (await collect_status(config)).to_json()
        assert document["worker_reports"]["0"]["state"] == "STOPPED"
        assert out.replay_problems(await out.outputs(meta, config), work) == []
    finally:
        await meta.close()
