"""`Windows.process_batch` and `IntervalJoin.process_batch` do what `process` does record
by record: the same records, cut into batches with a commit after each, give the same
sends, the same results in the same order, the same writes in every commit (the
changelog) and the same store, and every key is due at the same time after every batch
— late records, watermark records, non-str keys, a states' cache too small for every
key and the journaled stores of the skip and dead-letter policies included — whether a
batch comes as envelopes or, as a worker hands it, as columns (`ColumnarBatch`). And
`Windows`' inline folds of a record into its key's newest pane, columns or session do
what the layout's ``fold`` does: the same streams through ``fold`` alone (the reference,
record by record) give the same everything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.api import BatchColumns, ColumnarBatch, Envelope
from framework.config.serdes import get_serde
from framework.stores import MemoryEngine, TaskStore
from framework.windows import (
    Hopping,
    IntervalJoin,
    Session,
    Tumbling,
    Windows,
    aggregate,
    count,
    fold,
    max_of,
    mean_of,
    sum_of,
)
from framework.windows.kinds import WindowKind
from framework.windows.reducers import Reducer
from groupers import SystemStreamPartition

REDUCERS: dict[str, Callable[[], Reducer]] = {
    "count": count,
    "sum": lambda: sum_of("x"),
    "aggregate": lambda: aggregate(n=count(), total=sum_of("x"), top=max_of("x"),
                                   avg=mean_of("x")),
    "fold": lambda: fold([], lambda seen, v: [*seen, v["x"]], merge=lambda a, b: a + b),
}
KINDS: dict[str, Callable[[int], WindowKind]] = {
    "tumbling": lambda grace: Tumbling(size_ms=100, grace_ms=grace),
    "hopping": lambda grace: Hopping(size_ms=300, advance_ms=100, grace_ms=grace),
    "hopping, windows not made of panes": lambda grace: Hopping(size_ms=250, advance_ms=100,
                                                                grace_ms=grace),
    "session": lambda grace: Session(gap_ms=50, grace_ms=grace),
}


class Context:
    """What `Windows` and `IntervalJoin` need of a task context: ``streams``' partitions
    0 and 1 as inputs, stores in memory."""

    def __init__(self, streams: list[str]) -> None:
        self.task_name = "Partition 0"
        self.ssps = frozenset(SystemStreamPartition("local", stream, p)
                              for stream in streams for p in (0, 1))
        self.config = type("Config", (), {"inputs": [f"local.{s}" for s in streams],
                                          "stores": {}})()
        self.stores: dict[str, TaskStore] = {}

    def store(self, name: str) -> TaskStore:
        if name not in self.stores:
            self.stores[name] = TaskStore(name, MemoryEngine(), get_serde("string"),
                                          get_serde("json"))
        return self.stores[name]


class Sent:
    """A collector keeping what is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def send(self, stream: str, key: Any = None, value: Any = None, **_: Any) -> None:
        self.sent.append((stream, key, repr(value)))


class Columns(ColumnarBatch):
    """A batch of one partition's envelopes, as a worker hands it: also as columns."""

    def __init__(self, envelopes: list[Envelope]) -> None:
        self.envelopes = iter(envelopes)
        self.failed: int | None = None

    def __iter__(self) -> Any:
        return self.envelopes

    def __next__(self) -> Envelope:
        return next(self.envelopes)

    def columns(self) -> BatchColumns:
        rest = list(self.envelopes)
        return BatchColumns(rest[0].ssp, [e.offset for e in rest], [e.key for e in rest],
                            [e.value for e in rest], [e.timestamp for e in rest])

    def failed_at(self, offset: int) -> None:
        self.failed = offset


def by_partition(envelopes: list[Envelope]) -> list[Columns]:
    """``envelopes`` as a worker would hand them: a batch per run of one partition."""
    runs: list[list[Envelope]] = []
    for envelope in envelopes:
        if runs and runs[-1][0].ssp == envelope.ssp:
            runs[-1].append(envelope)
        else:
            runs.append([envelope])
    return [Columns(run) for run in runs]


@st.composite
def records(draw: st.DrawFn, streams: list[str]) -> list[Envelope]:
    """Records whose times follow a clock moving on by 0, 1, 9, 10 or 50 ms, each up to
    100 ms behind it (so some are late), over two partitions, with watermark records;
    then a watermark record per partition closing everything."""
    clock, made, offsets = 0, [], {}
    for _ in range(draw(st.integers(1, 80))):
        clock += draw(st.sampled_from([0, 1, 9, 10, 50]))
        ts = max(0, clock - draw(st.sampled_from([0, 0, 1, 9, 10, 11, 50, 100])))
        ssp = SystemStreamPartition("local", draw(st.sampled_from(streams)),
                                    draw(st.integers(0, 1)))
        amount = draw(st.sampled_from([1, 2, 2.0, -3, 2**70, None]))
        key = f"~wm-{ssp.partition}" if amount is None else draw(
            st.sampled_from(["a", "b", "c", 7, b"\x01"]))
        value = {"watermark": ts} if amount is None else {"x": amount}
        offsets[ssp] = offsets.get(ssp, -1) + 1
        made.append(Envelope(ssp, offsets[ssp], key, value, ts))
    for ssp in sorted({e.ssp for e in made}):
        offsets[ssp] += 1
        made.append(Envelope(ssp, offsets[ssp], "~end", {"watermark": 10**12}, 10**12))
    return made


