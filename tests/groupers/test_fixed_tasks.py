"""`FixedTasks` around any grouper, with the previous model's partition counts passed in.

Exact tables for SEP-5's scenarios (shared/seeds/004: "if partition is increased from 2 to
4, partitions 0 and 2 should be mapped to the same task and partitions 1 and 3 should be
mapped to the same task"), a user's own groupers wrapped, and hypothesis properties.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupers as G
from groupers import SystemStreamPartition as SSP


def ssps(stream: str, count: int, system: str = "local") -> list[SSP]:
    return [SSP(system, stream, p) for p in range(count)]


def table(grouping: Mapping[str, frozenset[SSP]]) -> dict[str, list[tuple[str, int]]]:
    return {task: sorted((s.stream, s.partition) for s in grouped)
            for task, grouped in grouping.items()}


def expand(grouper: G.ExpandingGrouper, before: Mapping[str, frozenset[SSP]],
           counts_before: Mapping[str, int], counts_now: Mapping[str, int]
           ) -> dict[str, frozenset[SSP]]:
    """The next grouping of streams ``local.<name>``, as the job model builder calls it."""
    return grouper.group(all_ssps(counts_now), G.ssp_task_mapping(before),
                         previous_counts={f"local.{n}": c for n, c in counts_before.items()})


def all_ssps(counts: Mapping[str, int]) -> list[SSP]:
    return [ssp for name, count in sorted(counts.items()) for ssp in ssps(name, count)]


class Ranges:
    """A user's grouper: each task holds ``width`` consecutive partitions of every stream."""

    def __init__(self, width: int) -> None:
        self.width = width

    def group(self, ssps: Iterable[SSP], previous: Mapping[SSP, str] | None = None
              ) -> dict[str, frozenset[SSP]]:
        tasks: dict[str, set[SSP]] = {}
        for ssp in ssps:
            tasks.setdefault(f"Range {ssp.partition // self.width}", set()).add(ssp)
        return {task: frozenset(members) for task, members in sorted(tasks.items())}


class Parity:
    """A user's grouper: even partitions in one task, odd ones in another."""

    def group(self, ssps: Iterable[SSP], previous: Mapping[SSP, str] | None = None
              ) -> dict[str, frozenset[SSP]]:
        tasks: dict[str, set[SSP]] = {}
        for ssp in ssps:
            tasks.setdefault("Even" if ssp.partition % 2 == 0 else "Odd", set()).add(ssp)
        return {task: frozenset(members) for task, members in sorted(tasks.items())}


class Seeded:
    """A user's grouper with an arbitrary many-to-one, cross-stream task mapping."""

    def __init__(self, seed: int, tasks: int) -> None:
        self.seed, self.tasks = seed, tasks

    def group(self, ssps: Iterable[SSP], previous: Mapping[SSP, str] | None = None
              ) -> dict[str, frozenset[SSP]]:
        grouped: dict[str, set[SSP]] = {}
        for ssp in ssps:
            bucket = random.Random(f"{self.seed}|{ssp.stream}|{ssp.partition}")
            grouped.setdefault(f"Bucket {bucket.randrange(self.tasks)}", set()).add(ssp)
        return {task: frozenset(members) for task, members in sorted(grouped.items())}


# -- the aliases are the wrapper ---------------------------------------------------------------

def test_the_public_fixed_task_groupers_wrap_the_base_groupers() -> None:
    assert isinstance(G.GroupByPartitionFixedTasks(), G.FixedTasks)
    assert isinstance(G.GroupByPartitionFixedTasks().base, G.GroupByPartition)
    assert isinstance(G.GroupBySystemStreamPartitionFixedTasks().base,
                      G.GroupBySystemStreamPartition)


def test_sep5_2_to_4_with_counts_puts_0_2_and_1_3_together() -> None:
    grouper = G.FixedTasks(G.GroupByPartition())
    after = expand(grouper, grouper.group(ssps("events", 2)), {"events": 2}, {"events": 4})
    assert table(after) == {
        "Partition 0": [("events", 0), ("events", 2)],
        "Partition 1": [("events", 1), ("events", 3)],
    }


def test_sep5_ssp_variant_4_to_8_maps_partition_5_to_the_task_of_1() -> None:
    grouper = G.FixedTasks(G.GroupBySystemStreamPartition())
    after = expand(grouper, grouper.group(ssps("t", 4)), {"t": 4}, {"t": 8})
    assert {task: sorted(s.partition for s in g) for task, g in after.items()} == {
        "SystemStreamPartition [local, t, 0]": [0, 4],
        "SystemStreamPartition [local, t, 1]": [1, 5],
        "SystemStreamPartition [local, t, 2]": [2, 6],
        "SystemStreamPartition [local, t, 3]": [3, 7],
    }


