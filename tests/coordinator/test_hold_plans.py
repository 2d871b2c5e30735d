"""`plan_holds` as a table: which changes of a 2-task stream hold it, which release it, and
which remedies stay exact — from the local log's growth records (exact) or, on Kafka, from
what was seen at detection. No processes: the function is pure."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs.jobfiles import count_job_text

from framework.config import JobConfig, load_config
from framework.coordinator.builder import build_job_model
from framework.coordinator.holds import HoldPlan, InputNow, plan_holds
from framework.metadata.jobmodel import JobModel, StreamHold

WORDS = "local.words"
E2 = {0: 10, 1: 12}
"""Where the 2 partitions ended when words grew past 2."""


@pytest.fixture
def config(tmp_path: Path) -> JobConfig:
    path = tmp_path / "job.toml"
    path.write_text(count_job_text("plans", {"words": 2}))
    return load_config(path)


def model_at_2(config: JobConfig, hold: StreamHold | None = None) -> JobModel:
    model = build_job_model(config, {WORDS: 2}, None)
    return build_job_model(config, {WORDS: 2}, model, holds={WORDS: hold} if hold else {})


def plan(config: JobConfig, model: JobModel, now: InputNow) -> HoldPlan:
    return plan_holds(config, model, {WORDS: now.count}, {WORDS: now}, now_ms=5)


EXACT = StreamHold(count=2, ends=E2, exact=True, refused=3, since_ms=1)


@pytest.mark.parametrize(("now", "counts", "held"), [
    # grown straight to a multiple: an expansion
    (InputNow(4, {0: 11, 1: 12, 2: 3, 3: 0}, {2: E2}), 4, False),
    # to 3: held where it grew, whether or not records were written at 3 yet
    (InputNow(3, {0: 10, 1: 12, 2: 0}, {2: E2}), 2, True),
    (InputNow(3, {0: 11, 1: 12, 2: 4}, {2: E2}), 2, True),
    # through 3 (nothing written there) to 4 while the job was down: an expansion
    (InputNow(4, {0: 15, 1: 12, 2: 1, 3: 2}, {2: E2, 3: {0: 10, 1: 12, 2: 0}}), 4, False),
    # through 3 with 2 records written there: held although 4 is a multiple of 2
    (InputNow(4, {0: 15, 1: 12, 2: 1, 3: 2}, {2: E2, 3: {0: 11, 1: 12, 2: 1}}), 2, True),
])
def test_a_change_without_a_hold(config: JobConfig, now: InputNow, counts: int,
                                 held: bool) -> None:
    found = plan(config, model_at_2(config), now)
    assert found.counts == {WORDS: counts}
    assert found.holds == ({WORDS: StreamHold(2, E2, True, 3, 5)} if held else {})
    assert bool(found.held) == held


def test_growing_on_to_4_releases_the_hold_only_when_nothing_was_written_at_3(
        config: JobConfig) -> None:
    held = model_at_2(config, EXACT)
    clean = InputNow(4, {0: 13, 1: 12, 2: 0, 3: 1}, {2: E2, 3: {0: 10, 1: 12, 2: 0}})
    assert (plan(config, held, clean).counts, plan(config, held, clean).holds) == (
        {WORDS: 4}, {})
    written = InputNow(4, {0: 13, 1: 12, 2: 5, 3: 1}, {2: E2, 3: {0: 11, 1: 12, 2: 5}})
    found = plan(config, held, written)
    assert (found.counts, found.holds) == ({WORDS: 2}, {WORDS: EXACT})
    why = found.held[WORDS]
    assert (why.change, why.unmappable_written, why.past_hold) == (
        "local.words 2→3→4", {3: 6}, 9)
    assert why.rekey_counts() is None  # written at 3, then at 4: no order a re-key keeps
    assert why.explain(Path("job.toml")).startswith(
        "local.words is held at 2 partitions: 6 records were written while it had 3 "
        "partitions, which 2 tasks cannot map")


def test_one_record_written_at_3_is_said_in_the_singular(config: JobConfig) -> None:
    written = InputNow(4, {0: 13, 1: 12, 2: 1, 3: 1}, {2: E2, 3: {0: 10, 1: 12, 2: 1}})
    why = plan(config, model_at_2(config, EXACT), written).held[WORDS]
    assert why.explain(Path("job.toml")).startswith(
        "local.words is held at 2 partitions: 1 record was written while it had 3 "
        "partitions, which 2 tasks cannot map")


def test_a_re_key_keeps_records_written_at_3_then_6(config: JobConfig) -> None:
    now = InputNow(6, {0: 13, 1: 12, 2: 5, 3: 1, 4: 0, 5: 2}, {2: E2, 3: {0: 11, 1: 12, 2: 5}})
    why = plan(config, model_at_2(config, EXACT), now).held[WORDS]
    assert why.change == "local.words 2→3→6"
    assert why.rekey_counts() == (3, (1, 3))


def test_on_kafka_the_hold_is_where_the_change_was_seen(config: JobConfig) -> None:
    """No growth records: held at the ends seen at detection; released by a count the
    tasks map only while nothing was written past the hold."""
    found = plan(config, model_at_2(config), InputNow(3, {0: 14, 1: 12, 2: 1}))
    kafka = StreamHold(count=2, ends={0: 14, 1: 12}, exact=False, refused=3, since_ms=5)
    assert (found.counts, found.holds) == ({WORDS: 2}, {WORDS: kafka})
    held = model_at_2(config, kafka)
    assert plan(config, held, InputNow(4, {0: 14, 1: 12, 2: 0, 3: 0})).holds == {}
    found = plan(config, held, InputNow(4, {0: 14, 1: 13, 2: 0, 3: 0}))
    assert (found.counts, found.holds) == ({WORDS: 2}, {WORDS: kafka})
    assert found.held[WORDS].change == "local.words 2→3→4"
    assert found.held[WORDS].rekey_counts() is None  # written at 3 or at 4: unknown
    at_3 = plan(config, held, InputNow(3, {0: 15, 1: 12, 2: 1})).held[WORDS]
    assert at_3.rekey_counts() == (3, (1, 3))  # counts only grow: all written at 3


def test_on_kafka_records_past_the_hold_start_where_the_job_stopped_reading(
        config: JobConfig) -> None:
    """A worker that had read past the hold seen at detection when it took the hold in
    place stopped where it was: its checkpoint, not the hold, starts what is past it."""
    kafka = StreamHold(count=2, ends={0: 14, 1: 12}, exact=False, refused=3, since_ms=5)
    held = model_at_2(config, kafka)
    now = InputNow(4, {0: 16, 1: 12, 2: 0, 3: 0})

    def decided(read: dict[tuple[str, int], int]) -> HoldPlan:
        return plan_holds(config, held, {WORDS: 4}, {WORDS: now}, now_ms=5, read=read)
    assert decided({}).held[WORDS].past_hold == 2
    assert decided({(WORDS, 0): 15}).held[WORDS].past_hold == 1
    released = decided({(WORDS, 0): 16, (WORDS, 1): 12})
    assert (released.counts, released.holds) == ({WORDS: 4}, {})
    assert decided({("local.other", 0): 16}).held[WORDS].past_hold == 2
    exact = model_at_2(config, StreamHold(2, {0: 14, 1: 12}, True, 3, 5))
    grown = InputNow(3, {0: 16, 1: 12, 2: 0}, {2: {0: 14, 1: 12}})
    assert plan_holds(config, exact, {WORDS: 3}, {WORDS: grown}, now_ms=5,
                      read={(WORDS, 0): 16}).held[WORDS].past_hold == 2  # exact: the hold


def test_a_stream_that_shrank_is_held_while_records_are_past_the_hold(
        config: JobConfig) -> None:
    """The growth records no longer tell a record's count (4 → 6 → 4 by re-creation)."""
    held = model_at_2(config, EXACT)
    grown = {2: E2, 3: {0: 10, 1: 12, 2: 0}}
    assert plan(config, held, InputNow(2, {0: 10, 1: 12}, grown)).holds == {}
    found = plan(config, held, InputNow(2, {0: 11, 1: 12}, grown))
    assert (found.counts, found.holds) == ({WORDS: 2}, {WORDS: EXACT})
    assert not found.held[WORDS].recorded


def test_a_model_without_holds_serializes_as_before_and_holds_round_trip(
        config: JobConfig) -> None:
    plain = model_at_2(config)
    assert "holds" not in plain.to_json()
    held = model_at_2(config, EXACT)
    assert JobModel.from_bytes(held.to_bytes()) == held
    assert held.read_limits() == {ssp: E2[ssp.partition]
                                  for t in held.tasks.values() for ssp in t.ssps}
