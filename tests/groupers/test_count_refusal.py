"""`count_refusal`: whether a stream's tasks can take a new partition count, asked of the
grouper as data in, answer out — and always the answer `group` itself gives.

Exact tables for the rules of `partition_before_expansion` (multiples of the count the keys
began in, no decrease), then hypothesis properties: for every history of expansions and
every next count of one stream, the check refuses exactly the counts `group` refuses, with
the same message.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fixed_tasks import Ranges, Seeded, all_ssps, expand, groupers_under_test, histories

import groupers as G

TWO = {0: "Partition 0", 1: "Partition 1"}
"""A stream that began in 2 partitions, one task each."""


def refusal(grouper: G.ExpandingGrouper, previous: Mapping[int, str], previous_count: int,
            count: int) -> str | None:
    error = grouper.count_refusal("local.e", previous, previous_count, count)
    return None if error is None else str(error)


@pytest.mark.parametrize(("count", "refused"), [
    (1, "stream local.e: partition count went from 2 to 1; a decrease drops the keys of the "
        "removed partitions. Restore local.e to 2 partitions (or a multiple of 2) — "
        "partition counts may only grow"),
    (2, None),
    (3, "stream local.e: partition count went from 2 to 3, refused (2 tasks consume it): "
        "partition count 3 is not a multiple of 2: keys would change tasks; expand to a "
        "multiple of 2 (e.g. 4), or re-key the job's state offline to a task count that "
        "divides 3"),
    (4, None),
    (5, "stream local.e: partition count went from 2 to 5, refused (2 tasks consume it): "
        "partition count 5 is not a multiple of 2: keys would change tasks; expand to a "
        "multiple of 2 (e.g. 6), or re-key the job's state offline to a task count that "
        "divides 5"),
    (6, None),
    (64, None),
])
def test_two_tasks_of_a_stream_that_began_in_2_partitions_map_every_multiple_of_2(
        count: int, refused: str | None) -> None:
    assert refusal(G.GroupByPartitionFixedTasks(), TWO, 2, count) == refused


def test_the_rule_follows_the_count_keys_began_in_not_the_count_now() -> None:
    """After 2 → 4 (partition p with the task of p mod 2), 6 maps and 5 does not."""
    grown = {p: f"Partition {p % 2}" for p in range(4)}
    grouper = G.GroupByPartitionFixedTasks()
    assert [count for count in range(1, 13) if refusal(grouper, grown, 4, count) is None] == [
        4, 6, 8, 10, 12]


def test_a_decrease_below_1_is_refused_as_a_decrease() -> None:
    assert refusal(G.GroupByPartitionFixedTasks(), TWO, 2, 0) == (
        "stream local.e: partition count went from 2 to 0; a decrease drops the keys of the "
        "removed partitions. Restore local.e to 2 partitions (or a multiple of 2) — "
        "partition counts may only grow")


def test_a_stream_new_to_the_job_takes_any_count() -> None:
    assert refusal(G.GroupByPartitionFixedTasks(), {}, 0, 3) is None


def test_a_history_missing_partitions_is_refused_naming_them() -> None:
    assert refusal(G.GroupByPartitionFixedTasks(), TWO, 4, 8) == (
        "stream local.e: the previous job model gives it 4 partitions but no task for "
        "partition(s) [2, 3]; the SSP → task history is incomplete — restore the "
        "coordinator stream or start the job afresh")


def test_tasks_holding_ranges_of_4_partitions_refuse_6() -> None:
    """Two tasks, but keys began in 4 partitions: 6 is not a multiple of 4."""
    ranges = {0: "Range 0", 1: "Range 0", 2: "Range 1", 3: "Range 1"}
    grouper = G.FixedTasks(Ranges(width=2))
    assert refusal(grouper, ranges, 4, 8) is None
    assert (refusal(grouper, ranges, 4, 6) or "").startswith(
        "stream local.e: partition count went from 4 to 6, refused (2 tasks consume it): "
        "partition count 6 is not a multiple of 4")


def test_a_custom_algorithm_decides_what_maps() -> None:
    class Halves:
        """Partition p of n came from p * initial // n: every multiple maps, others not."""

        def partition_before_expansion(self, partition: int, current: int, initial: int
                                       ) -> int:
            if current % initial:
                raise G.ExpansionError(f"{current} is not a multiple of {initial}")
            return partition * initial // current

    grouper = G.FixedTasks(G.GroupByPartition(), expansion=Halves())
    assert refusal(grouper, TWO, 2, 4) is None
    assert refusal(grouper, TWO, 2, 3) == (
        "stream local.e: partition count went from 2 to 3, refused (2 tasks consume it): "
        "3 is not a multiple of 2")


def test_groupers_that_regroup_on_every_model_map_every_count() -> None:
    for grouper in (G.GroupByPartition(), G.GroupBySystemStreamPartition(),
                    G.AllSspToSingleTask()):
        assert [refusal(grouper, TWO, 2, count) for count in range(1, 8)] == [None] * 7


# -- properties ------------------------------------------------------------------------------

def _stream_tasks(mapping: Mapping[G.SystemStreamPartition, str], name: str) -> dict[int, str]:
    return {ssp.partition: task for ssp, task in mapping.items() if ssp.stream == name}


@settings(max_examples=200, deadline=None)
@given(grouper=groupers_under_test, history=histories(), data=st.data())
def test_the_check_refuses_exactly_the_counts_group_refuses_with_its_message(
        grouper: G.FixedTasks, history: tuple[dict[str, int], list[dict[str, int]]],
        data: st.DataObject) -> None:
    initial, steps = history
    grouping, counts = grouper.group(all_ssps(initial)), initial
    for step in steps:
        grouping, counts = expand(grouper, grouping, counts, step), step
    name = data.draw(st.sampled_from(sorted(counts)))
    count = data.draw(st.integers(1, 4 * counts[name] + 3))
    mapping = G.ssp_task_mapping(grouping)
    answer = grouper.count_refusal(f"local.{name}", _stream_tasks(mapping, name),
                                   counts[name], count)
    try:
        expand(grouper, grouping, counts, {**counts, name: count})
    except G.ExpansionError as refused:
        assert answer is not None and str(answer) == str(refused)
    else:
        assert answer is None


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10**6), tasks=st.integers(1, 5), initial=st.integers(1, 6),
       count=st.integers(1, 30))
def test_a_user_grouper_wrapped_is_checked_as_it_is_grouped(
        seed: int, tasks: int, initial: int, count: int) -> None:
    grouper = G.FixedTasks(Seeded(seed, tasks))
    first = grouper.group(all_ssps({"e": initial}))
    answer = grouper.count_refusal("local.e", _stream_tasks(G.ssp_task_mapping(first), "e"),
                                   initial, count)
    try:
        expand(grouper, first, {"e": initial}, {"e": count})
    except G.ExpansionError as refused:
        assert str(answer) == str(refused)
    else:
        assert answer is None
