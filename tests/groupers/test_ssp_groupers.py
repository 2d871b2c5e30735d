"""SEP-5 SSP groupers: exact tables for the document's scenarios, plus properties."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupers as G
from groupers import SystemStreamPartition as SSP


def ssps(stream: str, count: int, system: str = "local") -> list[SSP]:
    return [SSP(system, stream, p) for p in range(count)]


def table(grouping: dict[str, frozenset[SSP]]) -> dict[str, list[tuple[str, int]]]:
    """Task → sorted (stream, partition) pairs: easy to write out by hand."""
    return {task: sorted((s.stream, s.partition) for s in grouped)
            for task, grouped in grouping.items()}


def regroup(grouper: G.SspGrouper, current: list[SSP], before: dict[str, frozenset[SSP]]):
    return grouper.group(current, G.ssp_task_mapping(before))


# -- base groupers -------------------------------------------------------------------------

def test_group_by_partition_puts_partition_p_of_every_stream_in_task_p() -> None:
    grouping = G.GroupByPartition().group(ssps("a", 2) + ssps("b", 3))
    assert table(grouping) == {
        "Partition 0": [("a", 0), ("b", 0)],
        "Partition 1": [("a", 1), ("b", 1)],
        "Partition 2": [("b", 2)],
    }


def test_group_by_ssp_makes_one_task_per_partition() -> None:
    grouping = G.GroupBySystemStreamPartition().group(ssps("t", 2, system="s"))
    assert grouping == {
        "SystemStreamPartition [s, t, 0]": frozenset({SSP("s", "t", 0)}),
        "SystemStreamPartition [s, t, 1]": frozenset({SSP("s", "t", 1)}),
    }


def test_all_ssp_to_single_task_puts_everything_in_one_task() -> None:
    grouping = G.AllSspToSingleTask().group(ssps("a", 2) + ssps("b", 1))
    assert table(grouping) == {"Task-0": [("a", 0), ("a", 1), ("b", 0)]}


def test_task_names_are_in_natural_order() -> None:
    grouping = G.GroupByPartition().group(ssps("a", 12))
    assert list(grouping) == [f"Partition {p}" for p in range(12)]


# -- fixed tasks: first run and expansions ---------------------------------------------------

@pytest.mark.parametrize(
    ("fixed", "base"),
    [
        (G.GroupByPartitionFixedTasks(), G.GroupByPartition()),
        (G.GroupBySystemStreamPartitionFixedTasks(), G.GroupBySystemStreamPartition()),
    ],
)
def test_first_run_equals_the_base_grouper(fixed: G.SspGrouper, base: G.SspGrouper) -> None:
    current = ssps("a", 3) + ssps("b", 5)
    assert fixed.group(current) == base.group(current)
    assert fixed.group(current, {}) == base.group(current)


def test_unchanged_counts_reproduce_the_previous_model() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    first = grouper.group(ssps("a", 4))
    assert regroup(grouper, ssps("a", 4), first) == first


def test_expansion_2_to_4_is_the_documents_example() -> None:
    grouper = G.GroupByPartitionFixedTasks(expansion=G.DefaultPartitionExpansionAlgorithm())
    after = regroup(grouper, ssps("events", 4), grouper.group(ssps("events", 2)))
    assert table(after) == {
        "Partition 0": [("events", 0), ("events", 2)],
        "Partition 1": [("events", 1), ("events", 3)],
    }


def test_expansion_4_to_8_keeps_four_tasks() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    after = regroup(grouper, ssps("events", 8), grouper.group(ssps("events", 4)))
    assert table(after) == {
        "Partition 0": [("events", 0), ("events", 4)],
        "Partition 1": [("events", 1), ("events", 5)],
        "Partition 2": [("events", 2), ("events", 6)],
        "Partition 3": [("events", 3), ("events", 7)],
    }


def test_repeated_expansion_2_4_8_16_fed_back_each_time() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    grouping = grouper.group(ssps("events", 2))
    for count in (4, 8, 16):
        grouping = regroup(grouper, ssps("events", count), grouping)
    assert table(grouping) == {
        "Partition 0": [("events", p) for p in range(0, 16, 2)],
        "Partition 1": [("events", p) for p in range(1, 16, 2)],
    }


def test_only_one_of_two_copartitioned_streams_expands_3_to_6() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    before = grouper.group(ssps("a", 3) + ssps("b", 3))
    after = regroup(grouper, ssps("a", 3) + ssps("b", 6), before)
    assert table(after) == {
        "Partition 0": [("a", 0), ("b", 0), ("b", 3)],
        "Partition 1": [("a", 1), ("b", 1), ("b", 4)],
        "Partition 2": [("a", 2), ("b", 2), ("b", 5)],
    }


def test_ssp_variant_sends_partition_5_after_4_to_8_to_task_of_partition_1() -> None:
    grouper = G.GroupBySystemStreamPartitionFixedTasks()
    after = regroup(grouper, ssps("t", 8, system="s"), grouper.group(ssps("t", 4, system="s")))
    assert G.ssp_task_mapping(after)[SSP("s", "t", 5)] == "SystemStreamPartition [s, t, 1]"
    assert {task: sorted(s.partition for s in group) for task, group in after.items()} == {
        "SystemStreamPartition [s, t, 0]": [0, 4],
        "SystemStreamPartition [s, t, 1]": [1, 5],
        "SystemStreamPartition [s, t, 2]": [2, 6],
        "SystemStreamPartition [s, t, 3]": [3, 7],
    }


# -- streams added and removed ----------------------------------------------------------------

def test_stream_added_later_with_a_multiple_of_the_task_count_joins_existing_tasks() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    before = grouper.group(ssps("a", 2))
    after = regroup(grouper, ssps("a", 2) + ssps("c", 4), before)
    assert table(after) == {
        "Partition 0": [("a", 0), ("c", 0), ("c", 2)],
        "Partition 1": [("a", 1), ("c", 1), ("c", 3)],
    }


def test_stream_added_later_with_another_count_is_grouped_by_the_base_grouper() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    before = grouper.group(ssps("a", 2))
    after = regroup(grouper, ssps("a", 2) + ssps("c", 3), before)
    assert table(after) == {
        "Partition 0": [("a", 0), ("c", 0)],
        "Partition 1": [("a", 1), ("c", 1)],
        "Partition 2": [("c", 2)],
    }


def test_stream_added_to_the_ssp_variant_gets_its_own_tasks() -> None:
    grouper = G.GroupBySystemStreamPartitionFixedTasks()
    before = grouper.group(ssps("a", 2, system="s"))
    after = regroup(grouper, ssps("a", 4, system="s") + ssps("c", 2, system="s"), before)
    assert {task: sorted((s.stream, s.partition) for s in g) for task, g in after.items()} == {
        "SystemStreamPartition [s, a, 0]": [("a", 0), ("a", 2)],
        "SystemStreamPartition [s, a, 1]": [("a", 1), ("a", 3)],
        "SystemStreamPartition [s, c, 0]": [("c", 0)],
        "SystemStreamPartition [s, c, 1]": [("c", 1)],
    }


def test_stream_removed_leaves_the_others_where_they_were() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    first = grouper.group(ssps("a", 2) + ssps("b", 2))
    expanded = regroup(grouper, ssps("a", 4) + ssps("b", 2), first)
    after = regroup(grouper, ssps("a", 4), expanded)
    assert table(after) == {
        "Partition 0": [("a", 0), ("a", 2)],
        "Partition 1": [("a", 1), ("a", 3)],
    }


def test_expanded_added_stream_keeps_its_keys_on_the_joined_tasks() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    joined = regroup(grouper, ssps("a", 2) + ssps("c", 4), grouper.group(ssps("a", 2)))
    after = regroup(grouper, ssps("a", 2) + ssps("c", 8), joined)
    assert table(after) == {
        "Partition 0": [("a", 0)] + [("c", p) for p in (0, 2, 4, 6)],
        "Partition 1": [("a", 1)] + [("c", p) for p in (1, 3, 5, 7)],
    }


# -- refusals -----------------------------------------------------------------------------------

def test_4_to_6_is_refused_naming_stream_counts_and_remedy() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    before = grouper.group(ssps("events", 4))
    with pytest.raises(G.ExpansionError) as error:
        regroup(grouper, ssps("events", 6), before)
    message = str(error.value)
    assert "local.events" in message
    assert "from 4 to 6" in message
    assert "multiple of 4" in message and "e.g. 8" in message
    assert isinstance(error.value, ValueError)


def test_4_to_2_is_refused_naming_stream_counts_and_remedy() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    before = grouper.group(ssps("events", 4))
    with pytest.raises(G.ExpansionError) as error:
        regroup(grouper, ssps("events", 2), before)
    message = str(error.value)
    assert "local.events" in message and "from 4 to 2" in message
    assert "Restore local.events to 4 partitions" in message


def test_6_after_2_to_4_is_accepted_because_6_is_a_multiple_of_the_two_tasks() -> None:
    grouper = G.GroupByPartitionFixedTasks()
    expanded = regroup(grouper, ssps("e", 4), grouper.group(ssps("e", 2)))
    after = regroup(grouper, ssps("e", 6), expanded)
    assert table(after) == {
        "Partition 0": [("e", 0), ("e", 2), ("e", 4)],
        "Partition 1": [("e", 1), ("e", 3), ("e", 5)],
    }


def test_default_algorithm_maps_modulo_the_initial_count() -> None:
    algorithm = G.DefaultPartitionExpansionAlgorithm()
    assert [algorithm.partition_before_expansion(p, 8, 2) for p in range(8)] == [
        0, 1, 0, 1, 0, 1, 0, 1,
    ]
    assert algorithm.partition_before_expansion(1, 2, 2) == 1
    with pytest.raises(G.ExpansionError, match="not a multiple of 4"):
        algorithm.partition_before_expansion(0, 6, 4)
    with pytest.raises(G.ExpansionError, match="decreased from 4 to 2"):
        algorithm.partition_before_expansion(0, 2, 4)


def test_a_custom_expansion_algorithm_is_used() -> None:
    class Halves:
        """Partition p of 2n came from p // 2 (a range partitioner's split)."""

        def partition_before_expansion(self, partition: int, current: int, initial: int) -> int:
            return partition * initial // current

    grouper = G.GroupByPartitionFixedTasks(expansion=Halves())
    after = regroup(grouper, ssps("e", 4), grouper.group(ssps("e", 2)))
    assert table(after) == {"Partition 0": [("e", 0), ("e", 1)],
                            "Partition 1": [("e", 2), ("e", 3)]}


