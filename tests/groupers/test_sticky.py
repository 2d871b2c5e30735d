"""KIP-54 sticky assignor: the document's examples as exact tables, plus properties."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupers as G
from groupers import Subscription as Sub
from groupers import TopicPartition as TP

Assignment = dict[str, list[TP]]
Group = tuple[dict[str, int], dict[str, set[str]]]
Case = tuple[dict[str, int], dict[str, Sub]]


def assign(partitions: Mapping[str, int], subscriptions: Mapping[str, Sub]) -> Assignment:
    return G.StickyAssignor().assign(partitions, subscriptions)


def table(assignment: Assignment) -> dict[str, list[str]]:
    """Member → ``topic-partition`` names: easy to write out by hand."""
    return {member: [str(tp) for tp in tps] for member, tps in assignment.items()}


def tps(*names: str) -> list[TP]:
    """``tps("t0-1", "t1-0")`` → the TopicPartitions with those names."""
    return [TP(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in names]


def owning(
    assignment: Assignment, topics: Mapping[str, Iterable[str]], generation: int = 1
) -> dict[str, Sub]:
    """The next rebalance's subscriptions: each member owns what ``assignment`` gave it."""
    return {m: Sub(ts, assignment.get(m, []), generation) for m, ts in topics.items()}


# -- equal subscriptions ---------------------------------------------------------------------

TWO_BY_THREE = {"t0": 3, "t1": 3}
BOTH = ["t0", "t1"]


def test_fresh_assignment_deals_partitions_round_robin() -> None:
    result = assign(TWO_BY_THREE, {m: Sub(BOTH) for m in ("C0", "C1", "C2")})
    assert table(result) == {
        "C0": ["t0-0", "t1-0"],
        "C1": ["t0-1", "t1-1"],
        "C2": ["t0-2", "t1-2"],
    }


def test_member_leaving_lets_the_others_keep_all_they_had() -> None:
    first = assign(TWO_BY_THREE, {m: Sub(BOTH) for m in ("C0", "C1", "C2")})
    result = assign(TWO_BY_THREE, owning(first, {"C0": BOTH, "C1": BOTH}))
    assert table(result) == {
        "C0": ["t0-0", "t0-2", "t1-0"],
        "C1": ["t0-1", "t1-1", "t1-2"],
    }


def test_member_joining_receives_only_what_balance_requires() -> None:
    # The document's example 3: C2 joins C0 and C1 on two topics of two partitions.
    first = assign({"t0": 2, "t1": 2}, {"C0": Sub(BOTH), "C1": Sub(BOTH)})
    assert table(first) == {"C0": ["t0-0", "t1-0"], "C1": ["t0-1", "t1-1"]}
    result = assign({"t0": 2, "t1": 2}, owning(first, {"C0": BOTH, "C1": BOTH, "C2": BOTH}))
    assert table(result) == {"C0": ["t0-0", "t1-0"], "C1": ["t0-1"], "C2": ["t1-1"]}


def test_joining_member_takes_one_partition_from_each_member_over_quota() -> None:
    first = assign(TWO_BY_THREE, {m: Sub(BOTH) for m in ("C0", "C1", "C2")})
    result = assign(TWO_BY_THREE, owning(first, {m: BOTH for m in ("C0", "C1", "C2", "C3")}))
    # 6 partitions over 4 members: two keep 2, two have 1; only t1-2 moves.
    assert table(result) == {
        "C0": ["t0-0", "t1-0"],
        "C1": ["t0-1", "t1-1"],
        "C2": ["t0-2"],
        "C3": ["t1-2"],
    }


def test_reassigning_a_balanced_assignment_changes_nothing() -> None:
    first = assign({"t0": 5, "t1": 2}, {m: Sub(BOTH) for m in ("C0", "C1", "C2")})
    assert assign({"t0": 5, "t1": 2}, owning(first, {m: BOTH for m in first})) == first


# -- unequal subscriptions (general path) ----------------------------------------------------

MOTIVATION = {"t0": 1, "t1": 2, "t2": 3}
MOTIVATION_TOPICS = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}


def test_unequal_subscriptions_are_as_balanced_as_they_can_be() -> None:
    # The document's motivation: round robin gives C0 [t0-0], C1 [t1-0], C2 the other 4.
    result = assign(MOTIVATION, {m: Sub(ts) for m, ts in MOTIVATION_TOPICS.items()})
    assert table(result) == {
        "C0": ["t0-0"],
        "C1": ["t1-0", "t1-1"],
        "C2": ["t2-0", "t2-1", "t2-2"],
    }


