"""`decide_partition_change` as a table: the one decision every coordinator (one host, or
the leader of several) takes about the inputs' counts — nothing, an expansion, a hold with
its refusal, a release — and the expansion record it leads to. Pure: no processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs.jobfiles import count_job_text

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.decision import decide_partition_change
from framework.coordinator.expansion_book import ExpansionBook
from framework.coordinator.holds import InputNow
from framework.metadata import CoordinatorStatus, ExpansionRecord
from framework.metadata.jobmodel import JobModel, StreamHold

WORDS = "local.words"
E2 = {0: 10, 1: 12}
"""Where the 2 partitions ended when words grew past 2."""
HOLD = StreamHold(count=2, ends=E2, exact=True, refused=3, since_ms=5)


@pytest.fixture
def config(tmp_path: Path) -> JobConfig:
    path = tmp_path / "job.toml"
    path.write_text(count_job_text("decide", {"words": 2}))
    return load_config(path)


def model_at_2(config: JobConfig, holds: dict[str, StreamHold] | None = None) -> JobModel:
    return build_job_model(config, {WORDS: 2}, build_job_model(config, {WORDS: 2}, None),
                           holds=holds or {})


@pytest.mark.parametrize(("holds", "now", "decided"), [
    # the model's count, nothing held: nothing to do
    ({}, InputNow(2, E2), ({WORDS: 2}, {}, "", (), False, "")),
    # grown to a multiple of the 2 tasks: an expansion
    ({}, InputNow(4, {0: 11, 1: 12, 2: 3, 3: 0}, {2: E2}),
     ({WORDS: 4}, {}, "local.words 2→4", (), True, "expansion local.words 2→4")),
    # grown to 3: held where it grew
    ({}, InputNow(3, {0: 10, 1: 12, 2: 0}, {2: E2}),
     ({WORDS: 2}, {WORDS: HOLD}, "", (WORDS,), True, "hold local.words")),
    # held at 2 and still at 3: the hold stays, the model too
    ({WORDS: HOLD}, InputNow(3, {0: 10, 1: 12, 2: 0}, {2: E2}),
     ({WORDS: 2}, {WORDS: HOLD}, "", (), False, "")),
    # held, grown on to 4 with nothing written at 3: released and expanded
    ({WORDS: HOLD}, InputNow(4, {0: 13, 1: 12, 2: 0, 3: 1}, {2: E2, 3: {0: 10, 1: 12, 2: 0}}),
     ({WORDS: 4}, {}, "local.words 2→4", (WORDS,), True,
      "expansion local.words 2→4, release local.words")),
])
def test_the_decision_about_the_counts_now(
        config: JobConfig, holds: dict[str, StreamHold], now: InputNow,
        decided: tuple[object, ...]) -> None:
    decision = decide_partition_change(config, model_at_2(config, holds), {WORDS: now.count},
                                       {WORDS: now}, now_ms=5)
    assert (decision.counts, decision.holds, decision.expansion, decision.toggled,
            decision.changed, decision.what) == decided
    assert (decision.refusal is not None) == (WORDS in decision.holds)


def test_a_refusal_is_recorded_once_per_change_and_cleared_when_released(
        config: JobConfig) -> None:
    status = CoordinatorStatus()
    book = ExpansionBook(status)
    model = model_at_2(config)
    three = InputNow(3, {0: 10, 1: 12, 2: 0}, {2: E2})
    held = decide_partition_change(config, model, {WORDS: 3}, {WORDS: three}, now_ms=5)
    assert book.note(held, model.epoch)
    assert status.refusal is not None
    assert (status.refusal.change, status.refusal.counts, status.refusal.detected_ms) == (
        "local.words 2→3", {WORDS: 3}, 5)
    assert status.refusal.error.startswith(
        "stream local.words: partition count went from 2 to 3, refused (2 tasks consume it)")
    again = decide_partition_change(config, model, {WORDS: 3}, {WORDS: three}, now_ms=9)
    assert not book.note(again, model.epoch)  # the same change: logged and recorded once
    assert status.refusal.detected_ms == 5
    unchanged = decide_partition_change(config, model, {WORDS: 2}, {}, now_ms=11)
    assert book.note(unchanged, model.epoch)
    assert status.refusal is None


def test_an_applied_expansion_is_recorded_in_the_timeline(config: JobConfig) -> None:
    status = CoordinatorStatus()
    book = ExpansionBook(status)
    model = model_at_2(config)
    four = InputNow(4, {0: 11, 1: 12, 2: 3, 3: 0}, {2: E2})
    decision = decide_partition_change(config, model, {WORDS: 4}, {WORDS: four}, now_ms=5)
    assert book.applied(decision.expansion_record(model.epoch + 1, 5, published_ms=8))
    assert status.expansions == [ExpansionRecord(
        change="local.words 2→4", epoch=model.epoch + 1, detected_ms=5,
        model_published_ms=8)]
    nothing = decide_partition_change(config, model, {WORDS: 2}, {}, now_ms=11)
    assert not book.applied(nothing.expansion_record(model.epoch + 1, 11, published_ms=12))
    assert len(status.expansions) == 1
