"""`FetchedColumns`: the local log's fetched batch as columns, read as tuples by the hot
path and as `FetchedRow`s (`FetchedRecord`s) by everything else."""

from __future__ import annotations

import pytest

from framework.systems.base import Record, as_record
from framework.systems.fetched import FetchedColumns, FetchedRow


def _columns() -> FetchedColumns:
    batch = FetchedColumns()
    batch.extend([5, 6], [b"a", None], [b"1", b"2"], [100, 101], [(), (("h", b"x"),)])
    batch.extend([9], [b"c"], [None], [102], [()])
    return batch


def test_rows_are_the_records_in_order_as_plain_tuples() -> None:
    assert list(_columns().rows()) == [(5, b"a", b"1", 100, ()),
                                       (6, None, b"2", 101, (("h", b"x"),)),
                                       (9, b"c", None, 102, ())]


def test_it_reads_as_a_sequence_of_fetched_rows() -> None:
    batch = _columns()
    assert len(batch) == 3 and bool(batch) and not FetchedColumns()
    assert batch[0] == FetchedRow(5, b"a", b"1", 100, ())
    assert batch[-1].offset == 9 and batch[-1].value is None
    assert batch[1:] == [FetchedRow(6, None, b"2", 101, (("h", b"x"),)),
                         FetchedRow(9, b"c", None, 102, ())]
    assert [row.offset for row in batch] == [5, 6, 9]
    assert [as_record(3, row) for row in batch][1] == Record(3, 6, None, b"2", 101,
                                                             (("h", b"x"),))
    with pytest.raises(IndexError):
        batch[3]


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        FetchedColumns().extend([1, 2], [b"k"], [b"v"], [0], [()])
