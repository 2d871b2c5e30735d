"""Records-mode event time — the record timestamps, no watermark records — stays exact on
Apache Kafka while the input expands 2 → 4 → 8, with a producer placing records by the
old partition count after each expansion (stale metadata).

The coordinator notices an expansion up to ``monitor_interval_ms`` (4 s here) after it;
in that time the old tasks would read on in the old partitions, and their watermark would
close windows whose records sit unread in the new partitions. Each worker instead checks
its inputs' partition counts after every fetch and stops reading an input that grew, so
every window of every kind is checked here against a recomputation from the records
produced, with no record late.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections import Counter
from pathlib import Path

from jobs.runs import LocalJob
from jobs.windowed import MINUTE
from kafka_broker import KafkaBroker
from test_aggregate_expansion import KEYS, OUTPUTS, batch, expected

from framework.partitioner import partition_for_key
from framework.systems.base import ProducerRecord

HERE = Path(__file__).resolve().parent

JOB = """\
[job]
name = "{name}"
task = "stats_task:StatsTask"
inputs = ["kafka.{events}"]
workers = 2
commit_interval_ms = 100
input_idle_timeout_ms = 0

[coordinator]
monitor_interval_ms = 4000

[systems.kafka]
type = "kafka"
bootstrap = "{bootstrap}"

[streams."kafka.{events}"]
partitions = 2
[streams."kafka.{out}tumbling"]
[streams."kafka.{out}hopping"]
[streams."kafka.{out}sessions"]
[streams."kafka.{out}late"]

[stores.tumbling]
[stores.hopping]
[stores.sessions]
"""


def task_text(out: str) -> str:
    """tests/windows/stats_task.py on the record timestamps, writing to ``kafka.<out>…``."""
    text = (HERE / "stats_task.py").read_text()
    for old, new in (('clock = EventTime(context, "tumbling", timestamp=lambda envelope: '
                      'envelope.value["ts"])', 'clock = EventTime(context, "tumbling")'),
                     ('"local.late"', f'"kafka.{out}late"'),
                     ('f"local.{name}"', f'f"kafka.{out}{{name}}"')):
        assert old in text, old
        text = text.replace(old, new)
    return text


BASE = (int(time.time() * 1000) - 86_400_000) // (5 * MINUTE) * (5 * MINUTE)
"""Event times start a day ago (the broker's time retention keeps them), window-aligned."""


def placed(records: list[ProducerRecord], topic: str, stale: int | None) -> list[ProducerRecord]:
    """``records`` on ``topic``, ``BASE`` later; every third one placed by a producer that
    still believes the topic has ``stale`` partitions (None: all by the current count)."""
    moved = []
    for n, record in enumerate(records):
        assert record.key is not None and record.value is not None
        value = json.loads(record.value)
        value["ts"] += BASE
        moved.append(ProducerRecord(
            topic, record.key, json.dumps(value).encode(), timestamp=value["ts"],
            partition=partition_for_key(record.key, stale)
            if stale is not None and n % 3 == 0 else None))
    return moved


async def test_record_timestamps_exact_across_2_4_8_on_kafka(kafka_broker: KafkaBroker,
                                                             tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:8]
    events, out = f"events-{unique}", f"w{unique}-"
    job = LocalJob(tmp_path / "job", JOB.format(name=f"record-time-{unique}", events=events,
                                                out=out, bootstrap=kafka_broker.bootstrap),
                   {"stats_task.py": task_text(out)}, system="kafka")
    await job.create_streams({events: 2, **{out + name: 2 for name in OUTPUTS}, out + "late": 1})
    rng = random.Random(281)
    produced: list[ProducerRecord] = []

    async def produce(start: int, stale: int | None = None) -> None:
        records = placed(batch(rng, start * MINUTE, (start + 4) * MINUTE, 300), events, stale)
        produced.extend(records)
        await job.send(records)

    await produce(0)
    job.start()
    try:
        await job.wait_epoch(1, workers=2)
        await job.wait(lambda: job.caught_up_on(events), "the first batch committed")
        await job.expand_stream(events, 4)  # windows of every kind are open
        await produce(4, stale=2)
        await job.wait_expansions({f"kafka.{events} 2→4"}, workers=2)
        await produce(8)
        await job.wait(lambda: job.caught_up_on(events), "the third batch committed")
        await job.expand_stream(events, 8)
        await produce(12, stale=4)
        await job.wait_expansions({f"kafka.{events} 2→4", f"kafka.{events} 4→8"}, workers=2)
        await job.send([ProducerRecord(events, b"~end", json.dumps({"watermark": 10**15})
                                       .encode(), partition=p) for p in range(8)])
        await job.wait(lambda: job.caught_up_on(events), "everything committed")
        assert await job.stop() == 0
    finally:
        job.kill()
    records = [{"key": r.key.decode(), **json.loads(r.value)} for r in produced
               if r.key and r.value]
    assert len({r["key"] for r in records}) == len(KEYS)
    want = expected(records)
    assert await job.values(out + "late") == []
    for name in OUTPUTS:
        rows = await job.keyed_values(out + name)
        copies = Counter((key, v["start"], v["end"]) for key, v in rows)
        assert [w for w, n in copies.items() if n > 1] == [], f"{name}: emitted twice"
        got = {(key, v["start"], v["end"]): v["value"] for key, v in rows}
        assert all(v["final"] for _, v in rows)
        missing = sorted(set(want[name]) - set(got))
        assert missing == [], f"{name}: {len(missing)} windows missing, e.g. {missing[:5]}"
        assert got == want[name], name
        assert len(got) == len(want[name]) > 100
    worker_logs = "".join(f.read_text() for f in (job.folder / "logs").glob("*"))
    assert "reading them no further" in worker_logs  # the workers saw the growth
