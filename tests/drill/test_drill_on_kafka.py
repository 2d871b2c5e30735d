"""`sampan drill --system kafka` on real Apache Kafka: the same drills as on the local log.

Every drill of this file runs on the session's one broker: each puts its topics, groups and
transactional ids in a namespace of its own (`framework.drill.topics.drill_namespace`), so the
examples' fixed stream and job names never meet, and deletes its topics when it ends unless
``keep``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from drill_cli import run_cli_drill

from framework.config import load_config
from framework.drill.options import DrillOptions
from framework.drill.run import DrillReport, run_drill
from framework.systems.kafka.system import KafkaSystem


def kafka(bootstrap: str, tmp_path: Path, folder: str, **options: Any) -> DrillOptions:
    return DrillOptions(system="kafka", bootstrap=bootstrap, output=tmp_path / folder,
                        plot=False, **options)


def assert_exact(report: DrillReport) -> None:
    assert report.exact, "\n".join(report.verdict.describe())
    assert report.verdict.keys > 0
    assert all(e.restored == 0 and e.in_place for e in report.expansions)


@pytest.mark.timeout(600)  # a CLI drill end to end; on a loaded machine it takes minutes
def test_kafka_drill_cli_is_exact(kafka_broker: Any, tmp_path: Path) -> None:
    """The README's drill on Kafka: exit 0, EXACT, report and plot. (Drills sharing the
    broker without meeting: every test of this file runs one on the same broker, each in
    its own namespace.)"""
    text = run_cli_drill(tmp_path / "cli", "--system", "kafka", "--bootstrap",
                         kafka_broker.bootstrap, "--records", "2000", "--rate", "2000",
                         "--keys", "100", timeout=420)
    assert "sampan drill — wordcount on kafka, 2 workers" in text
    assert "verdict: EXACT — all 100 keys" in text
    assert "expansion kafka.words 2→4" in text
    assert "expansion kafka.words 4→8" in text


async def test_kafka_drill_topics_live_in_the_drills_namespace_and_stay_with_keep(
        kafka_broker: Any, tmp_path: Path) -> None:
    """The job file names the namespace; its topics are there and only there, and with
    ``keep`` they stay after the drill, the report saying where and how to delete them."""
    report = await run_drill(kafka(kafka_broker.bootstrap, tmp_path, "d", records=1500,
                                   keys=100, rate=1500, steps=(4,), keep=True))
    assert_exact(report)
    path = tmp_path / "d" / "job" / "job.toml"
    config = load_config(path)
    namespace = config.system("kafka").client_options["namespace"]
    assert namespace.startswith("drill-wordcount-") and namespace.endswith(".")
    # the examples stamp events from 1970: the drill's topics must outlive time retention
    assert config.system("kafka").client_options["topic_configs"] == {"retention.ms": "-1"}
    inside = KafkaSystem("kafka", kafka_broker.bootstrap, {"namespace": namespace})
    plain = KafkaSystem("kafka", kafka_broker.bootstrap)
    await inside.start()
    await plain.start()
    try:
        streams = await inside.list_streams()
        assert streams["words"] == 4 and streams["word-counts"] == 2
        everything = {*await plain.list_streams(), *await plain.hidden_streams()}
        assert {f"{namespace}words", f"{namespace}word-counts"} <= everything
        own = sorted(t for t in everything if t.startswith(namespace))
        assert len(own) >= 6  # input, output, changelog, coordinator, checkpoints, fences
        pattern = namespace.replace(".", "\\.")
        assert (f"  kafka namespace {namespace} on {kafka_broker.bootstrap}: its {len(own)} "
                f"topics kept (--keep); `sampan streams list {path} --all` lists them, "
                f"`sampan streams delete kafka.NAME --job {path} --yes` deletes one (or "
                f"`kafka-topics.sh --bootstrap-server {kafka_broker.bootstrap} --delete "
                f"--topic '{pattern}.*'` all)\n") in report.text() + "\n"
        await inside.delete_streams([t.removeprefix(namespace) for t in own])
    finally:
        await inside.close()
        await plain.close()


async def test_kafka_naive_drill_miscounts_then_deletes_its_topics(kafka_broker: Any,
                                                                   tmp_path: Path) -> None:
    """(By default a drill on Kafka deletes every topic of its namespace when it ends, and
    its report says so.)"""
    report = await run_drill(kafka(kafka_broker.bootstrap, tmp_path, "n", records=3000,
                                   keys=200, rate=2000, steps=(4,), naive=True))
    assert not report.exact
    assert len(report.verdict.wrong) > 50
    assert f"verdict: WRONG — {len(report.verdict.wrong)} of 200 keys are wrong" in (
        report.text())
    assert report.topics is not None
    namespace = report.topics.namespace
    assert namespace.startswith("drill-wordcount-")
    assert report.topics.topics >= 6
    assert (f"\n  kafka namespace {namespace} on {kafka_broker.bootstrap}: its "
            f"{report.topics.topics} topics deleted (--keep keeps them)\n") in report.text()
    plain = KafkaSystem("kafka", kafka_broker.bootstrap)
    await plain.start()
    try:
        assert [t for t in {*await plain.list_streams(), *await plain.hidden_streams()}
                if t.startswith(namespace)] == []
    finally:
        await plain.close()


@pytest.mark.parametrize(("example", "job_file", "options"), [
    ("ad_join", "job.toml", {}),
    ("enrichment", "job.toml", {"keys": 200, "steps": (4,)}),
    ("enrichment", "job_broadcast.toml", {"keys": 200, "steps": (4,)}),
    ("windowed_counts", "job.toml", {}),
    # the pipeline forms (sampan drill --form pipeline)
    ("wordcount", "job_pipeline.toml", {"keys": 200}),
    ("ad_join", "job_pipeline.toml", {}),
    ("enrichment", "job_pipeline.toml", {"keys": 200, "steps": (4,)}),
    ("windowed_counts", "job_pipeline.toml", {}),
])
async def test_every_example_drills_exactly_on_kafka(kafka_broker: Any, tmp_path: Path,
                                                     example: str, job_file: str,
                                                     options: dict[str, Any]) -> None:
    report = await run_drill(kafka(kafka_broker.bootstrap, tmp_path, "d", example=example,
                                   job_file=job_file, records=3000, rate=1500, **options))
    assert_exact(report)
    steps = options.get("steps") or report.scenario.steps
    assert len(report.expansions) == len(steps)
    assert all(e.change.startswith(f"kafka.{report.scenario.expand} ")
               for e in report.expansions)
