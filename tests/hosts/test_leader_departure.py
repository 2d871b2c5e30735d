"""The leader of a forming round stopped (SIGTERM) before it answers: the other host forms
a new group without it and runs every task; every output record is checked (one per input
record with its running sum, in order per key, at-least-once replays only), on Apache
Kafka and on tansu.

The window is made reproducible by fault injection (``SAMPAN_FAULT_LEADER_HOLD_MS``, see
`framework.hosts.fault`): host a, leading the first round of two hosts, holds it before
answering; the test SIGTERMs a inside the hold. tansu keeps a leader that sends LeaveGroup
from a forming round as the round's leader, so b waited forever; a now leaves such a round
without LeaveGroup and tansu drops it after the session timeout, electing b.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hostjobs import Hosts, every_output, outputs_job, outputs_of, wait_for, write_records
from jobs.outputs import Workload, replay_problems
from test_failover import _settled

from framework.hosts.fault import ENV

TASKS = 4


@pytest.mark.parametrize("broker", ["kafka_broker", "tansu_broker"])
def test_sigterm_of_the_leader_holding_a_forming_round(
        broker: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    bootstrap = request.getfixturevalue(broker).bootstrap
    name = f"ld-{broker[0]}-{os.getpid()}"
    # the broker drops the departed leader after the session timeout: the brokers' least
    hosts = Hosts(outputs_job(tmp_path / "job", bootstrap, name, tasks=TASKS, workers=1,
                              session_timeout_ms=6000), tmp_path)
    work = Workload(keys=40, stream=f"{name}-in")
    with hosts.logs_kept_on_failure("leader-departure"):
        config = hosts.config
        hosts.start("a", env={ENV: "30000"})
        first = wait_for(lambda: _settled(hosts, {"a"}), 60, "a running alone", hosts)
        write_records(config, work, 1200)
        wait_for(lambda: every_output(config, work), 60, "a's first records", hosts)

        hosts.start("b")  # a round of a and b, led by a: a holds it unanswered
        wait_for(lambda: "holds this round of 2 hosts" in hosts.log("a"), 60,
                 "a holding the round", hosts)
        hosts.processes["a"].send_signal(signal.SIGTERM)
        assert hosts.processes["a"].wait(60) == 0
        left = hosts.log("a")
        assert "abandoning it unanswered" in left and "no LeaveGroup" in left
        assert "left the group of job" not in left

        write_records(config, work, 1200)
        after = wait_for(lambda: _settled(hosts, {"b"}, first.model.epoch), 90,
                         "b running every task alone", hosts)
        assert after.model is not None
        assert sorted(after.hosts["b"].active) == sorted(after.model.tasks)
        wait_for(lambda: every_output(config, work), 60, "every record", hosts)
        found = outputs_of(config)
        assert len(found) == 40  # no key missing
        problems = replay_problems(found, work)
        assert problems == [], problems[:10]
        assert "giving up its group member" not in hosts.log("b")  # a slow round, in bound
