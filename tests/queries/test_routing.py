"""Routing a store key to its task from the job model alone (DESIGN.md §16): the key's
partition by the input's key serde and Kafka's default partitioner, the task by the
model's SSP → task mapping (the fixed-task grouper's expansion mapping), the worker and
host by the placement; a store not keyed like an input is refused."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from framework.config import JobConfig, parse_config
from framework.metadata.jobmodel import PARKED, JobModel, TaskModel
from framework.partitioner import partition_for_key
from framework.queries.errors import NotQueryableError, QueryError, TaskUnavailableError
from framework.queries.routing import KeyRouter
from groupers import GroupByPartitionFixedTasks
from groupers import SystemStreamPartition as SSP

KEYS = [f"user-{i}" for i in range(200)]


def config_of(tmp_path: Path, key_serde: str = "string", **stores: Mapping[str, Any]
              ) -> JobConfig:
    return parse_config({
        "job": {"name": "wc", "task": "m:T", "inputs": ["local.words"]},
        "systems": {"local": {"type": "local"}},
        "streams": {"local.words": {"key_serde": key_serde}},
        "stores": {name: dict(table) for name, table in stores.items()}},
        tmp_path / "job.toml")


def model_of(grouping: Mapping[str, frozenset[SSP]], count: int, epoch: int = 1,
             workers: Mapping[str, int] | None = None,
             hosts: Mapping[str, tuple[int, ...]] | None = None) -> JobModel:
    names = sorted(grouping)
    tasks = {name: TaskModel(name, grouping[name], i,
                             (workers or {}).get(name, i % 2))
             for i, name in enumerate(names)}
    return JobModel("wc", epoch, "", 2, tasks, partition_counts={"local.words": count},
                    hosts=hosts or {})


def grouped(counts: list[int]) -> list[JobModel]:
    """The models of a job whose input grew through ``counts``, grouped as sampan does."""
    grouper, previous, models = GroupByPartitionFixedTasks(), None, []
    for epoch, count in enumerate(counts, 1):
        grouping = grouper.group([SSP("local", "words", p) for p in range(count)], previous)
        models.append(model_of(grouping, count, epoch))
        previous = {ssp: task for task, ssps in grouping.items() for ssp in ssps}
    return models


def test_a_key_routes_to_the_task_reading_its_partition(tmp_path: Path) -> None:
    router = KeyRouter(config_of(tmp_path, counts={"keyed_by": "local.words"}))
    (model,) = grouped([4])
    for key in KEYS:
        partition = partition_for_key(key.encode(), 4)
        route = router.route(model, "counts", key)
        assert (route.task, route.partition, route.stream, route.epoch) == (
            f"Partition {partition}", partition, "local.words", 1)
        assert route.worker == model.tasks[route.task].worker


def test_a_key_keeps_its_task_through_expansions_2_4_8(tmp_path: Path) -> None:
    router = KeyRouter(config_of(tmp_path, counts={"keyed_by": "local.words"}))
    models = grouped([2, 4, 8])
    for key in KEYS:
        routes = [router.route(model, "counts", key) for model in models]
        assert [r.partition for r in routes] == [
            partition_for_key(key.encode(), n) for n in (2, 4, 8)]
        assert {r.task for r in routes} == {f"Partition {partition_for_key(key.encode(), 2)}"}


def test_the_input_key_serde_places_the_key(tmp_path: Path) -> None:
    router = KeyRouter(config_of(tmp_path, "int64", counts={"keyed_by": "local.words"}))
    (model,) = grouped([8])
    for key in range(100):
        expected = partition_for_key(key.to_bytes(8, "big", signed=True), 8)
        assert router.route(model, "counts", key).partition == expected


def test_key_to_input_turns_a_store_key_into_the_input_key(tmp_path: Path) -> None:
    (tmp_path / "keys_for_routing.py").write_text(
        "def word(key):\n    return key.split('/', 1)[1]\n")
    router = KeyRouter(config_of(tmp_path, counts={
        "keyed_by": "local.words", "key_to_input": "keys_for_routing:word"}))
    (model,) = grouped([4])
    for key in KEYS:
        assert router.route(model, "counts", f"words/{key}").partition == partition_for_key(
            key.encode(), 4)


def test_a_failing_key_to_input_names_the_store_function_and_key(tmp_path: Path) -> None:
    (tmp_path / "keys_failing.py").write_text(
        "def word(key):\n    return key.split('/', 1)[1]\n")
    router = KeyRouter(config_of(tmp_path, counts={
        "keyed_by": "local.words", "key_to_input": "keys_failing:word"}))
    with pytest.raises(QueryError) as caught:
        router.route(grouped([4])[0], "counts", "no-slash")
    assert str(caught.value) == ("store 'counts': key_to_input keys_failing:word raised "
                                 "IndexError: list index out of range for key 'no-slash'")


def test_a_store_not_keyed_like_an_input_is_refused_naming_the_key_to_add(
        tmp_path: Path) -> None:
    config = config_of(tmp_path, totals={})
    with pytest.raises(NotQueryableError) as caught:
        KeyRouter(config).route(grouped([4])[0], "totals", "user-1")
    assert str(caught.value) == (
        "store 'totals' of job 'wc' does not declare how its keys are partitioned, so no "
        'task can be known to own a key; add keyed_by = "local.words" to [stores.totals] in '
        f"{tmp_path / 'job.toml'} (and key_to_input = \"module:function\" when its keys are "
        "not the input's record keys)")


def test_an_unknown_store_is_refused_listing_the_stores(tmp_path: Path) -> None:
    config = config_of(tmp_path, counts={"keyed_by": "local.words"}, totals={})
    with pytest.raises(NotQueryableError) as caught:
        KeyRouter(config).route(grouped([4])[0], "count", "user-1")
    assert str(caught.value) == "job 'wc' has no store 'count' (stores: counts, totals)"


def test_a_key_the_input_serde_cannot_write_is_refused(tmp_path: Path) -> None:
    router = KeyRouter(config_of(tmp_path, "int64", counts={"keyed_by": "local.words"}))
    with pytest.raises(QueryError) as caught:
        router.route(grouped([4])[0], "counts", "not-a-number")
    assert str(caught.value).startswith(
        "store 'counts': the key 'not-a-number' cannot be serialized with the int64 key "
        "serde of input 'local.words'")


def test_a_parked_task_routes_to_no_worker(tmp_path: Path) -> None:
    router = KeyRouter(config_of(tmp_path, counts={"keyed_by": "local.words"}))
    grouping = {f"Partition {p}": frozenset({SSP("local", "words", p)}) for p in range(2)}
    model = model_of(grouping, 2, workers={"Partition 0": PARKED, "Partition 1": PARKED},
                     hosts={"a": (0,), "b": (1,)})
    route = router.route(model, "counts", "user-1")
    assert route.worker == PARKED and route.host(model) is None


def test_a_placed_task_routes_to_its_host(tmp_path: Path) -> None:
    router = KeyRouter(config_of(tmp_path, counts={"keyed_by": "local.words"}))
    grouping = {f"Partition {p}": frozenset({SSP("local", "words", p)}) for p in range(2)}
    model = model_of(grouping, 2, workers={"Partition 0": 0, "Partition 1": 1},
                     hosts={"a": (0,), "b": (1,)})
    for key in KEYS[:20]:
        route = router.route(model, "counts", key)
        assert route.host(model) == ("a" if route.task == "Partition 0" else "b")


def test_a_model_without_the_inputs_count_answers_retry(tmp_path: Path) -> None:
    router = KeyRouter(config_of(tmp_path, counts={"keyed_by": "local.words"}))
    model = JobModel("wc", 3, "", 1, {}, partition_counts={})
    with pytest.raises(TaskUnavailableError) as caught:
        router.route(model, "counts", "user-1")
    assert caught.value.status == 503
