"""`bench.curves`' data → figure half on a synthetic table, without running a job."""

from __future__ import annotations

from pathlib import Path

from bench.curves.plot import Curve, draw, load, save

COMMAND = "python -m bench.curves tasks"
MACHINE = "test-host: 2 cores, x86_64, Python 3.11, load average 1.0, 1.0, 1.0"


def _curves() -> list[Curve]:
    rate = Curve("one worker", "partitions", "records/s", log_x=True)
    for partitions, records in ((4, 13_000.0), (16, 12_500.0), (64, 12_000.0)):
        rate.add("before", partitions, records)
        rate.add("after", partitions, records * 1.1)
    memory = Curve("peak RSS", "partitions", "MiB", series={"peak RSS": [(4, 62.0), (64, 75.0)]})
    return [rate, memory]


def test_a_table_of_curves_is_drawn_as_one_png(tmp_path: Path) -> None:
    path = draw(_curves(), tmp_path / "img" / "curves-tasks.png", COMMAND, MACHINE)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_saved_table_loads_back_with_its_command_and_machine(tmp_path: Path) -> None:
    save(_curves(), tmp_path / "tasks.json", COMMAND, MACHINE)
    assert load(tmp_path / "tasks.json") == (_curves(), COMMAND, MACHINE)
