"""Exact tables of `IntervalJoin`: the interval rule, inner and left joins, arrival in
either order, expiry by the watermark, late records (in memory, via run_task)."""

from __future__ import annotations

import pytest
from wtasks import JoinTask, left, marks, pairs, right, run_join

from framework.testing import run_task
from framework.windows import WindowError


def test_inner_join_pairs_records_within_before_and_after() -> None:
    result = run_join([
        right("a", 85), right("a", 90), right("a", 100), right("a", 120), right("a", 121),
        left("a", 100),            # joins 90, 100 and 120: [100 - 10, 100 + 20]
        right("b", 100), left("c", 100),  # other keys never join
        *marks(10**6)], before_ms=10, after_ms=20)
    assert pairs(result) == [("a", 100, 90), ("a", 100, 100), ("a", 100, 120)]


def test_a_pair_is_emitted_when_its_later_record_arrives_whatever_the_order() -> None:
    result = run_join([left("a", 100), right("a", 95), right("a", 111), left("a", 105),
                       *marks(10**6)])
    assert pairs(result) == [("a", 100, 95), ("a", 105, 95), ("a", 105, 111)]
    [first, *_] = result.sent_to("local.out")
    assert first.value == {"left": {"ts": 100}, "right": {"ts": 95}, "left_ts": 100,
                           "right_ts": 95}


def test_left_join_emits_an_unjoined_left_record_once_the_watermark_passes_its_window() -> None:
    # a's window is [90, 110]; expiries go in steps of (10 + 10 + 0) // 8 = 2 ms: at 112
    inputs = [left("a", 100), left("b", 100), right("b", 104), left("c", 130)]
    for watermark in (110, 111):
        held = run_join([*inputs, *marks(watermark)], how="left")
        assert pairs(held) == [("b", 100, 104)]
    passed = run_join([*inputs, *marks(112)], how="left")
    assert pairs(passed) == [("b", 100, 104), ("a", 100, None)]
    assert passed.sent_to("local.out")[-1].value == {"left": {"ts": 100}, "right": None,
                                                      "left_ts": 100, "right_ts": None}


def test_grace_keeps_records_for_out_of_order_partners() -> None:
    result = run_join([left("a", 100, 0), right("z", 200, 0), left("z", 200, 1),
                       right("z", 201, 1),   # W = 200: a@100 is 90 behind
                       right("a", 105, 0),   # within a grace of 100: still joins
                       *marks(10**6, 2)], how="left", grace_ms=100)
    assert pairs(result) == [("z", 200, 200), ("z", 200, 201), ("a", 100, 105)]
    assert "late" not in result.stores["j"]


def test_records_behind_the_watermark_are_late_and_join_nothing() -> None:
    result = run_join([left("a", 100), right("z", 200), left("z", 300),  # W = 200
                       right("a", 105), *marks(10**6)], how="left")
    assert pairs(result) == [("a", 100, None), ("z", 300, None)]  # a expired at W = 200
    assert result.stores["j"]["late"] == 1


def test_expired_records_are_gone_and_the_store_is_empty_once_nothing_is_kept() -> None:
    first = run_join([left("a", 100), right("a", 150), *marks(115)], how="left")
    assert pairs(first) == [("a", 100, None)]  # a@100 expired at 111, unjoined
    assert first.stores["j"]["a~closed"] == 114  # W = 115 in steps of 2
    again = run_join([left("a", 140), *marks(10**6)], stores={"j": first.stores["j"]},
                     how="left")
    assert pairs(again) == [("a", 140, 150)]  # a@100 neither joins nor comes back
    assert [k for k in again.stores["j"] if k.startswith("j|")] == []


def test_records_kept_across_a_restart_still_join() -> None:
    first = run_join([left("a", 100), *marks(50)], how="left")
    assert pairs(first) == []
    second = run_join([right("a", 108), *marks(10**6)], stores={"j": first.stores["j"]},
                      how="left")
    assert pairs(second) == [("a", 100, 108)]


def test_bad_joins_name_the_fix() -> None:
    with pytest.raises(WindowError, match="how must be 'inner' or 'left'"):
        run_join([left("a", 1)], how="outer")
    with pytest.raises(WindowError, match="after_ms must be >= 0"):
        run_join([left("a", 1)], after_ms=-1)
    with pytest.raises(WindowError, match=r"left='local.left' is not one of the job's inputs"):
        run_task(JoinTask(), [right("a", 1)], stores={"j": None})
    with pytest.raises(WindowError, match=r"the join reads local.left and local.right, not "
                                          r"local.other"):
        run_task(JoinTask(), [left("a", 1), right("a", 1), ("local.other", "a", {"ts": 1})],
                 stores={"j": None})


def test_an_unjoined_left_record_due_between_two_expiries_survives_a_restart() -> None:
    # before = after = 40: expiries are handed out in steps of 10. a@12 expires at 53, b@0
    # at 41; an expiry at W = 55 emits b and must not record a bound past a.
    options = {"before_ms": 40, "after_ms": 40, "how": "left"}
    first = run_join([left("b", 0), left("a", 12), *marks(55)], **options)
    second = run_join([*marks(10**6)], stores={"j": first.stores["j"]}, **options)
    assert pairs(first) + pairs(second) == [("b", 0, None), ("a", 12, None)]
