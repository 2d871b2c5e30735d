"""Queries while the per-key sum job runs on three hosts (`sampan run --host`) on real
Apache Kafka with exactly-once: the input grows 3 → 6 and host b is SIGKILLed (its tasks
fail over to a and c) while a querier asks for random keys through every host's
endpoints. Every answer is checked exactly against the store's changelog and the job's
outputs, per key never backwards (tests/queries/queryjobs.py). Figures are logged."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
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
from queryjobs import Querier, changelog_records, wrong_answers

from framework.queries.client import Client, SyncClient

log = logging.getLogger(__name__)

KEYS = 60


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


@pytest.mark.timeout(900)
def test_queries_on_three_hosts_stay_exact_through_an_expansion_and_a_killed_host(
        kafka_broker: Any, tmp_path: Path) -> None:
    name = f"qh-{os.getpid()}"
    path = outputs_job(tmp_path / "job", kafka_broker.bootstrap, name, tasks=3, workers=1,
                       session_timeout_ms=6000)
    text = path.read_text().replace("standby_replicas = 0\n",
                                    'standby_replicas = 0\nguarantee = "exactly-once"\n')
    path.write_text(text.replace("[stores.totals]\n",
                                 f'[stores.totals]\nkeyed_by = "kafka.{name}-in"\n')
                    + "\n[queries]\nenabled = true\n")
    hosts = Hosts(path, tmp_path)
    config = hosts.config
    work = Workload(keys=KEYS, stream=f"{name}-in")
    querier = QuerierThread(Querier(Client(config, retry_for=0), "totals",
                                    [f"key-{i:05d}" for i in range(KEYS)]))
    with hosts.logs_kept_on_failure("queries-on-hosts"):
        try:
            for host in "abc":
                hosts.start(host)
            wait_for(lambda: (s := first_settled(config, {"a", "b", "c"})) and all(
                s.hosts[h].active for h in "abc") and len(
                [e for e in s.queries.values() if e.url]) == 3 and s, 120,
                "3 hosts running tasks and answering queries", hosts)
            with SteadyInput(config, work):
                querier.start()
                wait_for(lambda: querier.answered() >= 100, 120, "100 answers", hosts)
                read_on(config, lambda system: system.expand_stream(f"{name}-in", 6))
                wait_for(lambda: (m := state(config).model) and m.partition_counts[
                    f"kafka.{name}-in"] == 6, 120, "the model of 6 partitions", hosts)
                seen = querier.answered()
                wait_for(lambda: querier.answered() >= seen + 100, 120,
                         "100 answers at 6 partitions", hosts)
                current = state(config)
                assert current.model is not None
                hosts.kill("b")
                wait_for(lambda: first_settled(config, {"a", "c"}, current.model.epoch), 120,
                         "failover to a and c", hosts)
                seen = querier.answered()
                wait_for(lambda: querier.answered() >= seen + 200, 120,
                         "200 answers after the failover", hosts)
            wait_for(lambda: every_output(config, work), 120, "an output per record", hosts)
            querier.stop()
            totals = work.totals
            with SyncClient(config) as client:
                wait_for(lambda: {k: client.get("totals", k).value for k in totals} == totals,
                         60, "every key's final total answered", hosts)
            log.warning("queries on 3 hosts through 3→6 and a SIGKILLed host: %s",
                        querier.querier.figures())
            assert exact_problems(outputs_of(config), work) == []
            final = state(config)
            assert final.model is not None
            records = read_on(config, lambda system: changelog_records(system, config,
                                                                       "totals"))
            sums = {key: {o["sum"] for o in found} for key, found in outputs_of(config).items()}
            assert wrong_answers(querier.querier.answers, final.model, records, sums) == []
            assert querier.answered() >= 400
        finally:
            querier.stop()
            hosts.stop_all()
