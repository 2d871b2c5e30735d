"""`framework.worker.following.Following` alone, with a fake model source: a fence starts
reading the newer model aside (or stops a worker that runs only its given model), an answer
about an epoch the worker left is dropped, and a model that never comes is not waited for
beyond `MODEL_WAIT_S`."""

from __future__ import annotations

import asyncio

import pytest

from framework.errors import FencedError
from framework.metadata.jobmodel import JobModel, TaskModel
from framework.worker import following
from framework.worker.following import Following
from framework.worker.in_place import InPlaceChange
from groupers import SystemStreamPartition


def model(epoch: int, count: int, *, since: int | None = None) -> JobModel:
    """One task over ``count`` partitions on worker 0."""
    ssps = frozenset(SystemStreamPartition("local", "words", p) for p in range(count))
    return JobModel("job", epoch, "d1", 1, {"Partition 0": TaskModel("Partition 0", ssps, 0, 0)},
                    {"local.words": count}, in_place_since=since)


class FakeSource:
    """The coordinator stream: its latest model, and how often it was asked."""

    def __init__(self, latest: JobModel | None) -> None:
        self.latest = latest
        self.asked = 0

    async def latest_model(self) -> JobModel | None:
        self.asked += 1
        return self.latest


class Fences:
    """The metadata system's fence: an epoch newer than the worker's fences it."""

    def __init__(self) -> None:
        self.epoch = 1
        self.checked = 0

    async def check(self) -> None:
        self.checked += 1
        if self.epoch > 1:
            raise FencedError("job 'job': epoch 1 was fenced by epoch 2")


def follower(source: FakeSource, *, in_place: bool = True
             ) -> tuple[Following, Fences, list[str]]:
    fences, newer = Fences(), []
    follows = Following(0, "d1", model(1, 2), in_place=in_place, check=fences.check,
                        on_newer=lambda: newer.append("newer"))
    follows.source = source
    return follows, fences, newer


async def fenced() -> None:
    raise FencedError("job 'job': epoch 1 was fenced by epoch 2")


async def test_a_fence_reads_the_newer_model_aside_once() -> None:
    source = FakeSource(model(2, 4, since=1))
    follows, _, newer = follower(source)
    assert not await follows.unless_newer(fenced())
    assert not await follows.unless_newer(fenced())  # a second fence: the same read
    assert newer == ["newer"] and follows.newer is not None
    change = await follows.newer
    assert isinstance(change, InPlaceChange) and change.model.epoch == 2
    assert follows.due(waiting=False)
    read, fence = follows.take()
    assert read.result() is change and isinstance(fence, FencedError)
    assert follows.newer is None and follows.fenced is None


async def test_a_step_without_fence_goes_through() -> None:
    follows, _, newer = follower(FakeSource(None))

    async def commit() -> None:
        return None

    assert await follows.unless_newer(commit())
    assert newer == [] and follows.newer is None and not follows.due(waiting=True)


async def test_a_worker_that_runs_its_given_model_stops_at_a_fence() -> None:
    follows, _, newer = follower(FakeSource(model(2, 4, since=1)), in_place=False)
    with pytest.raises(FencedError):
        await follows.unless_newer(fenced())
    assert newer == [] and follows.newer is None


async def test_a_model_published_for_a_restart_is_not_taken_in_place() -> None:
    follows, _, _ = follower(FakeSource(model(2, 4)))
    await follows.unless_newer(fenced())
    assert follows.newer is not None
    assert await follows.newer == "epoch 2 was published for workers to restart on"


async def test_a_model_not_written_yet_is_waited_for() -> None:
    source = FakeSource(model(1, 2))  # the fence moved; the model is not there yet
    follows, _, _ = follower(source)
    await follows.unless_newer(fenced())
    assert follows.newer is not None
    while source.asked < 2:
        await asyncio.sleep(0.05)
    assert not follows.newer.done()
    source.latest = model(2, 4, since=1)
    change = await follows.newer
    assert isinstance(change, InPlaceChange) and change.model.epoch == 2


async def test_a_model_that_never_comes_is_waited_for_up_to_model_wait_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(following, "MODEL_WAIT_S", 0.3)
    follows, _, _ = follower(FakeSource(model(1, 2)))
    await follows.unless_newer(fenced())
    assert follows.newer is not None
    assert await follows.newer == "no newer job model was found"


async def test_the_fence_is_asked_aside_and_its_answer_handed_over() -> None:
    follows, fences, _ = follower(FakeSource(None))
    follows.next_check = 10.0
    follows.ask(9.0, read=True)
    assert follows.fence_check is None  # not due yet
    follows.ask(10.0, read=True)
    assert follows.fence_check is not None and follows.next_check == 11.0
    follows.ask(10.5, read=False)  # one in flight: no second one
    answer = None
    while answer is None:
        await asyncio.sleep(0.01)
        answer = follows.answer()
    assert fences.checked == 1 and await follows.unless_newer(answer)


async def test_an_idle_worker_asks_sooner() -> None:
    follows, _, _ = follower(FakeSource(None))
    follows.next_check = 10.0
    follows.ask(9.0 + following.FENCE_CHECK_IDLE_S, read=False)
    assert follows.fence_check is not None
    await follows.stop()


async def test_an_answer_about_an_epoch_the_worker_left_is_dropped() -> None:
    follows, fences, newer = follower(FakeSource(None))
    fences.epoch = 2
    follows.next_check = 0.0
    follows.ask(1.0, read=True)  # asked at epoch 1
    assert follows.fence_check is not None
    await asyncio.gather(follows.fence_check[1], return_exceptions=True)
    follows.model = model(2, 4, since=1)  # taken in place meanwhile
    assert follows.answer() is None and follows.fence_check is None
    assert newer == []


async def test_no_fence_check_while_a_newer_model_is_read() -> None:
    follows, _, _ = follower(FakeSource(model(2, 4, since=1)))
    await follows.unless_newer(fenced())
    follows.next_check = 0.0
    follows.ask(1.0, read=True)
    assert follows.fence_check is None
    await follows.stop()
