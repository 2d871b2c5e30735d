"""A job on a secured Apache Kafka — TLS, SCRAM, the StandardAuthorizer — holding exactly
the ACLs `sampan acls` lists: its input grows 2 → 4 while it runs and a worker is
SIGKILLed, under both guarantees; every output record is checked, and the job
principal's password shows nowhere (logs, status, the stored configuration)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.outputs import checkpointed, exact_outputs
from secured_jobs import (
    PASSWORD_ENV,
    admin_system,
    create_topics,
    job_acls,
    secrets_shown,
    secured_sum_run,
)
from secured_kafka import SecuredKafka

from framework.metadata import read_state

RECORDS = 12_000
KEYS = 300


@pytest.mark.timeout(600)
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
async def test_a_job_holding_its_acls_expands_through_a_sigkill_exactly(
        secured_kafka: SecuredKafka, tmp_path: Path, guarantee: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, secured_kafka.password())
    run = secured_sum_run(tmp_path / "job", secured_kafka, guarantee=guarantee)
    config = run.config
    events = jf.streams(config)[0]
    work = out.Workload(KEYS, stream=events)
    admin = await admin_system(config, secured_kafka)
    acls = job_acls(run.path)
    try:
        await create_topics(admin, config, 2)
        secured_kafka.grant(acls)
        run.start()

        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 180)
        await h.produce(admin, work.records(RECORDS // 3))

        async def committed(target: int) -> bool:
            return await checkpointed(admin, config) >= target
        await run.wait(lambda: committed(RECORDS // 6), "the first commits", 180)
        await admin.expand_stream(events, 4)
        await h.produce(admin, work.records(RECORDS // 3))  # keyed over 4 partitions now
        os.kill(sorted(run.worker_pids().items())[0][1], signal.SIGKILL)

        async def expanded() -> bool:
            model = (await read_state(admin, config)).model
            return model is not None and model.partition_counts[config.inputs[0]] == 4
        await run.wait(expanded, "the expanded model", 180)
        await h.produce(admin, work.records(RECORDS - work.count))
        await run.wait(lambda: committed(RECORDS), "every input committed", 300)
        status_text = run.status()
        assert await run.stop() == 0
        assert await exact_outputs(admin, config, work) == []
    finally:
        run.kill()
        await admin.close()
        secured_kafka.revoke(acls)
    logs = run.logs_text(tail=10**7)
    assert "Traceback" not in logs
    assert "not authorized" not in logs
    assert secrets_shown(secured_kafka.password(), run.folder, str(status_text)) == []