def test_unequal_subscriptions_member_leaving_moves_only_its_partitions() -> None:
    first = assign(MOTIVATION, {m: Sub(ts) for m, ts in MOTIVATION_TOPICS.items()})
    survivors = {m: ts for m, ts in MOTIVATION_TOPICS.items() if m != "C0"}
    result = assign(MOTIVATION, owning(first, survivors))
    assert table(result) == {
        "C1": ["t0-0", "t1-0", "t1-1"],
        "C2": ["t2-0", "t2-1", "t2-2"],
    }


def test_unsubscribing_moves_partitions_only_as_balance_requires() -> None:
    previous = {"C0": tps("t0-0", "t1-0"), "C1": tps("t0-1", "t1-1")}
    result = assign({"t0": 2, "t1": 2}, owning(previous, {"C0": BOTH, "C1": ["t0"]}))
    # C1 drops t1-1, which only C0 can take; C0 (3) then hands t0-0 to C1 (1).
    assert table(result) == {"C0": ["t1-0", "t1-1"], "C1": ["t0-0", "t0-1"]}


def test_a_partition_is_not_passed_along_a_chain_of_members() -> None:
    # Balancing moves t1-0 C0 → C2 (C1 took both t0 partitions), then t1-1 C1 → C0. C0
    # would lose and gain t1, so t1-1 goes straight to C2 and C0 keeps t1-0.
    result = assign({"t0": 2, "t1": 3}, {
        "C0": Sub(["t1"], tps("t1-0", "t1-2"), generation=1),
        "C1": Sub(["t0", "t1"], tps("t1-1"), generation=1),
        "C2": Sub(["t1"]),
    })
    assert table(result) == {
        "C0": ["t1-0", "t1-2"],
        "C1": ["t0-0", "t0-1"],
        "C2": ["t1-1"],
    }


def test_member_subscribed_to_nothing_gets_an_empty_list() -> None:
    result = assign({"t0": 2}, {"C0": Sub(["t0"]), "C1": Sub([])})
    assert table(result) == {"C0": ["t0-0", "t0-1"], "C1": []}


def test_group_subscribed_to_nothing_gets_empty_lists() -> None:
    assert assign({"t0": 2}, {"C0": Sub([]), "C1": Sub([])}) == {"C0": [], "C1": []}


def test_empty_group_gets_an_empty_assignment() -> None:
    assert assign({"t0": 2}, {}) == {}


# -- ownership: generations, removed topics and partitions ----------------------------------

def test_higher_generation_wins_a_conflicting_claim() -> None:
    result = assign({"t0": 4}, {
        "C0": Sub(["t0"], tps("t0-0", "t0-1"), generation=2),
        "C1": Sub(["t0"], tps("t0-1", "t0-2"), generation=1),  # a zombie's stale claim
    })
    assert table(result) == {"C0": ["t0-0", "t0-1"], "C1": ["t0-2", "t0-3"]}


def test_equal_generation_claims_are_kept_by_neither_member() -> None:
    result = assign({"t0": 3}, {
        "C0": Sub(["t0"], tps("t0-0", "t0-1"), generation=3),
        "C1": Sub(["t0"], tps("t0-1", "t0-2"), generation=3),
        "C2": Sub(["t0"]),
    })
    assert table(result) == {"C0": ["t0-0"], "C1": ["t0-2"], "C2": ["t0-1"]}


def test_highest_claim_wins_even_after_a_tie_below_it() -> None:
    result = assign({"t0": 2}, {
        "C0": Sub(["t0"], tps("t0-0"), generation=1),
        "C1": Sub(["t0"], tps("t0-0"), generation=1),
        "C2": Sub(["t0"], tps("t0-0"), generation=2),
    })
    assert table(result) == {"C0": ["t0-1"], "C1": [], "C2": ["t0-0"]}


def test_partitions_of_a_removed_topic_are_dropped() -> None:
    previous = {"C0": tps("t0-0", "t1-0"), "C1": tps("t0-1", "t1-1")}
    result = assign({"t0": 2}, owning(previous, {"C0": ["t0"], "C1": ["t0"]}))
    assert table(result) == {"C0": ["t0-0"], "C1": ["t0-1"]}


def test_removed_partitions_are_dropped_and_the_rest_rebalanced() -> None:
    previous = {"C0": tps("t0-0", "t0-1"), "C1": tps("t0-2", "t0-3")}
    result = assign({"t0": 2}, owning(previous, {"C0": ["t0"], "C1": ["t0"]}))
    assert table(result) == {"C0": ["t0-0"], "C1": ["t0-1"]}


