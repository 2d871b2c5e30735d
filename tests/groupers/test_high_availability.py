"""KIP-441 high-availability task assignor: exact tables, convergence, and properties."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groupers as G

Table = dict[str, tuple[list[str], list[str], list[str]]]
V = TypeVar("V")


def table(result: G.TaskAssignment) -> Table:
    """Client → (sorted actives, sorted standbys, sorted warmups): easy to write by hand."""
    return {name: (sorted(held.active), sorted(held.standby), sorted(held.warmup))
            for name, held in result.clients.items()}


def caught_up(*tasks: str) -> dict[str, int]:
    return {task: 0 for task in tasks}


def stateful(*tasks: str) -> dict[str, bool]:
    return {task: True for task in tasks}


def stateless(*tasks: str) -> dict[str, bool]:
    return {task: False for task in tasks}


def owner(*tasks: str, capacity: int = 1, lags: Mapping[str, int] | None = None) -> G.ClientState:
    """A client that ran ``tasks`` as active (caught up on them) and holds ``lags``."""
    return G.ClientState(capacity, previous_active=tasks, task_lags={**(lags or {}),
                                                                    **caught_up(*tasks)})


def next_round(result: G.TaskAssignment, capacity: Mapping[str, int]) -> dict[str, G.ClientState]:
    """Feed a result back: actives are the previous actives; every replica is caught up."""
    return {name: G.ClientState(capacity.get(name, 1), previous_active=held.active,
                                task_lags=caught_up(*held.active, *held.standby, *held.warmup))
            for name, held in result.clients.items()}


def converge(
    assignor: G.HighAvailabilityTaskAssignor, tasks: Mapping[str, bool],
    clients: Mapping[str, G.ClientState], limit: int, context: str = "",
) -> tuple[int, G.TaskAssignment, dict[str, G.ClientState]]:
    """Rebalance until no probing is asked for: (rounds used, last result, next input)."""
    capacity = {name: state.capacity for name, state in clients.items()}
    for rounds in range(1, limit + 1):
        result = assignor.assign(tasks, clients)
        check_invariants(assignor, tasks, clients, result, context)
        clients = next_round(result, capacity)
        if not result.probing_rebalance_needed:
            return rounds, result, clients
    raise AssertionError(f"{context}: still probing after {limit} rounds")


def check_invariants(
    assignor: G.HighAvailabilityTaskAssignor, tasks: Mapping[str, bool],
    clients: Mapping[str, G.ClientState], result: G.TaskAssignment, context: str = "",
) -> None:
    """Every guarantee that holds for any input, each assertion naming ``context``."""
    assert list(result.clients) == sorted(clients), context
    actives = Counter(task for held in result.clients.values() for task in held.active)
    assert actives == Counter(set(tasks)), f"{context}: not one active per task"
    warmups = [(task, name) for name, held in result.clients.items() for task in held.warmup]
    assert len(warmups) <= assignor.max_warmups, context
    assert not warmups or result.probing_rebalance_needed, context
    wanted = min(assignor.num_standbys, len(clients) - 1)
    for name, held in result.clients.items():
        assert not held.active & held.standby, f"{context}: {name} has a task twice"
        assert not held.active & held.warmup, f"{context}: {name} has a task twice"
        assert not held.standby & held.warmup, f"{context}: {name} has a task twice"
    for task, is_stateful in tasks.items():
        holders = [name for name, held in result.clients.items()
                   if task in held.active or task in held.standby]
        if is_stateful:
            assert len(holders) == 1 + wanted, f"{context}: {task} held by {holders}"
        else:
            assert len(holders) == 1, f"{context}: stateless {task} has a standby"
            assert all(task not in held.warmup for held in result.clients.values()), context
    for task, name in warmups:
        assert tasks.get(task), f"{context}: warmup for stateless {task}"
        assert not _is_caught_up(assignor, clients[name], task), \
            f"{context}: warmup {task} on {name}, which is caught up already"
    for task in (task for task, is_stateful in tasks.items() if is_stateful):
        holder = next(name for name, held in result.clients.items() if task in held.active)
        if any(_is_caught_up(assignor, state, task) for state in clients.values()):
            assert _is_caught_up(assignor, clients[holder], task), \
                f"{context}: {task} moved to {holder}, which is not caught up"
    assert _balanced(result, tasks, clients, stateful=False), f"{context}: stateless skew"


def _is_caught_up(assignor: G.HighAvailabilityTaskAssignor, state: G.ClientState,
                  task: str) -> bool:
    if task in state.previous_active:
        return True
    return state.task_lags.get(task, math.inf) <= assignor.acceptable_recovery_lag


def _balanced(result: G.TaskAssignment, tasks: Mapping[str, bool],
              clients: Mapping[str, G.ClientState], stateful: bool) -> bool:
    """Each client runs the floor or the ceiling of its capacity-weighted share."""
    count = sum(1 for is_stateful in tasks.values() if is_stateful == stateful)
    total = sum(state.capacity for state in clients.values())
    for name, held in result.clients.items():
        share = count * clients[name].capacity / total
        mine = sum(1 for task in held.active if tasks[task] == stateful)
        if not math.floor(share) <= mine <= math.ceil(share):
            return False
    return True


def active_counts(result: G.TaskAssignment) -> dict[str, int]:
    return {name: len(held.active) for name, held in result.clients.items()}


# -- the documented example (docs/groupers/high_availability.md) -----------------------------

EXAMPLE_TASKS = stateful("P0", "P1", "P2", "P3")
EXAMPLE_CLIENTS = {
    "a": owner("P0", "P1", lags=caught_up("P2", "P3")),
    "b": owner("P2", "P3", lags=caught_up("P0", "P1")),
    "c": G.ClientState(),
}
EXAMPLE = G.HighAvailabilityTaskAssignor(num_standbys=1, max_warmups=2)


def test_example_new_client_warms_up_and_takes_a_standby() -> None:
    result = EXAMPLE.assign(EXAMPLE_TASKS, EXAMPLE_CLIENTS)
    assert table(result) == {
        "a": (["P0", "P1"], ["P2", "P3"], []),
        "b": (["P2", "P3"], ["P0"], []),
        "c": ([], ["P1"], ["P3"]),
    }
    assert result.probing_rebalance_needed


def test_example_probing_rebalance_moves_the_warmed_up_task() -> None:
    first = EXAMPLE.assign(EXAMPLE_TASKS, EXAMPLE_CLIENTS)
    second = EXAMPLE.assign(EXAMPLE_TASKS, next_round(first, {}))
    assert table(second) == {
        "a": (["P0", "P1"], ["P2"], []),
        "b": (["P2"], ["P0", "P3"], []),
        "c": (["P3"], ["P1"], []),
    }
    assert not second.probing_rebalance_needed


def test_example_settled_assignment_is_reproduced() -> None:
    _, settled, clients = converge(EXAMPLE, EXAMPLE_TASKS, EXAMPLE_CLIENTS, limit=5)
    assert EXAMPLE.assign(EXAMPLE_TASKS, clients) == settled


# -- active placement --------------------------------------------------------------------------

def test_every_client_is_in_the_result_even_with_nothing_to_run() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(stateful("P0"), {
        "b": G.ClientState(), "a": G.ClientState(), "c": G.ClientState()})
    assert table(result) == {"a": (["P0"], [], []), "b": ([], [], []), "c": ([], [], [])}


def test_fresh_group_spreads_stateful_tasks_evenly() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(
        stateful(*(f"P{p}" for p in range(7))), {name: G.ClientState() for name in "abc"})
    assert active_counts(result) == {"a": 3, "b": 2, "c": 2}
    assert not result.probing_rebalance_needed


def test_new_empty_client_gets_warmups_not_actives() -> None:
    tasks = stateful("P0", "P1", "P2", "P3", "P4", "P5")
    result = G.HighAvailabilityTaskAssignor(max_warmups=2).assign(tasks, {
        "a": owner("P0", "P1", "P2"), "b": owner("P3", "P4", "P5"), "c": G.ClientState()})
    assert table(result) == {
        "a": (["P0", "P1", "P2"], [], []),
        "b": (["P3", "P4", "P5"], [], []),
        "c": ([], [], ["P2", "P5"]),
    }
    assert result.probing_rebalance_needed


def test_warmups_are_capped_at_max_warmups() -> None:
    tasks = stateful("P0", "P1", "P2", "P3", "P4", "P5")
    result = G.HighAvailabilityTaskAssignor(max_warmups=2).assign(
        tasks, {"a": owner(*tasks), "b": G.ClientState()})
    assert table(result) == {"a": (sorted(tasks), [], []), "b": ([], [], ["P3", "P4"])}


def test_without_warmups_caught_up_tasks_never_move_to_an_empty_client() -> None:
    tasks = stateful("P0", "P1", "P2", "P3")
    result = G.HighAvailabilityTaskAssignor(max_warmups=0).assign(
        tasks, {"a": owner(*tasks), "b": G.ClientState()})
    assert table(result) == {"a": (sorted(tasks), [], []), "b": ([], [], [])}
    assert not result.probing_rebalance_needed


def test_client_within_acceptable_lag_takes_its_share_at_once() -> None:
    tasks = stateful("P0", "P1", "P2", "P3")
    result = G.HighAvailabilityTaskAssignor(acceptable_recovery_lag=10).assign(
        tasks, {"a": owner(*tasks), "b": G.ClientState(task_lags={"P2": 5, "P3": 10})})
    assert table(result) == {"a": (["P0", "P1"], [], []), "b": (["P2", "P3"], [], [])}
    assert not result.probing_rebalance_needed


def test_client_just_beyond_acceptable_lag_warms_up_first() -> None:
    tasks = stateful("P0", "P1", "P2", "P3")
    result = G.HighAvailabilityTaskAssignor(acceptable_recovery_lag=10).assign(
        tasks, {"a": owner(*tasks), "b": G.ClientState(task_lags={"P2": 11, "P3": 11})})
    assert table(result) == {"a": (sorted(tasks), [], []), "b": ([], [], ["P2", "P3"])}
    assert result.probing_rebalance_needed


def test_over_quota_owner_sheds_the_task_another_client_is_caught_up_on() -> None:
    tasks = stateful("P0", "P1", "P2", "P3")
    result = G.HighAvailabilityTaskAssignor().assign(
        tasks, {"a": owner(*tasks), "b": G.ClientState(task_lags={"P0": 0, "P1": 0})})
    assert table(result) == {"a": (["P2", "P3"], [], []), "b": (["P0", "P1"], [], [])}


def test_departed_clients_tasks_go_to_their_caught_up_standbys() -> None:
    tasks = stateful("P0", "P1", "P2", "P3", "P4", "P5")
    result = G.HighAvailabilityTaskAssignor().assign(tasks, {
        "a": owner("P0", "P1", lags={"P4": 0}), "b": owner("P2", "P3", lags={"P5": 0})})
    assert table(result) == {"a": (["P0", "P1", "P4"], [], []),
                             "b": (["P2", "P3", "P5"], [], [])}
    assert not result.probing_rebalance_needed


def test_orphan_stays_on_its_caught_up_standby_while_balance_warms_it_elsewhere() -> None:
    tasks = stateful("P0", "P1", "P2", "P3")
    result = G.HighAvailabilityTaskAssignor().assign(tasks, {
        "a": owner("P0", "P1", lags=caught_up("P2", "P3")), "b": G.ClientState()})
    assert table(result) == {"a": (sorted(tasks), [], []), "b": ([], [], ["P2", "P3"])}


def test_smallest_lag_wins_among_caught_up_clients() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(stateful("P0"), {
        "a": G.ClientState(task_lags={"P0": 7}), "b": G.ClientState(task_lags={"P0": 3})})
    assert table(result) == {"a": ([], [], []), "b": (["P0"], [], [])}


def test_previous_owner_wins_a_tie_on_lag() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(stateful("P0"), {
        "a": G.ClientState(task_lags={"P0": 0}), "b": owner("P0")})
    assert table(result) == {"a": ([], [], []), "b": (["P0"], [], [])}


def test_with_no_client_caught_up_the_smallest_lag_gets_the_task_without_warmup() -> None:
    result = G.HighAvailabilityTaskAssignor(acceptable_recovery_lag=10).assign(
        stateful("P0"), {"a": G.ClientState(task_lags={"P0": 50}),
                         "b": G.ClientState(task_lags={"P0": 20})})
    assert table(result) == {"a": ([], [], []), "b": (["P0"], [], [])}
    assert not result.probing_rebalance_needed


def test_two_clients_claiming_one_task_the_smaller_reported_gap_keeps_it() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(stateful("P0", "P1"), {
        "a": G.ClientState(previous_active={"P0"}, task_lags={"P0": 9}),
        "b": G.ClientState(previous_active={"P0"}, task_lags={"P0": 2}),
    })
    assert table(result) == {"a": (["P1"], [], []), "b": (["P0"], [], [])}


def test_capacity_two_client_gets_twice_the_tasks() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(
        {**stateful(*(f"S{p}" for p in range(8))), **stateless(*(f"L{p}" for p in range(4)))},
        {"a": G.ClientState(capacity=2), "b": G.ClientState(), "c": G.ClientState()})
    assert active_counts(result) == {"a": 6, "b": 3, "c": 3}


# -- stateless tasks ---------------------------------------------------------------------------

def test_stateless_and_stateful_tasks_are_balanced_separately() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(
        {**stateful("S0", "S1"), **stateless("L0", "L1")},
        {"a": G.ClientState(), "b": G.ClientState(previous_active={"L0", "L1"})})
    assert table(result) == {"a": (["L1", "S0"], [], []), "b": (["L0", "S1"], [], [])}


def test_stateless_tasks_stay_with_their_owner_while_under_quota() -> None:
    result = G.HighAvailabilityTaskAssignor().assign(stateless("L0", "L1", "L2", "L3"), {
        "a": G.ClientState(previous_active={"L1", "L2"}),
        "b": G.ClientState(previous_active={"L3"}), "c": G.ClientState()})
    assert table(result) == {"a": (["L1", "L2"], [], []), "b": (["L3"], [], []),
                             "c": (["L0"], [], [])}


def test_stateless_only_group_balances_immediately_with_no_warmups() -> None:
    tasks = stateless(*(f"L{p}" for p in range(6)))
    result = G.HighAvailabilityTaskAssignor(num_standbys=2).assign(tasks, {
        "a": G.ClientState(previous_active=tasks), "b": G.ClientState(),
        "c": G.ClientState()})
    assert table(result) == {"a": (["L0", "L1"], [], []), "b": (["L2", "L4"], [], []),
                             "c": (["L3", "L5"], [], [])}
    assert not result.probing_rebalance_needed


# -- standbys ----------------------------------------------------------------------------------

def test_standbys_go_to_distinct_clients_other_than_the_active() -> None:
    tasks = stateful("P0", "P1", "P2")
    result = G.HighAvailabilityTaskAssignor(num_standbys=2).assign(
        tasks, {name: G.ClientState() for name in "abc"})
    assert table(result) == {"a": (["P0"], ["P1", "P2"], []), "b": (["P1"], ["P0", "P2"], []),
                             "c": (["P2"], ["P0", "P1"], [])}


def test_standbys_are_capped_by_the_number_of_other_clients() -> None:
    result = G.HighAvailabilityTaskAssignor(num_standbys=5).assign(
        stateful("P0"), {"a": G.ClientState(), "b": G.ClientState()})
    assert table(result) == {"a": (["P0"], [], []), "b": ([], ["P0"], [])}


def test_no_standbys_for_stateless_tasks() -> None:
    result = G.HighAvailabilityTaskAssignor(num_standbys=1).assign(
        stateless("L0", "L1"), {"a": G.ClientState(), "b": G.ClientState()})
    assert all(not held.standby for held in result.clients.values())


def test_standby_prefers_the_client_with_the_lowest_lag() -> None:
    result = G.HighAvailabilityTaskAssignor(num_standbys=1, acceptable_recovery_lag=10).assign(
        stateful("P0", "P1", "P2"), {
            "a": owner("P0"), "b": owner("P1", lags={"P0": 500}),
            "c": owner("P2", lags={"P0": 80})})
    assert table(result) == {"a": (["P0"], ["P1"], []), "b": (["P1"], ["P2"], []),
                             "c": (["P2"], ["P0"], [])}


def test_standby_load_is_balanced() -> None:
    result = G.HighAvailabilityTaskAssignor(num_standbys=1).assign(
        stateful(*(f"P{p}" for p in range(6))), {name: G.ClientState() for name in "abc"})
    assert {name: len(held.standby) for name, held in result.clients.items()} == {
        "a": 2, "b": 2, "c": 2}


def test_one_clients_standbys_are_spread_over_the_other_clients() -> None:
    result = G.HighAvailabilityTaskAssignor(num_standbys=1).assign(
        stateful(*(f"P{p}" for p in range(12))), {name: G.ClientState() for name in "abcd"})
    assert table(result) == {
        "a": (["P0", "P4", "P8"], ["P1", "P11", "P6"], []),
        "b": (["P1", "P5", "P9"], ["P0", "P10", "P7"], []),
        "c": (["P10", "P2", "P6"], ["P3", "P4", "P9"], []),
        "d": (["P11", "P3", "P7"], ["P2", "P5", "P8"], []),
    }


@pytest.mark.parametrize("failed", ["a", "b", "c", "d"])
def test_failed_clients_tasks_move_at_once_to_their_standbys_and_stay_balanced(
    failed: str,
) -> None:
    assignor = G.HighAvailabilityTaskAssignor(num_standbys=1)
    tasks = stateful(*(f"P{p}" for p in range(12)))
    _, _, clients = converge(assignor, tasks, {name: G.ClientState() for name in "abcd"}, 5)
    del clients[failed]
    result = assignor.assign(tasks, clients)
    assert sorted(active_counts(result).values()) == [4, 4, 4]
    assert not result.probing_rebalance_needed


def test_when_every_other_client_is_a_standby_the_target_restores_as_a_standby() -> None:
    tasks = stateful("P0", "P1")
    result = G.HighAvailabilityTaskAssignor(num_standbys=1).assign(
        tasks, {"a": owner(*tasks), "b": G.ClientState()})
    assert table(result) == {"a": (["P0", "P1"], [], []), "b": ([], ["P0", "P1"], [])}
    assert result.probing_rebalance_needed
    after = G.HighAvailabilityTaskAssignor(num_standbys=1).assign(tasks, next_round(result, {}))
    assert table(after) == {"a": (["P0"], ["P1"], []), "b": (["P1"], ["P0"], [])}
    assert not after.probing_rebalance_needed


# -- convergence -------------------------------------------------------------------------------

@pytest.mark.parametrize("max_warmups", [1, 2, 3])
@pytest.mark.parametrize("num_standbys", [0, 1, 2])
def test_joining_client_converges_within_the_warmup_bound(
    max_warmups: int, num_standbys: int
) -> None:
    assignor = G.HighAvailabilityTaskAssignor(num_standbys=num_standbys,
                                              max_warmups=max_warmups)
    tasks = stateful(*(f"P{p}" for p in range(12)))
    _, _, clients = converge(assignor, tasks, {name: G.ClientState() for name in "abc"}, 5)
    clients["d"] = G.ClientState()
    bound = math.ceil(len(tasks) / max_warmups) + 1
    _, settled, _ = converge(assignor, tasks, clients, limit=bound)
    assert active_counts(settled) == {"a": 3, "b": 3, "c": 3, "d": 3}


def test_leaving_client_with_standbys_settles_in_one_round() -> None:
    assignor = G.HighAvailabilityTaskAssignor(num_standbys=1)
    tasks = stateful(*(f"P{p}" for p in range(9)))
    _, _, clients = converge(assignor, tasks, {name: G.ClientState() for name in "abc"}, 5)
    del clients["c"]
    _, settled, _ = converge(assignor, tasks, clients, limit=1)
    assert sorted(active_counts(settled).values()) == [4, 5]


SEEDS = range(150)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_membership_and_lag_changes_keep_invariants_and_converge(seed: int) -> None:
    rng = random.Random(seed)
    assignor = G.HighAvailabilityTaskAssignor(
        num_standbys=rng.randint(0, 3), max_warmups=rng.randint(1, 4),
        acceptable_recovery_lag=100)
    tasks = {f"t{i}": rng.random() < 0.7 for i in range(rng.randint(1, 60))}
    capacity = {f"c{i}": rng.choice([1, 1, 1, 2, 3]) for i in range(rng.randint(1, 10))}
    clients = {name: G.ClientState(cap) for name, cap in capacity.items()}
    for epoch in range(6):
        context = f"seed={seed} epoch={epoch} {assignor}"
        bound = math.ceil(sum(tasks.values()) / assignor.max_warmups) + 1
        _, settled, clients = converge(assignor, tasks, clients, bound, context)
        assert _balanced(settled, tasks, clients, stateful=True), f"{context}: stateful skew"
        assert assignor.assign(tasks, clients) == settled, f"{context}: not settled"
        clients = _perturb(rng, tasks, clients, epoch)


def _perturb(rng: random.Random, tasks: Mapping[str, bool],
             clients: dict[str, G.ClientState], epoch: int) -> dict[str, G.ClientState]:
    """One random change: a client joins or leaves, lags drift, or a capacity changes."""
    change = rng.choice(["join", "leave", "lags", "capacity"])
    names = sorted(clients)
    if change == "join" or len(clients) == 1:
        return {**clients, f"new{epoch}": G.ClientState(rng.choice([1, 1, 2]))}
    if change == "leave":
        gone = rng.choice(names)
        return {name: state for name, state in clients.items() if name != gone}
    if change == "lags":
        return {name: G.ClientState(state.capacity, state.previous_active, {
            **state.task_lags,
            **{task: rng.randint(0, 300) for task in tasks if rng.random() < 0.3}})
            for name, state in clients.items()}
    resized = rng.choice(names)
    state = clients[resized]
    return {**clients, resized: G.ClientState(rng.randint(1, 3), state.previous_active,
                                              state.task_lags)}


# -- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("setting", ["num_standbys", "max_warmups", "acceptable_recovery_lag"])
def test_negative_setting_is_refused_naming_it(setting: str) -> None:
    with pytest.raises(G.AssignmentError, match=f"{setting} is -1"):
        G.HighAvailabilityTaskAssignor(**{setting: -1})


def test_capacity_below_one_is_refused_naming_the_client() -> None:
    with pytest.raises(G.AssignmentError, match="client 'b' has capacity 0"):
        G.HighAvailabilityTaskAssignor().assign(
            stateful("P0"), {"a": G.ClientState(), "b": G.ClientState(capacity=0)})


def test_negative_lag_is_refused_naming_client_and_task() -> None:
    with pytest.raises(G.AssignmentError, match=r"client 'a' .* gap -3 for task 'P0'"):
        G.HighAvailabilityTaskAssignor().assign(
            stateful("P0"), {"a": G.ClientState(task_lags={"P0": -3})})


def test_tasks_without_clients_are_refused() -> None:
    with pytest.raises(G.AssignmentError, match="no clients"):
        G.HighAvailabilityTaskAssignor().assign(stateful("P0"), {})


def test_no_tasks_and_no_clients_is_an_empty_assignment() -> None:
    assert G.HighAvailabilityTaskAssignor().assign({}, {}) == G.TaskAssignment({}, False)


def test_unknown_tasks_named_by_a_client_are_ignored() -> None:
    result = G.HighAvailabilityTaskAssignor(num_standbys=1).assign(stateful("P0"), {
        "a": G.ClientState(previous_active={"gone"}, task_lags={"gone": -1, "old": 5}),
        "b": G.ClientState()})
    assert table(result) == {"a": (["P0"], [], []), "b": ([], ["P0"], [])}


# -- properties ----------------------------------------------------------------------------------

TASK_NAMES = [f"P{p}" for p in range(10)]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[G.HighAvailabilityTaskAssignor, dict[str, bool],
                                        dict[str, G.ClientState]]:
    assignor = G.HighAvailabilityTaskAssignor(
        num_standbys=draw(st.integers(0, 3)), max_warmups=draw(st.integers(0, 3)),
        acceptable_recovery_lag=draw(st.integers(0, 20)))
    tasks = draw(st.dictionaries(st.sampled_from(TASK_NAMES), st.booleans(), max_size=10))
    known = [*TASK_NAMES, "unknown"]
    names = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True))
    clients = {name: G.ClientState(
        draw(st.integers(1, 3)),
        previous_active=draw(st.frozensets(st.sampled_from(known), max_size=5)),
        task_lags=draw(st.dictionaries(st.sampled_from(known), st.integers(0, 40), max_size=8)))
        for name in names}
    return assignor, tasks, clients


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_property_invariants_hold_for_any_input(
    scenario: tuple[G.HighAvailabilityTaskAssignor, dict[str, bool], dict[str, G.ClientState]],
) -> None:
    assignor, tasks, clients = scenario
    check_invariants(assignor, tasks, clients, assignor.assign(tasks, clients))


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_property_result_does_not_depend_on_input_order(
    scenario: tuple[G.HighAvailabilityTaskAssignor, dict[str, bool], dict[str, G.ClientState]],
    rng: random.Random,
) -> None:
    assignor, tasks, clients = scenario

    def shuffled(items: Mapping[str, V]) -> dict[str, V]:
        pairs = list(items.items())
        rng.shuffle(pairs)
        return dict(pairs)

    reordered_tasks = shuffled(tasks)
    reordered_clients = {
        name: G.ClientState(state.capacity, sorted(state.previous_active, reverse=True),
                            shuffled(state.task_lags))
        for name, state in shuffled(clients).items()}
    first = assignor.assign(tasks, clients)
    second = assignor.assign(reordered_tasks, reordered_clients)
    assert first == second
    assert list(first.clients) == list(second.clients)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_property_a_settled_group_is_balanced_and_stays_put(
    scenario: tuple[G.HighAvailabilityTaskAssignor, dict[str, bool], dict[str, G.ClientState]],
) -> None:
    assignor, tasks, clients = scenario
    if assignor.max_warmups == 0:
        assignor = G.HighAvailabilityTaskAssignor(
            assignor.num_standbys, 1, assignor.acceptable_recovery_lag)
    bound = math.ceil(sum(tasks.values()) / assignor.max_warmups) + 1
    _, settled, after = converge(assignor, tasks, clients, bound)
    assert _balanced(settled, tasks, clients, stateful=True)
    assert assignor.assign(tasks, after) == settled
