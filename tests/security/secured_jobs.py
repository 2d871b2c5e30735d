"""Jobs on the secured broker (`tests/secured_kafka.py`): job files whose kafka system
connects as the job's principal ``alice`` (its password from the environment, never
written), the ACLs `sampan acls` prints for them granted, and the super user's view of the
same job for what the test itself does (create topics, produce, expand, read outputs)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobs import harness as h
from jobs import jobfiles as jf
from jobs.runs import SumRun
from secured_kafka import Acl, SecuredKafka

from framework.config import JobConfig
from framework.systems import open_system
from framework.systems.base import System

__all__ = [
    "PASSWORD_ENV",
    "admin_system",
    "admin_view",
    "create_topics",
    "inline",
    "job_acls",
    "job_options",
    "sampan",
    "secrets_shown",
    "secured_sum_run",
]

PASSWORD_ENV = "SAMPAN_TEST_JOB_PASSWORD"
"""The environment variable the job files refer to for the job principal's password."""


def job_options(broker: SecuredKafka, namespace: str, **extra: Any) -> dict[str, Any]:
    """``client_options`` of a job connecting as ``alice`` with SCRAM-SHA-512 over TLS
    (``extra`` adds or, set to None, removes options)."""
    options = {"namespace": namespace, "security_protocol": "SASL_SSL",
               "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
               "sasl_plain_password": "${" + PASSWORD_ENV + "}",
               "ssl_cafile": str(broker.ca_file), **extra}
    return {key: value for key, value in options.items() if value is not None}


def inline(options: Mapping[str, Any]) -> str:
    """The body of a TOML inline table (JSON strings are TOML basic strings)."""
    return ", ".join(f"{key} = {json.dumps(value)}" for key, value in options.items())


def secured_sum_run(folder: Path, broker: SecuredKafka, *, guarantee: str,
                    partitions: int = 2, workers: int = 2, **options: Any) -> SumRun:
    """tests/jobs' per-key running sum as `sampan run`, connecting as ``alice`` in a
    namespace of its own; its input starts with ``partitions`` partitions."""
    namespace = f"sec-{uuid.uuid4().hex[:6]}."
    run = SumRun(folder, broker.bootstrap, guarantee=guarantee, workers=workers,
                 client_options=inline(job_options(broker, namespace, **options)))
    events = jf.streams(run.config)[0]
    text = run.path.read_text().replace(
        f'[streams."kafka.{events}"]\npartitions = {jf.PARTITIONS}',
        f'[streams."kafka.{events}"]\npartitions = {partitions}')
    run.path.write_text(text)
    run.reload()
    return run


def admin_view(config: JobConfig, broker: SecuredKafka) -> JobConfig:
    """``config`` connecting as the super user (same namespace): for the test's own
    writes and reads, which the job's principal may not do."""
    kept = ("namespace", "timeout_s")
    options = {k: v for k, v in config.system("kafka").client_options.items() if k in kept}
    admin = {**options, **broker.admin_options()}
    return config.with_overrides({("systems", "kafka", "client_options"): admin})


async def admin_system(config: JobConfig, broker: SecuredKafka) -> System:
    """The job's kafka system as the super user, started."""
    system = open_system(admin_view(config, broker).system("kafka"))
    await system.start()
    return system


async def create_topics(system: System, config: JobConfig, partitions: int) -> None:
    """What an operator creates before the job's first start: its input and outputs."""
    events, sums = jf.streams(config)
    await system.create_stream(events, partitions, exist_ok=True)
    await system.create_stream(sums, jf.PARTITIONS, exist_ok=True)
    await system.create_stream("dead-letters", 1, exist_ok=True)


def job_acls(job: Path, principal: str | None = None) -> list[Acl]:
    """Every ACL binding `sampan acls JOB --json` prints for the job (one per operation)."""
    command = [*h.CLI, "acls", str(job), "--json"]
    if principal:
        command += ["--principal", principal]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True,
                          cwd=h.REPO)
    systems = json.loads(done.stdout)
    return [Acl(rule["resource"], rule["pattern"], rule["name"], operation,
                principal=system["principal"])
            for system in systems for rule in system["acls"] for operation in rule["operations"]]


def sampan(*args: str, env: Mapping[str, str] | None = None, stdin: str | None = None,
           timeout_s: float = 120) -> tuple[int, str, list[str]]:
    """Run `sampan ARGS` (the job principal's password in its environment): exit status,
    stdout, stderr's lines."""
    import os

    done = subprocess.run([*h.CLI, *args], capture_output=True, text=True, timeout=timeout_s,
                          cwd=h.REPO, input=stdin, env={**os.environ, **(env or {})})
    return done.returncode, done.stdout, done.stderr.strip().splitlines()


def secrets_shown(secret: str, *places: Path | str) -> list[str]:
    """The files (every file under a folder) and texts among ``places`` that hold
    ``secret``."""
    found = []
    for place in places:
        if isinstance(place, Path):
            files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]
            found += [str(p) for p in files if secret.encode() in p.read_bytes()]
        elif secret in place:
            found.append(f"text: {place[:80]!r}…")
    return found