# -- properties --------------------------------------------------------------------------------

@st.composite
def expansion_histories(draw: st.DrawFn) -> tuple[dict[str, int], list[dict[str, int]]]:
    """Streams with initial counts, then steps multiplying some streams' counts."""
    names = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True))
    initial = {name: draw(st.integers(1, 6)) for name in names}
    steps: list[dict[str, int]] = []
    counts = dict(initial)
    for _ in range(draw(st.integers(1, 4))):
        grown = draw(st.lists(st.sampled_from(names), unique=True))
        for name in grown:
            counts[name] *= draw(st.sampled_from([2, 3]))
        steps.append(dict(counts))
    return initial, steps


def all_ssps(counts: dict[str, int]) -> list[SSP]:
    return [ssp for name, count in sorted(counts.items()) for ssp in ssps(name, count)]


@pytest.mark.parametrize(
    "grouper", [G.GroupByPartitionFixedTasks(), G.GroupBySystemStreamPartitionFixedTasks()]
)
@settings(max_examples=150, deadline=None)
@given(history=expansion_histories(), hashes=st.lists(st.integers(0, 10**6), min_size=1,
                                                      max_size=25))
def test_keys_never_change_task_under_multiplicative_expansion(
    grouper: G.SspGrouper, history: tuple[dict[str, int], list[dict[str, int]]],
    hashes: list[int],
) -> None:
    initial, steps = history
    grouping = grouper.group(all_ssps(initial))
    task_count = len(grouping)
    home = {(name, h): G.ssp_task_mapping(grouping)[SSP("local", name, h % count)]
            for name, count in initial.items() for h in hashes}
    for counts in steps:
        grouping = regroup(grouper, all_ssps(counts), grouping)
        mapping = G.ssp_task_mapping(grouping)
        assert len(grouping) == task_count
        assert sorted(mapping) == sorted(all_ssps(counts))  # every SSP in exactly one task
        for (name, h), task in home.items():
            assert mapping[SSP("local", name, h % counts[name])] == task


