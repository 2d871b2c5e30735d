"""The `sampan` commands on the secured broker, as the job's principal with the ACLs
`sampan acls` lists: what those ACLs allow works (listing, tailing an input, producing to
an output, status, reset-offsets), what they do not allow (growing an input, producing to
it, creating or deleting a stream) stops with one line naming the operation and the topic,
and works once an operator grants it. Its job file holds the password itself, which no
output and no file sampan writes (logs, the stored configuration) shows."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs.outputs import Workload
from secured_jobs import (
    admin_system,
    create_topics,
    job_acls,
    sampan,
    secrets_shown,
    secured_sum_run,
)
from secured_kafka import Acl, SecuredKafka


def _denied(lines: list[str], operation: str, topic: str) -> bool:
    return len(lines) == 1 and (
        f"not authorized — User:alice may not {operation} topic '{topic}'" in lines[0])


@pytest.mark.timeout(600)
async def test_the_commands_do_what_the_jobs_acls_allow_and_name_what_they_do_not(
        secured_kafka: SecuredKafka, tmp_path: Path) -> None:
    password = secured_kafka.password()
    run = secured_sum_run(tmp_path / "job", secured_kafka, guarantee="at-least-once",
                          workers=1, sasl_plain_password=password)
    config, job = run.config, str(run.path)
    events, sums = jf.streams(config)
    ns = config.system("kafka").client_options["namespace"]
    admin = await admin_system(config, secured_kafka)
    acls = job_acls(run.path)
    try:
        await create_topics(admin, config, 2)
        await h.produce(admin, Workload(10, stream=events).records(50))
        secured_kafka.grant(acls)

        code, out, err = sampan("acls", job)
        assert code == 0 and err == []
        rows = [line.split()[:5] for line in out.splitlines()]
        assert ["TOPIC", "LITERAL", f"{ns}{events}", "READ", "always"] in rows
        assert (f"kafka-acls.sh --bootstrap-server {secured_kafka.bootstrap} "
                f"--command-config admin.properties --add --allow-principal 'User:alice' "
                f"--operation Read --topic '{ns}{events}'") in out

        code, out, err = sampan("streams", "list", "--job", job)
        assert code == 0, err
        assert f"kafka.{events}\t2" in out and f"kafka.{sums}\t{jf.PARTITIONS}" in out

        code, out, err = sampan("streams", "tail", f"kafka.{events}", "--job", job,
                                "--from-beginning", "--until-end", "--json")
        assert code == 0, err
        assert len(out.splitlines()) == 50

        line = json.dumps({"key": "k", "value": {"sum": 1, "n": 1}}) + "\n"
        code, out, err = sampan("streams", "produce", f"kafka.{sums}", "--job", job,
                                stdin=line)
        assert code == 0, err
        code, out, err = sampan("streams", "produce", f"kafka.{events}", "--job", job,
                                stdin=line)
        assert code == 2 and _denied(err, "WRITE", f"{ns}{events}"), err

        code, out, err = sampan("streams", "expand", f"kafka.{events}", "--partitions", "4",
                                "--job", job)
        assert code == 2 and _denied(err, "ALTER", f"{ns}{events}"), err
        with secured_kafka.granted([Acl("TOPIC", "LITERAL", f"{ns}{events}", "ALTER")]):
            code, out, err = sampan("streams", "expand", f"kafka.{events}", "--partitions",
                                    "4", "--job", job)
        assert code == 0, err
        assert (await admin.partition_counts([events]))[events] == 4

        code, out, err = sampan("streams", "create", "kafka.other", "--partitions", "1",
                                "--job", job)
        assert code == 2 and _denied(err, "CREATE", f"{ns}other"), err
        code, out, err = sampan("streams", "delete", f"kafka.{sums}", "--job", job, "--yes")
        assert code == 2 and _denied(err, "DELETE", f"{ns}{sums}"), err

        code, out, err = sampan("streams", "reset-offsets", f"kafka.{events}", "--job", job,
                                "--to", "latest")
        assert code == 0, err
        assert "reset 4 partitions" in out

        run.start()

        async def healthy() -> bool:
            return run.status()[0] == 0
        await run.wait(healthy, "a healthy job", 180)
        code, out, err = sampan("status", job)
        assert code == 0, err
        status_json = sampan("status", job, "--json")[1]
        urls = json.loads(status_json)["metrics"]
        metrics = "".join(urllib.request.urlopen(url, timeout=30).read().decode()
                          for url in [urls["coordinator"], *urls["workers"].values()])
        assert "sampan_" in metrics
        assert await run.stop() == 0
    finally:
        run.kill()
        secured_kafka.revoke(acls)
        await admin.close()
    snapshots = list((run.folder / "state").rglob("config-*.json"))
    assert snapshots and all("${SAMPAN_SECRET_KAFKA_SASL_PLAIN_PASSWORD}" in p.read_text()
                             for p in snapshots)
    shown = secrets_shown(password, run.folder, out, status_json, metrics)
    assert shown == [str(run.path)]  # the job file, where the user wrote it
