"""A host's lifecycle: its transition table written out, the moves its rebalance callbacks
make (a host object driven directly, no group), and the phase in its report and in
`sampan status`. The phases of hosts running on Kafka are checked where they run
(`test_second_system.py`)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from jobs.jobfiles import write_job

from framework.commands.status_document import Endpoints, HostRow, JobFigures, TaskHosts
from framework.commands.status_hosts import print_hosts
from framework.config import load_config
from framework.errors import StoreLockedError
from framework.hosts import host as host_module
from framework.hosts.host import Host
from framework.hosts.member import Answer
from framework.hosts.phase import HOST_TRANSITIONS, HostPhase
from framework.lifecycle import IllegalTransitionError
from framework.metadata import HostReport

P = HostPhase
ENDING = {P.STOPPING}

LEGAL = {
    (P.CREATED, P.STARTING),
    (P.STARTING, P.REBALANCING), (P.STARTING, P.STOPPING),
    (P.REBALANCING, P.REBALANCING), (P.REBALANCING, P.BUILDING_MODEL),
    (P.REBALANCING, P.AWAITING_MODEL), (P.REBALANCING, P.RUNNING),
    (P.REBALANCING, P.STOPPING),
    (P.BUILDING_MODEL, P.RUNNING), (P.BUILDING_MODEL, P.STOPPING),
    (P.AWAITING_MODEL, P.RUNNING), (P.AWAITING_MODEL, P.REBALANCING),
    (P.AWAITING_MODEL, P.STOPPING),
    (P.RUNNING, P.REBALANCING), (P.RUNNING, P.CHANGING_MODEL), (P.RUNNING, P.STOPPING),
    (P.CHANGING_MODEL, P.RUNNING), (P.CHANGING_MODEL, P.STOPPING),
    (P.STOPPING, P.STOPPED), (P.STOPPING, P.FAILED),
}


def test_the_transition_table() -> None:
    assert {(a, b) for a, targets in HOST_TRANSITIONS.items() for b in targets} == LEGAL


def _host(tmp_path: Path) -> Host:
    return Host(load_config(write_job(tmp_path / "job", name="phases")), "a")


def test_an_illegal_move_is_refused_naming_the_host_and_both_phases(tmp_path: Path) -> None:
    host = _host(tmp_path)
    with pytest.raises(IllegalTransitionError,
                       match=r"^host 'a' of job 'phases': illegal transition CREATED → "
                             r"RUNNING \(legal from CREATED: STARTING\)"):
        host.lifecycle.to(P.RUNNING)
    assert host.phase is P.CREATED


def test_a_round_moves_the_host_to_rebalancing_and_a_failed_answer_back_to_running(
        tmp_path: Path) -> None:
    host = _host(tmp_path)
    host.lifecycle.to(P.STARTING)

    async def round_that_fails() -> list[HostPhase]:
        seen = []
        await host._revoked()
        seen.append(host.phase)
        await host._apply(Answer(error="unreadable assignment"))
        seen.append(host.phase)
        await host._revoked()  # the retry's round
        seen.append(host.phase)
        return seen

    assert asyncio.run(round_that_fails()) == [P.REBALANCING, P.RUNNING, P.REBALANCING]


def test_a_host_stopping_keeps_its_phase_through_a_round_that_ends_meanwhile(
        tmp_path: Path) -> None:
    """An answer (or a revoke) arriving as the host leaves its group runs, but the host's
    phase goes on only to its end."""
    host = _host(tmp_path)
    for phase in (P.STARTING, P.STOPPING):
        host.lifecycle.to(phase)

    async def late_round() -> None:
        await host._revoked()
        await host._apply(Answer(error="unreadable assignment"))

    asyncio.run(late_round())
    assert host.phase is P.STOPPING


@pytest.mark.parametrize("leading", [True, False], ids=["leader", "follower"])
def test_a_rounds_model_that_fails_to_run_still_ends_the_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leading: bool) -> None:
    """Running the round's model raised (a replica's store still locked by a stopping
    worker: seen under load): the round is over all the same — the host is RUNNING what it
    has, and the next round may start (as before phases, the callback's error is logged by
    aiokafka and the host goes on)."""
    host = _host(tmp_path)
    for phase in (P.STARTING, P.REBALANCING):
        host.lifecycle.to(phase)
    model = SimpleNamespace(round_id="r1", epoch=1)

    async def latest_model() -> Any:
        return model

    async def lead(*_: object) -> Any:
        return SimpleNamespace(model=model, follow_up=None, probing=False)

    async def run_model(*_: object) -> None:
        raise StoreLockedError("cannot open store 'totals' of task 'Partition 3'")

    monkeypatch.setattr(host_module, "lead", lead)
    host._coordinator = SimpleNamespace(latest_model=latest_model)  # type: ignore[assignment]
    host._meta = SimpleNamespace()  # type: ignore[assignment]
    host._membership = SimpleNamespace(in_round=False)  # type: ignore[assignment]
    host._service = SimpleNamespace()  # type: ignore[assignment]
    host._run_model = run_model  # type: ignore[method-assign]
    host._leading = ("r1", {}) if leading else None
    with pytest.raises(StoreLockedError):
        asyncio.run(host._lead_or_wait("r1"))
    assert host.phase is P.RUNNING
    asyncio.run(host._revoked())
    assert host.phase is P.REBALANCING


def _figures(report: HostReport) -> JobFigures:
    return JobFigures(epoch=3, reason="r", partition_counts={}, workers=1, expansions=[],
                      restoring=[], metrics=Endpoints(None, {}),
                      worker_reports={}, total_lag=0, tasks=[], retention_resets=[],
                      hosts={"a": HostRow(report, True)},
                      task_hosts={"Partition 0": TaskHosts("a", [], [], 0)})


def test_status_names_each_hosts_phase() -> None:
    out = io.StringIO()
    print_hosts(_figures(HostReport(host="a", pid=7, machine="m1", epoch=3, leader=True,
                                    phase="AWAITING_MODEL", workers=[0])), out)
    assert out.getvalue().startswith(
        "  host a: running at epoch 3, leader, phase AWAITING_MODEL (pid 7 on m1, workers "
        "[0])\n")
    row = HostRow(HostReport(host="a", pid=7, machine="m1", phase="RUNNING"), True)
    assert row.to_json()["phase"] == "RUNNING"
