"""KAFKA-5337 lag-aware assignor: the document's example, lag rule, edge cases, properties."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupers as G
from groupers import TopicPartition as TP


def assign(counts, subscriptions, lags=None) -> dict[str, list[TP]]:
    return G.LagAwareAssignor().assign(counts, subscriptions, lags or {})


def table(result: Mapping[str, list[TP]]) -> dict[str, list[str]]:
    """Member → ``topic-partition`` strings: the table to write out by hand."""
    return {member: [str(tp) for tp in tps] for member, tps in result.items()}


def total_lag(result: Mapping[str, list[TP]], lags: Mapping[TP, int]) -> dict[str, int]:
    return {member: sum(lags.get(tp, 0) for tp in tps) for member, tps in result.items()}


# -- the document ---------------------------------------------------------------------------

def test_document_example_balances_lag_where_range_and_round_robin_do_not() -> None:
    lags = {TP("t0", 0): 100_000, TP("t0", 1): 60_000, TP("t0", 2): 50_000}
    result = assign({"t0": 3}, {"C0": ["t0"], "C1": ["t0"]}, lags)
    assert table(result) == {"C0": ["t0-0"], "C1": ["t0-1", "t0-2"]}
    assert total_lag(result, lags) == {"C0": 100_000, "C1": 110_000}


def test_count_balance_comes_before_lag_balance() -> None:
    lags = {TP("t", 0): 1_000, TP("t", 1): 1, TP("t", 2): 1, TP("t", 3): 1}
    assert table(assign({"t": 4}, {"C0": ["t"], "C1": ["t"]}, lags)) == {
        "C0": ["t-0", "t-3"], "C1": ["t-1", "t-2"],
    }


def test_zero_lags_still_balance_counts() -> None:
    members = {m: ["t"] for m in ("C0", "C1", "C2")}
    assert table(assign({"t": 7}, members)) == {
        "C0": ["t-0", "t-3", "t-6"], "C1": ["t-1", "t-4"], "C2": ["t-2", "t-5"],
    }


def test_equal_lags_go_to_the_lower_partition_number_first() -> None:
    lags = {TP("t", 0): 5, TP("t", 1): 9, TP("t", 2): 5}
    assert table(assign({"t": 3}, {"C0": ["t"], "C1": ["t"]}, lags)) == {
        "C0": ["t-1"], "C1": ["t-0", "t-2"],
    }


def test_counters_are_per_topic_so_each_topic_starts_from_the_smallest_member_id() -> None:
    members = {"C0": ["a", "b", "c"], "C1": ["a", "b", "c"]}
    assert table(assign({"a": 1, "b": 1, "c": 1}, members)) == {
        "C0": ["a-0", "b-0", "c-0"], "C1": [],
    }


def test_a_topic_is_shared_only_among_its_subscribers() -> None:
    subscriptions = {"C0": ["a"], "C1": ["a", "b"], "C2": ["b"]}
    lags = {TP("b", 0): 10}
    assert table(assign({"a": 2, "b": 3}, subscriptions, lags)) == {
        "C0": ["a-0"], "C1": ["a-1", "b-0"], "C2": ["b-1", "b-2"],
    }


def test_subscription_objects_and_plain_collections_are_accepted() -> None:
    subscriptions = {"C0": G.Subscription(["t"], [TP("t", 1)], generation=3), "C1": ("t",)}
    assert table(assign({"t": 2}, subscriptions)) == {"C0": ["t-0"], "C1": ["t-1"]}


def test_every_member_appears_even_without_partitions() -> None:
    assert assign({"t": 1}, {"C0": ["t"], "C1": ["t"], "C2": []}) == {
        "C0": [TP("t", 0)], "C1": [], "C2": [],
    }


def test_lags_of_unknown_partitions_are_ignored() -> None:
    lags = {TP("t", 7): 50, TP("other", 0): 9}
    assert table(assign({"t": 2}, {"C0": ["t"]}, lags)) == {"C0": ["t-0", "t-1"]}


# -- partition_lag --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("begin", "end", "committed", "reset", "lag"),
    [
        (0, 500, 120, "latest", 380),
        (0, 500, 120, "earliest", 380),
        (0, 500, 600, "latest", 0),
        (100, 500, None, "latest", 0),
        (100, 500, None, "earliest", 400),
        (100, 500, None, "none", 400),
        (100, 500, None, "LATEST", 0),
    ],
)
def test_partition_lag_follows_the_documents_rule(begin, end, committed, reset, lag) -> None:
    assert G.partition_lag(begin, end, committed, reset) == lag


def test_partition_lag_defaults_to_latest() -> None:
    assert G.partition_lag(0, 10, None) == 0


@pytest.mark.parametrize(("begin", "end", "committed"), [(-1, 5, None), (6, 5, None), (0, 5, -1)])
def test_partition_lag_rejects_inconsistent_offsets(begin, end, committed) -> None:
    with pytest.raises(G.AssignmentError):
        G.partition_lag(begin, end, committed)


# -- bad input ----------------------------------------------------------------------------

def test_subscription_to_unknown_topic_names_member_and_topic() -> None:
    with pytest.raises(G.AssignmentError, match=r"'C1'.*'b'.*partitions_per_topic"):
        assign({"a": 1}, {"C0": ["a"], "C1": ["a", "b"]})


def test_negative_partition_count_names_the_topic() -> None:
    with pytest.raises(G.AssignmentError, match=r"'a'.*negative"):
        assign({"a": -2}, {"C0": ["a"]})


def test_negative_lag_names_the_partition() -> None:
    with pytest.raises(G.AssignmentError, match=r"a-1.*negative lag"):
        assign({"a": 2}, {"C0": ["a"]}, {TP("a", 1): -5})


def test_a_bare_string_subscription_is_rejected() -> None:
    with pytest.raises(G.AssignmentError, match=r"'C0'.*collection of topic names"):
        assign({"t0": 1}, {"C0": "t0"})


# -- properties -----------------------------------------------------------------------------

TOPICS = ("a", "b", "c")
MEMBERS = tuple(f"C{i}" for i in range(6))


@st.composite
def groups(draw: st.DrawFn):
    counts = {t: draw(st.integers(0, 12)) for t in TOPICS}
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=6, unique=True))
    subscriptions = {m: sorted(draw(st.sets(st.sampled_from(TOPICS)))) for m in members}
    lag = st.integers(0, 5) | st.integers(0, 1_000_000)
    lags = {TP(t, p): draw(lag) for t in TOPICS for p in range(counts[t]) if draw(st.booleans())}
    return counts, subscriptions, lags


def by_topic(result, topic):
    return {m: [tp for tp in tps if tp.topic == topic] for m, tps in result.items()}


def ranked(topic, count, lags):
    """The topic's partitions in the order the document hands them out."""
    return sorted((TP(topic, p) for p in range(count)), key=lambda tp: (-lags.get(tp, 0), tp))


