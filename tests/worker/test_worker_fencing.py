"""A worker of an older job-model epoch cannot commit once a newer epoch is published."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.coordinator.builder import build_job_model
from framework.errors import FencedError
from framework.metadata import publish_model
from framework.worker.main import EXIT_FENCED


async def test_a_stale_epoch_worker_cannot_commit(tmp_path: Path) -> None:
    """Epoch 2 published: the epoch-1 worker's first commit raises FencedError, writes nothing."""
    config = jf.load(jf.write_job(tmp_path / "job"))
    meta = await h.open_meta(config)
    try:
        old = await h.prepare(config, meta)
        new = build_job_model(config, {"local.events": jf.PARTITIONS}, old)
        await publish_model(meta, config, new)
        assert (old.epoch, new.epoch) == (1, 2)
        await h.produce(meta, out.Workload(10).records(100))
        with pytest.raises(FencedError, match="commit of epoch 1 refused, the job is fenced "
                                              "at epoch 2"):
            await h.run_worker(config, old, 100)
        assert await out.output_count(meta, config) == 0
        assert await meta.read_checkpoints(config.name) == {}
        assert sum((await out.changelog_ends(meta, config)).values()) == 0
    finally:
        await meta.close()


async def test_a_fenced_worker_process_exits_with_status_3(tmp_path: Path) -> None:
    """`sampan worker` running epoch 1 when epoch 2 appears: exit 3 at its next commit."""
    path = jf.write_job(tmp_path / "job")
    config = jf.load(path)
    meta = await h.open_meta(config)
    try:
        old = await h.prepare(config, meta)
        with (tmp_path / "worker.log").open("ab") as log:
            worker = h.start_worker(path, log)
            try:
                await h.wait_resumed(meta, config, worker)
                await publish_model(meta, config, build_job_model(
                    config, {"local.events": jf.PARTITIONS}, old))
                await h.produce(meta, out.Workload(10).records(100))

                async def exited() -> bool:
                    return worker.poll() is not None

                await h.wait_until(exited, 30, "the fenced worker to exit")
            finally:
                h.kill(worker)
        assert worker.returncode == EXIT_FENCED
        assert "commit of epoch 1 refused" in (tmp_path / "worker.log").read_text()
        assert await out.output_count(meta, config) == 0
    finally:
        await meta.close()
