"""A host whose worker hits an error a restart cannot fix (exit status 5) stops its run at
once with the worker's line: no restart, no backoff."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hostjobs import Hosts, outputs_job, state, wait_for
from kafka_broker import KafkaBroker

VIEW_TASK = '''\
from sum_task import SumTask


class ViewTask(SumTask):
    def init(self, context):
        super().init(context)
        self.view = context.store("view")
'''


def test_a_host_whose_task_asks_for_an_undeclared_store_stops_at_once(
        kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    path = outputs_job(tmp_path / "job", kafka_broker.bootstrap, f"perm-{os.getpid()}",
                       tasks=2, workers=1, task="view_task:ViewTask")
    (path.parent / "view_task.py").write_text(VIEW_TASK)
    hosts = Hosts(path, tmp_path)
    with hosts.logs_kept_on_failure("permanent-error"):
        host = hosts.start("a")
        wait_for(lambda: host.poll() is not None, 120, "host a to stop", hosts)
        log = hosts.log("a")
        line = log.splitlines()[-1]
        assert host.returncode == 2, log[-3000:]
        found = re.fullmatch(
            r"sampan run: error: (task 'Partition \d' asked for store 'view', which the job "
            r"file does not declare; add a \[stores\.view\] table \(declared: \['totals'\]\))",
            line)
        assert found is not None, log[-3000:]
        assert "restarting worker" not in log
        assert f"stopped on an error a restart cannot fix: {found[1]}" in log
        report = state(hosts.config).hosts["a"]
        assert (report.state, report.error) == ("failed", found[1])
