"""The coordinator stream's typed records: one codec each, tolerant of other versions."""

from __future__ import annotations

import json

from framework.metadata import (
    ConfigChange,
    CoordinatorStatus,
    ExpansionRecord,
    Refusal,
    RestoreStop,
    StuckWorker,
    WorkerReport,
)


def test_a_full_status_round_trips_through_json() -> None:
    status = CoordinatorStatus(
        state="running", epoch=3, coordinator_pid=41, updated_ms=9, worker_logs="/x/logs",
        worker_pids={0: 100, 1: 101}, restarts=2,
        expansions=[ExpansionRecord("local.a 2→4", 2, 5, 6, 7, 8)],
        refusal=Refusal("local.a 4→6", "not a multiple", 10, {"local.a": 6}),
        error=None, config_change=ConfigChange("changed job.workers", 11),
        stuck=StuckWorker(worker=1, detail="stuck in process()", at_ms=12))
    encoded = json.loads(json.dumps(status.to_dict()))
    assert encoded["worker_pids"] == {"0": 100, "1": 101}  # JSON object keys are strings
    assert CoordinatorStatus.from_dict(encoded) == status


def test_a_worker_report_round_trips_and_defaults_what_an_older_writer_left_out() -> None:
    report = WorkerReport(epoch=2, pid=7, started_ms=1, stopped_ms=3, reason="stopped",
                          tasks=["Partition 0"], restored=5, restore_modes={"P/s": "delta"},
                          restore_stopped=RestoreStop("P/s", 4, 9))
    assert WorkerReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    old = WorkerReport.from_dict({"epoch": 1, "pid": 2, "started_ms": 3})
    assert (old.resumed_ms, old.restored, old.store_positions, old.tasks) == (None, 0, {}, [])


def test_fields_a_newer_writer_added_are_ignored() -> None:
    status = CoordinatorStatus.from_dict({"state": "stopped", "metrics_ports": [9100],
                                          "expansions": [{"change": "c", "epoch": 2,
                                                          "detected_ms": 1, "pause": 3}]})
    assert status == CoordinatorStatus(state="stopped",
                                       expansions=[ExpansionRecord("c", 2, 1)])
    assert WorkerReport.from_dict({"epoch": 1, "pid": 2, "started_ms": 3, "rate": 1.5}) == (
        WorkerReport(epoch=1, pid=2, started_ms=3))
