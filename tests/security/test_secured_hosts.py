"""Three `sampan run --host` processes of one exactly-once job on the secured broker,
holding exactly the ACLs `sampan acls` lists (the hosts' group included): the input grows
2 → 4 while they run and a worker is SIGKILLed; every output record is checked."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from hosts.hostjobs import Hosts, outputs_job, outputs_of, state, wait_for, write_records
from jobs.outputs import Workload, exact_problems
from secured_jobs import (
    PASSWORD_ENV,
    admin_view,
    job_acls,
    job_options,
    secrets_shown,
)
from secured_kafka import SecuredKafka

from framework.drill.hosts import settled
from framework.systems import open_system

RECORDS = 3000
KEYS = 60


@pytest.mark.timeout(900)
def test_three_hosts_holding_their_acls_expand_through_a_sigkill_exactly(
        secured_kafka: SecuredKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, secured_kafka.password())
    name = f"sh{os.getpid()}"
    path = outputs_job(tmp_path / "job", secured_kafka.bootstrap, name, tasks=2, workers=1,
                       client_options=job_options(secured_kafka, f"sec-{name}."))
    path.write_text(path.read_text().replace("[job]\n", '[job]\nguarantee = "exactly-once"\n'))
    hosts = Hosts(path, tmp_path)
    config = hosts.config
    admin = admin_view(config, secured_kafka)
    acls = job_acls(path)
    work = Workload(KEYS, stream=f"{name}-in")

    async def create() -> None:
        system = open_system(admin.system("kafka"))
        await system.start()
        try:
            await system.create_stream(f"{name}-in", 2)
            await system.create_stream(f"{name}-in-sums", 4)
        finally:
            await system.close()

    asyncio.run(create())
    secured_kafka.grant(acls)
    try:
        with hosts.logs_kept_on_failure("secured-hosts"):
            for host in ("a", "b", "c"):
                hosts.start(host)
            wait_for(lambda: settled(state(admin), {"a", "b", "c"}), 180,
                     "three hosts in the group, one model", hosts)
            write_records(admin, work, RECORDS // 3)

            async def expand() -> None:
                system = open_system(admin.system("kafka"))
                await system.start()
                try:
                    await system.expand_stream(f"{name}-in", 4)
                finally:
                    await system.close()

            asyncio.run(expand())
            write_records(admin, work, RECORDS // 3)
            current = state(admin)
            assert current.model is not None
            victim = next(r.pid for w, r in sorted(current.workers.items())
                          if w < current.model.workers and r.pid)
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda: (m := state(admin).model) is not None and
                     m.partition_counts[f"kafka.{name}-in"] == 4, 180,
                     "the expanded model", hosts)
            write_records(admin, work, RECORDS - work.count)
            wait_for(lambda: exact_problems(outputs_of(admin), work) == [], 300,
                     "every output, exact", hosts)
            assert hosts.dead() == []
    finally:
        secured_kafka.revoke(acls)
    logs = "\n".join(hosts.log(label) for label in hosts.processes)
    assert "killed by SIGKILL" in logs  # the killed worker was seen dying and replaced
    assert "Traceback" not in logs
    assert "not authorized" not in logs
    assert secrets_shown(secured_kafka.password(), tmp_path) == []