def run(make: Callable[[Context], Any], streams: list[str], data: list[Envelope],
        cuts: list[int], *, batch: str | None, cached: int | None, journal: bool
        ) -> dict[str, Any]:
    """``data`` through the aggregation ``make`` builds, per record (``batch`` None; as
    ``"reference"``: every record folded by its layout's ``fold``, none inline) or
    in batches — the records between two ``cuts`` in one `process_batch` call
    (``"envelopes"``), or in one call per run of one partition among them, as columns
    (``"columns"``) —, committing (draining the store) at each cut: what it sent and
    returned, each commit's writes and each key's due time then, and the store at the
    end."""
    if batch == "reference":
        with mock.patch("framework.windows.aggregation._shape",
                        return_value=(0, 0, 0, 0, None, None)):
            return run(make, streams, data, cuts, batch=None, cached=cached,
                       journal=journal)
    context = Context(streams)
    aggregation = make(context)
    store = context.stores["w"]
    if journal:  # as the worker sets it under process_policy skip or dead-letter
        store.journal = []
    if cached is not None:
        aggregation._keyed.max_cached = cached
    collector = Sent()
    returned: list[str] = []
    commits: list[Any] = []
    at = 0
    for cut in [*cuts, len(data)]:
        if cut <= at:
            continue
        if batch == "envelopes":
            returned += map(repr, aggregation.process_batch(iter(data[at:cut]), collector))
        elif batch == "columns":
            for columns in by_partition(data[at:cut]):
                returned += map(repr, aggregation.process_batch(columns, collector))
        else:
            for envelope in data[at:cut]:
                returned += map(repr, aggregation.process(envelope, collector))
        at = cut
        drained = store.drain()
        index = aggregation._keyed.index
        commits.append((list(drained.items()), dict(index.at), index.next()))
        store.apply(drained, None)
    return {"sent": collector.sent, "returned": returned, "commits": commits,
            "store": list(store.engine.iterate())}


def same_per_record_and_per_batch(make: Callable[[Context], Any], streams: list[str],
                                  data: list[Envelope], cuts: list[int],
                                  cached: int | None, journal: bool) -> None:
    reference = run(make, streams, data, cuts, batch="reference", cached=cached,
                    journal=journal)
    for batch in (None, "envelopes", "columns"):
        assert run(make, streams, data, cuts, batch=batch, cached=cached,
                   journal=journal) == reference, batch


cuts = st.lists(st.integers(1, 90), max_size=6).map(sorted)
"""Where a batch ends and a commit follows (past the records: none more)."""


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("reducer", list(REDUCERS))
@settings(max_examples=40, deadline=None)
@given(data=records(["views"]), cuts=cuts, grace=st.sampled_from([0, 1, 10, 50, 100]),
       late=st.sampled_from(["count", "dead-letter", "drop"]),
       emit=st.sampled_from(["close", "close", "update"]),
       cached=st.sampled_from([None, None, 1, 2]), journal=st.booleans())
def test_windows_in_batches_do_what_they_do_record_by_record(
        kind: str, reducer: str, data: list[Envelope], cuts: list[int], grace: int,
        late: str, emit: str, cached: int | None, journal: bool) -> None:
    def make(context: Context) -> Windows:
        return Windows(context, "w", KINDS[kind](grace), REDUCERS[reducer](),
                       emit=emit,  # type: ignore[arg-type]
                       late=late,  # type: ignore[arg-type]
                       late_stream="local.late", output="local.out")

    same_per_record_and_per_batch(make, ["views"], data, cuts, cached, journal)


@pytest.mark.parametrize("how", ["inner", "left"])
@settings(max_examples=60, deadline=None)
@given(data=records(["left", "right"]), cuts=cuts, grace=st.sampled_from([0, 10, 100]),
       before=st.sampled_from([0, 5, 50]), after=st.sampled_from([0, 5, 50]),
       late=st.sampled_from(["count", "dead-letter", "drop"]),
       cached=st.sampled_from([None, None, 1, 2]), journal=st.booleans())