def test_new_partitions_go_to_the_members_below_quota() -> None:
    previous = {"C0": tps("t0-0", "t0-1"), "C1": tps("t0-2")}
    result = assign({"t0": 6}, owning(previous, {"C0": ["t0"], "C1": ["t0"]}))
    assert table(result) == {"C0": ["t0-0", "t0-1", "t0-3"], "C1": ["t0-2", "t0-4", "t0-5"]}


# -- bad input -------------------------------------------------------------------------------

def test_subscription_to_an_unknown_topic_names_member_and_topic() -> None:
    with pytest.raises(G.AssignmentError, match=r"member 'C1' subscribes to topic 'nope'"):
        assign({"t0": 1}, {"C0": Sub(["t0"]), "C1": Sub(["t0", "nope"])})


@pytest.mark.parametrize("count", [-1, 1.5, "3", True])
def test_bad_partition_count_names_the_topic(count: object) -> None:
    with pytest.raises(G.AssignmentError, match=r"partitions_per_topic\['t0'\]"):
        assign({"t0": count}, {"C0": Sub(["t0"])})  # type: ignore[dict-item]


def test_assignment_error_is_a_value_error() -> None:
    assert issubclass(G.AssignmentError, ValueError)


# -- properties ------------------------------------------------------------------------------

TOPICS = ["t0", "t1", "t2", "t3"]
MEMBERS = ["C0", "C1", "C2", "C3", "C4", "C5"]


@st.composite
def groups(draw: st.DrawFn, equal: bool | None = None) -> Group:
    """Partition counts and member → topics; ``equal``: everyone subscribes alike."""
    topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
    counts = {t: draw(st.integers(0, 7)) for t in topics}
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, unique=True))
    if equal is None:
        equal = draw(st.booleans())
    if equal:
        shared = draw(st.sets(st.sampled_from(topics), min_size=1))
        return counts, {m: set(shared) for m in members}
    return counts, {m: draw(st.sets(st.sampled_from(topics))) for m in members}


@st.composite
def rebalances(draw: st.DrawFn, equal: bool | None = None) -> Case:
    """A rebalance: either the result of an earlier one fed back, or arbitrary claims."""
    counts, topics = draw(groups(equal))
    if draw(st.booleans()):
        before_counts, before_topics = draw(groups())
        before = assign(before_counts, {m: Sub(ts) for m, ts in before_topics.items()})
        return counts, owning(before, topics)
    # Arbitrary claims: conflicts, unsubscribed or deleted topics, partitions out of range.
    claimable = [TP(t, p) for t in [*TOPICS, "gone"] for p in range(counts.get(t, 2) + 1)]
    return counts, {
        m: Sub(ts, draw(st.sets(st.sampled_from(claimable), max_size=10)),
               draw(st.integers(-1, 2)))
        for m, ts in topics.items()
    }


def valid_owned(counts: Mapping[str, int], subscriptions: Mapping[str, Sub]) -> dict[str, set[TP]]:
    """What each member may keep: its subscribed, existing claims; highest generation wins."""
    claims: dict[TP, list[tuple[int, str]]] = defaultdict(list)
    for m, sub in subscriptions.items():
        for tp in sub.owned:
            if tp.topic in sub.topics and 0 <= tp.partition < counts[tp.topic]:
                claims[tp].append((sub.generation, m))
    kept: dict[str, set[TP]] = {m: set() for m in subscriptions}
    for tp, claimants in claims.items():
        top = max(generation for generation, _ in claimants)
        winners = [m for generation, m in claimants if generation == top]
        if len(winners) == 1:
            kept[winners[0]].add(tp)
    return kept


def balance_score(sizes: list[int]) -> int:
    """The document's score: sum over member pairs of the difference in partition counts."""
    return sum(abs(a - b) for a, b in combinations(sizes, 2))


def all_subscribed_equally(subscriptions: Mapping[str, Sub]) -> bool:
    return len({sub.topics for sub in subscriptions.values()}) == 1


FAST = settings(max_examples=100, deadline=None)


@FAST
@given(rebalances())
def test_every_partition_of_a_subscribed_topic_goes_to_exactly_one_subscriber(case: Case) -> None:
    counts, subscriptions = case
    result = assign(counts, subscriptions)
    assert list(result) == sorted(subscriptions)
    for member, got in result.items():
        assert got == sorted(got)
        assert all(tp.topic in subscriptions[member].topics for tp in got)
    handed_out = [tp for got in result.values() for tp in got]
    wanted = {t for sub in subscriptions.values() for t in sub.topics}
    assert sorted(handed_out) == [TP(t, p) for t in sorted(wanted) for p in range(counts[t])]


