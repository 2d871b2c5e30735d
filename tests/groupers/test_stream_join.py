"""KIP-315 stream-join sticky assignor: the document's tables, the edge cases, properties."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupers as G
from groupers import TopicPartition as TP

JOIN = ("clicks", "impressions")


def assign(counts: Mapping[str, int], subscriptions: Mapping[str, G.JoinSubscription]):
    return G.StreamJoinStickyAssignor().assign(counts, subscriptions)


def numbers(result: Mapping[str, G.JoinAssignment]) -> dict[str, tuple[int, ...]]:
    """Member → partition numbers: the table to write out by hand."""
    return {member: a.partition_numbers for member, a in result.items()}


def owning(owned: Mapping[str, set[int]], epoch: int, topics=JOIN) -> dict[str, G.JoinSubscription]:
    return {member: G.JoinSubscription(topics, nums, epoch) for member, nums in owned.items()}


# -- the document's example ---------------------------------------------------------------

def test_document_example_member_leaves_and_nobody_else_moves() -> None:
    before = {"A": {0, 1, 2}, "B": {3, 4, 5}, "C": {6, 7}}  # D ({8, 9}) has left
    result = assign({"impressions": 10, "clicks": 10}, owning(before, epoch=4))
    assert numbers(result) == {"A": (0, 1, 2, 9), "B": (3, 4, 5), "C": (6, 7, 8)}
    assert result["C"].topic_partitions == (
        TP("clicks", 6), TP("clicks", 7), TP("clicks", 8),
        TP("impressions", 6), TP("impressions", 7), TP("impressions", 8),
    )
    assert sorted(len(a.partition_numbers) for a in result.values()) == [3, 3, 4]


def test_member_joins_and_takes_one_surplus_number_from_each_largest_holder() -> None:
    before = {"A": {0, 1, 2}, "B": {3, 4, 5}, "C": {6, 7}, "D": {8, 9}, "E": set()}
    result = assign({"impressions": 10, "clicks": 10}, owning(before, epoch=1))
    assert numbers(result) == {
        "A": (0, 1), "B": (3, 4), "C": (6, 7), "D": (8, 9), "E": (2, 5),
    }


def test_fresh_assignment_deals_numbers_round_robin() -> None:
    fresh = {member: G.JoinSubscription(JOIN) for member in "ABC"}
    assert numbers(assign({"impressions": 10, "clicks": 10}, fresh)) == {
        "A": (0, 3, 6, 9), "B": (1, 4, 7), "C": (2, 5, 8),
    }


def test_steal_list_is_refreshed_after_every_steal() -> None:
    subscriptions = owning({"A": {0, 1, 2}, "B": {3}, "C": set(), "D": set()}, epoch=1)
    assert numbers(assign({"impressions": 4, "clicks": 4}, subscriptions)) == {
        "A": (0,), "B": (3,), "C": (2,), "D": (1,),
    }


# -- previous ownership and epochs --------------------------------------------------------

def test_lower_epoch_claim_loses_to_higher_epoch_claim() -> None:
    subscriptions = {
        "A": G.JoinSubscription(JOIN, {0, 1}, epoch=3),
        "B": G.JoinSubscription(JOIN, {1, 2}, epoch=2),  # a zombie still claiming 1
    }
    assert numbers(assign({"impressions": 4, "clicks": 4}, subscriptions)) == {
        "A": (0, 1), "B": (2, 3),
    }


def test_equal_epoch_claims_leave_the_number_unowned() -> None:
    subscriptions = {
        "A": G.JoinSubscription(JOIN),
        "B": G.JoinSubscription(JOIN, {0}, epoch=1),
        "C": G.JoinSubscription(JOIN, {0}, epoch=1),
    }
    assert numbers(assign({"impressions": 2, "clicks": 2}, subscriptions)) == {
        "A": (0,), "B": (1,), "C": (),
    }


def test_result_epoch_is_max_subscription_epoch_plus_one_for_every_member() -> None:
    subscriptions = {
        "A": G.JoinSubscription(JOIN, {0}, epoch=4),
        "B": G.JoinSubscription(JOIN, {1}, epoch=7),
        "C": G.JoinSubscription(JOIN),
    }
    result = assign({"impressions": 3, "clicks": 3}, subscriptions)
    assert {member: a.epoch for member, a in result.items()} == {"A": 8, "B": 8, "C": 8}


def test_first_assignment_has_epoch_zero() -> None:
    result = assign({"t": 1}, {"A": G.JoinSubscription(["t"])})
    assert result == {"A": G.JoinAssignment((0,), (TP("t", 0),), epoch=0)}


# -- eligibility and topics ---------------------------------------------------------------

def test_eligible_numbers_are_bounded_by_the_smallest_topic() -> None:
    result = assign({"clicks": 10, "impressions": 8},
                    {"A": G.JoinSubscription(JOIN), "B": G.JoinSubscription(JOIN)})
    assert numbers(result) == {"A": (0, 2, 4, 6), "B": (1, 3, 5, 7)}
    assert TP("clicks", 8) not in result["A"].topic_partitions + result["B"].topic_partitions


def test_owned_number_equal_to_the_eligible_count_is_not_eligible() -> None:
    subscriptions = {
        "A": G.JoinSubscription(JOIN, {8, 9}, epoch=1),
        "B": G.JoinSubscription(JOIN, {0}, epoch=1),
    }
    result = assign({"clicks": 10, "impressions": 8}, subscriptions)
    assert numbers(result) == {"A": (1, 2, 4, 6), "B": (0, 3, 5, 7)}


def test_member_with_an_extra_topic_gets_only_its_numbers_of_that_topic() -> None:
    subscriptions = {
        "A": G.JoinSubscription(JOIN),
        "B": G.JoinSubscription([*JOIN, "views"]),
    }
    result = assign({"impressions": 4, "clicks": 4, "views": 4}, subscriptions)
    assert result["A"].topic_partitions == (
        TP("clicks", 0), TP("clicks", 2), TP("impressions", 0), TP("impressions", 2),
    )
    assert result["B"].topic_partitions == (
        TP("clicks", 1), TP("clicks", 3), TP("impressions", 1), TP("impressions", 3),
        TP("views", 1), TP("views", 3),
    )


def test_member_subscribed_to_nothing_appears_with_no_numbers() -> None:
    subscriptions = {"A": G.JoinSubscription(JOIN), "B": G.JoinSubscription([], {1}, epoch=2)}
    result = assign({"impressions": 2, "clicks": 2}, subscriptions)
    assert result["B"] == G.JoinAssignment((), (), epoch=3)
    assert numbers(result) == {"A": (0, 1), "B": ()}


def test_topic_with_no_partitions_leaves_every_member_empty() -> None:
    result = assign({"impressions": 0, "clicks": 5},
                    {"A": G.JoinSubscription(JOIN), "B": G.JoinSubscription(JOIN)})
    assert numbers(result) == {"A": (), "B": ()}


def test_no_members_gives_an_empty_result() -> None:
    assert assign({"impressions": 4}, {}) == {}


# -- bad input ----------------------------------------------------------------------------

def test_subscription_to_unknown_topic_names_member_and_topic() -> None:
    with pytest.raises(G.AssignmentError, match=r"'B'.*'views'.*partitions_per_topic"):
        assign({"clicks": 2}, {"A": G.JoinSubscription(["clicks"]),
                               "B": G.JoinSubscription(["clicks", "views"])})


def test_negative_partition_count_names_the_topic() -> None:
    with pytest.raises(G.AssignmentError, match=r"'clicks'.*negative"):
        assign({"clicks": -1}, {"A": G.JoinSubscription(["clicks"])})


def test_negative_owned_number_names_the_member() -> None:
    with pytest.raises(G.AssignmentError, match=r"'A'.*-3"):
        assign({"clicks": 2}, {"A": G.JoinSubscription(["clicks"], {-3}, epoch=1)})


# -- properties -----------------------------------------------------------------------------

TOPICS = ("a", "b", "c")


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, G.JoinSubscription]]:
    counts = {t: draw(st.integers(0, 14)) for t in TOPICS}
    members = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]),
                            min_size=1, max_size=8, unique=True))
    subscriptions = {
        m: G.JoinSubscription(
            draw(st.sets(st.sampled_from(TOPICS), min_size=0 if i == 0 else 1)),
            draw(st.sets(st.integers(0, 16), max_size=8)),
            draw(st.integers(-1, 3)),
        )
        for i, m in enumerate(members)
    }
    return counts, subscriptions


def eligible_count(counts, subscriptions) -> int:
    return min((counts[t] for s in subscriptions.values() for t in s.topics), default=0)


def valid_owned(counts, subscriptions) -> dict[str, set[int]]:
    """The numbers each drafting member truly owned: eligible and out-ranking every rival."""
    eligible = eligible_count(counts, subscriptions)
    return {
        m: {n for n in s.owned if n < eligible and all(
            o.epoch < s.epoch for r, o in subscriptions.items() if r != m and n in o.owned)}
        for m, s in subscriptions.items() if s.topics
    }


PROPERTY = settings(max_examples=100, deadline=None)


@PROPERTY
@given(groups())
def test_every_eligible_number_goes_to_exactly_one_subscribed_member(group) -> None:
    counts, subscriptions = group
    result = assign(counts, subscriptions)
    assert list(result) == sorted(subscriptions)
    given_out = [n for a in result.values() for n in a.partition_numbers]
    drafting = any(s.topics for s in subscriptions.values())
    expected = list(range(eligible_count(counts, subscriptions))) if drafting else []
    assert sorted(given_out) == expected


@PROPERTY
@given(groups())
def test_topic_partitions_are_the_members_numbers_of_each_of_its_topics(group) -> None:
    counts, subscriptions = group
    for member, a in assign(counts, subscriptions).items():
        assert a.partition_numbers == tuple(sorted(a.partition_numbers))
        assert a.topic_partitions == tuple(
            TP(t, n) for t in sorted(subscriptions[member].topics) for n in a.partition_numbers)
        assert all(tp.partition < counts[tp.topic] for tp in a.topic_partitions)


@PROPERTY
@given(groups())
def test_sizes_of_subscribed_members_differ_by_at_most_one(group) -> None:
    counts, subscriptions = group
    result = assign(counts, subscriptions)
    sizes = [len(result[m].partition_numbers) for m, s in subscriptions.items() if s.topics]
    assert not sizes or max(sizes) - min(sizes) <= 1


@PROPERTY
@given(groups())
def test_each_member_keeps_as_much_of_its_valid_ownership_as_its_size_allows(group) -> None:
    """kept(m) = min(|valid owned(m)|, size(m)), and the larger sizes went where they keep most."""
    counts, subscriptions = group
    result = assign(counts, subscriptions)
    valid = valid_owned(counts, subscriptions)
    for member, owned in valid.items():
        size = len(result[member].partition_numbers)
        assert len(owned & set(result[member].partition_numbers)) == min(len(owned), size)
    if valid:
        base, extra = divmod(eligible_count(counts, subscriptions), len(valid))
        holdings = sorted((len(o) for o in valid.values()), reverse=True)
        best = sum(min(h, base + (i < extra)) for i, h in enumerate(holdings))
        kept = sum(len(o & set(result[m].partition_numbers)) for m, o in valid.items())
        assert kept == best


@PROPERTY
@given(groups(), st.randoms(use_true_random=False))
def test_equal_input_in_any_order_gives_equal_output(group, rnd) -> None:
    counts, subscriptions = group
    shuffled_members = list(subscriptions.items())
    rnd.shuffle(shuffled_members)
    shuffled_topics = list(counts.items())
    rnd.shuffle(shuffled_topics)
    reordered = {
        m: G.JoinSubscription(rnd.sample(sorted(s.topics), len(s.topics)),
                              rnd.sample(sorted(s.owned), len(s.owned)), s.epoch)
        for m, s in shuffled_members
    }
    assert assign(dict(shuffled_topics), reordered) == assign(counts, subscriptions)


@PROPERTY
@given(groups())
def test_every_member_gets_max_epoch_plus_one(group) -> None:
    counts, subscriptions = group
    expected = max(s.epoch for s in subscriptions.values()) + 1
    assert {a.epoch for a in assign(counts, subscriptions).values()} == {expected}


@PROPERTY
@given(st.integers(1, 40), st.integers(2, 8), st.data())
def test_a_member_leaving_moves_only_its_own_numbers(count, size, data) -> None:
    members = [f"m{i}" for i in range(size)]
    first = assign({"a": count, "b": count}, {m: G.JoinSubscription("ab") for m in members})
    leaving = data.draw(st.sampled_from(members))
    after = assign({"a": count, "b": count}, {
        m: G.JoinSubscription("ab", first[m].partition_numbers, first[m].epoch)
        for m in members if m != leaving
    })
    for member, a in after.items():
        assert set(first[member].partition_numbers) <= set(a.partition_numbers)
