"""`bench.windows_step` runs each job over its input, and its batches close what its
per-record calls close (its figures are printed, never asserted: see bench/)."""

from __future__ import annotations

from bench import windows_step


def test_each_job_runs_and_batches_close_what_single_records_close() -> None:
    data = windows_step.envelopes(20_000)  # about 5 minutes of event time
    assert len(data) == 20_000 and len({e.key for e in data}) > 2_000
    sent = {batch: {job: windows_step._run(job, data, batch)[1] for job in windows_step.JOBS}
            for batch in (None, 3_000)}
    assert sent[None] == sent[3_000]
    assert sent[None]["sum"] == 20_000  # one output per record
    assert all(sent[None][job] > 0 for job in ("tumbling", "session"))
    shares = windows_step.run(["sum", "session"], 2_000, 1)
    assert set(shares) == {"sum", "session"} and min(shares.values()) > 0
