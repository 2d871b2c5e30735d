"""`framework.worker.merging`: after a barrier, a new partition's records wait in record
time for the old partitions of their stream (the end-to-end checks are
tests/coordinator/test_expansion_order.py and test_expansion_on_kafka.py)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from framework.metadata.jobmodel import BarrierStage
from framework.systems.base import Record
from framework.systems.fetched import FetchedColumns
from framework.worker.merging import Merging
from groupers import SystemStreamPartition as SSP

OLD, NEW = SSP("local", "w", 0), SSP("local", "w", 4)
STAGE = BarrierStage({OLD: 10, SSP("local", "other", 0): 3}, frozenset({NEW}))


def columns(*rows: tuple[int, int]) -> FetchedColumns:
    """(offset, timestamp) rows as fetched columns."""
    fetched = FetchedColumns()
    fetched.extend([o for o, _ in rows], [b"k"] * len(rows), [b"v"] * len(rows),
                   [t for _, t in rows], [()] * len(rows))
    return fetched


def released(merging: Merging) -> list[tuple[SSP, list[int]]]:
    return [(ssp, list(records.offsets)) for ssp, records in merging.ready()]


def merging_after_barrier(cap: int = 100) -> Merging:
    merging = Merging(window_ms=60_000, cap=cap)
    merging.start("Partition 0", STAGE, now_ms=1_000)
    return merging


def test_a_new_partition_waits_for_its_streams_old_partitions_only() -> None:
    merging = merging_after_barrier()
    assert merging.sources == {OLD}  # not the other stream's partition
    merging.hold(NEW, columns((0, 500), (1, 700)), position=0, fetch=1)
    assert released(merging) == []  # nothing of the old partition read yet
    assert merging.waiting_by_task() == {"Partition 0": 2}  # the metric's figure
    merging.processed(OLD, columns((10, 600)))
    assert released(merging) == [(NEW, [0])]  # up to the old partition's record time
    merging.processed(OLD, columns((11, 900)))
    assert released(merging) == [(NEW, [1])]
    assert not merging.pending


def test_a_new_record_of_the_millisecond_the_old_partition_was_read_to_waits() -> None:
    """A record of that millisecond may still be unread in the old partition."""
    merging = merging_after_barrier()
    merging.hold(NEW, columns((0, 600)), position=0, fetch=1)
    merging.processed(OLD, columns((10, 600)))
    assert released(merging) == []
    merging.processed(OLD, columns((11, 601)))
    assert released(merging) == [(NEW, [0])]


def test_an_old_partition_read_to_its_end_lets_what_earlier_fetches_brought_through(
        ) -> None:
    """Whatever its timestamps (a producer's clock may run ahead of the worker's)."""
    merging = merging_after_barrier()
    first = merging.ticket(1_000)
    merging.hold(NEW, columns((0, 500), (1, 9_000_000)), position=0, fetch=first[0])
    merging.observed([OLD, NEW], {NEW: columns()}, full=False, ticket=first)
    assert released(merging) == []  # the same fetch: the old partition's record may lag
    second = merging.ticket(1_100)
    merging.hold(NEW, columns((2, 600)), position=0, fetch=second[0])
    merging.observed([OLD], {}, full=True, ticket=second)  # a full fetch tells nothing
    assert released(merging) == []
    third = merging.ticket(1_200)
    merging.observed([OLD], {OLD: columns((10, 2_500))}, full=False, ticket=third)
    assert released(merging) == []  # the old partition had records: not read to its end
    fourth = merging.ticket(1_300)
    merging.observed([OLD], {}, full=False, ticket=fourth)
    assert released(merging) == [(NEW, [0, 1, 2])]


def test_records_fetched_twice_are_kept_once_and_the_consumer_reads_on_past_them() -> None:
    merging = merging_after_barrier()
    merging.hold(NEW, columns((3, 500), (4, 600)), position=4, fetch=1)  # 3 was processed
    merging.hold(NEW, columns((4, 600), (5, 700)), position=4, fetch=1)  # a reassigned consumer
    assert list(merging.pending[NEW].offsets) == [4, 5]
    assert merging.fetch_from(NEW, 4) == 6
    merging.processed(OLD, columns((10, 1_000)))
    assert released(merging) == [(NEW, [4, 5])]
    assert merging.fetch_from(NEW, 6) == 6


def test_a_full_wait_pauses_the_new_partition_until_it_drains() -> None:
    merging = merging_after_barrier(cap=3)
    merging.hold(NEW, columns((0, 500), (1, 600), (2, 700)), position=0, fetch=1)
    assert NEW in merging.paused and merging.reroute
    merging.reroute = False
    merging.hold(NEW, columns((3, 800)), position=0, fetch=1)  # in flight when paused: dropped
    assert list(merging.pending[NEW].offsets) == [0, 1, 2]
    merging.processed(OLD, columns((10, 650)))
    assert released(merging) == [(NEW, [0, 1])]
    assert NEW in merging.paused and not merging.reroute
    merging.processed(OLD, columns((11, 750)))
    assert released(merging) == [(NEW, [2])]
    assert NEW not in merging.paused and merging.reroute  # fetched again, from 3


def test_a_partition_new_in_one_expansion_and_old_in_the_next_releases_in_chain() -> None:
    """2 → 4 → 8 before either was drained: 2 waits for 0, 6 for 0 and 2."""
    merging = Merging(window_ms=60_000, cap=100)
    p0, p2, p6 = (SSP("local", "w", p) for p in (0, 2, 6))
    merging.start("Partition 0", BarrierStage({p0: 5}, frozenset({p2})), now_ms=0)
    merging.start("Partition 0", BarrierStage({p0: 9, p2: 4}, frozenset({p6})), now_ms=0)
    merging.hold(p2, columns((0, 100), (1, 300)), position=0, fetch=1)
    merging.hold(p6, columns((0, 200)), position=0, fetch=1)
    merging.processed(p0, columns((9, 250)))
    ready = []
    for ssp, records in merging.ready():  # as the worker does: what it processes counts
        ready.append((ssp, list(records.offsets)))
        if ssp in merging.sources:
            merging.processed(ssp, records)
    assert ready == [(p2, [0])]  # 6 waits: 2 was read only up to 100
    merging.processed(p0, columns((10, 400)))
    ready = []
    for ssp, records in merging.ready():
        ready.append((ssp, list(records.offsets)))
        if ssp in merging.sources:
            merging.processed(ssp, records)
    assert ready == [(p2, [1]), (p6, [0])]


def test_a_merge_ends_once_the_old_partitions_are_found_read_to_their_end_past_its_window(
        ) -> None:
    merging = merging_after_barrier()  # passed at 1,000 ms: the window ends at 61,000
    merging.processed(OLD, columns((10, 90_000)))  # record time is not wall time
    merging.observed([OLD], {}, full=False, ticket=merging.ticket(60_999))
    list(merging.ready())
    assert NEW in merging.merges
    merging.observed([OLD], {}, full=False, ticket=merging.ticket(61_000))
    list(merging.ready())
    assert merging.merges == {} and merging.sources == frozenset()


def test_a_merge_resumed_by_a_worker_starting_the_task_counts_its_window_from_the_stage(
        ) -> None:
    """A stage passed before this worker started the task (`TaskModel.merging`): its
    records wait the same way, and the window ends ``window_ms`` after the stage was
    added, not after the worker started."""
    merging = Merging(window_ms=60_000, cap=100)
    stage = BarrierStage(STAGE.barrier, STAGE.held, at_ms=1_000)
    merging.start("Partition 0", stage, now_ms=50_000, resumed=True)
    merging.hold(NEW, columns((0, 500)), position=0, fetch=merging.ticket(50_000)[0])
    assert released(merging) == []
    merging.processed(OLD, columns((10, 501)))
    assert released(merging) == [(NEW, [0])]
    merging.observed([OLD], {}, full=False, ticket=merging.ticket(60_999))
    list(merging.ready())
    assert NEW in merging.merges
    merging.observed([OLD], {}, full=False, ticket=merging.ticket(61_000))
    list(merging.ready())
    assert merging.merges == {}


def test_no_window_means_no_merge() -> None:
    merging = Merging(window_ms=0, cap=100)
    merging.start("Partition 0", STAGE, now_ms=1_000)
    assert merging.merges == {}


def test_records_of_a_client_are_kept_as_columns() -> None:
    merging = merging_after_barrier()
    records: Sequence[Record] = [Record(4, o, b"k", b"v", t, (("h", b"1"),))
                                 for o, t in ((0, 100), (1, 200))]
    merging.hold(NEW, records, position=1, fetch=1)
    merging.processed(OLD, columns((10, 1_000)))
    [(ssp, kept)] = merging.ready()
    assert (ssp, kept.offsets, kept.timestamps, kept.headers) == (NEW, [1], [200],
                                                                  [(("h", b"1"),)])


@given(st.lists(st.tuples(st.sampled_from(["old", "new", "old empty"]),
                          st.integers(0, 50)), max_size=60))
def test_every_new_record_is_released_once_in_offset_order_and_never_ahead_of_the_old(
        steps: list[tuple[str, int]]) -> None:
    """Any interleaving of old-partition records, new-partition fetches and fetches that
    find the old partition read to its end: the new partition's records come out once
    each, in offset order, each only once the old partition was read to its timestamp or
    found read to its end by a later fetch."""
    merging = merging_after_barrier(cap=1_000)
    new_offset = old_offset = old_ts = 0
    brought: dict[int, int] = {}  # new record offset -> its fetch number
    emptied = 0  # the latest fetch that found the old partition read to its end
    out: list[int] = []
    for kind, gap in steps:
        ticket = merging.ticket(0)
        if kind == "old":
            old_ts += gap
            merging.processed(OLD, columns((old_offset, old_ts)))
            old_offset += 1
        elif kind == "new":
            merging.hold(NEW, columns((new_offset, old_ts + gap - 25)), position=0,
                         fetch=ticket[0])
            brought[new_offset] = ticket[0]
            new_offset += 1
        else:
            merging.observed([OLD], {}, full=False, ticket=ticket)
            emptied = ticket[0]
        for ssp, records in merging.ready():
            assert ssp == NEW
            for offset, timestamp in zip(records.offsets, records.timestamps, strict=True):
                assert timestamp < old_ts or brought[offset] < emptied
            out += records.offsets
    assert out == list(range(len(out)))
    waiting = merging.pending.get(NEW)
    assert out + (list(waiting.offsets) if waiting else []) == list(range(new_offset))
