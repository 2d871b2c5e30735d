"""`sampan streams delete SYSTEM.STREAM --job JOB [--yes]`: delete a stream with all its
records, on the local log or Kafka.

Refused while a running job uses the stream: the job of the job file (its inputs, the
streams it declares, its coordinator stream, checkpoints, fences and changelogs) and, on
the local log, every other job whose coordinator holds a live lease there and reads the
stream or owns it. The refusal names the job and how to stop it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from framework.commands.internal_streams import internal_role
from framework.commands.status_hosts import hosts_state
from framework.commands.stream_ref import missing_stream, split_stream, started_system
from framework.config import JobConfig
from framework.coordinator.lease import Holder, LeaseStore, pid_alive
from framework.coordinator.liveness import check_coordinator
from framework.errors import ConfigError, SampanError
from framework.metadata import MODEL_KEY, read_state
from framework.metadata.jobmodel import JobModel
from framework.systems.base import DeletesStreams, HidesStreams, System
from framework.systems.local.system import LocalSystem
from framework.systems.reading import read_range
from framework.wording import counted
from groupers import SystemStreamPartition

__all__ = ["delete_stream", "uses"]


def uses(config: JobConfig) -> dict[str, str]:
    """The streams the job of ``config`` uses (``system.stream``), each with how."""
    found = {name: "declares (its task may write to)" for name in config.streams}
    found[config.coordinator_stream] = "keeps its job models in"
    meta = config.metadata_system
    for kind in ("checkpoints", "fences"):  # Kafka's topics; no stream on the local log
        found[f"{meta}.__sampan-{config.name}-{kind}"] = f"keeps its {kind} in"
    for store in config.logged_stores:
        found[config.changelog_stream(store)] = f"logs store {store!r} to"
    if config.errors.dead_letter_stream:
        found[config.errors.dead_letter_stream] = "writes dead letters to"
    for name in (*config.inputs, *config.broadcast_inputs):
        found[name] = "reads"
    return found


async def delete_stream(config: JobConfig, qualified: str,
                        confirm: Callable[[str], bool]) -> str:
    """Delete ``qualified`` once no running job uses it and ``confirm(what)`` agrees;
    what was deleted, for the command's output."""
    system_name, stream = split_stream(config, qualified)
    source = await started_system(config, system_name)
    meta = source if system_name == config.metadata_system else await started_system(
        config, config.metadata_system)
    try:
        if not isinstance(source, DeletesStreams):
            raise ConfigError(f"system {system_name!r} cannot delete streams")
        existing = await source.list_streams()
        if isinstance(source, HidesStreams):
            existing.update(await source.hidden_streams())
        if stream not in existing:
            raise missing_stream(config, qualified, existing)
        await _refuse_if_used(config, meta, source, qualified)
        spans = await source.offsets(stream)
        records = sum(span.end - span.oldest for span in spans.values())
        role = internal_role(config, system_name, stream)
        what = (f"{qualified} ({counted(len(spans), 'partition')}, "
                f"{counted(records, 'record')}{f'; {role}' if role else ''})")
        if not confirm(what):
            raise SampanError(f"{qualified} was not deleted (not confirmed); pass --yes to "
                              f"delete it without a question")
        await source.delete_streams([stream])
        read = any((ssp.system, ssp.stream) == (system_name, stream)
                   for checkpoint in (await meta.read_checkpoints(config.name)).values()
                   for ssp in checkpoint.inputs)
    finally:
        if meta is not source:
            await meta.close()
        await source.close()
    if not read:
        return f"deleted {what}"
    return (f"deleted {what}. Job {config.name!r} reads it: after you create it again, run "
            f"`sampan streams reset-offsets {qualified} --job {config.path} --to earliest` "
            f"before `sampan run` (its checkpoints still point into the deleted stream)")


async def _refuse_if_used(config: JobConfig, meta: System, source: System,
                          qualified: str) -> None:
    """`SampanError` naming the job and how to stop it when a running job uses
    ``qualified``: the job file's job, and on the local log any job with a live lease."""
    how = uses(config).get(qualified)
    if how is not None:
        running = await _running(config, meta)
        if running is not None:
            raise _refusal(config.name, how, qualified, running,
                           f"Ctrl-C on `sampan run {config.path}`")
    if isinstance(source, LocalSystem):
        stream = qualified.partition(".")[2]
        now = int(time.time() * 1000)
        for job, (holder, expires_ms) in (await source.leases()).items():
            owner = Holder.from_json(holder)
            if job == config.name or expires_ms < now or owner.gone():
                continue
            other = await _other_job_use(source, job, stream)
            if other is not None:
                raise _refusal(job, other, qualified, f"coordinator pid {owner.pid} on "
                               f"{owner.host}", f"Ctrl-C on its `sampan run`, or `kill "
                               f"{owner.pid}` on {owner.host}")


def _refusal(job: str, how: str, qualified: str, running: str, stop: str) -> SampanError:
    return SampanError(f"refused: job {job!r} is running ({running}) and {how} {qualified}; "
                       f"stop it ({stop}), then delete again")


async def _running(config: JobConfig, meta: System) -> str | None:
    """Who runs the job of ``config`` now (its coordinator, hosts or workers), or None."""
    state = await read_state(meta, config)
    status = state.status
    if isinstance(meta, LeaseStore):
        lease = await meta.read_lease(config.name)
        if lease is not None and lease[1] >= int(time.time() * 1000):
            holder = Holder.from_json(lease[0])
            if not holder.gone():
                return f"coordinator pid {holder.pid} on {holder.host}"
    if state.model is not None and state.model.hosts and status.state is None:
        if hosts_state(state)[0] == "running":
            return "on hosts " + ", ".join(sorted(state.model.hosts))
    elif status.state == "running" and (
            await check_coordinator(meta, config.name, status)).alive:
        return f"coordinator pid {status.coordinator_pid} on {status.coordinator_host}"
    here = status.coordinator_host in (None, socket.gethostname())
    workers = sorted(pid for pid in status.worker_pids.values() if here and pid_alive(pid))
    if workers:
        return f"worker pids {', '.join(map(str, workers))}"
    return None


async def _other_job_use(system: System, job: str, stream: str) -> str | None:
    """How job ``job``, whose coordinator stream is in the local log ``system``, uses
    ``stream`` (a name in that log): its own streams by name, its inputs by its model."""
    if stream.startswith(f"__sampan-{job}-"):
        return "keeps its job models in"
    if stream.startswith(f"{job}-") and stream.endswith("-changelog"):
        return "logs a store to"
    model = await _latest_model(system, f"__sampan-{job}-coordinator")
    read = model is not None and any(
        ssp.stream == stream for task in model.tasks.values()
        for ssp in task.ssps | task.broadcast)
    return "reads" if read else None


async def _latest_model(system: System, coordinator_stream: str) -> JobModel | None:
    """The newest job model in ``coordinator_stream`` of ``system``, if any."""
    if coordinator_stream not in await system.list_streams():
        return None
    span = (await system.offsets(coordinator_stream))[0]
    ssp = SystemStreamPartition(system.name, coordinator_stream, 0)
    latest = None
    async for batch in read_range(system, ssp, span.oldest, span.end):
        for record in batch:
            if record.key == MODEL_KEY and record.value is not None:
                latest = record.value
    return None if latest is None else JobModel.from_bytes(latest)
