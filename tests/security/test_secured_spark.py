"""The Spark DataSource on the secured broker as the job's principal, its password in a
file (what a Spark cluster mounts): it reads an input it may READ — the bulk fetcher
included — and writes an output it may WRITE; every record is checked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out
from secured_jobs import admin_system, create_topics, job_acls, secured_sum_run
from secured_kafka import SecuredKafka

from framework.drill.verify import read_stream
from framework.spark import records


def test_the_datasource_reads_and_writes_as_the_job_principal(
        spark: Any, secured_kafka: SecuredKafka, tmp_path: Path) -> None:
    (tmp_path / "password").write_text(secured_kafka.password() + "\n")
    run = secured_sum_run(tmp_path / "job", secured_kafka, guarantee="at-least-once",
                          sasl_plain_password=None, sasl_plain_password_file=str(
                              tmp_path / "password"))
    config, job = run.config, str(run.path)
    events, sums = jf.streams(config)
    work = out.Workload(30, stream=events)
    written = work.records(400)
    acls = job_acls(run.path)

    async def fill() -> None:
        admin = await admin_system(config, secured_kafka)
        try:
            await create_topics(admin, config, 2)
            await h.produce(admin, written)
        finally:
            await admin.close()

    asyncio.run(fill())
    secured_kafka.grant(acls)
    try:
        assert records.kafka_fetch.AVAILABLE  # the bulk fetcher, not aiokafka's consumer
        rows = spark.read.format("sampan").option("job", job).option(
            "stream", f"kafka.{events}").option("raw", "true").load().collect()
        assert sorted((bytes(r.key), bytes(r.value)) for r in rows) == sorted(
            (r.key, r.value) for r in written)
        frame = spark.createDataFrame([("k1", json.dumps({"sum": 5, "n": 1}))],
                                      "key string, value string")
        frame.write.format("sampan").option("job", job).option(
            "stream", f"kafka.{sums}").mode("append").save()
    finally:
        secured_kafka.revoke(acls)

    async def outputs() -> list[tuple[bytes | None, bytes | None]]:
        admin = await admin_system(config, secured_kafka)
        try:
            return [row for rows in (await read_stream(admin, sums)).values() for row in rows]
        finally:
            await admin.close()

    assert asyncio.run(outputs()) == [(b"k1", b'{"sum":5,"n":1}')]
