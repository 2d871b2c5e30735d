"""`sampan acls` lists exactly what a job needs on a secured Apache Kafka: with every ACL
it prints the job runs (tests/security/test_secured_runs.py), and with any one of them
removed it stops at once — exit 2, no worker restarted, no wait — with one line naming the
operation and that one resource, and `sampan status` does not call it healthy (where the
job could record its failure, status shows that line)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from jobs.runs import SumRun
from secured_jobs import PASSWORD_ENV, admin_system, create_topics, job_acls, secured_sum_run
from secured_kafka import Acl, SecuredKafka

from framework.systems.base import ProducerRecord

BOUND_S = 120.0
"""Far above what stopping on a denial takes (seconds): only a hang or a loop reaches it."""

CASES = [
    ("input", "READ", "DESCRIBE topic", "{ns}{events}"),
    ("input", "CREATE", "CREATE topic", "{ns}{events}"),
    ("output", "WRITE", "DESCRIBE topic", "{ns}{events}-sums"),
    ("output", "CREATE", "CREATE topic", "{ns}{events}-sums"),
    ("internal", "READ", "READ topic", "{ns}__sampan-{job}-coordinator"),
    ("internal", "WRITE", "WRITE topic", "{ns}__sampan-{job}-coordinator"),
    ("internal", "CREATE", "CREATE topic", "{ns}__sampan-{job}-coordinator"),
    ("changelog", "READ", "READ topic", "{ns}{job}-totals-changelog"),
    ("changelog", "WRITE", "WRITE topic", "{ns}{job}-totals-changelog"),
    ("changelog", "CREATE", "CREATE topic", "{ns}{job}-totals-changelog"),
    ("changelog", "ALTER", "ALTER topic", "{ns}{job}-totals-changelog"),
    ("group", "READ", "READ group", "{ns}__sampan-{job}-coordinators"),
    ("transactional id", "WRITE", "WRITE transactional id", "{ns}sampan-{job}-"),
]
"""(what the ACL is for, its operation, the denial the error names, that resource). Without
READ or WRITE on a topic the principal may not even DESCRIBE it, which is what Kafka
refuses first (the error says READ or WRITE grant it). The
CREATE of an input or output is needed only when the topic does not exist yet (the job
file declares its partitions): the operator has not made that one."""


def _role(acl: Acl, run: SumRun) -> str:
    """What ``acl`` is for, in the terms of `CASES`."""
    ns = run.config.system("kafka").client_options["namespace"]
    events = jf.streams(run.config)[0]
    if acl.resource_type == "GROUP":
        return "group"
    if acl.resource_type == "TRANSACTIONAL_ID":
        return "transactional id"
    if acl.name.endswith("-changelog"):
        return "changelog"
    if acl.pattern_type == "PREFIXED":
        return "internal"
    return "input" if acl.name == ns + events else "output"


def test_sampan_acls_lists_one_acl_per_case_and_no_other(secured_kafka: SecuredKafka,
                                                        tmp_path: Path) -> None:
    run = secured_sum_run(tmp_path / "job", secured_kafka, guarantee="exactly-once")
    listed = {(_role(acl, run), acl.operation) for acl in job_acls(run.path)}
    assert listed == {(role, op) for role, op, _, _ in CASES}


async def _changelog(admin: object, run: SumRun, partitions: int, records: bool) -> None:
    """The store's changelog, made by an operator before the job's first start."""
    stream = run.config.changelog_ref("totals").stream
    await admin.create_stream(stream, partitions, compacted=True)  # type: ignore[attr-defined]
    if records:
        await admin.produce([ProducerRecord(stream, b"key-00001", b"7", p)  # type: ignore
                             for p in range(partitions)])


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("role", "operation", "denied", "name"), CASES,
                         ids=[f"{role} {op}" for role, op, _, _ in CASES])
async def test_a_job_missing_one_acl_stops_at_once_naming_it(
        secured_kafka: SecuredKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        role: str, operation: str, denied: str, name: str) -> None:
    monkeypatch.setenv(PASSWORD_ENV, secured_kafka.password())
    run = secured_sum_run(tmp_path / "job", secured_kafka, guarantee="exactly-once",
                          workers=1)
    config = run.config
    events = jf.streams(config)[0]
    acls = job_acls(run.path)
    missing = [acl for acl in acls if (_role(acl, run), acl.operation) == (role, operation)]
    assert missing, f"sampan acls lists no {operation} ACL for the {role}"
    admin = await admin_system(config, secured_kafka)
    given = [acl for acl in acls if acl not in missing]
    try:
        if (role, operation) == ("input", "CREATE"):
            await admin.create_stream(f"{events}-sums", jf.PARTITIONS)
            await admin.create_stream("dead-letters", 1)
        elif (role, operation) == ("output", "CREATE"):
            await admin.create_stream(events, 2)
            await admin.create_stream("dead-letters", 1)
        else:
            await create_topics(admin, config, 2)
        if role == "changelog" and operation in ("READ", "ALTER"):
            # READ: a restore reads it; ALTER: an operator made it too small for 2 tasks.
            await _changelog(admin, run, 1 if operation == "ALTER" else 2, operation == "READ")
        if (role, operation) != ("input", "CREATE"):
            await h.produce(admin, out.Workload(20, stream=events).records(200))
        secured_kafka.grant(given)
        started = time.monotonic()
        run.start()
        assert run.process is not None
        while run.process.poll() is None:
            assert time.monotonic() - started < BOUND_S, (
                f"still running {BOUND_S:g}s after start without {operation} on the {role}"
                f"\n{run.logs_text()}")
            await asyncio.sleep(0.2)
        code, document = run.status()
    finally:
        run.kill()
        secured_kafka.revoke(given)
        await admin.close()
    ns = config.system("kafka").client_options["namespace"]
    resource = name.format(ns=ns, events=events, job=config.name)
    lines = run.coordinator_log().strip().splitlines()
    logs = run.logs_text(tail=10**7)
    assert run.process.returncode == 2, logs
    assert lines[-1].startswith("sampan run: error: Kafka at 127.0.0.1:"), logs
    assert f"not authorized — User:alice may not {denied} '{resource}" in lines[-1]
    assert "restarting worker" not in logs
    assert "Traceback" not in logs
    assert code != 0, document  # not healthy, whatever the job got to record
    if code == 4:  # it recorded its failure: with the line
        assert "not authorized" in json.dumps(document), document
