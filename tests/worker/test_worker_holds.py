"""A worker honours its job model's holds (`JobModel.holds`) on every system: a held input's
partitions are read up to the hold and not one record further, even where the system
itself knows nothing of it (Kafka; the local log at the model's own count). This is what
keeps a stream held after a refused partition change on Kafka, where the hold is only
seen at detection."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from jobs import harness as h
from jobs import jobfiles as jf
from jobs import outputs as out

from framework.drill.verify import read_stream
from framework.metadata import publish_model
from framework.metadata.jobmodel import StreamHold

RECORDS = 2_000
KEYS = 50


def expected_below(rows: dict[int, list[tuple[bytes, bytes]]], limits: dict[int, int]
                   ) -> dict[str, list[dict[str, int]]]:
    """Per key, the running sums of its records below the limits, in order (a key's records
    all lie in one partition)."""
    found: dict[str, list[dict[str, int]]] = {}
    for partition, records in sorted(rows.items()):
        for key, value in records[:limits[partition]]:
            data = json.loads(value)
            sums = found.setdefault(key.decode(), [])
            sums.append({"sum": (sums[-1]["sum"] if sums else 0) + data["amount"],
                         "n": data["n"]})
    return found


async def test_a_worker_reads_a_held_input_up_to_the_hold_on_the_local_log(
        tmp_path: Path) -> None:
    await read_up_to_the_hold(tmp_path)


async def test_a_worker_reads_a_held_input_up_to_the_hold_on_kafka(
        kafka_broker: Any, tmp_path: Path) -> None:
    await read_up_to_the_hold(tmp_path, system="kafka", bootstrap=kafka_broker.bootstrap)


async def read_up_to_the_hold(tmp_path: Path, **options: Any) -> None:
    """Half of every partition is below the hold: exactly that half is processed."""
    unique = uuid.uuid4().hex[:8]
    config = jf.load(jf.write_job(tmp_path / "job", name=f"held-{unique}",
                                events=f"events-{unique}", **options))
    meta = await h.open_meta(config)
    try:
        model = await h.prepare(config, meta)
        work = out.Workload(KEYS, stream=jf.streams(config)[0])
        await h.produce(meta, work.records(RECORDS))
        ends = {p: r.end for p, r in (await meta.offsets(jf.streams(config)[0])).items()}
        limits = {p: end // 2 for p, end in ends.items()}  # mid-batch: the fetch reads past
        hold = StreamHold(count=jf.PARTITIONS, ends=limits, exact=False, refused=6)
        held = await publish_model(meta, config, replace(
            model, epoch=model.epoch + 1, holds={config.inputs[0]: hold}))
        _, result = await h.run_worker(config, held, sum(limits.values()))
        checkpoints = await meta.read_checkpoints(config.name)
        read = {ssp.partition: position for cp in checkpoints.values()
                for ssp, position in cp.inputs.items()}
        assert read == limits
        assert result.processed == sum(limits.values())
        rows = await read_stream(meta, jf.streams(config)[0])
        assert await out.outputs(meta, config) == expected_below(rows, limits)
    finally:
        await meta.close()