def test_a_join_in_batches_does_what_it_does_record_by_record(
        how: str, data: list[Envelope], cuts: list[int], grace: int, before: int, after: int,
        late: str, cached: int | None, journal: bool) -> None:
    def make(context: Context) -> IntervalJoin:
        return IntervalJoin(context, "w", left="local.left", right="local.right",
                            before_ms=before, after_ms=after, grace_ms=grace,
                            how=how,  # type: ignore[arg-type]
                            late=late,  # type: ignore[arg-type]
                            late_stream="local.late", output="local.out")

    same_per_record_and_per_batch(make, ["left", "right"], data, cuts, cached, journal)


def test_a_key_written_again_after_its_close_keeps_its_state_in_the_store() -> None:
    """A close that empties a key deletes it from the store at the next close unless a
    record writes it first: a record of the key later in the same batch cancels that
    delete (else the state the next commit wrote is deleted, and a restart loses it)."""
    views = SystemStreamPartition("local", "views", 0)
    data = [Envelope(views, n, key, {"x": 1}, ts) for n, (key, ts) in enumerate(
        [("a", 0), ("b", 100), ("a", 110), ("b", 120), ("c", 200), ("c", 201)])]
    other = SystemStreamPartition("local", "views", 1)
    data.append(Envelope(other, 0, "~wm", {"watermark": 10**6}, 10**6))

    def make(context: Context) -> Windows:
        return Windows(context, "w", Session(gap_ms=50), count())

    for cuts in ([1, 2, 3, 4, 5, 6], [6], [3]):
        per_record = run(make, ["views"], data, cuts, batch=None, cached=None, journal=False)
        for batch in ("envelopes", "columns"):
            per_batch = run(make, ["views"], data, cuts, batch=batch, cached=None,
                            journal=False)
            assert per_batch == per_record
            assert b"k|sa" in dict(per_batch["store"])


@pytest.mark.parametrize("columns", [False, True])
def test_a_record_that_fails_stops_the_batch_and_keeps_the_next_close(columns: bool) -> None:
    """A bad event time raises from the batch at its record (read as columns, the batch
    is told which one failed); the records before it are folded in and the aggregation
    still knows when its next window closes."""
    views = SystemStreamPartition("local", "views", 0)
    good = [Envelope(views, n, "a", {"x": 1}, ts) for n, ts in enumerate([5, 150])]
    bad = Envelope(views, 2, "a", {"x": 1}, -1)
    batch = Columns([*good, bad, *good]) if columns else iter([*good, bad, *good])
    context = Context(["views"])
    windows = Windows(context, "w", Tumbling(size_ms=100), count())
    with pytest.raises(Exception, match=r"local\.views\[0\] offset 2: event time -1"):
        windows.process_batch(batch, Sent())
    assert windows._next_close == 100
    assert windows._keyed.load("sa") == [0, 1, 100, 1]
    if isinstance(batch, Columns):
        assert batch.failed == 2


def test_a_join_told_which_record_of_its_columns_failed() -> None:
    left = SystemStreamPartition("local", "left", 0)
    batch = Columns([Envelope(left, 0, "a", {}, 5), Envelope(left, 1, "a", {}, 2**70)])
    context = Context(["left", "right"])
    join = IntervalJoin(context, "w", left="local.left", right="local.right", before_ms=5,
                        after_ms=5)
    with pytest.raises(Exception, match=r"local\.left\[0\] offset 1: event time"):
        join.process_batch(batch, Sent())
    assert batch.failed == 1


def test_a_first_state_after_a_close_is_filed_in_a_due_bucket_the_close_left() -> None:
    """The keys' first states in a batch are filed in the last due bucket used while it
    stands: a close that dropped it (every key in it had moved later) makes the next
    first state due in that bucket file a new one, so its session still closes."""
    views = SystemStreamPartition("local", "views", 0)
    other = SystemStreamPartition("local", "views", 1)
    # Granule 100: k0 is due at 900, k1 at 1,900 then 2,000 (still filed at 1,900); k0 at
    # 1,900 closes k0's first session and drops the bucket of 1,900; k2 is due at 1,900.
    data = [Envelope(views, n, key, {"x": 1}, ts) for n, (key, ts) in enumerate(
        [("k0", 0), ("k1", 1_000), ("k1", 1_150), ("k0", 1_900), ("k2", 1_050)])]
    data.append(Envelope(views, 5, "~wm", {"watermark": 10**6}, 10**6))
    windows = Windows(Context(["views"]), "w", Session(gap_ms=800, grace_ms=1_000), count())
    results = windows.process(Envelope(other, 0, "~wm", {"watermark": 10**6}, 10**6), Sent())
    results += windows.process_batch(Columns(data), Sent())
    assert [(r.key, r.start, r.end, r.value) for r in results] == [
        ("k0", 0, 1, 1), ("k2", 1_050, 1_051, 1), ("k1", 1_000, 1_151, 2),
        ("k0", 1_900, 1_901, 1)]