PROPERTY = settings(max_examples=100, deadline=None)


@PROPERTY
@given(groups())
def test_each_subscribed_topic_partition_goes_to_exactly_one_subscriber(group) -> None:
    counts, subscriptions, lags = group
    result = assign(counts, subscriptions, lags)
    assert list(result) == sorted(subscriptions)
    wanted = {t for topics in subscriptions.values() for t in topics}
    handed = [tp for tps in result.values() for tp in tps]
    assert sorted(handed) == [TP(t, p) for t in sorted(wanted) for p in range(counts[t])]
    for member, tps in result.items():
        assert tps == sorted(tps)
        assert all(tp.topic in subscriptions[member] for tp in tps)


@PROPERTY
@given(groups())
def test_counts_per_topic_differ_by_at_most_one_among_its_subscribers(group) -> None:
    counts, subscriptions, lags = group
    result = assign(counts, subscriptions, lags)
    for topic in TOPICS:
        sizes = [len(tps) for m, tps in by_topic(result, topic).items()
                 if topic in subscriptions[m]]
        assert not sizes or max(sizes) - min(sizes) <= 1


@PROPERTY
@given(groups(), st.randoms(use_true_random=False))
def test_equal_input_in_any_order_gives_equal_output(group, rnd) -> None:
    counts, subscriptions, lags = group

    def reorder(items):
        return dict(rnd.sample(list(items), len(items)))

    shuffled = {m: rnd.sample(ts, len(ts)) for m, ts in reorder(subscriptions.items()).items()}
    assert assign(reorder(counts.items()), shuffled, reorder(lags.items())) == assign(
        counts, subscriptions, lags)


@PROPERTY
@given(groups())
def test_the_two_largest_lags_of_a_topic_go_to_different_members(group) -> None:
    counts, subscriptions, lags = group
    result = assign(counts, subscriptions, lags)
    for topic in TOPICS:
        subscribers = [m for m in subscriptions if topic in subscriptions[m]]
        if len(subscribers) >= 2 and counts[topic] >= 2:
            first, second = ranked(topic, counts[topic], lags)[:2]
            owner = {tp: m for m, tps in result.items() for tp in tps}
            assert owner[first] != owner[second]


@PROPERTY
@given(groups())
def test_partitions_go_out_in_rounds_least_loaded_member_takes_the_largest_lag(group) -> None:
    """Round r hands the r-th block of k ranked partitions one to each of the k subscribers;
    within a round, a member with less lag of the topic so far gets a partition at least as
    lagged as a member with more."""
    counts, subscriptions, lags = group
    result = assign(counts, subscriptions, lags)
    for topic in TOPICS:
        subscribers = sorted(m for m in subscriptions if topic in subscriptions[m])
        if not subscribers:
            continue
        k = len(subscribers)
        owner = {tp: m for m, tps in by_topic(result, topic).items() for tp in tps}
        so_far = dict.fromkeys(subscribers, 0)
        order = ranked(topic, counts[topic], lags)
        for start in range(0, len(order), k):
            block = order[start:start + k]
            takers = [owner[tp] for tp in block]
            assert len(set(takers)) == len(takers)
            for i, j in zip(range(len(block)), range(1, len(block)), strict=False):
                assert (so_far[takers[i]], takers[i]) < (so_far[takers[j]], takers[j])
            for tp, member in zip(block, takers, strict=True):
                so_far[member] += lags.get(tp, 0)
