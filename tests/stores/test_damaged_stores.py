"""Damaged RocksDB files: a logged store heals itself from its changelog, exactly; a store
without a changelog stops the worker with one line naming its folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.config import JobConfig
from framework.errors import StoreError

RECORDS = 4_000
KEYS = 200
TASKS = [f"Partition {p}" for p in range(jf.PARTITIONS)]


def sst_files(config: JobConfig, task: str) -> list[Path]:
    folder = config.state_dir / "stores" / "totals" / task.replace(" ", "%20")
    found = sorted(folder.glob("*.sst"))
    assert found, f"no .sst file in {folder} to damage: {sorted(folder.iterdir())}"
    return found


def flip_bytes(path: Path) -> None:
    """A checksum mismatch on read: the file opens (footer and index intact), its first
    data block does not verify."""
    data = bytearray(path.read_bytes())
    for at in range(8, 40):
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    """A truncated .sst: RocksDB refuses to open the database."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


async def _first_run(tmp_path: Path, errors: str = "", stores: str = "") -> tuple:
    path = jf.write_job(tmp_path / "job", errors=errors)
    if stores:
        path.write_text(path.read_text().replace("[stores.totals]", f"[stores.totals]\n{stores}"))
    config = jf.load(path)
    meta = await h.open_meta(config)
    model = await h.prepare(config, meta)
    work = out.Workload(KEYS)
    await h.produce(meta, work.records(RECORDS))
    await h.run_worker(config, model, RECORDS)
    return config, meta, model, work


@pytest.mark.parametrize("damage", [truncate, flip_bytes], ids=["truncated", "checksum"])
async def test_a_damaged_logged_store_is_wiped_and_restored_exactly(
        tmp_path: Path, damage: object, caplog: pytest.LogCaptureFixture) -> None:
    config, meta, model, work = await _first_run(tmp_path)
    try:
        for path in sst_files(config, "Partition 1"):
            damage(path)  # type: ignore[operator]
        more = work.records(RECORDS)
        await h.produce(meta, more)
        if damage is flip_bytes:  # found when read: the worker stops, having wiped it
            with pytest.raises(StoreError, match=r"store 'totals' of task 'Partition 1' at "
                               r"\S+ is damaged \(Corruption: .*\); wiped \S+: the next start "
                               r"of this worker restores it fully from its changelog"):
                await h.run_worker(config, model, RECORDS)
        worker, _ = await h.run_worker(config, model, RECORDS)
        assert worker.restore_modes["Partition 1/totals"] == "full"
        assert out.exact_problems(await out.outputs(meta, config), work) == []
        assert await out.changelog_state(meta, config) == work.totals
        assert "is damaged" in caplog.text
    finally:
        await meta.close()


async def test_a_damaged_store_without_changelog_stops_naming_its_folder(
        tmp_path: Path) -> None:
    config, meta, model, _ = await _first_run(tmp_path, stores="changelog = false")
    try:
        for path in sst_files(config, "Partition 2"):
            truncate(path)
        with pytest.raises(StoreError) as caught:
            await h.run_worker(config, model, 1)
        message = str(caught.value)
        folder = config.state_dir / "stores" / "totals" / "Partition%202"
        assert message.startswith(f"store 'totals' of task 'Partition 2' at {folder} is "
                                  "damaged (Corruption: ")
        assert message.endswith(f"store 'totals' has no changelog to restore it from: move "
                                f"{folder} away to start it empty (its contents are lost), "
                                f"or put back a backup of it")
        assert "\n" not in message
        assert folder.exists()  # never wiped: it is the only copy
    finally:
        await meta.close()