@FAST
@given(rebalances())
def test_no_single_move_improves_the_balance_score(case: Case) -> None:
    counts, subscriptions = case
    result = assign(counts, subscriptions)
    sizes = {m: len(got) for m, got in result.items()}
    score = balance_score(list(sizes.values()))
    for giver, got in result.items():
        for tp in got:
            for taker, sub in subscriptions.items():
                if taker != giver and tp.topic in sub.topics:
                    moved = dict(sizes, **{giver: sizes[giver] - 1, taker: sizes[taker] + 1})
                    assert balance_score(list(moved.values())) >= score, (tp, giver, taker)
    if all_subscribed_equally(subscriptions):
        assert max(sizes.values()) - min(sizes.values()) <= 1


@FAST
@given(rebalances(equal=True))
def test_equal_subscriptions_keep_as_many_owned_partitions_as_the_quota_allows(case: Case) -> None:
    counts, subscriptions = case
    result = assign(counts, subscriptions)
    for member, owned in valid_owned(counts, subscriptions).items():
        kept = owned & set(result[member])
        assert len(kept) == min(len(owned), len(result[member]))


@FAST
@given(rebalances())
def test_no_member_both_gains_and_loses_partitions_of_one_topic(case: Case) -> None:
    counts, subscriptions = case
    result = assign(counts, subscriptions)
    owned = valid_owned(counts, subscriptions)
    for member, got in result.items():
        gained = {tp.topic for tp in set(got) - owned[member]}
        lost = {tp.topic for tp in owned[member] - set(got)}
        if all_subscribed_equally(subscriptions):
            assert not (gained and lost)
        else:
            assert not gained & lost


@FAST
@given(rebalances(equal=True))
def test_equal_subscriptions_member_leaving_lets_the_others_keep_all(case: Case) -> None:
    counts, subscriptions = case
    first = assign(counts, subscriptions)
    leaver = min(first)
    survivors = {m: list(sub.topics) for m, sub in subscriptions.items() if m != leaver}
    result = assign(counts, owning(first, survivors, generation=9))
    assert all(set(first[m]) <= set(result[m]) for m in survivors)


@FAST
@given(rebalances())
def test_feeding_a_result_back_reproduces_it(case: Case) -> None:
    counts, subscriptions = case
    first = assign(counts, subscriptions)
    topics = {m: list(sub.topics) for m, sub in subscriptions.items()}
    assert assign(counts, owning(first, topics, generation=7)) == first


@FAST
@given(rebalances(), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_input_order(
    case: Case, rng: random.Random
) -> None:
    counts, subscriptions = case
    expected = assign(counts, subscriptions)
    count_items, member_items = list(counts.items()), list(subscriptions.items())
    rng.shuffle(count_items)
    rng.shuffle(member_items)
    again = assign(dict(count_items), dict(member_items))
    assert again == expected
    assert list(again) == list(expected)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_larger_unequal_groups_stay_valid_and_balanced(
    members: int, partitions: int, seed: int
) -> None:
    rng = random.Random(seed)
    counts = {f"t{t}": rng.randint(0, partitions) for t in range(6)}
    topics = {f"C{m}": rng.sample(sorted(counts), rng.randint(0, 6)) for m in range(members)}
    first = assign(counts, {m: Sub(ts) for m, ts in topics.items()})
    for m in rng.sample(sorted(topics), len(topics) // 3):
        topics[m] = rng.sample(sorted(counts), rng.randint(0, 6))
    topics[f"C{members}"] = rng.sample(sorted(counts), 3)
    subscriptions = owning(first, topics)
    result = assign(counts, subscriptions)
    sizes = {m: len(got) for m, got in result.items()}
    owned = valid_owned(counts, subscriptions)
    for giver, got in result.items():
        assert all(tp.topic in topics[giver] for tp in got)
        for tp in got:
            assert all(sizes[taker] >= sizes[giver] - 1
                       for taker, ts in topics.items() if tp.topic in ts)
        assert not {tp.topic for tp in set(got) - owned[giver]} & {
            tp.topic for tp in owned[giver] - set(got)}
    wanted = {t for ts in topics.values() for t in ts}
    assert sum(sizes.values()) == sum(counts[t] for t in wanted)