@settings(max_examples=150, deadline=None)
@given(history=expansion_histories(), hashes=st.lists(st.integers(0, 10**6), min_size=1,
                                                      max_size=25))
def test_copartitioned_streams_keep_a_keys_partitions_in_one_task(
    history: tuple[dict[str, int], list[dict[str, int]]], hashes: list[int]
) -> None:
    initial, steps = history
    grouper = G.GroupByPartitionFixedTasks()
    grouping = grouper.group(all_ssps(initial))
    for counts in steps:
        grouping = regroup(grouper, all_ssps(counts), grouping)
        mapping = G.ssp_task_mapping(grouping)
        for h in hashes:
            for a in initial:
                for b in initial:
                    if initial[a] == initial[b]:
                        assert (mapping[SSP("local", a, h % counts[a])]
                                == mapping[SSP("local", b, h % counts[b])])


@pytest.mark.parametrize(
    "grouper", [G.GroupByPartitionFixedTasks(), G.GroupBySystemStreamPartitionFixedTasks(),
                G.GroupByPartition(), G.AllSspToSingleTask()]
)
@settings(max_examples=60, deadline=None)
@given(history=expansion_histories(), seed=st.integers(0, 2**32))
def test_output_does_not_depend_on_input_order(
    grouper: G.SspGrouper, history: tuple[dict[str, int], list[dict[str, int]]], seed: int
) -> None:
    initial, steps = history
    shuffler = random.Random(seed)
    previous = G.ssp_task_mapping(grouper.group(all_ssps(initial)))
    current = all_ssps(steps[-1] if grouper.__class__.__name__.endswith("Tasks") else initial)
    shuffled_current = current[:]
    shuffler.shuffle(shuffled_current)
    shuffled_previous = list(previous.items())
    shuffler.shuffle(shuffled_previous)
    straight = grouper.group(current, previous)
    mixed = grouper.group(shuffled_current, dict(shuffled_previous))
    assert straight == mixed
    assert list(straight) == list(mixed)
