"""`CommittedFilter`: read_committed from control records, as a table of cases."""

from __future__ import annotations

import pytest

from framework.systems.kafka.txn_filter import ABORT, COMMIT, DATA, CommittedFilter, TxnRecord


def _rec(offset: int, pid: int = -1, epoch: int = 0, control: int = DATA) -> TxnRecord:
    return TxnRecord(offset, b"k", b"v", 0, (), pid, epoch, pid >= 0, control)


def _feed(records: list[TxnRecord]) -> tuple[list[int], int | None]:
    committed = CommittedFilter()
    released = committed.release(records)
    return [r.offset for r in released], committed.holding


CASES = {
    "plain records pass": ([_rec(0), _rec(1)], [0, 1], None),
    "committed transaction": ([_rec(0, 7), _rec(1, 7), _rec(2, 7, control=COMMIT)], [0, 1], None),
    "aborted transaction": ([_rec(0, 7), _rec(1, 7, control=ABORT), _rec(2)], [2], None),
    "open transaction holds what follows (last stable offset)":
        ([_rec(0), _rec(1, 7), _rec(2), _rec(3, 8), _rec(4, 8, control=COMMIT)], [0], 1),
    "release in offset order when the first commits last":
        ([_rec(0, 7), _rec(1, 8), _rec(2, 8, control=COMMIT), _rec(3, 7, control=COMMIT)],
         [0, 1], None),
    "a newer epoch of the producer aborts its old open transaction":
        ([_rec(0, 7, 0), _rec(1, 7, 1), _rec(2, 7, 1, control=COMMIT)], [1], None),
    "an older epoch's marker does not end a newer transaction":
        ([_rec(0, 7, 2), _rec(1, 7, 1, control=ABORT)], [], 0),
    "a marker without its data (seeked past it) is ignored":
        ([_rec(0, 9, control=COMMIT), _rec(1)], [1], None),
}


@pytest.mark.parametrize("records, released, holding", CASES.values(), ids=CASES.keys())
def test_committed_filter(records: list[TxnRecord], released: list[int],
                          holding: int | None) -> None:
    assert _feed(records) == (released, holding)


def test_records_are_released_across_fetches() -> None:
    committed = CommittedFilter()
    assert committed.release([_rec(0, 7), _rec(1)]) == []
    assert committed.holding == 0
    assert [r.offset for r in committed.release([_rec(2, 7, control=COMMIT)])] == [0, 1]
    assert committed.holding is None
