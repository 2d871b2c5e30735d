"""Claims of the docs checked against the code they describe: names the code derives,
limits it enforces, what the metrics table lists and what is built (not "planned")."""

from __future__ import annotations

import re
from pathlib import Path

from framework.config.sections import CoordinatorConfig
from framework.metrics.families import FAMILIES
from framework.systems.kafka.system import checkpoints_topic, fences_topic

DOCS = Path(__file__).resolve().parents[2] / "docs"


def page(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())  # one line: wrapping is irrelevant


def test_derived_names_list_every_kafka_topic_sampan_creates() -> None:
    config = page("config.md")
    for topic in (checkpoints_topic("<job.name>"), fences_topic("<job.name>")):
        assert f"`{topic}`" in config, topic
    for stream in ("__sampan-<job.name>-coordinator", "<job.name>-<s>-changelog"):
        assert f"`<metadata_system>.{stream}`" in config, stream


def test_the_kafka_lease_timeout_is_documented_as_the_code_takes_it() -> None:
    """kafka_lease: session = max(6000, lease_timeout_ms); config allows >= 1000."""
    assert CoordinatorConfig.lease_timeout_ms == 10000
    for name in ("config.md", "coordinator.md"):
        assert "max(lease_timeout_ms, 6000)" in page(name), name
    assert "| `lease_timeout_ms` | integer ≥ 1000 |" in page("config.md")


def test_what_is_built_is_not_called_planned_or_unused() -> None:
    assert "is planned" not in page("operations.md")
    assert "hosts.md" in page("operations.md").split("## Several hosts")[1]
    assert "not used yet" not in page("systems.md")
    assert "or at least once (on Kafka)" not in page("tasks.md")
    assert 'guarantee = "exactly-once"' in page("tasks.md")


def test_the_records_source_warning_says_where_it_applies() -> None:
    windows = page("windows.md")
    section = windows.split("**Across an expansion with `\"records\"`.**")[1].split("##")[0]
    assert "on the local log, a worker reads" in section
    assert "on Kafka, which keeps no such offset" in section
    assert "exact across an expansion when" in section  # the condition, stated
    assert "test_record_time_on_kafka.py" in section


def test_the_dead_letter_and_bad_record_commands_end_and_match_one_record() -> None:
    operations = page("operations.md")
    for tail in re.findall(r"`sampan streams tail [^`]*`", operations):
        assert "--until-end" in tail, tail
    assert "grep '\"offset\": 7'" not in operations
    assert "grep '\"partition\": 0, \"offset\": 7,'" in operations


def test_the_metrics_table_lists_every_family_with_its_type() -> None:
    metrics = (DOCS / "metrics.md").read_text()
    rows = dict(re.findall(r"^\| `(sampan_\w+)` \| (\w+) \|", metrics, flags=re.M))
    expected = {f.name + ("_total" if f.kind == "counter" else ""): f.kind for f in FAMILIES}
    assert rows == expected
