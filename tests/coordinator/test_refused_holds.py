"""Issue 31 §1: a refused partition change never turns into a miscount. A stream that grew
to a count its 2 tasks cannot map (3) is held — read only up to where it had 2 partitions
— and once records were written under 3, it stays held on every later count (4, 6) and
across coordinator restarts, until `sampan streams discard-held` skips those records.
Every output record is checked against the records the job kept: one per input, each
key's counts in order, nothing lost, duplicated or reordered."""

from __future__ import annotations

from collections.abc import Callable

from jobs.outputs import keys
from jobs.runs import CountJob

from framework.metadata import CoordinatorState

KEYS = keys(40)


async def ends(job: CountJob, stream: str = "words") -> dict[int, int]:
    return {p: r.end for p, r in (await job.call(lambda s: s.offsets(stream))).items()}


async def read(job: CountJob) -> dict[int, int]:
    """Partition → the position the job checkpointed on words."""
    return {ssp.partition: position for cp in (await job.checkpoints()).values()
            for ssp, position in cp.inputs.items() if ssp.stream == "words"}


async def refused(job: CountJob, change: str) -> CoordinatorState:
    """Until the coordinator's status names ``change`` as refused (held)."""
    seen: list[CoordinatorState] = []

    async def named() -> bool:
        seen[:] = [await job.state()]
        refusal = seen[0].status.refusal
        return refusal is not None and refusal.change == change
    await job.wait(named, f"the refusal of {change}")
    return seen[0]


async def held_exactly(job: CountJob, hold: dict[int, int],
                       before: dict[str, list[tuple[int, int]]]) -> None:
    """The job read words exactly up to ``hold`` — never past it — and its outputs are
    exactly those of the records before the hold."""
    async def caught_up() -> bool:
        done = await read(job)
        assert all(done.get(p, 0) <= end for p, end in hold.items()), (
            f"read past the hold {hold}: {done}")
        assert set(done) <= set(hold), f"read partitions the hold does not cover: {done}"
        return done == hold
    await job.wait(caught_up, f"words read up to the hold {hold}")
    assert await job.outputs() == before
    state = await job.state()
    assert state.model is not None and state.model.partition_counts == {"local.words": 2}
    assert state.model.holds["local.words"].ends == hold


async def started_held(make_job: Callable[..., CountJob], name: str
                       ) -> tuple[CountJob, dict[int, int], dict[str, list[tuple[int, int]]]]:
    """A running 2-partition job that counted everything, then words grew to 3 (refused);
    the hold and the outputs expected while held. The running workers took the hold in
    place: the same processes, a worker restarted by none."""
    job = make_job(name, {"words": 2})
    await job.create("words", 2)
    await job.produce("words", KEYS, 3)
    job.start()
    pids = (await job.wait_epoch(1)).status.worker_pids
    await job.wait_outputs()
    hold, before = await ends(job), job.truth.expected_outputs()
    await job.expand("words", 3)  # what `sampan streams expand --force` does
    state = await refused(job, "local.words 2→3")
    await same_workers(job, pids, state.model.epoch if state.model else 0)
    return job, hold, before


async def same_workers(job: CountJob, pids: dict[int, int], epoch: int) -> None:
    """Every worker of ``pids`` runs ``epoch``, in the same process: taken in place."""
    async def there() -> bool:
        workers = (await job.state()).workers
        return all(w in workers and workers[w].epoch == epoch for w in pids)
    await job.wait(there, f"every worker on epoch {epoch}")
    state = await job.state()
    assert state.status.worker_pids == pids and state.status.restarts == 0
    assert {w: state.workers[w].pid for w in pids} == pids


async def discard_and_finish(job: CountJob, change: str, skipped: int, count: int) -> None:
    """Stop the held job, discard the held records, run on: every kept record exact."""
    assert await job.stop() == 0
    discard = job.sampan("streams", "discard-held", "local.words", "--job", "{job}")
    assert discard.returncode == 0, discard.stderr
    assert discard.stdout.startswith(f"discarded {skipped} records of local.words ({change}):")
    job.start()
    await job.produce("words", KEYS, 3)
    await job.wait_outputs()
    state = await job.state()
    assert state.model is not None
    assert (state.model.partition_counts, state.model.holds) == ({"local.words": count}, {})
    assert state.status.refusal is None
    assert await job.stop() == 0
    await job.assert_exact()


async def test_2_to_3_to_4_with_writes_stays_held_until_discard_held(
        make_job: Callable[..., CountJob]) -> None:
    job, hold, before = await started_held(make_job, "h234")
    under_3 = await job.produce("words", KEYS, 2)  # placed by hash % 3
    await job.expand("words", 4)
    await job.produce("words", KEYS, 2)  # placed by hash % 4: kept
    state = await refused(job, "local.words 2→3→4")
    assert state.status.refusal is not None and state.status.refusal.error.startswith(
        "local.words is held at 2 partitions: 80 records were written while it had 3 "
        "partitions, which 2 tasks cannot map")
    await held_exactly(job, hold, before)
    job.truth.discard(under_3)
    await discard_and_finish(job, "local.words 2→3→4", 80, 4)


