"""Prometheus metrics and live status of a running job: real `sampan run`, real workers,
the local log on disk; every /metrics endpoint scraped and parsed with prometheus_client."""

from __future__ import annotations

import json
import os
import shutil
import signal
import urllib.parse
from collections.abc import Callable

from freeze import freeze
from jobs.outputs import keys
from jobs.runs import CountJob
from metricsjobs import endpoints, scrape, total, values

from framework.commands.status import collect_status
from framework.coordinator.phase import CoordinatorPhase
from framework.metrics.targets import targets_dir
from framework.stores.restore import FAULT_BATCH_DELAY_ENV
from framework.stores.rocksdb import store_path
from framework.systems.local.schema import database_file

PADDING = 4_000  # changelog records the task never reads: a restore long enough to watch
SLOW_RESTORE = {FAULT_BATCH_DELAY_ENV: "5"}  # ≥ 5 ms per record: ≥ 20 s on any machine


async def scrape_all(job: CountJob, epoch: int) -> tuple[dict, list[dict]]:
    """The coordinator's samples and every worker's, once all workers of ``epoch`` serve."""
    found: list[tuple[str, dict[int, str]]] = []

    async def serving() -> bool:
        state = await job.state()
        coordinator, workers = await endpoints(job)
        found[:] = [(coordinator, workers)]
        return (len(workers) == job.config.workers and state.model is not None
                and state.model.epoch == epoch)
    await job.wait(serving, f"every worker of epoch {epoch} serving /metrics")
    coordinator, workers = found[0]
    return scrape(coordinator), [scrape(url) for url in workers.values()]


async def lag_zero(job: CountJob, epoch: int) -> list[dict]:
    """Scrape until every input partition's lag gauge is 0 (end offsets refresh each second)."""
    result: list[list[dict]] = []

    async def caught_up() -> bool:
        _, workers = await scrape_all(job, epoch)
        result[:] = [workers]
        lags = [v for w in workers for v in values(w, "sampan_input_lag_records").values()]
        return bool(lags) and all(v == 0 for v in lags)
    await job.wait(caught_up, "input lag 0 on every partition")
    return result[0]


