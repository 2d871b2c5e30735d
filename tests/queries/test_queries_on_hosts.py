"""Queries while the per-key sum job runs on three hosts (`sampan run --host`) on real
Apache Kafka with exactly-once and one standby replica per task: the input grows 2 → 4 → 8
and a host owning a task is SIGKILLed (its task fails over) while two queriers ask for
random keys through every host's endpoints — one from owners only, one with ``max_lag``
(a standby copy answers while the owner cannot). Every answer is checked exactly against
the store's changelog and the job's outputs, per key never backwards, standby answers
within ``max_lag`` and never below a position already answered (tests/queries/queryjobs.py).
Figures are logged.

Only on Kafka: a job on the local log lives on one machine and refuses ``--host``
(tests/hosts/test_host_cli.py). The hosts' group session timeout is lengthened by fault
injection (`framework.hosts.fault`) so the killed host's task stays without an owner long
enough for standby reads to be seen answering, whatever the machine's load; meanwhile a
probe asks that task's keys with ``max_lag`` (its answers checked too) until a standby
has answered one."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hosts.hostjobs import (
    Hosts,
    SteadyInput,
    every_output,
    first_settled,
    outputs_job,
    outputs_of,
    read_on,
    state,
    wait_for,
)
from jobs.outputs import Workload, exact_problems
from queryjobs import Querier, changelog_records, standby_problems, wrong_answers

from framework.hosts.fault import SESSION_ENV
from framework.metadata.jobmodel import JobModel
from framework.queries.client import Answer, Client, SyncClient
from framework.queries.errors import EndpointUnreachableError, TaskUnavailableError
from framework.queries.routing import KeyRouter

log = logging.getLogger(__name__)

KEYS = 60
MAX_LAG = 500
"""The standby querier's bound, in changelog offsets (a copy tails a few commits behind)."""
SESSION_MS = 20000
"""Every host's group session timeout (fault injection; the job's is 6 s): how long a
SIGKILLed host's task has no owner before the others rebalance."""


class QuerierThread:
    """A `Querier` on its own event loop in a thread, until `stop`."""

    def __init__(self, querier: Querier) -> None:
        self.querier = querier
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self.querier.run(self._stop))
        finally:
            self._loop.run_until_complete(self.querier.client.close())
            self._loop.close()

    def start(self) -> QuerierThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(60)

    def answered(self) -> int:
        return len(self.querier.answers)

    def answers_since(self, index: int) -> list[Answer]:
        return [answer for _, answer in self.querier.answers[index:]]


def standby_served_the_dead_hosts_task(answers: list[Answer], model: JobModel, host: str
                                       ) -> bool:
    """Whether a standby copy answered for a task of ``host`` in ``model`` from a host that
    had not yet taken a later model: while the task had no running owner."""
    return any(a.standby is not None and model.host_of(a.task) == host
               and a.epoch <= model.epoch for a in answers)