def test_2_4_6_with_counts_is_accepted_because_keys_began_in_2_partitions() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    expanded = expand(grouper, grouper.group(ssps("e", 2)), {"e": 2}, {"e": 4})
    after = expand(grouper, expanded, {"e": 4}, {"e": 6})
    assert table(after) == {
        "Partition 0": [("e", 0), ("e", 2), ("e", 4)],
        "Partition 1": [("e", 1), ("e", 3), ("e", 5)],
    }


def test_4_to_6_with_counts_is_refused_naming_stream_counts_and_remedy() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    with pytest.raises(G.ExpansionError, match=r"local\.e: partition count went from 4 to 6, "
                       r"refused \(4 tasks consume it\).*e\.g\. 8"):
        expand(grouper, grouper.group(ssps("e", 4)), {"e": 4}, {"e": 6})


# -- a user's grouper wrapped -------------------------------------------------------------------

def test_wrapped_range_grouper_4_to_8_sends_p_to_the_task_of_p_mod_4() -> None:
    grouper = G.FixedTasks(Ranges(width=2))
    before = grouper.group(ssps("e", 4))
    assert table(before) == {"Range 0": [("e", 0), ("e", 1)], "Range 1": [("e", 2), ("e", 3)]}
    after = expand(grouper, before, {"e": 4}, {"e": 8})
    assert table(after) == {
        "Range 0": [("e", 0), ("e", 1), ("e", 4), ("e", 5)],
        "Range 1": [("e", 2), ("e", 3), ("e", 6), ("e", 7)],
    }


def test_wrapped_range_grouper_refuses_4_to_6_which_would_split_its_tasks_keys() -> None:
    """Two tasks, but keys began in 4 partitions: 6 is not a multiple of 4 (SEP-5's
    "number of tasks = initial count" would have accepted it and moved keys)."""
    grouper = G.FixedTasks(Ranges(width=2))
    with pytest.raises(G.ExpansionError, match=r"from 4 to 6, refused \(2 tasks consume it\)"
                       r".*not a multiple of 4"):
        expand(grouper, grouper.group(ssps("e", 4)), {"e": 4}, {"e": 6})


def test_wrapped_parity_grouper_accepts_4_to_6_since_its_tasks_follow_p_mod_2() -> None:
    grouper = G.FixedTasks(Parity())
    after = expand(grouper, grouper.group(ssps("e", 4)), {"e": 4}, {"e": 6})
    assert table(after) == {"Even": [("e", 0), ("e", 2), ("e", 4)],
                            "Odd": [("e", 1), ("e", 3), ("e", 5)]}


def test_wrapped_grouper_places_a_stream_new_to_the_job_as_it_would() -> None:
    grouper = G.FixedTasks(Ranges(width=2))
    before = grouper.group(ssps("a", 2))
    after = expand(grouper, before, {"a": 2}, {"a": 4, "c": 4})
    assert table(after) == {
        "Range 0": [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("c", 0), ("c", 1)],
        "Range 1": [("c", 2), ("c", 3)],
    }


def test_wrapped_grouper_with_a_custom_expansion_algorithm() -> None:
    class Halves:
        def partition_before_expansion(self, partition: int, current: int, initial: int) -> int:
            return partition * initial // current

    grouper = G.FixedTasks(G.GroupByPartition(), expansion=Halves())
    after = expand(grouper, grouper.group(ssps("e", 2)), {"e": 2}, {"e": 4})
    assert table(after) == {"Partition 0": [("e", 0), ("e", 1)],
                            "Partition 1": [("e", 2), ("e", 3)]}


# -- the passed counts are checked ----------------------------------------------------------

def test_counts_missing_a_stream_of_the_mapping_are_refused_naming_it() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    before = grouper.group(ssps("a", 2) + ssps("b", 2))
    with pytest.raises(G.ExpansionError, match=r"stream local\.b: previous_counts has no "):
        grouper.group(ssps("a", 2) + ssps("b", 2), G.ssp_task_mapping(before),
                      previous_counts={"local.a": 2})


