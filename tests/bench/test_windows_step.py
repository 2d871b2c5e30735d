"""`bench.windows_step` runs each job over its input and closes the windows the Python
path closes (its figures are printed, never asserted: see bench/)."""

from __future__ import annotations

import pytest

from bench import windows_step
from framework.windows import accel


def test_each_job_runs_and_the_c_path_closes_what_python_closes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = windows_step.envelopes(20_000)  # about 5 minutes of event time
    assert len(data) == 20_000 and len({e.key for e in data}) > 2_000
    sent = {}
    for setting in ("1", "0"):
        monkeypatch.setenv(accel.ENV, setting)
        sent[setting] = {job: windows_step._run(job, data)[1] for job in windows_step.JOBS}
    assert sent["1"] == sent["0"]
    assert sent["1"]["sum"] == 20_000  # one output per record
    assert all(sent["1"][job] > 0 for job in ("tumbling", "session"))
    shares = windows_step.run(["sum", "session"], 2_000, 1)
    assert set(shares) == {"sum", "session"} and min(shares.values()) > 0
