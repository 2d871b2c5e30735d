"""`sampan drill --system kafka --hosts 3 --kill-host` end to end on real Kafka: 3 host process
groups, one SIGKILLed mid-run, its tasks resumed on the survivors from their standbys; with
``--steps`` the input also expands while that host is down."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from framework.systems.kafka.system import KafkaSystem

pytestmark = pytest.mark.slow


async def topics_starting(bootstrap: str, prefix: str) -> list[str]:
    """The broker's topics whose names start with ``prefix``."""
    system = KafkaSystem("kafka", bootstrap)
    await system.start()
    try:
        return sorted(t for t in {*await system.list_streams(), *await system.hidden_streams()}
                      if t.startswith(prefix))
    finally:
        await system.close()


def test_host_drill_kills_a_host_and_every_key_is_exact(kafka_broker: Any,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "drill"
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "drill", "--system", "kafka", "--bootstrap",
         kafka_broker.bootstrap, "--hosts", "3", "--kill-host", "--standbys", "1",
         "--records", "4000", "--keys", "120", "--output", str(out)],
        capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    text = done.stdout
    verdict = re.search(r"verdict: OK — all 120 keys (exact|never short, none missing "
                        r"\(at-least-once; (\d+) over, (\d+) exact\)) against the truth", text)
    assert verdict is not None, text
    if verdict.group(2) is not None:
        assert int(verdict.group(2)) + int(verdict.group(3)) == 120
    killed = re.search(r"host (h\d) SIGKILLed \(process group\) after 4,000, its tasks (.+)",
                       text)
    assert killed is not None and killed.group(1) == "h2", text
    moved = killed.group(2).split(", ")
    assert moved and all(m.startswith("Partition ") for m in moved)
    restored = re.search(r"restored at failover: ([\d,]+) changelog records \(a full restore "
                         r"of the moved tasks: ([\d,]+)\); modes: (.+)", text)
    assert restored is not None, text
    count, full = (int(restored.group(i).replace(",", "")) for i in (1, 2))
    assert count < full  # the standbys held all but the gap
    modes = dict(m.rsplit(" ", 1) for m in restored.group(3).split(", "))
    assert set(modes) == set(moved) and set(modes.values()) <= {"none", "delta"}
    # separate state folders and logs per host; the killed host's log ends mid-run
    assert {p.name for p in out.glob("data-h*")} == {"data-h1", "data-h2", "data-h3"}
    assert "left the group" not in (out / "host-h2.log").read_text()
    assert "left the group" in (out / "host-h1.log").read_text()
    # its topics (input, changelog, coordinator stream, checkpoints, fences) lived in a
    # namespace of its own, deleted at the end
    cleaned = re.search(r"\n  kafka namespace (drill-hosts-[0-9a-f]{8}\.) on \S+: its (\d+) "
                        r"topics deleted \(--keep keeps them\)\n", text)
    assert cleaned is not None and int(cleaned.group(2)) == 5, text
    assert asyncio.run(topics_starting(kafka_broker.bootstrap, cleaned.group(1))) == []


def test_host_drill_expands_the_input_while_a_host_is_down(kafka_broker: Any,
                                                           tmp_path: Path) -> None:
    """2 → 4 partitions (CreatePartitions) right after the SIGKILL, a quarter of the records
    written under 4: one failover model applies both, and every key is exact (exactly-once)."""
    out = tmp_path / "drill"
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "drill", "--system", "kafka", "--bootstrap",
         kafka_broker.bootstrap, "--hosts", "3", "--kill-host", "--standbys", "1",
         "--records", "4000", "--keys", "120", "--partitions", "2", "--steps", "4",
         "--guarantee", "exactly-once", "--output", str(out)],
        capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    text = done.stdout
    assert "verdict: OK — all 120 keys exact against the truth" in text, text
    killed = re.search(r"host (h\d) SIGKILLed \(process group\) after 3,000, its tasks "
                       r"(Partition \d)\n", text)
    assert killed is not None, text
    # The failover model applies the expansion too, or (when the leader saw the new
    # partitions before the killed host's session ended) an earlier model after the kill.
    grown = re.search(rf"input expanded while {killed.group(1)} was down: "
                      r"kafka\.drill-hosts-\d+-\d+-in 2→4; (failover model \(epoch \d+\): "
                      r".*expansion kafka\.drill-hosts-\d+-\d+-in 2→4|applied by epoch "
                      rf"(\d+), before {killed.group(1)}'s session ended; failover model "
                      r"\(epoch (\d+)\))", text)
    assert grown is not None, text
    if grown.group(2) is not None:
        assert int(grown.group(2)) < int(grown.group(3)), text
    assert "2 tasks, standby_replicas = 1" in text


def test_host_drill_refuses_without_kafka(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", "drill", "--hosts", "3", "--kill-host"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "needs --system kafka --bootstrap HOST:PORT --kill-host" in done.stderr
