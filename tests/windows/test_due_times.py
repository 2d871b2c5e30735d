"""When a key's windows fall due: a session a record extends is due at its new end, and a
window closes at the first record whose watermark passes it — neither sooner nor later."""

from __future__ import annotations

from typing import Any

from wtasks import Context, Sent, envelope

from framework.windows import Hopping, Session, Tumbling, Windows, count
from framework.windows.kinds import WindowKind


def closed_by_each(kind: WindowKind, records: list[tuple[str, int]]
                   ) -> list[list[tuple[Any, ...]]]:
    """Per record, the windows its `Windows.process` call closed (one partition: the
    watermark is the largest event time so far)."""
    windows = Windows(Context(), "w", kind, count())  # type: ignore[arg-type]
    sent = Sent()
    return [[(w.key, w.start, w.end, w.value) for w in windows.process(
        envelope(key, ts, offset), sent)] for offset, (key, ts) in enumerate(records)]


def test_an_extended_session_closes_when_the_watermark_passes_its_new_end() -> None:
    gap = 80  # due times in steps of gap // 8 = 10
    records = [("a", 0), ("a", 50),  # a's session ends at 50: it closes at 131
               ("b", 100),           # would close [0, 1) at 81: still open
               ("b", 139),           # 139 < 140, the step after 131
               ("b", 140),           # a's session closes
               ("a", 300)]           # b's session [100, 141) closes at 300 >= 221
    assert closed_by_each(Session(gap_ms=gap), records) == [
        [], [], [], [], [("a", 0, 51, 2)], [("b", 100, 141, 3)]]


def test_a_session_merged_into_the_next_closes_with_it() -> None:
    records = [("a", 0), ("a", 100),  # two sessions of gap 60: [0] and [100]
               ("a", 50),             # joins both: [0, 100], closes at 161 (+ grace 100)
               ("b", 170),            # the session [0] would have closed at 61
               ("b", 260),            # 160 < 161
               ("b", 268)]            # 268 - 100 passes 161 (a multiple of the step, 7)
    assert closed_by_each(Session(gap_ms=60, grace_ms=100), records) == [
        [], [], [], [], [], [("a", 0, 101, 3)]]


def test_tumbling_and_hopping_windows_close_at_their_end() -> None:
    records = [("a", 5), ("a", 12), ("b", 19), ("b", 20), ("a", 31), ("b", 45)]
    assert closed_by_each(Tumbling(size_ms=10), records) == [
        [], [("a", 0, 10, 1)], [], [("a", 10, 20, 1), ("b", 10, 20, 1)], [("b", 20, 30, 1)],
        [("a", 30, 40, 1)]]
    assert closed_by_each(Hopping(size_ms=20, advance_ms=10), records) == [
        [], [], [], [("a", 0, 20, 2), ("b", 0, 20, 1)], [("a", 10, 30, 1), ("b", 10, 30, 2)],
        [("a", 20, 40, 1), ("b", 20, 40, 1)]]