async def test_metrics_follow_processing_an_expansion_and_a_restore(
        make_job: Callable[..., CountJob]) -> None:
    job = make_job("metrics", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", keys(40), 5)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()

    # epoch 1: processed == produced, outputs == processed, lag reaches 0
    workers = await lag_zero(job, 1)
    assert total(workers, "sampan_records_processed_total") == job.truth.total == 200
    assert total(workers, "sampan_outputs_produced_total") == 200
    assert total(workers, "sampan_process_latency_seconds_count") == 200
    assert total(workers, "sampan_records_skipped_total") == 0
    store = await job.store()
    assert total(workers, "sampan_changelog_records_written_total") >= len(store)
    assert all(values(w, "sampan_commits_total") for w in workers)
    assert {v for w in workers for v in values(w, "sampan_job_model_epoch").values()} == {1}
    rows = {frozenset(dict(k).items()) for w in workers
            for k in values(w, "sampan_input_lag_records")}
    assert {(dict(r)["task"], dict(r)["stream"], dict(r)["partition"]) for r in rows} == {
        ("Partition 0", "local.words", "0"), ("Partition 1", "local.words", "1")}

    # an expansion: counted once, with its pause; the workers took it in place, so their
    # counts go on
    await job.expand("words", 4)
    await job.produce("words", keys(40), 3)
    await job.wait_epoch(2)
    await job.wait_outputs()
    workers = await lag_zero(job, 2)

    async def resumed() -> bool:  # the coordinator records when every worker resumed
        return (await job.state()).status.expansions[0].resumed_ms is not None
    await job.wait(resumed, "the expansion's pause recorded")
    pause_ms = (await job.state()).status.expansions[0].pause_ms
    coordinator, _ = await scrape_all(job, 2)
    assert total([coordinator], "sampan_expansions_total") == 1
    assert total([coordinator], "sampan_expansion_pause_seconds_count") == 1
    assert round(total([coordinator], "sampan_expansion_pause_seconds_sum") * 1000) == pause_ms
    assert total([coordinator], "sampan_job_model_epoch") == 2
    assert total([coordinator], "sampan_worker_restarts_total") == 0
    assert {dict(labels)["phase"]: value for labels, value in values(
        coordinator, "sampan_coordinator_phase").items()} == {
        phase.name: float(phase is CoordinatorPhase.RUNNING) for phase in CoordinatorPhase}
    assert total(workers, "sampan_records_processed_total") == job.truth.total == 320
    assert total(workers, "sampan_barrier_held_ssps") == 0

    async def rated() -> bool:  # a rate needs two samples of the processed counts, 1 s apart
        _, workers = await scrape_all(job, 2)
        return all(values(w, "sampan_task_records_per_second") for w in workers)
    await job.wait(rated, "every task's processing rate")
    status = (await collect_status(job.config)).to_json()
    assert [e["change"] for e in status["expansions"]] == ["local.words 2→4"]
    assert status["phase"] == "RUNNING"
    assert status["expansions"][0]["pause_ms"] == pause_ms  # one definition, both places
    assert {t["task"]: t["lag_by_stream"] for t in status["tasks"]} == {
        "Partition 0": {"local.words": 0}, "Partition 1": {"local.words": 0}}
    assert set(status["metrics"]["workers"]) == {"0", "1"}
    assert status["metrics"]["file_sd"] == str(job.config.state_dir / "metrics" / "*.json")

    # a full restore of Partition 1's store: watched while it runs, totals match at the end
    assert await job.stop() == 0
    job.write("metrics", {"words": 4}, extra="store_restore_batch = 1\n")
    padding = await job.pad_changelog(partition=1, records=PADDING)
    changelog = job.config.changelog_stream("counts").partition(".")[2]
    restore_end = (await job.call(lambda s: s.offsets(changelog)))[1].end
    shutil.rmtree(store_path(job.config.state_dir, "counts", "Partition 1"))
    log = job.logs / "worker-1.log"
    log.unlink()
    job.env = SLOW_RESTORE
    job.start()

    async def reported() -> bool:  # written every second while restoring
        progress = (await job.state()).progress.get(1)
        return progress is not None and progress.epoch == 3 and bool(progress.restoring) and (
            progress.restoring[0].restored > 0)
    await job.wait(reported, "worker 1's restore progress in the coordinator stream")
    pid = (await job.state()).status.worker_pids[1]
    freeze(pid, database_file(job.folder / "data"))  # mid-restore: status shows an ETA
    try:
        assert "restore applied" not in log.read_text(errors="replace")
        restoring = (await collect_status(job.config)).to_json()["restoring"]
        text = job.sampan("status", "{job}").stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    [row] = restoring
    assert (row["worker"], row["task"], row["store"], row["to_restore"]) == (
        1, "Partition 1", "counts", restore_end)
    assert 0 < row["restored"] < restore_end and row["eta_s"] > 0
    assert "RESTORING store 'counts' of task 'Partition 1' on worker 1" in text
    _, urls = await endpoints(job)
    during = scrape(urls[1])
    restored = values(during, "sampan_store_restore_records_restored", task="Partition 1")
    to_restore = values(during, "sampan_store_restore_records_to_restore", task="Partition 1")
    assert list(to_restore.values()) == [restore_end]
    assert 0 < next(iter(restored.values())) <= restore_end

    state = await job.wait_epoch(3)
    # an old expansion's pause, after a restart
    restarted = (await collect_status(job.config)).to_json()
    assert [(e["change"], e["pause_ms"]) for e in restarted["expansions"]] == [
        ("local.words 2→4", pause_ms)]
    _, workers = await scrape_all(job, 3)
    one = next(w for w in workers if values(w, "sampan_records_processed_total",
                                            task="Partition 1"))
    assert state.workers[1].restored == restore_end
    assert values(one, "sampan_store_restore_records_restored", task="Partition 1",
                  store="counts").popitem()[1] == restore_end
    assert total([one], "sampan_changelog_records_restored_total") == restore_end
    assert values(one, "sampan_store_restore_mode", task="Partition 1", mode="full"
                  ).popitem()[1] == 1
    assert (await collect_status(job.config)).to_json()["restoring"] == []
    assert await job.stop() == 0
    assert await job.store() == {**padding, **job.truth.sent}
    assert await job.outputs() == job.truth.expected_outputs()


async def test_metrics_targets_stay_put_across_restarts_and_expansions(
        make_job: Callable[..., CountJob]) -> None:
    """Default ports (`port = 0`): a SIGKILLed worker, an expansion and a new `sampan run`
    keep every endpoint's address, and the Prometheus file_sd files in the state folder
    name exactly the endpoints the job serves."""
    job = make_job("targets", {"words": 2})
    await job.create("words", 2)
    job.start()
    await job.wait_epoch(1)
    folder = targets_dir(job.config.state_dir)

    async def addresses(epoch: int) -> dict[str, str]:
        """Process → host:port, once every worker of ``epoch`` serves; checked against the
        file_sd files."""
        await scrape_all(job, epoch)
        coordinator, workers = await endpoints(job)
        served = {"coordinator": urllib.parse.urlsplit(coordinator).netloc, **{
            f"worker-{w}": urllib.parse.urlsplit(u).netloc for w, u in workers.items()}}
        files = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
        assert {name: entry[0]["targets"] for name, entry in files.items()} == {
            name: [address] for name, address in served.items()}
        assert files["worker-1"][0]["labels"] == {"sampan_job": "targets",
                                                  "sampan_process": "worker-1"}
        return served

    first = await addresses(1)
    state = await job.state()
    os.kill(state.status.worker_pids[0], signal.SIGKILL)

    async def restarted() -> bool:
        report = (await job.state()).workers.get(0)
        return report is not None and report.pid != state.workers[0].pid and (
            report.resumed_ms is not None)
    await job.wait(restarted, "worker 0 restarted")
    assert await addresses(1) == first
    await job.expand("words", 4)
    await job.wait_epoch(2)
    assert await addresses(2) == first
    assert await job.stop() == 0
    job.start()
    await job.wait_epoch(3)
    assert await addresses(3) == first
    assert await job.stop() == 0