async def test_2_to_3_to_6_with_writes_stays_held_until_discard_held(
        make_job: Callable[..., CountJob]) -> None:
    job, hold, before = await started_held(make_job, "h236")
    under_3 = await job.produce("words", KEYS, 2)
    await job.expand("words", 6)
    await job.produce("words", KEYS, 2)
    await refused(job, "local.words 2→3→6")
    await held_exactly(job, hold, before)
    job.truth.discard(under_3)
    await discard_and_finish(job, "local.words 2→3→6", 80, 6)


async def test_a_direct_2_to_6_with_writes_in_between_is_exact(
        make_job: Callable[..., CountJob]) -> None:
    """6 is a multiple of the 2 tasks: applied with barriers, nothing held."""
    job = make_job("d26", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", KEYS, 3)
    job.start()
    await job.wait_epoch(1)
    await job.expand("words", 6)
    await job.produce("words", KEYS, 3)  # placed by hash % 6, maybe before detection
    state = await job.wait_epoch(2)
    await job.produce("words", KEYS, 3)
    await job.wait_outputs()
    assert state.model is not None
    assert (state.model.partition_counts, state.model.holds) == ({"local.words": 6}, {})
    assert [e.change for e in state.status.expansions] == ["local.words 2→6"]
    assert await job.stop() == 0
    await job.assert_exact()


async def test_growing_on_to_a_multiple_with_nothing_written_under_3_releases_the_hold(
        make_job: Callable[..., CountJob]) -> None:
    job, hold, before = await started_held(make_job, "r234")
    pids = (await job.state()).status.worker_pids
    await held_exactly(job, hold, before)
    await job.expand("words", 4)  # nothing was written while it had 3 partitions
    await job.produce("words", KEYS, 3)

    async def released() -> bool:
        state = await job.state()
        return (state.model is not None and state.model.partition_counts == {"local.words": 4}
                and not state.model.holds and state.status.refusal is None)
    await job.wait(released, "the hold released at 4 partitions")
    await job.produce("words", KEYS, 3)
    await job.wait_outputs()
    state = await job.state()
    assert [e.change for e in state.status.expansions] == ["local.words 2→4"]
    assert state.model is not None
    await same_workers(job, pids, state.model.epoch)
    assert all(state.workers[w].in_place_changes == 2 for w in pids)
    assert await job.stop() == 0
    await job.assert_exact()
    assert "no input is held any more" in job.coordinator_log()


async def test_the_hold_survives_a_sigkilled_coordinator(
        make_job: Callable[..., CountJob]) -> None:
    """SIGKILL of `sampan run` and its workers: the restarted coordinator finds the hold in
    the job model and keeps it (counts 4 now, a multiple of 2, would be applied otherwise)."""
    job, hold, before = await started_held(make_job, "k234")
    under_3 = await job.produce("words", KEYS, 2)
    await job.expand("words", 4)
    await job.produce("words", KEYS, 2)
    await refused(job, "local.words 2→3→4")
    await held_exactly(job, hold, before)
    epoch = (await job.state()).status.epoch
    job.kill()
    job.start()
    assert epoch is not None
    state = await job.wait_epoch(epoch + 1)
    assert state.status.refusal is not None
    assert state.status.refusal.change == "local.words 2→3→4"
    await job.produce("words", KEYS, 1)  # written at 4 partitions: waits behind the hold
    await held_exactly(job, hold, before)
    job.truth.discard(under_3)
    await discard_and_finish(job, "local.words 2→3→4", 80, 4)


async def test_2_to_3_to_4_with_writes_while_the_job_was_down_is_held_at_start(
        make_job: Callable[..., CountJob]) -> None:
    """The coordinator never saw 3 partitions: the local log's growth records tell that
    records were written under 3, so the job starts held rather than adopting 4."""
    job = make_job("down234", {"words": 2})
    await job.create("words", 2)
    await job.produce("words", KEYS, 3)
    job.start()
    await job.wait_epoch(1)
    await job.wait_outputs()
    assert await job.stop() == 0
    hold, before = await ends(job), job.truth.expected_outputs()
    await job.expand("words", 3)
    under_3 = await job.produce("words", KEYS, 2)
    await job.expand("words", 4)
    await job.produce("words", KEYS, 2)
    job.start()
    state = await job.wait_epoch(2)
    assert state.status.refusal is not None
    assert state.status.refusal.change == "local.words 2→3→4"
    assert state.status.expansions == []
    await held_exactly(job, hold, before)
    job.truth.discard(under_3)
    await discard_and_finish(job, "local.words 2→3→4", 80, 4)