@pytest.mark.timeout(900)
def test_queries_on_three_hosts_stay_exact_and_standbys_answer_through_expansions_and_a_killed_host(
        kafka_broker: Any, tmp_path: Path) -> None:
    name = f"qh-{os.getpid()}"
    path = outputs_job(tmp_path / "job", kafka_broker.bootstrap, name, tasks=2, workers=1,
                       standbys=1, session_timeout_ms=6000)
    text = path.read_text().replace("standby_replicas = 1\n",
                                    'standby_replicas = 1\nguarantee = "exactly-once"\n')
    path.write_text(text.replace("[stores.totals]\n",
                                 f'[stores.totals]\nkeyed_by = "kafka.{name}-in"\n')
                    + "\n[queries]\nenabled = true\n")
    hosts = Hosts(path, tmp_path)
    config = hosts.config
    work = Workload(keys=KEYS, stream=f"{name}-in")
    keys = [f"key-{i:05d}" for i in range(KEYS)]
    owners = QuerierThread(Querier(Client(config, retry_for=0), "totals", keys))
    standbys = QuerierThread(Querier(Client(config, retry_for=0), "totals", keys,
                                     max_lag=MAX_LAG))
    queriers = (owners, standbys)
    probe = SyncClient(config, retry_for=0)
    probed: list[tuple[str, Answer]] = []
    probe_failures: Counter[str] = Counter()
    with hosts.logs_kept_on_failure("queries-on-hosts"):
        try:
            for host in "abc":
                hosts.start(host, env={SESSION_ENV: str(SESSION_MS)})
            wait_for(lambda: (s := first_settled(config, {"a", "b", "c"})) and len(
                [e for e in s.queries.values() if e.url]) == 3 and len(
                [e for e in s.standby_queries.values() if e.url]) == 3 and s, 120,
                "3 hosts settled, answering queries and standby reads", hosts)
            with SteadyInput(config, work):
                for querier in queriers:
                    querier.start()
                wait_for(lambda: min(q.answered() for q in queriers) >= 100, 120,
                         "100 answers each", hosts)
                for partitions in (4, 8):
                    read_on(config, lambda system, n=partitions: system.expand_stream(
                        f"{name}-in", n))
                    wait_for(lambda n=partitions: (m := state(config).model)
                             and m.partition_counts[f"kafka.{name}-in"] == n, 120,
                             f"the model of {partitions} partitions", hosts)
                    seen = [q.answered() for q in queriers]
                    wait_for(lambda s=seen: all(q.answered() >= n + 60
                                                for q, n in zip(queriers, s, strict=True)),
                             120, f"60 answers each at {partitions} partitions", hosts)
                wait_for(lambda: first_settled(config, {"a", "b", "c"}, 0, lambda s: (
                    s.model is not None and s.model.partition_counts[f"kafka.{name}-in"] == 8
                    and all(s.model.standbys.get(t) for t in s.model.tasks))), 120,
                    "settled at 8 partitions with a standby per task", hosts)
                current = state(config)  # the newest model: the one the kill interrupts
                model = current.model
                assert model is not None
                victim = sorted(model.tasks, key=lambda t: (
                    current.hosts[model.host_of(t) or ""].leader, t))[0]
                killed = model.host_of(victim)
                assert killed is not None
                survivors = {"a", "b", "c"} - {killed}
                router = KeyRouter(config)
                victims = itertools.cycle(
                    [k for k in keys if router.route(model, "totals", k).task == victim])
                since = standbys.answered()
                hosts.kill(killed)

                def standby_served() -> bool:
                    return standby_served_the_dead_hosts_task(
                        [a for _, a in probed] + standbys.answers_since(since), model, killed)

                def probed_until_served() -> bool:
                    key = next(victims)
                    try:
                        probed.append((key, probe.get("totals", key, max_lag=MAX_LAG)))
                    except (TaskUnavailableError, EndpointUnreachableError) as error:
                        probe_failures[type(error).__name__ + ": " + str(error)[:160]] += 1
                    return standby_served()
                wait_for(lambda: probed_until_served() or first_settled(
                    config, survivors, model.epoch), 240,
                    f"a standby answer for host {killed}'s task, or the failover", hosts)
                assert standby_served(), (
                    f"no standby answered for {victim} while host {killed} was dead and "
                    f"not yet replaced; the probe: {len(probed)} answers ("
                    f"{[(a.task, a.standby, a.epoch) for _, a in probed][-5:]} last), "
                    f"{probe.client.standby_refused} standby answers refused, failures "
                    f"{dict(probe_failures.most_common(4))}; the standby querier: "
                    f"{standbys.querier.figures()}")
                wait_for(lambda: first_settled(config, survivors, model.epoch), 240,
                         f"failover to {sorted(survivors)}", hosts)
                seen = [q.answered() for q in queriers]
                wait_for(lambda: all(q.answered() >= n + 120
                                     for q, n in zip(queriers, seen, strict=True)),
                         120, "120 answers each after the failover", hosts)
            wait_for(lambda: every_output(config, work), 120, "an output per record", hosts)
            for querier in queriers:
                querier.stop()
            totals = work.totals
            with SyncClient(config) as client:
                wait_for(lambda: {k: client.get("totals", k).value for k in totals} == totals,
                         60, "every key's final total answered", hosts)
            for label, querier in (("owners only", owners), (f"max_lag {MAX_LAG}", standbys)):
                log.warning("queries on 3 hosts through 2→4→8 and a SIGKILLed host (%s): %s",
                            label, querier.querier.figures())
            assert exact_problems(outputs_of(config), work) == []
            final = state(config)
            assert final.model is not None
            records = read_on(config, lambda system: changelog_records(system, config,
                                                                       "totals"))
            sums = {key: {o["sum"] for o in found} for key, found in outputs_of(config).items()}
            log.warning("the probe of host %s's task while it was dead: %d answers, %d "
                        "from a standby", killed, len(probed),
                        sum(a.standby is not None for _, a in probed))
            for answers, max_lag in ((owners.querier.answers, None),
                                     (standbys.querier.answers, MAX_LAG), (probed, MAX_LAG)):
                assert wrong_answers(answers, final.model, records, sums) == []
                assert standby_problems(answers, max_lag) == []
            assert all(q.answered() >= 340 for q in queriers)
            assert all(a.standby is None for _, a in owners.querier.answers)
        finally:  # the hosts stop in logs_kept_on_failure, after their logs are kept
            for querier in queriers:
                querier.stop()
            probe.close()