def test_counts_below_the_mappings_partitions_are_refused() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    with pytest.raises(G.ExpansionError, match="gives it 2 partitions but maps partition 3"):
        expand(grouper, grouper.group(ssps("e", 4)), {"e": 2}, {"e": 4})


def test_counts_above_the_mappings_partitions_say_the_history_is_incomplete() -> None:
    """The inference ``max(before) + 1`` would have taken 2 here and moved keys."""
    grouper = G.GroupByPartitionFixedTasks()
    with pytest.raises(G.ExpansionError, match=r"gives it 4 partitions but no task for "
                       r"partition\(s\) \[2, 3\]"):
        expand(grouper, grouper.group(ssps("e", 2)), {"e": 4}, {"e": 8})


def test_base_groupers_accept_and_ignore_the_counts() -> None:
    for grouper in (G.GroupByPartition(), G.GroupBySystemStreamPartition(),
                    G.AllSspToSingleTask()):
        assert expand(grouper, grouper.group(ssps("e", 2)), {"e": 2}, {"e": 4}) == \
            grouper.group(ssps("e", 4))


# -- properties ------------------------------------------------------------------------------

@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, int], list[dict[str, int]]]:
    """Streams with initial counts, then steps multiplying some streams' counts."""
    names = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True))
    counts = {name: draw(st.integers(1, 6)) for name in names}
    initial, steps = dict(counts), []
    for _ in range(draw(st.integers(1, 3))):
        for name in draw(st.lists(st.sampled_from(names), unique=True)):
            counts[name] *= draw(st.sampled_from([2, 3]))
        steps.append(dict(counts))
    return initial, steps


groupers_under_test = st.one_of(
    st.builds(G.GroupByPartitionFixedTasks),
    st.builds(G.GroupBySystemStreamPartitionFixedTasks),
    st.builds(lambda: G.FixedTasks(G.AllSspToSingleTask())),
    st.builds(lambda width: G.FixedTasks(Ranges(width)), st.integers(1, 4)),
    st.builds(lambda seed, tasks: G.FixedTasks(Seeded(seed, tasks)),
              st.integers(0, 10**6), st.integers(1, 5)),
)


@settings(max_examples=100, deadline=None)
@given(grouper=groupers_under_test, history=histories())
def test_expansions_keep_every_task_and_send_p_to_the_task_of_p_mod_initial_count(
    grouper: G.FixedTasks, history: tuple[dict[str, int], list[dict[str, int]]]
) -> None:
    initial, steps = history
    first = grouper.group(all_ssps(initial))
    home = G.ssp_task_mapping(first)
    grouping, counts = first, initial
    for step in steps:
        grouping, counts = expand(grouper, grouping, counts, step), step
        mapping = G.ssp_task_mapping(grouping)  # raises if an SSP is in two tasks
        assert sorted(mapping) == all_ssps(step)  # every partition in exactly one task
        assert list(grouping) == list(first)  # the same tasks, in the same order
        for ssp, task in mapping.items():
            assert task == home[ssp._replace(partition=ssp.partition % initial[ssp.stream])]


@settings(max_examples=100, deadline=None)
@given(grouper=groupers_under_test, history=histories(), seed=st.integers(0, 2**32))
def test_the_grouping_does_not_depend_on_input_order(
    grouper: G.FixedTasks, history: tuple[dict[str, int], list[dict[str, int]]], seed: int
) -> None:
    initial, steps = history
    shuffler = random.Random(seed)
    previous = list(G.ssp_task_mapping(grouper.group(all_ssps(initial))).items())
    current = all_ssps(steps[-1])
    counts = [(f"local.{name}", count) for name, count in initial.items()]
    straight = grouper.group(current, dict(previous), previous_counts=dict(counts))
    for items in (current, previous, counts):
        shuffler.shuffle(items)
    mixed = grouper.group(current, dict(previous), previous_counts=dict(counts))
    assert straight == mixed
    assert list(straight) == list(mixed)


@settings(max_examples=100, deadline=None)
@given(history=histories())
def test_the_old_two_argument_call_groups_a_complete_history_alike(
    history: tuple[dict[str, int], list[dict[str, int]]]
) -> None:
    for grouper in (G.GroupByPartitionFixedTasks(), G.GroupBySystemStreamPartitionFixedTasks()):
        initial, steps = history
        with_counts = without = grouper.group(all_ssps(initial))
        counts = initial
        for step in steps:
            with_counts, counts = expand(grouper, with_counts, counts, step), step
            without = grouper.group(all_ssps(step), G.ssp_task_mapping(without))
            assert with_counts == without
