"""The leader of a forming round stopped (SIGTERM) before it answers: the other host forms
a new group without it and runs every task, with exact per-key sums.

The window is made reproducible by fault injection (``SAMPAN_FAULT_LEADER_HOLD_MS``, see
`framework.hosts.fault`): host a, leading the first round of two hosts, holds it before
answering; the test SIGTERMs a inside the hold. tansu keeps a leader that sends LeaveGroup
from a forming round as the round's leader, so b waited forever; a now leaves such a round
without LeaveGroup and tansu drops it after the session timeout, electing b.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

from hostjobs import Hosts, final_state, job_file, produce, wait_for
from test_failover import _settled

from framework.hosts.fault import ENV

KEYS = 40


def test_sigterm_of_the_leader_holding_a_forming_round(kafka_broker: Any, tmp_path: Path
                                                        ) -> None:
    name = f"ld-{os.getpid()}"
    hosts = Hosts(job_file(tmp_path / "job", kafka_broker.bootstrap, name), tmp_path)
    with hosts.logs_kept_on_failure("leader-departure"):
        config = hosts.config
        hosts.start("a", env={ENV: "30000"})
        first = wait_for(lambda: _settled(hosts, {"a"}), 60, "a running alone", hosts)
        truth: Counter[str] = Counter()
        produce(config, truth, 1200, KEYS)
        wait_for(lambda: final_state(config) == dict(truth), 60, "a's first records", hosts)

        hosts.start("b")  # a round of a and b, led by a: a holds it unanswered
        wait_for(lambda: "holds this round of 2 hosts" in hosts.log("a"), 60,
                 "a holding the round", hosts)
        hosts.processes["a"].send_signal(signal.SIGTERM)
        assert hosts.processes["a"].wait(60) == 0
        left = hosts.log("a")
        assert "abandoning it unanswered" in left and "no LeaveGroup" in left
        assert "left the group of job" not in left

        produce(config, truth, 1200, KEYS, start=1200)
        after = wait_for(lambda: _settled(hosts, {"b"}, first.model.epoch), 90,
                         "b running every task alone", hosts)
        assert after.model is not None
        assert sorted(after.hosts["b"].active) == sorted(after.model.tasks)
        wait_for(lambda: final_state(config) == dict(truth), 60, "every record", hosts)
        totals = final_state(config)
        assert totals == dict(truth) and len(totals) == KEYS  # exact, no key missing
        assert "giving up its group member" not in hosts.log("b")  # a slow round, in bound
